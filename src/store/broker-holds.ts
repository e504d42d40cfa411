/**
 * Broker rate-limit holds on one node: when Tradovate answers 429 (or 423) a connection waits out
 * its hour before it logs in again, since every request inside it extends the lockout. The hold
 * lives in the actor; this keeps it across a restart of `serve` too, so a restarted service does
 * not log straight back in (a cluster keeps it in its event feed instead).
 */
import type { StoreContext } from './context.js';

export interface BrokerHoldStore {
  /** Until when (ms since the epoch) the connection must not contact its broker; undefined when none or passed. */
  until(connectionId: string): number | undefined;
  /** Records a hold, durably. */
  set(connectionId: string, until: number): Promise<void>;
  /** Forgets a connection's hold (it connected again, sooner, on a manual reconnect). */
  clear(connectionId: string): Promise<void>;
}

export function createBrokerHoldStore(ctx: StoreContext): BrokerHoldStore {
  const db = ctx.dbs.brokerHolds;
  return {
    until(connectionId) {
      const until = db.get(connectionId) as number | undefined;
      return until !== undefined && until > ctx.clock() ? until : undefined;
    },
    async set(connectionId, until) {
      await ctx.durable(db.put(connectionId, until));
    },
    async clear(connectionId) {
      if (db.get(connectionId) === undefined) return;
      await db.remove(connectionId);
    },
  };
}
