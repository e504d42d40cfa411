/**
 * Bracket integrity the other way round: a protective leg with nothing left to protect. Futures
 * positions net per contract, so once an account is flat in a contract, a take-profit or
 * stop-loss still working there opens a new, unprotected position when it fires. That is what
 * the spec's own way to exit one symbol leaves behind (an ordinary opposite-side order closes
 * the position; the broker keeps the bracket's legs working), and so does a close by hand.
 *
 * When a position goes flat, the account's legs in that contract whose entry is done (filled or
 * otherwise final, or a re-placed leg) are cancelled, after a grace period: when a leg fills,
 * the broker cancels its OCO sibling itself, a moment after the position update. A leg whose
 * entry is still working (a resting bracket) is never touched. Each cancel is reported as a
 * bracket-alert and logged.
 */
import type { MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { contractName, isFinal } from '../../src/broker/tradovate/order-records.js';
import { cancelOrderBody, checkAnswer } from '../../src/broker/tradovate/requests.js';
import { FINAL_STATUSES, type OrderRecord } from '../../src/domain/orders.js';
import type { ActorContext } from './context.js';

/** Cancels protective legs left working in a contract the account is flat in. */
export class OrphanLegs {
  /** Accounts with a sweep pending (one timer per account, however many positions moved). */
  private readonly pending = new Map<number, NodeJS.Timeout>();

  constructor(
    private readonly ctx: ActorContext,
    private readonly connectionId: string,
    private readonly graceMs: number,
  ) {}

  /** Feeds one mirror change: a position gone flat (or a fresh snapshot) schedules a sweep. */
  onChange(change: MirrorChange): void {
    if (change.eventType === 'Snapshot') {
      for (const account of this.ctx.mirror.all('account')) this.schedule(account.id);
      return;
    }
    const e = change.entity;
    if (change.entityType !== 'position' || !e || typeof e.accountId !== 'number') return;
    // A broker that deletes a closed position instead of zeroing it: flat all the same.
    if (change.eventType === 'Deleted' || Number(e.netPos ?? 0) === 0) this.schedule(e.accountId);
  }

  /** Stops pending sweeps (the actor is stopping). */
  stop(): void {
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }

  private schedule(accountId: number): void {
    if (this.pending.has(accountId)) return;
    const timer = setTimeout(() => {
      this.pending.delete(accountId);
      void this.sweep(String(accountId)).catch((err: unknown) => this.ctx.logger.warn({ err, accountId }, 'orphaned leg sweep failed'));
    }, this.graceMs);
    timer.unref();
    this.pending.set(accountId, timer);
  }

  /** The account's protective legs working in a contract it is flat in, whose entry is done. */
  orphans(accountId: string): OrderRecord[] {
    const working = this.ctx.model.workingOrders(accountId);
    const held = new Set(this.ctx.model.openPositionEntities(accountId).map((p) => contractName(this.ctx.mirror, p.contractId) ?? String(p.contractId)));
    const byId = new Map(working.map((o) => [o.orderId, o]));
    return working.filter((o) => {
      if (o.role !== 'take_profit' && o.role !== 'stop_loss') return false;
      if (held.has(o.symbol)) return false;
      // A leg of a resting (or still filling) entry waits for its entry: not an orphan.
      const entry = o.bracketId === null ? undefined : byId.get(o.bracketId);
      return entry === undefined || FINAL_STATUSES.has(entry.status);
    });
  }

  private async sweep(accountId: string): Promise<void> {
    try {
      this.ctx.conn.requireConnected();
    } catch {
      return; // the snapshot after the reconnect sweeps again
    }
    // One report per bracket: cancelling one leg may take its OCO sibling with it.
    const brackets = new Map<string, OrderRecord[]>();
    for (const leg of this.orphans(accountId)) {
      const key = leg.bracketId ?? leg.orderId;
      brackets.set(key, [...(brackets.get(key) ?? []), leg]);
    }
    for (const [bracket, legs] of brackets) {
      const cancelled: string[] = [];
      for (const leg of legs) {
        const id = Number(leg.orderId);
        if (isFinal(this.ctx.mirror, id)) continue;
        try {
          checkAnswer('cancelorder', await this.ctx.conn.send('order/cancelorder', cancelOrderBody(id), { kind: 'order' }));
          cancelled.push(`${leg.role} ${leg.orderId}`);
        } catch (err) {
          // It filled or went away meanwhile: nothing left to do.
          if (!isFinal(this.ctx.mirror, id)) this.ctx.logger.error({ err, orderId: leg.orderId, accountId }, 'orphaned bracket leg could not be cancelled');
        }
      }
      if (cancelled.length === 0) continue;
      const symbol = legs[0]!.symbol;
      const detail = `${cancelled.join(' and ')}${legs[0]!.bracketId ? ` of entry ${bracket}` : ''} cancelled: the ${symbol} position it protected was closed by another order`;
      this.ctx.logger.warn({ orderId: bracket, accountId, symbol, cancelled }, 'orphaned bracket legs cancelled');
      this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: bracket, ts: Date.now(), detail });
    }
  }
}
