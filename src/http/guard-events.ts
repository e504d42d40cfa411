/**
 * What the front keeps of the actors' guard events: each one is journaled (kind `guard`), and
 * a lock or unlock is stored on the account's guard record, so a lock survives a restart until
 * it expires. The actor cannot write the store itself (workers never import it).
 */
import type { ActorGateway } from '../actors/protocol.js';
import type { LockState } from '../domain/guards.js';
import type { Logger } from '../log.js';

/** The slice of the store the bridge writes. */
export interface GuardEventStore {
  connections: { byId(connectionId: string): { userId: string } | undefined };
  guards: { setLock(userId: string, accountId: string, lock: LockState | null): Promise<unknown> };
  journal: { append(entry: { userId: string; accountId: string | null; kind: string; request: unknown; outcome: unknown }): void };
}

/** Journals guard events and stores lock changes; returns the unsubscribe function. */
export function recordGuardEvents(gateway: Pick<ActorGateway, 'onEvent'>, store: GuardEventStore, log: Logger): () => void {
  // Lock writes of one account stay in event order (a lock then an unlock must not land reversed).
  const chains = new Map<string, Promise<unknown>>();
  return gateway.onEvent((event) => {
    if (event.type !== 'guard') return;
    const userId = store.connections.byId(event.connectionId)?.userId;
    if (!userId) return;
    const { accountId, guard, action, detail, lock } = event;
    store.journal.append({ userId, accountId, kind: 'guard', request: { guard, action }, outcome: lock === undefined ? { detail } : { detail, lock } });
    if (lock === undefined) return;
    const key = `${userId}|${accountId}`;
    const next = (chains.get(key) ?? Promise.resolve())
      .then(() => store.guards.setLock(userId, accountId, lock))
      .catch((err: unknown) => log.error({ err, accountId, guard, action }, 'storing the account lock failed'));
    chains.set(key, next);
    void next.finally(() => {
      if (chains.get(key) === next) chains.delete(key);
    });
  });
}
