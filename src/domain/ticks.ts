/**
 * Tick arithmetic that is safe with binary floating point: prices such as 71.23 or 1.08735 are
 * not exact multiples of 0.01 or 0.00005 in IEEE 754, so every test works on the price
 * expressed in ticks with a tolerance, and every produced price is re-rounded to the tick's
 * decimal places (5001.25, never 5001.2500000000001).
 */

// A price within a millionth of a tick of a tick boundary is on it; real representation error
// is around 1e-9 ticks even for prices of 1e6 ticks, real off-tick prices are ≥ 1e-3 ticks away.
const TICK_EPSILON = 1e-6;
const decimalsCache = new Map<number, number>();

/** Number of decimal places needed to write multiples of `tickSize` exactly (0.25 → 2, 1/128 → 7). */
export function tickDecimals(tickSize: number): number {
  const cached = decimalsCache.get(tickSize);
  if (cached !== undefined) return cached;
  let decimals = 0;
  let scale = 1;
  while (decimals < 15 && Math.abs(Math.round(tickSize * scale) - tickSize * scale) > 1e-9 * scale) {
    decimals += 1;
    scale *= 10;
  }
  decimalsCache.set(tickSize, decimals);
  return decimals;
}

function validTick(tickSize: number): boolean {
  return Number.isFinite(tickSize) && tickSize > 0;
}

/** Rounds a multiple of the tick to the tick's decimal places, removing float noise. */
function clean(value: number, tickSize: number): number {
  const result = Number(value.toFixed(tickDecimals(tickSize)));
  return result === 0 ? 0 : result;
}

/** Whether `price` sits on a tick boundary of `tickSize` (false for non-finite input). */
export function isOnTick(price: number, tickSize: number): boolean {
  if (!Number.isFinite(price) || !validTick(tickSize)) return false;
  const ticks = price / tickSize;
  return Math.abs(ticks - Math.round(ticks)) < TICK_EPSILON;
}

/** Direction for roundToTick: nearest (ties away from zero), down (toward −∞) or up (toward +∞). */
export type TickRounding = 'nearest' | 'down' | 'up';

/** The tick-boundary price for `price`, rounded as `mode` says; NaN for non-finite input. */
export function roundToTick(price: number, tickSize: number, mode: TickRounding = 'nearest'): number {
  if (!Number.isFinite(price) || !validTick(tickSize)) return Number.NaN;
  const ticks = price / tickSize;
  const nearest = Math.sign(ticks) * Math.round(Math.abs(ticks));
  let n: number;
  // A price already on a tick (up to float noise) stays there in every mode.
  if (Math.abs(ticks - nearest) < TICK_EPSILON) n = nearest;
  else if (mode === 'down') n = Math.floor(ticks);
  else if (mode === 'up') n = Math.ceil(ticks);
  else n = nearest;
  return clean(n * tickSize, tickSize);
}

/** Price distance of `ticks` ticks, e.g. 20 ticks of 0.25 → 5 (sign kept). */
export function ticksToPoints(ticks: number, tickSize: number): number {
  if (!Number.isFinite(ticks) || !validTick(tickSize)) return Number.NaN;
  return clean(ticks * tickSize, tickSize);
}

/** Whole number of ticks in a price distance, e.g. 5 points of 0.25 → 20 (nearest tick). */
export function pointsToTicks(points: number, tickSize: number): number {
  if (!Number.isFinite(points) || !validTick(tickSize)) return Number.NaN;
  const ticks = points / tickSize;
  const n = Math.sign(ticks) * Math.round(Math.abs(ticks));
  return n === 0 ? 0 : n;
}

/** `price` moved by `ticks` ticks (negative moves down), on the tick grid; NaN for non-finite input (roundToTick's check). */
export function addTicks(price: number, ticks: number, tickSize: number): number {
  return roundToTick(price + ticks * tickSize, tickSize);
}

/**
 * Representation slack when a client's number is compared with the exact tick price: a few
 * units in the last place (a client that computed 71.23 as 71.22999999999999 meant 71.23). A
 * number further away than that is a different price, however small the gap
 * (1000.2500000001 is not 1000.25).
 */
const ULP_SLACK = 4 * Number.EPSILON;

/**
 * The price of `ticks` whole ticks, written exactly as the tick's decimals write it
 * (4001 × 0.25 → 1000.25, 7123 × 0.01 → 71.23): the one number sent to a broker for that tick.
 */
export function ticksToPrice(ticks: number, tickSize: number): number {
  if (!Number.isSafeInteger(ticks) || !validTick(tickSize)) return Number.NaN;
  return clean(ticks * tickSize, tickSize);
}

/**
 * The whole number of ticks `price` stands for, or undefined when it is not exactly on a tick
 * (beyond float representation slack) or not finite. Integer ticks are how prices are compared
 * and moved; ticksToPrice turns them back into the exact price.
 */
export function priceToTicks(price: number, tickSize: number): number | undefined {
  const ticks = Math.round(price / tickSize);
  // A non-finite price, a bad tick size or an unsafe tick count make `exact` NaN, which equals nothing.
  const exact = ticksToPrice(ticks, tickSize);
  return Math.abs(price - exact) <= ULP_SLACK * Math.abs(exact) ? (ticks === 0 ? 0 : ticks) : undefined;
}
