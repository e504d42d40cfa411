/**
 * What one working order does at a last price, as a pure decision: fill at a price, trail its
 * stop, or nothing yet. The paper market has no spread and unlimited size at the last price.
 *
 * | type | triggers when (buy / sell) | then |
 * |---|---|---|
 * | Market | at once | fills at last |
 * | Limit | last ≤ limit / last ≥ limit | fills at last if marketable on arrival, else at the limit |
 * | Stop | last ≥ stop / last ≤ stop | fills at last |
 * | StopLimit | as Stop | works as a Limit at `price` |
 * | MIT | last ≤ price / last ≥ price (touched) | fills at last |
 * | TrailingStop | as Stop, after trailing | fills at last |
 * | TrailingStopLimit | as Stop, after trailing | works as a Limit; the limit keeps its distance to the stop |
 *
 * Trailing: a sell stop (protecting a long) follows the price up at `trail` below it, a buy
 * stop follows it down at `trail` above it; neither ever moves back.
 */
import { roundToTick } from './contracts.js';

/** The order fields a decision reads. */
export interface MatchInput {
  buy: boolean;
  orderType: string;
  price?: number;
  stopPrice?: number;
  /** The stop or touch price has been reached (sticky). */
  triggered: boolean;
  /** Trailing distance in price points (trailing types). */
  trail?: number;
}

/** The decision: fill at `fillPrice`, and/or new stop (and limit) prices for a trailing order. */
export interface MatchDecision {
  fillPrice?: number;
  triggered: boolean;
  trailTo?: { stopPrice: number; price?: number };
}

/** Order types the matching engine implements. */
export const MATCHED_TYPES: ReadonlySet<string> = new Set(['Market', 'Limit', 'Stop', 'StopLimit', 'MIT', 'TrailingStop', 'TrailingStopLimit']);

const TRAILING = new Set(['TrailingStop', 'TrailingStopLimit']);

/** True for the two trailing order types. */
export const isTrailing = (orderType: string): boolean => TRAILING.has(orderType);

/** The trailed stop for `last`, or undefined when it does not move. */
function trailed(o: MatchInput, last: number, tick: number): number | undefined {
  if (o.trail === undefined || o.stopPrice === undefined) return undefined;
  const candidate = roundToTick(o.buy ? last + o.trail : last - o.trail, tick);
  if (o.buy ? candidate < o.stopPrice : candidate > o.stopPrice) return candidate;
  return undefined;
}

/** Decides what a working order does at `last`; `arrival` = it has just started working. */
export function decide(o: MatchInput, last: number, arrival: boolean, tick: number): MatchDecision {
  const type = o.orderType;
  let triggered = o.triggered;
  let stopPrice = o.stopPrice;
  let limit = o.price;
  let trailTo: MatchDecision['trailTo'];
  if (!triggered && TRAILING.has(type)) {
    const moved = trailed(o, last, tick);
    if (moved !== undefined) {
      if (limit !== undefined && stopPrice !== undefined) limit = roundToTick(limit + (moved - stopPrice), tick);
      stopPrice = moved;
      trailTo = { stopPrice: moved, ...(type === 'TrailingStopLimit' ? { price: limit } : {}) };
    }
  }
  if (!triggered && (type === 'Stop' || type === 'StopLimit' || TRAILING.has(type))) {
    const stop = stopPrice as number;
    if (!(o.buy ? last >= stop : last <= stop)) return { triggered, trailTo };
    triggered = true;
    arrival = true;
  }
  if (!triggered && type === 'MIT') {
    const touch = (o.price ?? o.stopPrice) as number;
    if (!(o.buy ? last <= touch : last >= touch)) return { triggered };
    triggered = true;
  }
  if (type === 'Market' || type === 'Stop' || type === 'MIT' || type === 'TrailingStop') return { fillPrice: last, triggered, trailTo };
  const lim = limit as number;
  if (o.buy ? last <= lim : last >= lim) return { fillPrice: arrival ? last : lim, triggered, trailTo };
  return { triggered, trailTo };
}
