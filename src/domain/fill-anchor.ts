/**
 * Where the tick-offset legs of a bracket really land. The broker hangs them from the entry's
 * fill, and the fill is not the price the entry names: a buy limit above the market fills at
 * the market, so a stop 15,000 points under a 20,000 limit that filled at 5,000 would rest at
 * −10,000. The connection actor, which can know the market, checks the legs from the price the
 * entry can actually fill at (this module: pure, no I/O); the front's plan can only check them
 * from the named or reference price (order-plan.ts).
 */
import type { BracketLeg, OrderType, Side } from './orders.js';
import { ticksToPrice } from './ticks.js';

/** The entry fields that decide where it fills. */
export interface EntryPrices {
  side: Side;
  orderType: OrderType;
  price?: number | null;
  stopPrice?: number | null;
}

/** The band a price must lie in (order-plan.ts priceBand), as the actor receives it. */
export interface LegBand {
  min: number;
  max: number;
  reference: number;
}

/** A leg as the broker receives it: points from the fill; `ticks` when the client gave ticks, else the absolute `price` it was derived from. */
export interface OffsetLeg {
  name: 'takeProfit' | 'stopLoss';
  offsetPoints: number;
  ticks: number | null;
  price?: number;
}

/** Where the check projected the legs from. */
export interface FillAnchor {
  /** The price the legs were projected from. */
  price: number;
  /** The market's last price, when known. */
  last: number | null;
  /** What the anchor is, in words. */
  basis: string;
}

/** The outcome: the anchor and a `{path, message}` per leg that lands out of bounds. */
export interface LegCheck {
  anchor: FillAnchor;
  errors: { path: string; message: string }[];
}

/**
 * The price the entry is expected to fill at with the market at `last`: a market order at the
 * market; a limit at the better of its limit and the market (a limit through the market fills
 * at once); a stop at the worse of its trigger and the market (a stop already through the
 * market triggers at once); a stop-limit where its stop fills, capped by its limit.
 */
export function expectedFill(e: EntryPrices, last: number): number {
  const buy = e.side === 'buy';
  const better = (a: number, b: number) => (buy ? Math.min(a, b) : Math.max(a, b));
  const worse = (a: number, b: number) => (buy ? Math.max(a, b) : Math.min(a, b));
  switch (e.orderType) {
    case 'limit':
      return better(e.price ?? last, last);
    case 'stop':
      return worse(e.stopPrice ?? last, last);
    case 'stop_limit':
      return better(e.price ?? last, worse(e.stopPrice ?? last, last));
    default:
      return last;
  }
}

/**
 * The lowest price the entry can fill at when the market is not known: what its own prices
 * guarantee (a sell limit fills at its limit or higher, a buy stop at its trigger or higher),
 * else `floor`, the bottom of the band.
 */
export function lowestFill(e: EntryPrices, floor: number): { price: number; basis: string } {
  const bound =
    e.side === 'buy'
      ? e.orderType === 'stop'
        ? e.stopPrice
        : e.orderType === 'stop_limit' && e.price != null && e.stopPrice != null
          ? Math.min(e.price, e.stopPrice)
          : null
      : e.orderType === 'limit' || e.orderType === 'stop_limit'
        ? e.price
        : null;
  const kind = `${e.side} ${e.orderType.replace('_', '-')}`;
  if (bound != null && bound > floor) return { price: bound, basis: `the lowest fill ${bound} of a ${kind} at ${bound} (no market price known)` };
  return { price: floor, basis: `the lowest fill ${floor} a ${kind} may get (the band's bottom; no market price known)` };
}

/** True for a leg that sits below the fill (a buy's stop, a sell's target). */
function below(side: Side, leg: OffsetLeg['name']): boolean {
  return (side === 'buy') === (leg === 'stopLoss');
}

function describe(leg: OffsetLeg, side: Side): string {
  const dir = below(side, leg.name) ? 'below' : 'above';
  return leg.ticks !== null ? `${leg.ticks} ticks ${dir}` : `price ${leg.price}, sent as ${leg.offsetPoints} points ${dir}`;
}

/**
 * Checks where each leg lands from the entry's fill. With the market's `last` price known,
 * every leg projected from the expected fill must lie in the band. Without it, a leg below the
 * fill must still stay above zero from the lowest fill the entry allows (the band's bottom when
 * its own prices do not bound it); legs above the fill cannot reach zero.
 */
