/**
 * The paper broker's order engine: order lifecycle (new, reject, modify, cancel), matching
 * against the synthetic last price, fills split into several `fill` events, OSO legs that
 * wait `Suspended` for their entry, OCO siblings, multibracket strategies, trailing stops and
 * MIT orders, trading sessions (no trading while closed, Day orders expire). Pure: every
 * mutation records `props` events in SimState, which the server takes and sends.
 */
import type { IdMap } from '../domain/id-map.js';
import { riskCheck, validateVersion, type CheckFailure } from './checks.js';
import { roundToTick } from './contracts.js';
import { decide, isTrailing } from './matching.js';
import { OrderBook, type OrderRec, type OrderSpec } from './order-book.js';
import { Positions } from './positions.js';
import { seededRandom } from './prices.js';
import type { SessionMode } from './sessions.js';
import { type Entity, type EntityType, type IdReservation, SimState } from './state.js';
import { finishStrategy, startBrackets } from './strategies.js';

export type { OrderAction, OrderRec, OrderSpec } from './order-book.js';

/** Upper bound of `fill` events one fill produces. */
const MAX_FILL_PIECES = 16;
const FINAL = new Set(['Filled', 'Canceled', 'Rejected', 'Expired', 'Completed']);

/** Engine construction options. */
export interface EngineOptions {
  clock?: () => number;
  seed?: number;
  /** Final orders kept (with their commands, versions, reports, fills); older ones are archived. Default 10,000. */
  retainFinalOrders?: number;
  /** Trading sessions (default `none`: always open). */
  sessions?: SessionMode;
  /** Ids kept across restarts. */
  ids?: IdReservation | undefined;
}

const SESSION_CLOSED: CheckFailure = { status: 'ExecutionRejected', reason: 'SessionClosed', text: 'Market is closed' };

/** The matching engine and every entity it owns. */
export class Engine {
  readonly state: SimState;
  readonly positions: Positions;
  readonly book: OrderBook;
  /** Orders by id (final ones until archived). */
  readonly orders: IdMap<OrderRec>;
  /** Orders of each order strategy, entry first. */
  readonly strategyOrders: Map<number, OrderRec[]>;
  /** Accounts with fills since the last `takeFilledAccounts` (their equity moved). */
  private filledAccounts = new Set<number>();
  private readonly random: () => number;

  constructor(opts: EngineOptions = {}) {
    this.random = seededRandom((opts.seed ?? 1) ^ 0x5eed);
    this.state = new SimState(opts.clock ?? Date.now, seededRandom(opts.seed ?? 1), opts.sessions, opts.ids);
    this.positions = new Positions(this.state);
    this.book = new OrderBook(this.state, opts.retainFinalOrders ?? 10_000);
    this.orders = this.book.orders;
    this.strategyOrders = this.book.strategyOrders;
  }

  /** True when the order can still fill or be cancelled. */
  isLive(rec: OrderRec): boolean {
    return !FINAL.has(rec.order.ordStatus as string);
  }

  /** Creates order, command and orderVersion (all one id); `suspended` parks it as an OSO leg. */
  create(spec: OrderSpec, links: { parentId?: number; strategyId?: number } = {}): OrderRec {
    const s = this.state;
    const id = s.id();
    const order: Entity = {
      id, accountId: spec.accountId, contractId: spec.contractId, timestamp: s.timestamp(), action: spec.action,
      ordStatus: 'PendingNew', executionProviderId: 1, admin: spec.admin ?? false, archived: false, external: false,
    };
    if (links.parentId) order.parentId = links.parentId;
    const rec: OrderRec = {
      id, accountId: spec.accountId, contractId: spec.contractId, buy: spec.action === 'Buy', order,
      version: this.versionEntity(id, id, spec), lastCommandId: id, filled: 0, filledValue: 0, triggered: false,
      legIds: [], owned: [], ...links,
    };
    this.book.add(rec);
    this.own(rec, 'order', order);
    this.own(rec, 'command', {
      id, orderId: id, timestamp: s.timestamp(), clOrdId: spec.clOrdId, commandType: 'New', commandStatus: 'Pending',
      senderId: this.userOf(rec), userSessionId: 0, isAutomated: spec.isAutomated ?? false, customTag50: spec.customTag50,
    });
    this.own(rec, 'orderVersion', rec.version);
    return rec;
  }

