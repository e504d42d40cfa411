/**
 * Turns an order request (API body, or a webhook alert after lenient parsing) into a
 * NewOrder for the broker side: resolves the symbol, checks prices against the contract
 * tick, checks that the bracket sits on the right side of the entry, converts tick offsets to
 * points, and derives the broker clOrdIds from idempotency keys. Pure: no I/O, the clock is a
 * parameter, so every rule is unit-tested. Everything here runs before any broker traffic
 * (spec Rule 2).
 */
import { hash, randomFillSync } from 'node:crypto';
import { DEFAULT_ORDER_LIMITS, isOrderQty, referencePrice, type BracketLeg, type LegInput, type NewOrder, type OrderLimits, type OrderType, type Side, type TimeInForce } from './orders.js';
import { AppError } from './problems.js';
import { resolveSymbol } from './symbols.js';
import { priceToTicks, ticksToPoints, ticksToPrice } from './ticks.js';

/** The order fields, whatever the source (API body, webhook + strategy). */
export interface OrderInput {
  symbol: string;
  side: Side;
  qty: number;
  type?: OrderType | undefined;
  price?: number | null | undefined;
  stopPrice?: number | null | undefined;
  timeInForce?: TimeInForce | undefined;
  takeProfit?: LegInput | null | undefined;
  stopLoss?: LegInput | null | undefined;
  clientOrderId?: string | null | undefined;
}

export interface PlannedLeg {
  kind: 'absolute' | 'relative';
  /** Absolute price, or the projected price from the entry's price when one is known. */
  price: number | null;
  ticks: number | null;
  offsetPoints: number | null;
}

/** Everything decided before the broker is called; `order` lacks only the clOrdId. */
export interface OrderPlan {
  order: Omit<NewOrder, 'clOrdId'>;
  product: { root: string; tickSize: number; pointValue: number };
  bracket: 'none' | 'absolute' | 'relative' | 'mixed';
  takeProfit: PlannedLeg | null;
  stopLoss: PlannedLeg | null;
}

interface FieldError {
  path: string;
  message: string;
}

function validationFailed(errors: FieldError[]): AppError {
  const detail = errors.map((e) => `${e.path}: ${e.message}`).join('; ');
  return new AppError('VALIDATION_FAILED', detail, { errors });
}

/** The prices an order of a product may carry, as whole ticks and as prices. */
export interface PriceBand {
  reference: number;
  minTicks: number;
  maxTicks: number;
  min: number;
  max: number;
}

/**
 * reference ÷ factor … reference × factor, on the tick grid and never below one tick: far
 * wider than any day's move, far narrower than a typo (5e-324, 1e21, an extra digit).
 */
export function priceBand(reference: number, tickSize: number, factor: number): PriceBand {
  const minTicks = Math.max(1, Math.ceil(reference / factor / tickSize - 1e-9));
  const maxTicks = Math.floor((reference * factor) / tickSize + 1e-9);
  return { reference, minTicks, maxTicks, min: ticksToPrice(minTicks, tickSize), max: ticksToPrice(maxTicks, tickSize) };
}

function outOfRange(errors: FieldError[], band: PriceBand): AppError {
  const detail = errors.map((e) => `${e.path}: ${e.message}`).join('; ');
  return new AppError('PRICE_OUT_OF_RANGE', detail, { errors, band: { min: band.min, max: band.max, reference: band.reference } });
}

function checkPriceFields(type: OrderType, price: number | null, stopPrice: number | null, errors: FieldError[]): void {
  const needsPrice = type === 'limit' || type === 'stop_limit';
  const needsStop = type === 'stop' || type === 'stop_limit';
  if (needsPrice && price === null) errors.push({ path: 'price', message: `required for ${type} orders` });
  if (!needsPrice && price !== null) errors.push({ path: 'price', message: `not allowed for ${type} orders` });
  if (needsStop && stopPrice === null) errors.push({ path: 'stopPrice', message: `required for ${type} orders` });
  if (!needsStop && stopPrice !== null) errors.push({ path: 'stopPrice', message: `not allowed for ${type} orders` });
}

/** Everything one plan's price checks share. */
interface PriceCheck {
  tickSize: number;
  band: PriceBand;
  contract: string;
  errors: FieldError[];
  range: FieldError[];
}

/** A given price as whole ticks: in the band and exactly on the tick, else an error for `path` and null. */
function givenTicks(c: PriceCheck, path: string, value: number | null): number | null {
  if (value === null) return null;
  if (!(value >= c.band.min && value <= c.band.max)) {
    c.range.push({ path, message: `${value} is outside ${c.band.min}..${c.band.max} for ${c.contract}` });
    return null;
  }
  const ticks = priceToTicks(value, c.tickSize);
  if (ticks === undefined) c.errors.push({ path, message: `${value} is not on the ${c.tickSize} tick of ${c.contract}` });
  return ticks ?? null;
}