export function checkLegsFromFill(e: EntryPrices, legs: readonly OffsetLeg[], tickSize: number, band: LegBand, contract: string, last: number | null): LegCheck {
  const errors: LegCheck['errors'] = [];
  const onGrid = (p: number) => Math.round(p / tickSize);
  if (last !== null) {
    const price = expectedFill(e, last);
    const named = e.orderType === 'market' ? '' : ` at ${e.orderType === 'stop' ? e.stopPrice : e.price}`;
    const anchor: FillAnchor = { price, last, basis: `the expected fill ${price} (${e.side} ${e.orderType.replace('_', '-')}${named}, last price ${last})` };
    const [minTicks, maxTicks] = [onGrid(band.min), onGrid(band.max)];
    for (const leg of legs) {
      const projected = onGrid(price) + (below(e.side, leg.name) ? -1 : 1) * onGrid(leg.offsetPoints);
      if (projected >= minTicks && projected <= maxTicks) continue;
      errors.push({
        path: `${leg.name}.${leg.ticks !== null ? 'ticks' : 'price'}`,
        message: `${describe(leg, e.side)} ${anchor.basis} is ${ticksToPrice(projected, tickSize)}, outside ${band.min}..${band.max} for ${contract}`,
      });
    }
    return { anchor, errors };
  }
  const low = lowestFill(e, band.min);
  const anchor: FillAnchor = { price: low.price, last: null, basis: low.basis };
  for (const leg of legs) {
    if (!below(e.side, leg.name)) continue;
    const projected = onGrid(low.price) - onGrid(leg.offsetPoints);
    if (projected >= 1) continue;
    errors.push({
      path: `${leg.name}.${leg.ticks !== null ? 'ticks' : 'price'}`,
      message: `${describe(leg, e.side)} ${low.basis} is ${ticksToPrice(projected, tickSize)}: a leg must stay above zero (${contract})`,
    });
  }
  return { anchor, errors };
}

/**
 * A bracket at fixed prices against where the entry really fills (the market's `last` known):
 * a buy's take-profit must lie above the expected fill and its stop-loss below it, mirrored for
 * a sell. The plan checks them against the price the order names; a market order names none,
 * and a buy limit above the market fills at the market. A leg on the wrong side of the fill
 * would fill as soon as it is placed, closing the position as it opens.
 */
export function checkFixedLegsFromFill(e: EntryPrices, legs: { takeProfit?: BracketLeg | null; stopLoss?: BracketLeg | null }, last: number): { path: string; message: string }[] {
  const fill = expectedFill(e, last);
  const buy = e.side === 'buy';
  const named = e.orderType === 'market' ? '' : ` at ${e.orderType === 'stop' ? e.stopPrice : e.price}`;
  const basis = `the expected fill ${fill} (${e.side} ${e.orderType.replace('_', '-')}${named}, last price ${last})`;
  const errors: { path: string; message: string }[] = [];
  const tp = legs.takeProfit && 'price' in legs.takeProfit ? legs.takeProfit.price : null;
  const sl = legs.stopLoss && 'price' in legs.stopLoss ? legs.stopLoss.price : null;
  if (tp !== null && (buy ? tp <= fill : tp >= fill)) errors.push({ path: 'takeProfit.price', message: `${tp} must be ${buy ? 'above' : 'below'} ${basis}: it would fill at once` });
  if (sl !== null && (buy ? sl >= fill : sl <= fill)) errors.push({ path: 'stopLoss.price', message: `${sl} must be ${buy ? 'below' : 'above'} ${basis}: it would fill at once` });
  return errors;
}

/** The legs a relative or mixed bracket sends as offsets, or none when no leg is an offset (an OSO at fixed prices). */
export function offsetLegs(legs: { takeProfit?: BracketLeg | null; stopLoss?: BracketLeg | null }, offsetOf: (leg: BracketLeg) => number, tickSize: number): OffsetLeg[] {
  const given = (['takeProfit', 'stopLoss'] as const).flatMap((name) => (legs[name] ? [[name, legs[name]] as const] : []));
  if (!given.some(([, leg]) => 'offsetPoints' in leg)) return [];
  return given.map(([name, leg]) =>
    'offsetPoints' in leg
      ? { name, offsetPoints: Math.abs(leg.offsetPoints), ticks: Math.round(Math.abs(leg.offsetPoints) / tickSize) }
      : { name, offsetPoints: offsetOf(leg), ticks: null, price: leg.price },
  );
}