  /** Runs pre-trade checks; then the order works (or waits suspended) and may fill at once. */
  submit(rec: OrderRec, opts: { riskCheck: boolean; suspended?: boolean }): void {
    // An OCO sibling can be cancelled by its partner's immediate fill before it is submitted.
    if (rec.order.ordStatus !== 'PendingNew') return;
    const problem = validateVersion(this.state, rec.contractId, rec.version)
      ?? (!rec.order.admin && !this.state.session().open ? SESSION_CLOSED : undefined)
      ?? (opts.riskCheck ? riskCheck(this.state, this.positions, rec, rec.version.orderQty as number, rec.version.orderQty as number) : undefined);
    if (problem) {
      this.reject(rec, problem.status, problem.reason, problem.text);
      return;
    }
    const s = this.state;
    this.own(rec, 'commandReport', { id: s.id(), commandId: rec.id, timestamp: s.timestamp(), commandStatus: 'RiskPassed' });
    this.updateCommand(rec.id, 'RiskPassed');
    if (opts.suspended) {
      this.execReport(rec, { execType: 'Suspended', ordStatus: 'Suspended' });
      this.setStatus(rec, 'Suspended');
      return;
    }
    this.execReport(rec, { execType: 'New', ordStatus: 'Working' });
    this.setStatus(rec, 'Working');
    this.match(rec, true);
  }

  /** Rejects an order: commandReport + executionReport + order `Rejected`; legs follow. */
  reject(rec: OrderRec, commandStatus: string, reason: string, text: string): void {
    const s = this.state;
    this.own(rec, 'commandReport', {
      id: s.id(), commandId: rec.id, timestamp: s.timestamp(), commandStatus, rejectReason: reason, text, ordStatus: 'Rejected',
    });
    this.execReport(rec, { execType: 'Rejected', ordStatus: 'Rejected', rejectReason: reason, text });
    this.setStatus(rec, 'Rejected');
    this.updateCommand(rec.id, commandStatus);
    for (const legId of rec.legIds) {
      const leg = this.orders.get(legId);
      if (leg && this.isLive(leg)) this.reject(leg, 'ExecutionRejected', 'ParentRejected', 'Parent order was rejected');
    }
    const sibling = rec.siblingId ? this.orders.get(rec.siblingId) : undefined;
    if (sibling) this.terminate(sibling, 'Canceled');
    finishStrategy(this, rec);
  }

  /** Turns a suspended leg into a working order for `qty`. */
  activate(rec: OrderRec, qty: number): void {
    if (rec.order.ordStatus !== 'Suspended') return;
    this.resize(rec, qty);
    this.execReport(rec, { execType: 'New', ordStatus: 'Working' });
    this.setStatus(rec, 'Working');
    this.match(rec, true);
  }

  /** User cancel: a Cancel command, then Canceled (or a TooLate report if already final). */
  cancel(rec: OrderRec, fields: { clOrdId?: string; isAutomated?: boolean } = {}): number {
    const commandId = this.command(rec, 'Cancel', fields);
    if (!this.isLive(rec)) {
      this.commandRejected(rec, commandId, 'TooLate', `Order is not working (${String(rec.order.ordStatus)})`);
      return commandId;
    }
    this.commandReport(rec, commandId, 'RiskPassed');
    rec.lastCommandId = commandId;
    this.terminate(rec, 'Canceled');
    this.updateCommand(commandId, 'ExecutionStopped');
    return commandId;
  }

