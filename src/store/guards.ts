/**
 * Risk guards per account (domain/guards.ts) and the account's lock, kept so a lock survives a
 * restart until it expires and the guards reach the actor in its spec. One record per (user,
 * account id): account ids are the broker's, unique per user.
 */
import { AppError } from '../domain/problems.js';
import { NO_GUARDS, type AccountGuards, type GuardConfig, type LockState, type OwedLeg } from '../domain/guards.js';
import type { StoreContext } from './context.js';

/** An account's guards and lock. */
export interface GuardRecord {
  userId: string;
  accountId: string;
  config: GuardConfig;
  lock: LockState | null;
  /** Bracket legs the account's actor owes it (domain/guards.ts OwedLeg); absent when none. */
  owedLegs?: OwedLeg[];
  updatedAt: string;
}

/** What one write changes of a record. */
export interface GuardChange {
  config?: GuardConfig;
  lock?: LockState | null;
  owedLegs?: OwedLeg[];
}

export interface GuardStore {
  /** An account's record; undefined when nothing was ever set. */
  get(userId: string, accountId: string): GuardRecord | undefined;
  /** Every record of a user. */
  listByUser(userId: string): GuardRecord[];
  /** Sets the account's guards (its lock stays). */
  setConfig(userId: string, accountId: string, config: GuardConfig): Promise<GuardRecord>;
  /** Sets or clears the account's lock (guards stay, or none when the account had no record). */
  setLock(userId: string, accountId: string, lock: LockState | null): Promise<GuardRecord>;
  /** Replaces the bracket legs owed to the account (empty: none). */
  setOwedLegs(userId: string, accountId: string, legs: OwedLeg[]): Promise<GuardRecord>;
}

const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** VALIDATION_FAILED unless the account id can name a record. */
export function checkGuardAccountId(accountId: string): void {
  if (!ACCOUNT_ID.test(accountId)) throw new AppError('VALIDATION_FAILED', 'account id must be 1..64 characters of A-Z a-z 0-9 _ -');
}

/** The record after a change of config and/or lock. */
export function changedGuards(
  prev: GuardRecord | undefined,
  userId: string,
  accountId: string,
  change: GuardChange,
  updatedAt: string,
): GuardRecord {
  const owedLegs = change.owedLegs ?? prev?.owedLegs ?? [];
  return {
    userId,
    accountId,
    config: change.config ?? prev?.config ?? { ...NO_GUARDS },
    lock: change.lock !== undefined ? change.lock : (prev?.lock ?? null),
    ...(owedLegs.length > 0 && { owedLegs }),
    updatedAt,
  };
}

/** The LMDB guard store: key [userId, accountId]. */
export function createGuardStore(ctx: StoreContext): GuardStore {
  const { guards } = ctx.dbs;
  const get = (userId: string, accountId: string) => guards.get([userId, accountId]) as GuardRecord | undefined;

  async function change(userId: string, accountId: string, c: GuardChange): Promise<GuardRecord> {
    checkGuardAccountId(accountId);
    // Read-modify-write in one transaction: the config (API) and the lock (actor events) change independently.
    return ctx.durable(
      guards.transaction(() => {
        const next = changedGuards(get(userId, accountId), userId, accountId, c, ctx.nowIso());
        guards.put([userId, accountId], next);
        return next;
      }),
    );
  }

  return {
    get: (userId, accountId) => (ACCOUNT_ID.test(accountId) ? get(userId, accountId) : undefined),
    listByUser(userId) {
      const out: GuardRecord[] = [];
      for (const { value } of guards.getRange({ start: [userId] as never, end: [userId, '\uffff'] as never })) {
        const r = value as GuardRecord;
        if (r.userId === userId) out.push(r);
      }
      return out;
    },
    setConfig: (userId, accountId, config) => change(userId, accountId, { config }),
    setLock: (userId, accountId, lock) => change(userId, accountId, { lock }),
    setOwedLegs: (userId, accountId, owedLegs) => change(userId, accountId, { owedLegs }),
  };
}

/** A user's guards as an actor takes them: by account id. */
export function accountGuardsOf(store: { guards: Pick<GuardStore, 'listByUser'> }, userId: string): Record<string, AccountGuards> {
  const out: Record<string, AccountGuards> = {};
  for (const r of store.guards.listByUser(userId)) out[r.accountId] = { config: r.config, lock: r.lock, ...(r.owedLegs && { owedLegs: r.owedLegs }) };
  return out;
}
