/**
 * What the order operations (place, cancel, flatten) share inside one actor, plus the small
 * helpers they all need: waiting for the broker's events after its answer, and classifying
 * in-body failures (HTTP 200 with failureReason) as BROKER_REJECTED.
 */
import type { Logger } from '../log.js';
import type { Entity, Mirror } from '../broker/tradovate/mirror.js';
import { AppError } from '../domain/problems.js';
import type { BrokerConnection } from './connection.js';
import type { OrderModel } from './order-model.js';
import { FINAL_STATUSES, fillsOf, statusOf } from './order-mapping.js';
import type { ActorEvent, PlaceOrderResult } from './protocol.js';
import type { OrderStatus } from '../domain/orders.js';

/** Everything an order operation needs from its actor. */
export interface ActorContext {
  conn: BrokerConnection;
  mirror: Mirror;
  model: OrderModel;
  /** How long to wait for broker events that follow an answer. */
  settleMs: number;
  logger: Logger;
  emit(event: ActorEvent): void;
  /** Place attempts in flight, by `accountId|clOrdId`. */
  placing: Map<string, Promise<PlaceOrderResult>>;
}

/** The service status of a mirrored order. */
export function orderStatus(mirror: Mirror, order: Entity): OrderStatus {
  return statusOf(order.ordStatus, fillsOf(mirror, order.id).qty);
}

/** True once the order can no longer change (filled, cancelled, rejected, expired). */
export function isFinal(mirror: Mirror, orderId: number): boolean {
  const o = mirror.get('order', orderId);
  return !!o && FINAL_STATUSES.has(orderStatus(mirror, o));
}

/** Throws BROKER_REJECTED when a 200 answer carries a failure (`failureReason`/`errorText`). */
export function checkAnswer(endpoint: string, d: unknown): Record<string, unknown> {
  const body = d && typeof d === 'object' ? (d as Record<string, unknown>) : {};
  const reason = body.failureReason;
  if ((typeof reason === 'string' && reason !== 'Success') || (typeof body.errorText === 'string' && body.errorText)) {
    const brokerReason = [reason, body.failureText ?? body.errorText].filter((x) => typeof x === 'string' && x).join(': ');
    throw new AppError('BROKER_REJECTED', `broker rejected ${endpoint}: ${brokerReason}`, { brokerReason });
  }
  return body;
}

/** Milliseconds since `t0` (performance clock), rounded to 0.1 ms. */
export function since(t0: number): number {
  return Math.round((performance.now() - t0) * 10) / 10;
}