  /** User modify: Modify command + new orderVersion (same id), Replaced, then matching again. */
  modify(rec: OrderRec, spec: Partial<OrderSpec> & { orderQty: number; orderType: string }): number {
    const commandId = this.command(rec, 'Modify', spec);
    if (!this.isLive(rec)) {
      this.commandRejected(rec, commandId, 'TooLate', `Order is not working (${String(rec.order.ordStatus)})`);
      return commandId;
    }
    const version = this.versionEntity(commandId, rec.id, {
      ...spec, timeInForce: spec.timeInForce ?? (rec.version.timeInForce as string),
    } as OrderSpec);
    this.own(rec, 'orderVersion', version);
    const problem = validateVersion(this.state, rec.contractId, version)
      ?? (!this.state.session().open ? SESSION_CLOSED : undefined)
      ?? (spec.orderQty <= rec.filled ? { status: 'ExecutionRejected', reason: 'UnknownReason', text: 'Quantity must exceed the filled quantity' } : undefined)
      ?? (rec.parentId || rec.siblingId ? undefined : riskCheck(this.state, this.positions, rec, spec.orderQty, spec.orderQty - (rec.version.orderQty as number)));
    if (problem) {
      this.commandRejected(rec, commandId, problem.reason, problem.text, problem.status);
      return commandId;
    }
    this.commandReport(rec, commandId, 'RiskPassed');
    rec.version = version;
    rec.lastCommandId = commandId;
    rec.triggered = false;
    rec.trail = undefined;
    this.execReport(rec, { execType: 'Replaced', ordStatus: rec.order.ordStatus });
    this.setStatus(rec, rec.order.ordStatus as string);
    this.updateCommand(commandId, 'Replaced');
    if (rec.order.ordStatus === 'Working') this.match(rec, true);
    return commandId;
  }

  /** Fills `qty` of a live order at `price` now (several `fill` events for larger quantities). */
  fill(rec: OrderRec, qty: number, price: number): void {
    const s = this.state;
    const total = rec.version.orderQty as number;
    const amount = Math.min(qty, total - rec.filled);
    let left = amount;
    while (left > 0) {
      // Larger fills arrive split into pieces of up to 4 lots, as observed on Tradovate demo;
      // never more than MAX_FILL_PIECES pieces, so a big order costs a bounded number of events.
      const piece = Math.max(2 + Math.floor(this.random() * 3), Math.ceil(amount / MAX_FILL_PIECES));
      const chunk = left <= 3 ? left : Math.min(left, piece);
      left -= chunk;
      rec.filled += chunk;
      rec.filledValue += chunk * price;
      const done = rec.filled === total;
      this.execReport(rec, {
        execType: 'Trade', ordStatus: done ? 'Filled' : 'Working', cumQty: rec.filled,
        avgPx: rec.filledValue / rec.filled, lastQty: chunk, lastPx: price,
      });
      const fill = this.own(rec, 'fill', {
        id: s.id(), orderId: rec.id, contractId: rec.contractId, timestamp: s.timestamp(), tradeDate: s.tradeDate(),
        action: rec.order.action, qty: chunk, price, active: true, finallyPaired: 0, external: false,
      });
      this.positions.apply(rec.accountId, rec.contractId, fill);
    }
    if (amount > 0) this.filledAccounts.add(rec.accountId);
    if (rec.filled === total) this.setStatus(rec, 'Filled');
    if (amount > 0) this.afterFill(rec, amount);
  }

  /** Re-evaluates every working order of a contract against its last price. */
  matchContract(contractId: number): void {
    for (const rec of this.book.workingOf(contractId)) if (rec.order.ordStatus === 'Working') this.match(rec, false);
  }

  /** Accounts that had fills since the last call (undefined when none). */
  takeFilledAccounts(): ReadonlySet<number> | undefined {
    if (this.filledAccounts.size === 0) return undefined;
    const out = this.filledAccounts;
    this.filledAccounts = new Set();
    return out;
  }

