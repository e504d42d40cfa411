/**
 * Request bodies for the broker's order endpoints, built from the front's requests. Pure: the
 * actor sends them. Every order carries `isAutomated: true` (exchange policy for algorithmic
 * orders) and the request's `clOrdId`.
 */
import type { NewOrder, OrderType, Side, TimeInForce } from '../../domain/orders.js';

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
    ...(req.clientOrderId ? { text: req.clientOrderId.slice(0, 64) } : {}),
    isAutomated: true,
  };
}

/**
 * `order/placeoso` body for an absolute bracket: bracket1 the take-profit (Limit), bracket2 the
 * stop-loss (Stop); with only one leg it goes in bracket1.
 */
export function placeOsoBody(req: NewOrder, account: AccountRef, tp: number | null, sl: number | null): Record<string, unknown> {
  const exit = exitActionOf(req.side);
  const tif = TIF_TO_BROKER[req.timeInForce === 'ioc' || req.timeInForce === 'fok' ? 'gtc' : req.timeInForce];
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
