/**
 * Orders, positions, trades and accounts as the service exposes them (DESIGN §4). IDs are
 * strings, times ISO-8601 UTC. Shared by every layer: the front plans and shows them, the
 * actors build them from broker data, the store keeps strategy defaults in these terms.
 */
import type { BrokerKind, Environment } from './connections.js';

export type Side = 'buy' | 'sell';
export type OrderType = 'market' | 'limit' | 'stop' | 'stop_limit';
export type TimeInForce = 'day' | 'gtc' | 'ioc' | 'fok';
export type OrderStatus = 'pending' | 'working' | 'partially_filled' | 'filled' | 'cancelled' | 'rejected' | 'expired';
export type OrderRole = 'single' | 'entry' | 'take_profit' | 'stop_loss';

/** Statuses after which nothing more happens to an order. */
export const FINAL_STATUSES: ReadonlySet<OrderStatus> = new Set(['filled', 'cancelled', 'rejected', 'expired']);

/** Default largest quantity one order may carry (API, webhooks and strategies alike; ORDER_QTY_MAX). */
export const MAX_ORDER_QTY = 10_000;

/** No deployment may allow more than this per order (the bound of the ORDER_QTY_MAX setting and of the schemas). */
export const ORDER_QTY_CEILING = 1_000_000;

/** Default width of the price band: a price must lie within reference ÷ factor … reference × factor. */
export const PRICE_BAND_FACTOR = 5;

/** The per-order limits a deployment sets (config ORDER_QTY_MAX and PRICE_BAND_FACTOR). */
export interface OrderLimits {
  maxQty: number;
  priceBandFactor: number;
}

/** The defaults of OrderLimits. */
export const DEFAULT_ORDER_LIMITS: Readonly<OrderLimits> = Object.freeze({ maxQty: MAX_ORDER_QTY, priceBandFactor: PRICE_BAND_FACTOR });

/** Whether `qty` is a whole number of contracts from 1 to `max`. */
export function isOrderQty(qty: number, max: number = MAX_ORDER_QTY): boolean {
  return Number.isInteger(qty) && qty > 0 && qty <= max;
}

/**
 * A broker order id from a path, strictly: canonical decimal digits (no sign, no leading zero,
 * no exponent, hex or fraction) within the safe integers; undefined otherwise. `010000337`,
 * `0x9897d1` and `1.0000337e7` are not order 10000337.
 */
export function parseOrderId(text: string): number | undefined {
  if (!/^[1-9][0-9]{0,15}$/.test(text)) return undefined;
  const id = Number(text);
  return Number.isSafeInteger(id) ? id : undefined;
}

/**
 * The price an entry is expected to fill at, when the order names one: the limit price of
 * limit and stop-limit orders, the trigger of stop orders; null for market orders.
 */
export function referencePrice(type: OrderType, price: number | null | undefined, stopPrice: number | null | undefined): number | null {
  if (type === 'limit' || type === 'stop_limit') return price ?? null;
  if (type === 'stop') return stopPrice ?? null;
  return null;
}

/** A bracket leg as clients write it: an absolute price, or a tick offset from the entry's fill. */
export type LegInput = { price: number } | { ticks: number };

/** A bracket leg as the broker side takes it: an absolute price, or an unsigned offset in points from the fill. */
export type BracketLeg = { price: number } | { offsetPoints: number };

/** An order ready for the broker: contract resolved, prices checked, legs in points, the broker clOrdId derived. */
export interface NewOrder {
  accountId: string;
  /** Resolved contract name, e.g. "ESZ6". */
  symbol: string;
  requestedSymbol: string;
  side: Side;
  qty: number;
  orderType: OrderType;
  price?: number | null;
  stopPrice?: number | null;
  timeInForce: TimeInForce;
  takeProfit?: BracketLeg | null;
  stopLoss?: BracketLeg | null;
  clientOrderId?: string | null;
  /**
   * The contract's price band, on orders whose bracket has offset legs: the actor checks where
   * those legs land from the entry's real fill against it (domain/fill-anchor.ts).
   */
  priceBand?: { min: number; max: number; reference: number };
  /**
   * Deterministic broker clOrdId (derived from user + Idempotency-Key when one is given).
   * Before placing, the actor looks it up in its synced mirror; if the broker already has
   * an order with it, that order is the answer (no second order).
   */
  clOrdId: string;
}

export interface OrderRecord {
  /** The broker's own order id as a string. */
  orderId: string;
  accountId: string;
  /** Resolved contract, e.g. "ESZ6". */
  symbol: string;
  /** What the client sent, e.g. "ES1!"; null for orders not placed through tradegate. */
  requestedSymbol: string | null;
  side: Side;
  type: OrderType;
  qty: number;
  filledQty: number;
  avgFillPrice: number | null;
  price: number | null;
  stopPrice: number | null;
  timeInForce: TimeInForce;
  status: OrderStatus;
  role: OrderRole;
  bracketId: string | null;
  legs: { takeProfit: string | null; stopLoss: string | null };
  clientOrderId: string | null;
  /** Broker-side reject reason, when status is rejected. */
  rejectReason?: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface PositionRecord {
  accountId: string;
  symbol: string;
  /** Signed: positive long, negative short. */
  netQty: number;
  avgPrice: number;
  openedAt: string | null;
}

export interface ClosedTrade {
  id: string;
  accountId: string;
  symbol: string;
  direction: 'long' | 'short';
  qty: number;
  entryPrice: number;
  exitPrice: number;
  openedAt: string;
  closedAt: string;
  pnlPoints: number;
  /** In account currency: pnlPoints × point value × qty. */
  pnl: number;
  entryOrderIds: string[];
  exitOrderIds: string[];
}

export interface AccountRecord {
  id: string;
  name: string;
  connectionId: string;
  broker: BrokerKind;
  environment: Environment;
  /** false once the broker stops reporting the account (evaluation breached, reset, replaced). */
  active: boolean;
}