  /**
   * Re-evaluates every working order when the market opens again. Orders the opening price has
   * gapped through fill at that price, as at an opening auction, not at their limit.
   */
  matchAll(): void {
    for (const id of this.book.workingContracts()) {
      for (const rec of this.book.workingOf(id)) if (rec.order.ordStatus === 'Working') this.match(rec, true);
    }
  }

  /** Working and suspended orders of an account, optionally for one contract. */
  liveOrders(accountId: number, contractId?: number): OrderRec[] {
    return this.book.liveOf(accountId, contractId);
  }

  /** Session close: every live Day order expires (legs of an unfilled entry are cancelled with it). */
  expireDayOrders(): void {
    for (const rec of this.book.allLive()) if (this.isLive(rec) && rec.version.timeInForce === 'Day') this.terminate(rec, 'Expired');
  }

  /** Fills a working order if the last price allows it; `arrival` = it has just started working. */
  match(rec: OrderRec, arrival: boolean): void {
    if (rec.order.ordStatus !== 'Working' || !this.state.accounts.get(rec.accountId)?.active) return;
    // Closed market: nothing trades, except the broker's own liquidations at the last price.
    if (!rec.order.admin && !this.state.session().open) return;
    const last = this.state.prices.last(rec.contractId);
    const v = rec.version;
    const type = v.orderType as string;
    const tick = this.state.contracts.productOf(rec.contractId).tickSize;
    if (rec.trail === undefined && isTrailing(type)) this.startTrailing(rec, last, tick);
    const d = decide({
      buy: rec.buy, orderType: type, price: v.price as number | undefined, stopPrice: v.stopPrice as number | undefined,
      triggered: rec.triggered, trail: rec.trail,
    }, last, arrival, tick);
    rec.triggered = d.triggered;
    if (d.trailTo) this.state.update('orderVersion', v, d.trailTo);
    if (d.fillPrice === undefined) return this.expireIfImmediate(rec);
    this.fill(rec, (v.orderQty as number) - rec.filled, d.fillPrice);
  }

  /** Fixes a trailing order's distance: `pegDifference`, else how far its stop is from the price now. */
  private startTrailing(rec: OrderRec, last: number, tick: number): void {
    const v = rec.version;
    const peg = v.pegDifference as number | undefined;
    const stop = v.stopPrice as number | undefined;
    rec.trail = peg !== undefined ? Math.abs(peg) : Math.abs(last - (stop as number));
    if (stop === undefined) this.state.update('orderVersion', v, { stopPrice: roundToTick(rec.buy ? last + rec.trail : last - rec.trail, tick) });
  }

  private expireIfImmediate(rec: OrderRec): void {
    const tif = rec.version.timeInForce;
    if (tif === 'IOC' || tif === 'FOK') this.terminate(rec, 'Canceled');
  }

  private afterFill(rec: OrderRec, qty: number): void {
    for (const legId of rec.legIds) {
      const leg = this.orders.get(legId);
      if (!leg || !this.isLive(leg)) continue;
      if (leg.order.ordStatus === 'Suspended') this.activate(leg, rec.filled);
      else this.resize(leg, (leg.version.orderQty as number) + qty);
    }
    const sibling = rec.siblingId ? this.orders.get(rec.siblingId) : undefined;
    if (sibling && this.isLive(sibling)) {
      if (!this.isLive(rec)) this.terminate(sibling, 'Canceled');
      else {
        const qtyLeft = (sibling.version.orderQty as number) - qty;
        if (qtyLeft <= sibling.filled) this.terminate(sibling, 'Canceled');
        else this.resize(sibling, qtyLeft);
      }
    }
    if (rec.strategyBrackets && !this.isLive(rec)) startBrackets(this, rec);
    finishStrategy(this, rec);
  }

  /** Makes two orders one-cancels-other (each order's `ocoId` names its sibling). */
  pair(a: OrderRec, b: OrderRec): void {
    a.siblingId = b.id;
    b.siblingId = a.id;
    a.order.ocoId = b.id;
    b.order.ocoId = a.id;
  }

