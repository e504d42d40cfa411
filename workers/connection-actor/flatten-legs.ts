/**
 * The bracket legs a flatten cancels, kept as owed (domain/guards.ts OwedLeg, `flatten`) from
 * before its first cancel until it ends. A flatten closes a position in two steps, its cancels
 * and then its liquidation: killed in between (kill -9, a worker lost), it left the position
 * open with nothing protecting it, and the restarted service owed it nothing (money re-probe).
 *
 * Kept as a leg cancel's survivor is (cancel.ts): stored before the cancels are sent, and
 * dropped when the flatten ends, whatever its outcome (it answers for that itself). An actor
 * started after a crash in between finds them and puts them back on a position still open, as
 * the one-cancels-other pair they were, and says so on the stream. It does not liquidate: the
 * flatten's caller had no answer, and the restart must not close a position the trader may have
 * dealt with at the broker meanwhile. A lock's flatten (the kill switch, a tripped loss limit) is
 * stored with the lock and runs again instead (guards.ts): its legs are not put back.
 */
import { AppError } from '../../src/domain/problems.js';
import { isFinal } from '../../src/broker/tradovate/order-records.js';
import type { OwedLeg } from '../../src/domain/guards.js';
import type { OrderRecord } from '../../src/domain/orders.js';
import type { ActorContext } from './context.js';
import { restoredPairClOrdId, restoreLegPair } from './leg-pair.js';
import { reduces, stopCoverage } from './stop-coverage.js';

/** Sweeps a pair that could not be put back (not refused by the broker) is tried on. */
const MAX_RESTORE_ATTEMPTS = 3;

const isLeg = (o: OrderRecord): o is OrderRecord & { role: 'take_profit' | 'stop_loss' } => o.role === 'take_profit' || o.role === 'stop_loss';

/** Whether `side` takes off a position of `net`. */

/**
 * Keeps the legs among `working` (what a flatten is about to cancel) that protect an open
 * position, and resolves once they are stored. Answers what it kept, for dropFlattenLegs.
 */
export async function keepFlattenLegs(ctx: ActorContext, accountId: string, working: readonly OrderRecord[]): Promise<OwedLeg[]> {
  const kept: OwedLeg[] = [];
  for (const leg of working) {
    if (!isLeg(leg) || leg.bracketId === null || !reduces(leg.side, ctx.model.netPosition(accountId, leg.symbol))) continue;
    // Only live legs protect the position: those of an entry still resting are suspended ('pending')
    // and, put back, would cover a position they never covered.
    if (leg.status !== 'working' && leg.status !== 'partially_filled') continue;
    // A leg owed already (a leg cancel's survivor) stays the leg cancel's.
    if (ctx.owedLegs.has(leg.orderId)) continue;
    const owed: OwedLeg = { accountId, leg, entryId: Number(leg.bracketId), role: leg.role, attempts: 0, flatten: true };
    ctx.owedLegs.set(leg.orderId, owed);
    kept.push(owed);
  }
  if (kept.length > 0) await ctx.keepOwedLegs?.(accountId);
  return kept;
}

/**
 * The flatten that kept `kept` ended: they are owed no longer (those another cancel took over
 * since stay its). Resolves once that is stored: the flatten answers after it, so a crash just
 * after its answer does not find them and say it was cut short (re-probe).
 */
export async function dropFlattenLegs(ctx: ActorContext, accountId: string, kept: readonly OwedLeg[]): Promise<void> {
  let changed = false;
  for (const owed of kept) {
    if (ctx.owedLegs.get(owed.leg.orderId) !== owed) continue;
    ctx.owedLegs.delete(owed.leg.orderId);
    changed = true;
  }
  if (changed) await ctx.keepOwedLegs?.(accountId);
}

/**
 * After a restart (the connection's first snapshot), with no flatten running: the legs a flatten
 * kept and did not drop (it was cut short) are put back on the position if it is still open.
 * A bracket whose take-profit and stop-loss it both cancelled is placed again as a pair; a leg
 * cancelled alone (its sibling still working, or filled) is handed on as an ordinary owed leg
 * (cancel.ts resumeOwedLegs places it, `rp-<id>`). Answers whether it changed what is owed.
 */
