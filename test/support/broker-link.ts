/**
 * The order operations (place, cancel, flatten) without a socket: a scripted broker behind
 * the BrokerLink the operations see, which answers like Tradovate and reports what happened
 * through the mirror, as props events would. One account (7, "DEMO7") trading ESZ6 (contract 1).
 * A test overrides an endpoint in `handlers` to refuse, stay silent or misbehave, or makes a
 * request time out and answers it late (`timeOut`).
 */
import { Mirror, type Entity } from '../../src/broker/tradovate/mirror.js';
import type { LateAnswer } from '../../src/broker/tradovate/ws-client.js';
import type { ActorEvent } from '../../src/actors/protocol.js';
import { connectionFailed, type ConnectionSpec } from '../../src/domain/connections.js';
import type { NewOrder } from '../../src/domain/orders.js';
import { AppError } from '../../src/domain/problems.js';
import { createLogger } from '../../src/log.js';
import type { ActorContext, BrokerLink } from '../../workers/connection-actor/context.js';
import { OrderModel } from '../../workers/connection-actor/order-model.js';
import { UnknownOutcomes } from '../../workers/connection-actor/unknown-outcomes.js';

export const ACCOUNT = '7';
export const CONTRACT = 1;

type Body = Record<string, any>;

/** A scripted Tradovate over a mirror. */
export class FakeBroker implements BrokerLink {
  readonly spec = { connectionId: 'c1', userId: 'u1', broker: 'paper', environment: 'paper' } as ConnectionSpec;
  readonly mirror = new Mirror();
  readonly sent: { endpoint: string; body: Body }[] = [];
  connected = true;
  /** Cancelling one leg of a working bracket takes the other down too (OCO), as Tradovate does. */
  oco = true;
  /** Per endpoint, replaces the default behaviour. */
  handlers: Record<string, (body: Body) => unknown> = {};
  private nextId = 100;
  private clock = Date.UTC(2026, 10, 21, 15, 0, 0);

  constructor() {
    this.mirror.replace({ accounts: [{ id: Number(ACCOUNT), name: 'DEMO7', active: true }], contracts: [{ id: CONTRACT, name: 'ESZ6' }] });
  }

  /** Set: the connection gave up (FAILED) with this detail. */
  failed: string | undefined;

  requireConnected(): void {
    if (this.failed !== undefined) throw connectionFailed(this.spec.connectionId, this.failed);
    if (!this.connected) throw new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING');
  }

  /** Set: the broker has gone quiet (reads and new requests refused while connected). */
  quiet = false;

  requireFresh(): void {
    this.requireConnected();
    if (this.quiet) throw new AppError('BROKER_UNAVAILABLE', 'no word from the broker for 5.0 s', {}, 1);
  }

  async ensureContract(): Promise<void> {}

  /** Account ids `account/list` answers with; null lists every account in the mirror. */
  listed: number[] | null = null;

  /** `account/list`: accounts it no longer lists leave the mirror (as BrokerConnection.pollAccounts does). */
  async pollAccounts(): Promise<void> {
    this.sent.push({ endpoint: 'account/list', body: {} });
    if (!this.listed) return;
    for (const a of this.mirror.all('account')) if (!this.listed.includes(a.id)) this.mirror.apply('account', 'Deleted', a);
  }

  async send(endpoint: string, body?: unknown, opts: { onLate?: (answer: LateAnswer) => void } = {}): Promise<unknown> {
    this.requireConnected();
    const b = (body ?? {}) as Body;
    this.sent.push({ endpoint, body: b });
    const late = this.timingOut.get(endpoint);
    if (late) {
      this.timingOut.delete(endpoint);
      late({ body: b, onLate: opts.onLate });
      throw new AppError('BROKER_TIMEOUT', `broker did not answer ${endpoint} in time`);
    }
    const handler = this.handlers[endpoint] ?? this.defaults[endpoint];
    if (!handler) throw new AppError('NOT_FOUND', `no such endpoint ${endpoint}`);
    return handler(b);
  }

  /**
   * Holds the broker's answers on `endpoint` until `release()`; `reached` resolves when the
   * first request arrives (it is recorded in `sent` at once).
   */
  hold(endpoint: string): { release: () => void; reached: Promise<void> } {
    let release!: () => void;
    let arrived!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const reached = new Promise<void>((r) => (arrived = r));
    const answer = this.handlers[endpoint] ?? this.defaults[endpoint]!;
    this.handlers[endpoint] = async (b) => {
      arrived();
      await held;
      return answer(b);
    };
    return { release, reached };
  }

  private readonly timingOut = new Map<string, (sent: { body: Body; onLate: ((answer: LateAnswer) => void) | undefined }) => void>();