  /** Ends a live order without a user command (OCO, IOC, cascade) and applies OSO/OCO rules. */
  terminate(rec: OrderRec, status: 'Canceled' | 'Expired'): void {
    if (!this.isLive(rec)) return;
    this.execReport(rec, { execType: status, ordStatus: status, cumQty: rec.filled });
    this.setStatus(rec, status);
    rec.strategyBrackets = undefined;
    if (rec.filled === 0) {
      for (const legId of rec.legIds) {
        const leg = this.orders.get(legId);
        if (leg) this.terminate(leg, 'Canceled');
      }
    }
    const sibling = rec.siblingId ? this.orders.get(rec.siblingId) : undefined;
    if (sibling) this.terminate(sibling, 'Canceled');
    finishStrategy(this, rec);
  }

  private resize(rec: OrderRec, qty: number): void {
    if (qty === rec.version.orderQty) return;
    this.state.update('orderVersion', rec.version, { orderQty: qty });
  }

  private setStatus(rec: OrderRec, status: string): void {
    this.state.update('order', rec.order, { ordStatus: status });
    this.book.statusChanged(rec, status, FINAL.has(status));
  }

  private versionEntity(id: number, orderId: number, spec: Partial<OrderSpec>): Entity {
    const v: Entity = { id, orderId, orderQty: spec.orderQty, orderType: spec.orderType, timeInForce: spec.timeInForce ?? 'Day' };
    if (spec.price !== undefined) v.price = spec.price;
    if (spec.stopPrice !== undefined) v.stopPrice = spec.stopPrice;
    if (spec.pegDifference !== undefined) v.pegDifference = spec.pegDifference;
    if (spec.text !== undefined) v.text = spec.text;
    return v;
  }

  private command(rec: OrderRec, commandType: 'Cancel' | 'Modify', fields: { clOrdId?: string; isAutomated?: boolean }): number {
    const s = this.state;
    const id = s.id();
    this.own(rec, 'command', {
      id, orderId: rec.id, timestamp: s.timestamp(), clOrdId: fields.clOrdId, commandType, commandStatus: 'Pending',
      senderId: this.userOf(rec), userSessionId: 0, isAutomated: fields.isAutomated ?? false,
    });
    return id;
  }

  private commandReport(rec: OrderRec, commandId: number, commandStatus: string, extra: Record<string, unknown> = {}): void {
    const s = this.state;
    this.own(rec, 'commandReport', { id: s.id(), commandId, timestamp: s.timestamp(), commandStatus, ...extra });
  }

  private commandRejected(rec: OrderRec, commandId: number, reason: string, text: string, status = 'ExecutionRejected'): void {
    this.commandReport(rec, commandId, status, { rejectReason: reason, text, ordStatus: rec.order.ordStatus });
    this.updateCommand(commandId, status);
  }

  private updateCommand(commandId: number, commandStatus: string): void {
    const command = this.state.get('command', commandId);
    if (command) this.state.update('command', command, { commandStatus });
  }

  private execReport(rec: OrderRec, fields: Record<string, unknown>): void {
    const s = this.state;
    this.own(rec, 'executionReport', {
      id: s.id(), commandId: rec.lastCommandId, name: String(rec.id), accountId: rec.accountId, contractId: rec.contractId,
      timestamp: s.timestamp(), tradeDate: s.tradeDate(), orderId: rec.id, action: rec.order.action,
      cumQty: rec.filled, avgPx: rec.filled > 0 ? rec.filledValue / rec.filled : undefined, ...fields,
    });
  }

  /** Stores an entity created for `rec` and remembers it, so the order can be archived later. */
  private own(rec: OrderRec, type: EntityType, entity: Entity): Entity {
    rec.owned.push(type, entity.id);
    return this.state.create(type, entity, rec.accountId);
  }

  private userOf(rec: OrderRec): number {
    return this.state.accounts.get(rec.accountId)?.userId ?? 0;
  }
}