export async function restoreFlattenLegs(ctx: ActorContext, accountId: string, connectionId: string): Promise<boolean> {
  const mine = [...ctx.owedLegs.values()].filter((o) => o.accountId === accountId && o.flatten);
  if (mine.length === 0) return false;
  for (const owed of mine) ctx.owedLegs.delete(owed.leg.orderId);
  const alert = (orderId: string, detail: string) => {
    ctx.logger.warn({ accountId, orderId, detail }, 'flatten cut short');
    ctx.emit({ type: 'bracket-alert', connectionId, accountId, orderId, ts: Date.now(), detail });
  };
  const cutShort = 'a flatten of this account was cut short (the service stopped after it cancelled the legs, before it closed the position)';
  if (ctx.guards?.owesFlatten?.(accountId)) {
    // The lock's flatten runs again once CONNECTED: legs put back now would only be cancelled again.
    ctx.logger.warn({ accountId, legs: mine.map((o) => o.leg.orderId) }, 'flatten cut short: the lock flattens the account again');
    return true;
  }
  const byBracket = new Map<number, OwedLeg[]>();
  for (const owed of mine) byBracket.set(owed.entryId, [...(byBracket.get(owed.entryId) ?? []), owed]);
  for (const [entryId, legs] of byBracket) {
    const cancelled = legs.filter((o) => ctx.model.record(Number(o.leg.orderId))?.status === 'cancelled');
    const tp = cancelled.find((o) => o.role === 'take_profit')?.leg;
    const sl = cancelled.find((o) => o.role === 'stop_loss')?.leg;
    if (!tp || !sl) {
      // One leg only (or none) cancelled: the rest is still working or filled; resumeOwedLegs settles each.
      for (const { flatten: _kept, ...owed } of cancelled) ctx.owedLegs.set(owed.leg.orderId, owed);
      const first = cancelled[0]?.leg;
      if (first) {
        const net = ctx.model.netPosition(accountId, first.symbol);
        const named = cancelled.map((o) => `${o.role} ${o.leg.orderId}`).join(' and ');
        alert(first.orderId, `${cutShort}: ${named}, cancelled by it, ${net === 0 ? 'is not needed: the position is flat now' : 'goes back on the position it protected (the next alert says how); flatten again to close it'}`);
      }
      continue;
    }
    const net = ctx.model.netPosition(accountId, tp.symbol);
    const position = net === 0 ? 'flat' : `${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
    if (!reduces(tp.side, net)) {
      alert(tp.orderId, `${cutShort}: the ${tp.symbol} position is ${position} now, so its take_profit ${tp.orderId} and stop_loss ${sl.orderId} are not placed again`);
      continue;
    }
    // What the position still needs: stops working on it (another bracket's, one put back just
    // before) count, so two brackets on a position cut short to one contract get one pair.
    const room = Math.abs(net) - stopCoverage(ctx.model.workingOrders(accountId), tp.symbol, net);
    const qty = Math.min(Math.max(tp.qty - tp.filledQty, sl.qty - sl.filledQty), room);
    if (qty <= 0) {
      alert(tp.orderId, `${cutShort}: the ${tp.symbol} position ${position} has stop-losses for all of it, so its take_profit ${tp.orderId} and stop_loss ${sl.orderId} are not placed again`);
      continue;
    }
    const sent = ctx.model.findByClOrdId(accountId, restoredPairClOrdId(tp));
    if (sent && !isFinal(ctx.mirror, sent.id)) {
      // Put back before another crash: the broker has the pair already.
      alert(tp.orderId, `${cutShort}: its take_profit ${tp.orderId} and stop_loss ${sl.orderId} are back on the ${tp.symbol} position ${position} (${sent.id}), placed before the restart; flatten again to close it`);
      continue;
    }
    try {
      const ids = await restoreLegPair(ctx, accountId, String(entryId), tp, sl, qty);
      alert(
        tp.orderId,
        `${cutShort}: the ${tp.symbol} position ${position} is open, so its take_profit ${tp.orderId} and stop_loss ${sl.orderId} were placed again for ${qty} as take_profit ${ids.takeProfit} and stop_loss ${ids.stopLoss} (one cancels the other); flatten again to close it`,
      );
    } catch (err) {
      const why = err instanceof AppError ? String(err.extensions.brokerReason ?? err.message) : err instanceof Error ? err.message : String(err);
      ctx.logger.error({ err, accountId, entryId }, 'legs of a flatten cut short could not be placed again');
      // Not refused by the broker (the connection lost meanwhile, a timeout): owed again, tried at the
      // next sweep (a reconnect's snapshot), where a pair that did reach the broker is found by its clOrdId.
      const tries = Math.max(...legs.map((o) => o.attempts)) + 1;
      const retry = !(err instanceof AppError && err.code === 'BROKER_REJECTED') && tries < MAX_RESTORE_ATTEMPTS;
      if (retry) for (const o of legs) ctx.owedLegs.set(o.leg.orderId, { ...o, attempts: tries });
      const next = retry ? 'tried again once the connection is back' : 'close or protect it';
      alert(tp.orderId, `${cutShort}: the ${tp.symbol} position ${position} is open without protective orders; placing its take_profit ${tp.orderId} and stop_loss ${sl.orderId} again failed (${why}): ${next}`);
    }
  }
  return true;
}