/**
 * A bracket leg in ticks. An absolute leg is checked like any given price. A relative leg is
 * projected from the entry's price when the order names one, else (market orders: the fill is
 * not known yet) from the product's reference price; the projection must stay in the band.
 * The fill may be elsewhere (a buy limit above the market fills at the market): the actor
 * checks the legs again from the price the entry can really fill at (fill-anchor.ts).
 */
function planLeg(c: PriceCheck, name: 'takeProfit' | 'stopLoss', leg: LegInput | null | undefined, sign: 1 | -1, refTicks: number | null): PlannedLeg | null {
  if (!leg) return null;
  if ('price' in leg) {
    const ticks = givenTicks(c, `${name}.price`, leg.price);
    return { kind: 'absolute', price: ticks === null ? null : ticksToPrice(ticks, c.tickSize), ticks: null, offsetPoints: null };
  }
  if (!Number.isSafeInteger(leg.ticks) || leg.ticks <= 0) {
    c.errors.push({ path: `${name}.ticks`, message: 'must be a positive integer' });
    return null;
  }
  const from = refTicks ?? priceToTicks(c.band.reference, c.tickSize) ?? Math.round(c.band.reference / c.tickSize);
  const projected = from + sign * leg.ticks;
  if (projected < c.band.minTicks || projected > c.band.maxTicks) {
    const base = refTicks === null ? `the reference price ${c.band.reference}` : `the entry price ${ticksToPrice(refTicks, c.tickSize)}`;
    c.range.push({ path: `${name}.ticks`, message: `${leg.ticks} ticks from ${base} is ${ticksToPrice(projected, c.tickSize)}, outside ${c.band.min}..${c.band.max} for ${c.contract}` });
  }
  const price = refTicks === null ? null : ticksToPrice(projected, c.tickSize);
  return { kind: 'relative', price, ticks: leg.ticks, offsetPoints: ticksToPoints(leg.ticks, c.tickSize) };
}

/**
 * Checks that absolute legs protect the position: for a buy the take-profit is above the
 * entry and the stop-loss below it (mirrored for a sell). Without a known entry price
 * (market orders) only the relation between the two legs can be checked.
 */
function checkBracketSides(side: Side, ref: number | null, tp: PlannedLeg | null, sl: PlannedLeg | null, errors: FieldError[]): void {
  const up = side === 'buy' ? 'above' : 'below';
  const down = side === 'buy' ? 'below' : 'above';
  const beyond = (a: number, b: number) => (side === 'buy' ? a > b : a < b);
  if (ref !== null) {
    if (tp?.kind === 'absolute' && tp.price !== null && !beyond(tp.price, ref)) {
      errors.push({ path: 'takeProfit.price', message: `must be ${up} the entry price ${ref} for a ${side}` });
    }
    if (sl?.kind === 'absolute' && sl.price !== null && !beyond(ref, sl.price)) {
      errors.push({ path: 'stopLoss.price', message: `must be ${down} the entry price ${ref} for a ${side}` });
    }
    return;
  }
  if (tp?.kind === 'absolute' && sl?.kind === 'absolute' && tp.price !== null && sl.price !== null && !beyond(tp.price, sl.price)) {
    errors.push({ path: 'takeProfit.price', message: `must be ${up} stopLoss.price (${sl.price}) for a ${side}` });
  }
}

function toBracketLeg(leg: PlannedLeg | null): BracketLeg | null {
  if (!leg) return null;
  return leg.kind === 'absolute' ? { price: leg.price as number } : { offsetPoints: leg.offsetPoints as number };
}

/**
 * Validates and maps an order. Throws AppError UNKNOWN_SYMBOL (nothing resolved),
 * PRICE_OUT_OF_RANGE (a given or computed price outside the contract's band) or
 * VALIDATION_FAILED, each with `errors: [{path, message}]` naming every offending field. Prices
 * are handled as whole ticks, and every price in the plan is the exact tick price.
 */
