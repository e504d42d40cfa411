/**
 * Multibracket order strategies (`orderStrategyTypeId` 2): when the entry has filled, each
 * bracket becomes a take-profit limit and a stop at signed point offsets from the average
 * fill price, OCO-paired and announced through `orderStrategyLink`; the strategy finishes
 * when none of its orders is live any more. A bracket with `trailingStop: true` gets a
 * TrailingStop leg that trails at the stop-loss distance (rounded to the tick, at least one).
 */
import { roundToTick } from './contracts.js';
import type { Engine, OrderAction, OrderRec } from './engine.js';

/** One bracket of a multibracket strategy (signed point offsets from the entry's average price). */
export interface BracketSpec {
  qty: number;
  profitTarget?: number;
  stopLoss?: number;
  trailingStop?: boolean;
}

/** Creates the bracket legs of a strategy whose entry has just filled completely. */
export function startBrackets(engine: Engine, entry: OrderRec): void {
  const s = engine.state;
  const avg = entry.filledValue / entry.filled;
  const tick = s.contracts.productOf(entry.contractId).tickSize;
  const exit: OrderAction = entry.buy ? 'Sell' : 'Buy';
  const brackets = entry.strategyBrackets ?? [];
  entry.strategyBrackets = undefined;
  brackets.forEach((b, i) => {
    const base = { accountId: entry.accountId, contractId: entry.contractId, action: exit, orderQty: b.qty, timeInForce: 'GTC', isAutomated: true };
    const links = { strategyId: entry.strategyId };
    const legs: Array<{ rec: OrderRec; label: string }> = [];
    if (typeof b.profitTarget === 'number') {
      legs.push({ rec: engine.create({ ...base, orderType: 'Limit', price: roundToTick(avg + b.profitTarget, tick) }, links), label: `tp${i + 1}` });
    }
    if (typeof b.stopLoss === 'number') {
      const stopPrice = roundToTick(avg + b.stopLoss, tick);
      const leg = b.trailingStop
        ? { ...base, orderType: 'TrailingStop', stopPrice, pegDifference: Math.max(tick, roundToTick(Math.abs(b.stopLoss), tick)) }
        : { ...base, orderType: 'Stop', stopPrice };
      legs.push({ rec: engine.create(leg, links), label: `sl${i + 1}` });
    }
    if (legs.length === 2) engine.pair(legs[0]!.rec, legs[1]!.rec);
    for (const { rec, label } of legs) {
      s.create('orderStrategyLink', { id: s.id(), orderStrategyId: entry.strategyId, orderId: rec.id, label }, entry.accountId);
    }
    for (const { rec } of legs) engine.submit(rec, { riskCheck: false });
  });
}

/** Marks the strategy of `rec` finished once none of its orders can still work. */
export function finishStrategy(engine: Engine, rec: OrderRec): void {
  if (!rec.strategyId) return;
  const strategy = engine.state.get('orderStrategy', rec.strategyId);
  if (!strategy || strategy.status !== 'ActiveStrategy') return;
  const orders = engine.strategyOrders.get(rec.strategyId) ?? [];
  if (orders.some((o) => engine.isLive(o) || o.strategyBrackets)) return;
  const entry = orders[0];
  const status = entry && entry.filled === 0 && entry.order.ordStatus === 'Canceled' ? 'StoppedByUser' : 'ExecutionFinished';
  engine.state.update('orderStrategy', strategy, { status, timestamp: engine.state.timestamp() });
}