  /**
   * The next request to `endpoint` times out (BROKER_TIMEOUT) with the broker still holding it:
   * `execute()` carries it out (events into the mirror) as the broker would, late; `answer()`
   * then delivers its answer to the request's onLate, as a socket routes a late answer.
   * `refuse(status, d)` delivers a late refusal instead (nothing executed).
   */
  timeOut(endpoint: string): { execute(): void; answer(): void; refuse(status: number, d: unknown): void } {
    let sent: { body: Body; onLate: ((answer: LateAnswer) => void) | undefined } | undefined;
    let data: unknown;
    this.timingOut.set(endpoint, (s) => (sent = s));
    const handler = this.handlers[endpoint] ?? this.defaults[endpoint]!;
    return {
      execute: () => {
        data = handler(sent!.body);
      },
      answer: () => sent!.onLate?.({ status: 200, data }),
      refuse: (status, d) => sent!.onLate?.({ status, data: d }),
    };
  }

  /** Requests sent to one endpoint. */
  bodies(endpoint: string): Body[] {
    return this.sent.filter((s) => s.endpoint === endpoint).map((s) => s.body);
  }

  /** The broker fills `qty` of an order at `price` (the order's position moves with it). */
  fill(orderId: number, qty: number, price: number): void {
    const order = this.mirror.get('order', orderId)!;
    const version = this.mirror.latestVersion(orderId)!;
    const filled = this.mirror.by('fill', 'orderId', orderId).reduce((n, f) => n + Number(f.qty), 0) + qty;
    this.mirror.apply('fill', 'Created', { id: this.id(), orderId, accountId: order.accountId, contractId: CONTRACT, action: order.action, qty, price, timestamp: this.ts() });
    this.update('order', orderId, { ordStatus: filled >= Number(version.orderQty) ? 'Filled' : 'Working' });
    // Protective legs wake up once their entry has a fill.
    for (const leg of this.mirror.by('order', 'parentId', orderId)) if (leg.ordStatus === 'Suspended') this.update('order', leg.id, { ordStatus: 'Working' });
    const signed = order.action === 'Buy' ? qty : -qty;
    const pos = this.mirror.by('position', 'accountId', Number(ACCOUNT)).find((p) => p.contractId === CONTRACT);
    if (pos) this.update('position', pos.id, { netPos: Number(pos.netPos) + signed });
    else this.mirror.apply('position', 'Created', { id: this.id(), accountId: Number(ACCOUNT), contractId: CONTRACT, netPos: signed, netPrice: price, timestamp: this.ts() });
  }

  /** Puts an order of its own at the broker (placed elsewhere, or before a crash). */
  addOrder(fields: { action?: 'Buy' | 'Sell'; orderType?: string; qty?: number; price?: number; stopPrice?: number; parentId?: number; clOrdId?: string; ordStatus?: string }): number {
    return this.createOrder({
      action: fields.action ?? 'Buy', orderType: fields.orderType ?? 'Limit', orderQty: fields.qty ?? 1, price: fields.price, stopPrice: fields.stopPrice,
      accountId: Number(ACCOUNT), clOrdId: fields.clOrdId, timeInForce: 'Day',
    }, { parentId: fields.parentId, ordStatus: fields.ordStatus ?? 'Working' });
  }