export function planOrder(input: OrderInput, accountId: string, now: Date, limits: OrderLimits = DEFAULT_ORDER_LIMITS): OrderPlan {
  const resolved = resolveSymbol(input.symbol, now);
  if (!resolved.ok) {
    throw new AppError('UNKNOWN_SYMBOL', `Unknown symbol '${input.symbol}': ${resolved.reason}`, { symbol: input.symbol });
  }
  const { tickSize, pointValue, referencePrice: reference } = resolved.product;
  const type = input.type ?? 'market';
  const c: PriceCheck = { tickSize, band: priceBand(reference, tickSize, limits.priceBandFactor), contract: resolved.contract, errors: [], range: [] };

  if (!isOrderQty(input.qty, limits.maxQty)) c.errors.push({ path: 'qty', message: `must be a whole number from 1 to ${limits.maxQty}` });
  checkPriceFields(type, input.price ?? null, input.stopPrice ?? null, c.errors);
  const priceTicks = givenTicks(c, 'price', input.price ?? null);
  const stopTicks = givenTicks(c, 'stopPrice', input.stopPrice ?? null);
  const price = priceTicks === null ? null : ticksToPrice(priceTicks, tickSize);
  const stopPrice = stopTicks === null ? null : ticksToPrice(stopTicks, tickSize);

  const ref = referencePrice(type, price, stopPrice);
  const refTicks = ref === null ? null : (priceToTicks(ref, tickSize) ?? null);
  const sign = input.side === 'buy' ? 1 : -1;
  const takeProfit = planLeg(c, 'takeProfit', input.takeProfit, sign, refTicks);
  const stopLoss = planLeg(c, 'stopLoss', input.stopLoss, sign === 1 ? -1 : 1, refTicks);
  checkBracketSides(input.side, ref, takeProfit, stopLoss, c.errors);
  // A fixed price next to a tick offset is sent as two offsets from the entry's price: a market
  // entry names none (new-user probe: the dry run said "mixed", the order itself was refused).
  if (ref === null && takeProfit && stopLoss && takeProfit.kind !== stopLoss.kind) {
    const fixed = takeProfit.kind === 'absolute' ? 'takeProfit' : 'stopLoss';
    c.errors.push({ path: fixed, message: `a ${type} entry has no price to measure a fixed ${fixed} from while the other leg is in ticks: give both legs as prices or both in ticks, or give the entry a price` });
  }
  if (c.range.length) throw outOfRange(c.range, c.band);
  if (c.errors.length) throw validationFailed(c.errors);

  const kinds = new Set([takeProfit?.kind, stopLoss?.kind].filter(Boolean));
  const bracket = kinds.size === 0 ? 'none' : kinds.size === 2 ? 'mixed' : takeProfit?.kind ?? stopLoss?.kind ?? 'none';
  return {
    order: {
      accountId,
      symbol: resolved.contract,
      requestedSymbol: input.symbol,
      side: input.side,
      qty: input.qty,
      orderType: type,
      price,
      stopPrice,
      timeInForce: input.timeInForce ?? 'day',
      takeProfit: toBracketLeg(takeProfit),
      stopLoss: toBracketLeg(stopLoss),
      clientOrderId: input.clientOrderId ?? null,
      ...(bracket === 'relative' || bracket === 'mixed' ? { priceBand: { min: c.band.min, max: c.band.max, reference: c.band.reference } } : {}),
    },
    product: { root: resolved.root, tickSize, pointValue },
    bracket,
    takeProfit,
    stopLoss,
  };
}

/** sha256(user, key) in base64url: the same key of the same user always names the same broker order. */
function keyDigest(userId: string, idempotencyKey: string): string {
  return hash('sha256', `${userId}\0${idempotencyKey}`, 'base64url');
}

/** Random bytes are drawn from this pool: one `randomBytes(16)` call cost ~6 µs of CPU per order. */
const RANDOM_POOL = Buffer.alloc(4096);
let poolOffset = RANDOM_POOL.length;

/** `n` fresh random bytes (from the CSPRNG, refilled 4 KB at a time) as base64url. */
function randomBase64url(n: number): string {
  if (poolOffset + n > RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    poolOffset = 0;
  }
  const text = RANDOM_POOL.toString('base64url', poolOffset, poolOffset + n);
  poolOffset += n;
  return text;
}

/**
 * The broker clOrdId: deterministic from (user, idempotency key) so that a retry after a
 * crash or a timeout finds the first attempt at the broker; random without a key.
 * ≤ 64 chars (Tradovate limit).
 */
export function clOrdIdFor(userId: string, idempotencyKey?: string): string {
  if (idempotencyKey === undefined) return `tg-r-${randomBase64url(16)}`;
  return `tg-k-${keyDigest(userId, idempotencyKey).slice(0, 40)}`;
}

/** Prefix for a flatten's cancel clOrdIds, deterministic under an idempotency key like clOrdIdFor. */
export function flattenClOrdIdPrefix(userId: string, idempotencyKey?: string): string {
  if (idempotencyKey === undefined) return `tg-f-${randomBase64url(9)}`;
  return `tg-f-${keyDigest(userId, idempotencyKey).slice(0, 24)}`;
}

/** The `?dryRun=true` response body: the plan, nothing sent. */
export function dryRunBody(plan: OrderPlan, guardsChecked: boolean) {
  const r = plan.order;
  return {
    dryRun: true as const,
    accountId: r.accountId,
    symbol: r.symbol,
    requestedSymbol: r.requestedSymbol,
    product: plan.product,
    side: r.side,
    qty: r.qty,
    type: r.orderType,
    price: r.price ?? null,
    stopPrice: r.stopPrice ?? null,
    timeInForce: r.timeInForce,
    bracket: plan.bracket,
    takeProfit: plan.takeProfit,
    stopLoss: plan.stopLoss,
    clientOrderId: r.clientOrderId ?? null,
    guardsChecked,
  };
}
