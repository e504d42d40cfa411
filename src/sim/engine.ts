/**
 * The paper broker's order engine: order lifecycle (new, reject, modify, cancel), matching
 * against the synthetic last price, fills split into several `fill` events, OSO legs that
 * wait `Suspended` for their entry, OCO siblings, multibracket strategies. Pure: every
 * mutation records `props` events in SimState, which the server takes and sends.
 */
import { riskCheck, validateVersion } from './checks.js';
import { Positions } from './positions.js';
import { seededRandom } from './prices.js';
import { type Entity, type EntityType, SimState } from './state.js';
import { finishStrategy, startBrackets } from './strategies.js';

/** Upper bound of `fill` events one fill produces. */
const MAX_FILL_PIECES = 16;

export type OrderAction = 'Buy' | 'Sell';
export type OrderTypeName = 'Market' | 'Limit' | 'Stop' | 'StopLimit';
const FINAL = new Set(['Filled', 'Canceled', 'Rejected', 'Expired', 'Completed']);

/** What an order is made of, already resolved to ids. */
export interface OrderSpec {
  accountId: number;
  contractId: number;
  action: OrderAction;
  orderQty: number;
  orderType: string;
  price?: number;
  stopPrice?: number;
  timeInForce?: string;
  clOrdId?: string;
  text?: string;
  isAutomated?: boolean;
  admin?: boolean;
  customTag50?: string;
}

/** Engine bookkeeping for one order. */
export interface OrderRec {
  id: number;
  accountId: number;
  contractId: number;
  buy: boolean;
  order: Entity;
  version: Entity;
  lastCommandId: number;
  filled: number;
  filledValue: number;
  triggered: boolean;
  siblingId?: number;
  legIds: number[];
  parentId?: number;
  strategyId?: number;
  /** Entities created for this order, as (type, id) pairs, archived with it. */
  owned: Array<EntityType | number>;
  /** Multibracket definition, created when this strategy entry fills completely. */
  strategyBrackets?: Array<{ qty: number; profitTarget?: number; stopLoss?: number }>;
}

/** Engine construction options. */
export interface EngineOptions {
  clock?: () => number;
  seed?: number;
  /** Final orders kept (with their commands, versions, reports, fills); older ones are archived. Default 10,000. */
  retainFinalOrders?: number;
}

/** The matching engine and every entity it owns. */
export class Engine {
  readonly state: SimState;
  readonly positions: Positions;
  readonly orders = new Map<number, OrderRec>();
  /** Orders of each order strategy, entry first. */
  readonly strategyOrders = new Map<number, OrderRec[]>();
  private readonly working = new Map<number, Set<OrderRec>>();
  private readonly random: () => number;
  private finalOrders: OrderRec[] = [];
  private finalHead = 0;
  private readonly retainFinalOrders: number;

  constructor(opts: EngineOptions = {}) {
    this.retainFinalOrders = opts.retainFinalOrders ?? 10_000;
    this.random = seededRandom((opts.seed ?? 1) ^ 0x5eed);
    this.state = new SimState(opts.clock ?? Date.now, seededRandom(opts.seed ?? 1));
    this.positions = new Positions(this.state);
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
    this.orders.set(id, rec);
    if (links.strategyId) {
      const list = this.strategyOrders.get(links.strategyId) ?? [];
      list.push(rec);
      this.strategyOrders.set(links.strategyId, list);
    }
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
    const problem = validateVersion(this.state, rec.contractId, rec.version) ?? (opts.riskCheck ? riskCheck(this.state, this.positions, rec, rec.version.orderQty as number, rec.version.orderQty as number) : undefined);
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
    const s = this.state;
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
    if (rec.filled === total) this.setStatus(rec, 'Filled');
    if (amount > 0) this.afterFill(rec, amount);
  }

  /** Re-evaluates every working order of a contract against its last price. */
  matchContract(contractId: number): void {
    const set = this.working.get(contractId);
    if (!set) return;
    for (const rec of [...set]) if (rec.order.ordStatus === 'Working') this.match(rec, false);
  }

  /** Working and suspended orders of an account, optionally for one contract. */
  liveOrders(accountId: number, contractId?: number): OrderRec[] {
    const out: OrderRec[] = [];
    for (const rec of this.orders.values()) {
      if (rec.accountId === accountId && this.isLive(rec) && (contractId === undefined || rec.contractId === contractId)) out.push(rec);
    }
    return out;
  }

  /** Fills a working order if the last price allows it; `arrival` = it has just started working. */
  match(rec: OrderRec, arrival: boolean): void {
    if (rec.order.ordStatus !== 'Working' || !this.state.accounts.get(rec.accountId)?.active) return;
    const last = this.state.prices.last(rec.contractId);
    const v = rec.version;
    const type = v.orderType as string;
    let price: number | undefined;
    if ((type === 'Stop' || type === 'StopLimit') && !rec.triggered) {
      const stop = v.stopPrice as number;
      if (rec.buy ? last >= stop : last <= stop) rec.triggered = true;
      else return this.expireIfImmediate(rec);
      arrival = true;
    }
    if (type === 'Market' || type === 'Stop') price = last;
    else {
      const limit = v.price as number;
      if (rec.buy ? last <= limit : last >= limit) price = arrival ? last : limit;
    }
    if (price === undefined) return this.expireIfImmediate(rec);
    this.fill(rec, (v.orderQty as number) - rec.filled, price);
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
    const set = this.working.get(rec.contractId) ?? new Set<OrderRec>();
    this.working.set(rec.contractId, set);
    if (status === 'Working') set.add(rec);
    else set.delete(rec);
    this.state.update('order', rec.order, { ordStatus: status });
    if (FINAL.has(status)) this.retire(rec);
  }

  private versionEntity(id: number, orderId: number, spec: Partial<OrderSpec>): Entity {
    const v: Entity = { id, orderId, orderQty: spec.orderQty, orderType: spec.orderType, timeInForce: spec.timeInForce ?? 'Day' };
    if (spec.price !== undefined) v.price = spec.price;
    if (spec.stopPrice !== undefined) v.stopPrice = spec.stopPrice;
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

  /** Keeps at most `retainFinalOrders` final orders; older ones and their entities are archived. */
  private retire(rec: OrderRec): void {
    this.finalOrders.push(rec);
    while (this.finalOrders.length - this.finalHead > this.retainFinalOrders) {
      const old = this.finalOrders[this.finalHead++]!;
      // Compact now and then instead of shift(), which is O(n) on every archived order.
      if (this.finalHead > 4096) {
        this.finalOrders = this.finalOrders.slice(this.finalHead);
        this.finalHead = 0;
      }
      this.orders.delete(old.id);
      for (let i = 0; i < old.owned.length; i += 2) this.state.remove(old.owned[i] as EntityType, old.owned[i + 1] as number);
      old.owned = [];
    }
  }

  private userOf(rec: OrderRec): number {
    return this.state.accounts.get(rec.accountId)?.userId ?? 0;
  }
}
