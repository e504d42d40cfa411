/** Risk guards and locks under `guards.<userId>.<accountId>` (see store/guards.ts). */
import { changedGuards, checkGuardAccountId, type GuardChange, type GuardRecord, type GuardStore } from '../guards.js';
import { isKeyToken, type NatsStoreContext } from './tables.js';

/** The cluster guard store. */
export function createNatsGuardStore(ctx: NatsStoreContext): GuardStore {
  const key = (userId: string, accountId: string) => `guards.${userId}.${accountId}`;

  async function change(userId: string, accountId: string, c: GuardChange): Promise<GuardRecord> {
    checkGuardAccountId(accountId);
    return ctx.mirror.mutate(key(userId, accountId), (current) => {
      const next = changedGuards(current as GuardRecord | undefined, userId, accountId, c, ctx.nowIso());
      return { next, result: next };
    });
  }

  return {
    get: (userId, accountId) => (isKeyToken(userId) && isKeyToken(accountId) ? ctx.mirror.get<GuardRecord>(key(userId, accountId)) : undefined),
    listByUser: (userId) => (isKeyToken(userId) ? ctx.mirror.values<GuardRecord>(`guards.${userId}.`) : []),
    setConfig: (userId, accountId, config) => change(userId, accountId, { config }),
    setLock: (userId, accountId, lock) => change(userId, accountId, { lock }),
    setOwedLegs: (userId, accountId, owedLegs) => change(userId, accountId, { owedLegs }),
  };
}