  private readonly defaults: Record<string, (b: Body) => unknown> = {
    'order/placeorder': (b) => ({ orderId: this.createOrder(b) }),
    'order/placeoco': (b) => {
      const orderId = this.createOrder(b);
      const ocoId = this.createOrder({ ...b.other, orderQty: b.orderQty, accountId: b.accountId, symbol: b.symbol });
      return { orderId, ocoId };
    },
    'order/placeoso': (b) => {
      const orderId = this.createOrder(b);
      const legs = [b.bracket1, b.bracket2].filter(Boolean).map((leg: Body) =>
        this.createOrder({ ...leg, orderQty: b.orderQty, accountId: b.accountId, symbol: b.symbol }, { parentId: orderId, ordStatus: 'Suspended' }),
      );
      return { orderId, oso1Id: legs[0], ...(legs[1] ? { oso2Id: legs[1] } : {}) };
    },
    'orderstrategy/startorderstrategy': (b) => {
      const id = this.id();
      this.mirror.apply('orderStrategy', 'Created', { id, accountId: b.accountId, action: b.action, status: 'ActiveStrategy', uuid: b.uuid, params: b.params });
      const entry = this.createOrder({ action: b.action, orderType: 'Market', orderQty: JSON.parse(b.params).brackets[0].qty, accountId: b.accountId });
      this.mirror.apply('orderStrategyLink', 'Created', { id: this.id(), orderStrategyId: id, orderId: entry });
      return { orderStrategy: { id } };
    },
    'order/cancelorder': (b) => {
      const order = this.mirror.get('order', b.orderId);
      if (!order || ['Filled', 'Canceled', 'Rejected', 'Expired'].includes(String(order.ordStatus))) return { failureReason: 'UnknownReason', failureText: 'order is not working' };
      this.update('order', order.id, { ordStatus: 'Canceled' });
      for (const leg of this.mirror.by('order', 'parentId', order.id)) if (leg.ordStatus === 'Suspended') this.update('order', leg.id, { ordStatus: 'Canceled' });
      const parent = Number(order.parentId ?? 0);
      if (this.oco && parent) {
        for (const sibling of this.mirror.by('order', 'parentId', parent)) if (sibling.id !== order.id && sibling.ordStatus === 'Working') this.update('order', sibling.id, { ordStatus: 'Canceled' });
      }
      return { commandId: this.id() };
    },
    'order/modifyorder': (b) => {
      const order = this.mirror.get('order', b.orderId);
      if (!order || ['Filled', 'Canceled', 'Rejected', 'Expired'].includes(String(order.ordStatus))) return { failureReason: 'TooLate', failureText: 'order is not working' };
      const commandId = this.id();
      // A modify's version id is its command id (mirror.latestVersion picks the highest).
      this.mirror.apply('orderVersion', 'Created', { ...this.mirror.latestVersion(order.id), ...b, id: commandId, orderId: order.id });
      // As the paper broker (and Tradovate) do: no total at or below what the order has filled.
      const filled = this.mirror.by('fill', 'orderId', order.id).reduce((n, f) => n + Number(f.qty), 0);
      if (typeof b.orderQty === 'number' && b.orderQty <= filled) {
        this.mirror.apply('commandReport', 'Created', { id: this.id(), commandId, commandStatus: 'ExecutionRejected', rejectReason: 'UnknownReason', text: 'Quantity must exceed the filled quantity' });
      }
      return { commandId };
    },
    'order/liquidateposition': (b) => {
      const pos = this.mirror.by('position', 'accountId', b.accountId).find((p) => p.contractId === b.contractId);
      if (pos) this.update('position', pos.id, { netPos: 0 });
      return { commandId: this.id() };
    },
  };

  private createOrder(b: Body, extra: { parentId?: number | undefined; ordStatus?: string } = {}): number {
    const id = this.id();
    this.mirror.apply('order', 'Created', {
      id, accountId: b.accountId, contractId: CONTRACT, action: b.action, ordStatus: extra.ordStatus ?? 'Working', timestamp: this.ts(),
      ...(extra.parentId ? { parentId: extra.parentId } : {}), ...(b.clOrdId ? { clOrdId: b.clOrdId } : {}),
    });
    this.mirror.apply('orderVersion', 'Created', {
      id: this.id(), orderId: id, orderQty: b.orderQty, orderType: b.orderType, timeInForce: b.timeInForce,
      ...(b.price !== undefined ? { price: b.price } : {}), ...(b.stopPrice !== undefined ? { stopPrice: b.stopPrice } : {}),
      ...(b.text !== undefined ? { text: b.text } : {}),
    });
    if (b.clOrdId) this.mirror.apply('command', 'Created', { id: this.id(), orderId: id, clOrdId: b.clOrdId });
    return id;
  }

  private update(type: string, id: number, changes: Record<string, unknown>): void {
    this.mirror.apply(type, 'Updated', { ...(this.mirror.get(type, id) as Entity), ...changes, timestamp: this.ts() });
  }

  private id(): number {
    return this.nextId++;
  }

  private ts(): string {
    return new Date((this.clock += 1000)).toISOString();
  }
}

/**
 * An actor context over a FakeBroker; `events` collects what the operation emits. A retry waits
 * `waitMs` for an unknown outcome, which ends after `maxAgeMs`.
 */
export function fakeActorContext(settleMs = 200, unknown: { waitMs?: number; maxAgeMs?: number } = {}): { broker: FakeBroker; ctx: ActorContext; events: ActorEvent[] } {
  const broker = new FakeBroker();
  const model = new OrderModel(broker.mirror, broker.spec);
  model.refreshAccounts();
  const events: ActorEvent[] = [];
  const logger = createLogger('silent');
  const ctx: ActorContext = {
    conn: broker,
    mirror: broker.mirror,
    model,
    settleMs,
    logger,
    emit: (e) => events.push(e),
    placing: new Map(),
    reducing: new Map(),
    owedLegs: new Map(),
    cancelling: new Map(), flattening: new Map(),
    unknown: new UnknownOutcomes(broker.mirror, model, logger, unknown.waitMs ?? 200, unknown.maxAgeMs ?? 60_000),
  };
  return { broker, ctx, events };
}

/** A planned order on the fake account, ready for placeOrder. */
export function newOrder(patch: Partial<NewOrder> = {}): NewOrder & { type: 'place-order' } {
  return {
    type: 'place-order', accountId: ACCOUNT, symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'buy', qty: 1, orderType: 'limit', price: 5000,
    stopPrice: null, timeInForce: 'day', clOrdId: `tg-k-${Math.random().toString(36).slice(2)}`, clientOrderId: null, ...patch,
  };
}
