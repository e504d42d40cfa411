/**
 * Every request body the service sends to the broker (records → broker), and the check of
 * what comes back. Pure: the actor sends them. Every order carries `isAutomated: true`
 * (exchange policy for algorithmic orders) and a `clOrdId`.
 */
import type { NewOrder, OrderRecord, OrderType, Side, TimeInForce } from '../../domain/orders.js';
import { AppError } from '../../domain/problems.js';

/** Service order type → broker orderType. */
export const ORDER_TYPE_TO_BROKER: Record<OrderType, string> = {
  market: 'Market',
  limit: 'Limit',
  stop: 'Stop',
  stop_limit: 'StopLimit',
};

/** Service time in force → broker timeInForce. */
export const TIF_TO_BROKER: Record<TimeInForce, string> = { day: 'Day', gtc: 'GTC', ioc: 'IOC', fok: 'FOK' };

/** Broker action for a side. */
export function actionOf(side: Side): 'Buy' | 'Sell' {
  return side === 'buy' ? 'Buy' : 'Sell';
}

/** The opposite action (what a protective leg does). */
export function exitActionOf(side: Side): 'Buy' | 'Sell' {
  return side === 'buy' ? 'Sell' : 'Buy';
}

/** The broker account an order goes to (id and name/spec). */
export interface AccountRef {
  id: number;
  name: string;
}

function priceFields(type: OrderType, price?: number | null, stopPrice?: number | null): Record<string, number> {
  const out: Record<string, number> = {};
  if ((type === 'limit' || type === 'stop_limit') && price != null) out.price = price;
  if ((type === 'stop' || type === 'stop_limit') && stopPrice != null) out.stopPrice = stopPrice;
  return out;
}

/** `order/placeorder` body for a single order (no brackets). */
export function placeOrderBody(req: NewOrder, account: AccountRef): Record<string, unknown> {
  return {
    accountSpec: account.name,
    accountId: account.id,
    clOrdId: req.clOrdId,
    action: actionOf(req.side),
    symbol: req.symbol,
    orderQty: req.qty,
    orderType: ORDER_TYPE_TO_BROKER[req.orderType],
    ...priceFields(req.orderType, req.price, req.stopPrice),
    timeInForce: TIF_TO_BROKER[req.timeInForce],
    ...(req.clientOrderId ? { text: brokerText(req.clientOrderId) } : {}),
    isAutomated: true,
  };
}

/**
 * `order/placeoso` body for an absolute bracket: bracket1 the take-profit (Limit), bracket2 the
 * stop-loss (Stop); with only one leg it goes in bracket1.
 */
export function placeOsoBody(req: NewOrder, account: AccountRef, tp: number | null, sl: number | null): Record<string, unknown> {
  const exit = exitActionOf(req.side);
  // Protective legs are good till cancelled whatever the entry's time in force: a day leg expires
  // at the session's close and leaves the position it protects open overnight with no stop.
  const tif = TIF_TO_BROKER.gtc;
  const legs: Record<string, unknown>[] = [];
  if (tp !== null) legs.push({ action: exit, orderType: 'Limit', price: tp, timeInForce: tif });
  if (sl !== null) legs.push({ action: exit, orderType: 'Stop', stopPrice: sl, timeInForce: tif });
  return {
    ...placeOrderBody(req, account),
    bracket1: legs[0],
    ...(legs[1] ? { bracket2: legs[1] } : {}),
  };
}

/**
 * `orderstrategy/startorderstrategy` body for a relative bracket (multibracket, type 2).
 * Offsets are signed points from the entry fill: a buy's target is above (+) and its stop
 * below (−); a sell's the other way round. `params` must be a JSON string.
 */
export function startStrategyBody(
  req: NewOrder,
  account: AccountRef,
  tpPoints: number | null,
  slPoints: number | null,
): Record<string, unknown> {
  const sign = req.side === 'buy' ? 1 : -1;
  const bracket: Record<string, unknown> = { qty: req.qty, trailingStop: false };
  if (tpPoints !== null) bracket.profitTarget = sign * Math.abs(tpPoints);
  if (slPoints !== null) bracket.stopLoss = -sign * Math.abs(slPoints);
  const entryVersion: Record<string, unknown> = {
    orderQty: req.qty,
    orderType: ORDER_TYPE_TO_BROKER[req.orderType],
    ...priceFields(req.orderType, req.price, req.stopPrice),
    timeInForce: TIF_TO_BROKER[req.timeInForce],
  };
  return {
    accountId: account.id,
    accountSpec: account.name,
    symbol: req.symbol,
    action: actionOf(req.side),
    orderStrategyTypeId: 2,
    params: JSON.stringify({ entryVersion, brackets: [bracket] }),
    uuid: req.clOrdId,
    isAutomated: true,
  };
}

