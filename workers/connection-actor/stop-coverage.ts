/**
 * How far a position's stops reach: its stop-loss legs and the stop orders of its own resting on
 * the side that reduces it (a stop exit). Shared by the leg watch (orphan-legs.ts) and cancels.
 */
import type { OrderRecord } from '../../src/domain/orders.js';

const open = (o: Pick<OrderRecord, 'qty' | 'filledQty'>) => o.qty - o.filledQty;

/** Whether an order on `side` reduces a position of `net` (sells a long, buys back a short). */
export function reduces(side: OrderRecord['side'], net: number): boolean {
  return net > 0 ? side === 'sell' : net < 0 && side === 'buy';
}

/** A stop order of its own (not a bracket's leg) on the side that reduces a position of `net`. */
export function isStopExit(o: Pick<OrderRecord, 'role' | 'type' | 'side'>, net: number): boolean {
  return o.role === 'single' && (o.type === 'stop' || o.type === 'stop_limit') && reduces(o.side, net);
}

/**
 * Whether a working order stands for a position at all: the legs of a bracket entry still
 * resting unfilled wait suspended at the broker and protect nothing yet (new-user probe: a
 * resting scale-in bracket hid a position left with no stop-loss).
 */
export function standsForPosition(o: Pick<OrderRecord, 'role' | 'bracketId'>, working: readonly Pick<OrderRecord, 'orderId' | 'filledQty'>[]): boolean {
  if (o.role !== 'take_profit' && o.role !== 'stop_loss') return true;
  const entry = o.bracketId === null ? undefined : working.find((w) => w.orderId === o.bracketId);
  return entry === undefined || entry.filledQty > 0;
}

/** How many contracts of a position of `net` in `symbol` stop-losses and resting stop exits cover. */
export function stopCoverage(working: readonly OrderRecord[], symbol: string, net: number): number {
  const side = net > 0 ? 'sell' : 'buy';
  let covered = 0;
  for (const o of working) {
    if (o.symbol !== symbol || o.side !== side) continue;
    if ((o.role === 'stop_loss' && standsForPosition(o, working)) || isStopExit(o, net)) covered += open(o);
  }
  return covered;
}
