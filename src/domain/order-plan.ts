/**
 * Turns an order request (API body, or a webhook alert after lenient parsing) into a
 * NewOrder for the broker side: resolves the symbol, checks prices against the contract
 * tick, checks that the bracket sits on the right side of the entry, converts tick offsets to
 * points, and derives the broker clOrdIds from idempotency keys. Pure: no I/O, the clock is a
 * parameter, so every rule is unit-tested. Everything here runs before any broker traffic
 * (spec Rule 2).
 */
import { createHash, randomBytes } from 'node:crypto';
import { isOrderQty, MAX_ORDER_QTY, referencePrice, type BracketLeg, type LegInput, type NewOrder, type OrderType, type Side, type TimeInForce } from './orders.js';
import { AppError } from './problems.js';
import { resolveSymbol } from './symbols.js';
import { isOnTick, roundToTick, ticksToPoints } from './ticks.js';

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

/** Rounds away binary noise (5000 + 5 must be exactly 5005). */
function clean(n: number, tickSize: number): number {
  return roundToTick(n, tickSize);
}

function checkPriceFields(type: OrderType, price: number | null, stopPrice: number | null, errors: FieldError[]): void {
  const needsPrice = type === 'limit' || type === 'stop_limit';
  const needsStop = type === 'stop' || type === 'stop_limit';
  if (needsPrice && price === null) errors.push({ path: 'price', message: `required for ${type} orders` });
  if (!needsPrice && price !== null) errors.push({ path: 'price', message: `not allowed for ${type} orders` });
  if (needsStop && stopPrice === null) errors.push({ path: 'stopPrice', message: `required for ${type} orders` });
  if (!needsStop && stopPrice !== null) errors.push({ path: 'stopPrice', message: `not allowed for ${type} orders` });
}

function planLeg(leg: LegInput | null | undefined, sign: 1 | -1, ref: number | null, tickSize: number): PlannedLeg | null {
  if (!leg) return null;
  if ('price' in leg) return { kind: 'absolute', price: leg.price, ticks: null, offsetPoints: null };
  const offsetPoints = ticksToPoints(leg.ticks, tickSize);
  return { kind: 'relative', price: ref === null ? null : clean(ref + sign * offsetPoints, tickSize), ticks: leg.ticks, offsetPoints };
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
 * Validates and maps an order. Throws AppError UNKNOWN_SYMBOL (nothing resolved) or
 * VALIDATION_FAILED with `errors: [{path, message}]` naming each offending field.
 */
export function planOrder(input: OrderInput, accountId: string, now: Date): OrderPlan {
  const resolved = resolveSymbol(input.symbol, now);
  if (!resolved.ok) {
    throw new AppError('UNKNOWN_SYMBOL', `Unknown symbol '${input.symbol}': ${resolved.reason}`, { symbol: input.symbol });
  }
  const { tickSize, pointValue } = resolved.product;
  const type = input.type ?? 'market';
  const price = input.price ?? null;
  const stopPrice = input.stopPrice ?? null;
  const errors: FieldError[] = [];

  if (!isOrderQty(input.qty)) errors.push({ path: 'qty', message: `must be a whole number from 1 to ${MAX_ORDER_QTY}` });
  checkPriceFields(type, price, stopPrice, errors);
  const offTick = (path: string, value: number | null) => {
    if (value !== null && !isOnTick(value, tickSize)) {
      errors.push({ path, message: `${value} is not on the ${tickSize} tick of ${resolved.contract}` });
    }
  };
  offTick('price', price);
  offTick('stopPrice', stopPrice);
  if (input.takeProfit && 'price' in input.takeProfit) offTick('takeProfit.price', input.takeProfit.price);
  if (input.stopLoss && 'price' in input.stopLoss) offTick('stopLoss.price', input.stopLoss.price);
  for (const [path, leg] of [['takeProfit.ticks', input.takeProfit], ['stopLoss.ticks', input.stopLoss]] as const) {
    if (leg && 'ticks' in leg && (!Number.isInteger(leg.ticks) || leg.ticks <= 0)) {
      errors.push({ path, message: 'must be a positive integer' });
    }
  }

  const ref = referencePrice(type, price, stopPrice);
  const sign = input.side === 'buy' ? 1 : -1;
  const takeProfit = planLeg(input.takeProfit, sign, ref, tickSize);
  const stopLoss = planLeg(input.stopLoss, sign === 1 ? -1 : 1, ref, tickSize);
  checkBracketSides(input.side, ref, takeProfit, stopLoss, errors);
  if (errors.length) throw validationFailed(errors);

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
    },
    product: { root: resolved.root, tickSize, pointValue },
    bracket,
    takeProfit,
    stopLoss,
  };
}

/** sha256(user, key) in base64url: the same key of the same user always names the same broker order. */
function keyDigest(userId: string, idempotencyKey: string): string {
  return createHash('sha256').update(userId).update('\0').update(idempotencyKey).digest('base64url');
}

/**
 * The broker clOrdId: deterministic from (user, idempotency key) so that a retry after a
 * crash or a timeout finds the first attempt at the broker; random without a key.
 * ≤ 64 chars (Tradovate limit).
 */
export function clOrdIdFor(userId: string, idempotencyKey?: string): string {
  if (idempotencyKey === undefined) return `tg-r-${randomBytes(16).toString('base64url')}`;
  return `tg-k-${keyDigest(userId, idempotencyKey).slice(0, 40)}`;
}

/** Prefix for a flatten's cancel clOrdIds, deterministic under an idempotency key like clOrdIdFor. */
export function flattenClOrdIdPrefix(userId: string, idempotencyKey?: string): string {
  if (idempotencyKey === undefined) return `tg-f-${randomBytes(9).toString('base64url')}`;
  return `tg-f-${keyDigest(userId, idempotencyKey).slice(0, 24)}`;
}

/** The `?dryRun=true` response body: the plan, nothing sent. */
export function dryRunBody(plan: OrderPlan) {
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
  };
}