/** `user/syncrequest` body: explicit entity types, or the broker sends no updates. */
export function syncRequestBody(userId: number, entityTypes: readonly string[]): Record<string, unknown> {
  return { users: [userId], entityTypes: [...entityTypes] };
}

/** `order/cancelorder` body; `clOrdId` tags the cancel for tracing at the broker. */
export function cancelOrderBody(orderId: number, clOrdId?: string): Record<string, unknown> {
  const body: Record<string, unknown> = { orderId, isAutomated: true };
  if (clOrdId) body.clOrdId = clOrdId.slice(0, 64);
  return body;
}

/** `order/liquidateposition` body (it has no clOrdId field). */
export function liquidatePositionBody(accountId: number, contractId: unknown): Record<string, unknown> {
  return { accountId, contractId, admin: false, isAutomated: true };
}

/**
 * `order/placeorder` body that re-places a surviving bracket leg as a standalone order: same
 * side, type, prices and open quantity, clOrdId `rp-<old id>`.
 */
export function replaceLegBody(leg: OrderRecord, account: AccountRef): Record<string, unknown> {
  const body: Record<string, unknown> = {
    accountSpec: account.name,
    accountId: account.id,
    clOrdId: `rp-${leg.orderId}`,
    action: actionOf(leg.side),
    symbol: leg.symbol,
    orderQty: leg.qty - leg.filledQty,
    orderType: ORDER_TYPE_TO_BROKER[leg.type],
    // Good till cancelled, as every protective leg (placeOsoBody).
    timeInForce: TIF_TO_BROKER.gtc,
    isAutomated: true,
  };
  if (leg.price !== null) body.price = leg.price;
  if (leg.stopPrice !== null) body.stopPrice = leg.stopPrice;
  return body;
}

/**
 * `order/placeoco` body putting a bracket's two legs back on its position as an OCO pair (a
 * take-profit limit and a stop-loss stop, `qty` each, good till cancelled): what a position gets
 * when the legs cut for an exit that was then refused must come back.
 */
export function restoreLegsOcoBody(tp: OrderRecord, sl: OrderRecord, qty: number, account: AccountRef): Record<string, unknown> {
  return {
    ...replaceLegBody({ ...tp, qty, filledQty: 0 }, account),
    clOrdId: `rr-${tp.orderId}`,
    other: { action: actionOf(sl.side), orderType: ORDER_TYPE_TO_BROKER[sl.type], ...(sl.price !== null && { price: sl.price }), ...(sl.stopPrice !== null && { stopPrice: sl.stopPrice }), timeInForce: TIF_TO_BROKER.gtc },
  };
}

/** `order/modifyorder` body giving a working order a new quantity, its type, prices and time in force unchanged. */
export function resizeOrderBody(order: OrderRecord, orderQty: number): Record<string, unknown> {
  return {
    orderId: Number(order.orderId),
    orderQty,
    orderType: ORDER_TYPE_TO_BROKER[order.type],
    ...priceFields(order.type, order.price, order.stopPrice),
    timeInForce: TIF_TO_BROKER[order.timeInForce],
    isAutomated: true,
  };
}

/**
 * The `d` of a 200 answer as an object; throws BROKER_REJECTED when it carries a failure
 * instead (`failureReason` other than Success, or `errorText`): the broker answers many
 * refusals with HTTP 200.
 */
export function checkAnswer(endpoint: string, d: unknown): Record<string, unknown> {
  const body = d && typeof d === 'object' ? (d as Record<string, unknown>) : {};
  const reason = body.failureReason;
  if ((typeof reason === 'string' && reason !== 'Success') || (typeof body.errorText === 'string' && body.errorText)) {
    const brokerReason = [reason, body.failureText ?? body.errorText].filter((x) => typeof x === 'string' && x).join(': ');
    throw new AppError('BROKER_REJECTED', `broker rejected ${endpoint}: ${brokerReason}`, { brokerReason });
  }
  return body;
}

/** The broker's `text` (64 UTF-16 units), never cut inside a surrogate pair (the API refuses longer labels; this is a backstop). */
export function brokerText(label: string): string {
  if (label.length <= 64) return label;
  const cut = label.slice(0, 64);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, 63) : cut;
}
