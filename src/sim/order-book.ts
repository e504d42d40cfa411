/**
 * The engine's order records and their indexes: by id, per strategy, working orders per
 * contract (what a price change matches), live orders overall and per account (what a session
 * close or a liquidation walks) and the bounded archive of final orders. Every index is updated
 * on status changes, so no operation scans every order.
 */
import { IdMap } from '../domain/id-map.js';
import type { SimState, Entity, EntityType } from './state.js';
import type { BracketSpec } from './strategies.js';

export type OrderAction = 'Buy' | 'Sell';

/** What an order is made of, already resolved to ids. */
export interface OrderSpec {
  accountId: number;
  contractId: number;
  action: OrderAction;
  orderQty: number;
  orderType: string;
  price?: number;
  stopPrice?: number;
  /** Trailing distance (trailing types); the sign is ignored. */
  pegDifference?: number;
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
  /** Trailing distance in points, fixed when a trailing order starts working. */
  trail?: number;
  siblingId?: number;
  legIds: number[];
  parentId?: number;
  strategyId?: number;
  /** Entities created for this order, as (type, id) pairs, archived with it. */
  owned: Array<EntityType | number>;
  /** Multibracket definition, created when this strategy entry fills completely. */
  strategyBrackets?: BracketSpec[];
}

/**
 * Orders by id plus the indexes the engine needs. What grows with the orders is kept by id in
 * IdMaps, which never rehash all of their entries in one insert (id-map.ts).
 */
export class OrderBook {
  readonly orders = new IdMap<OrderRec>();
  /** Orders of each order strategy, entry first. */
  readonly strategyOrders = new Map<number, OrderRec[]>();
  /** Working orders of each contract. */
  private readonly working = new Map<number, IdMap<OrderRec>>();
  private readonly live = new IdMap<OrderRec>();
  private readonly liveByAccount = new Map<number, IdMap<OrderRec>>();
  private finalOrders: OrderRec[] = [];
  private finalHead = 0;

  constructor(
    private readonly state: SimState,
    private readonly retainFinalOrders: number,
  ) {}

  /** Registers a new (live) order. */
  add(rec: OrderRec): void {
    this.orders.set(rec.id, rec);
    this.live.set(rec.id, rec);
    let mine = this.liveByAccount.get(rec.accountId);
    if (!mine) this.liveByAccount.set(rec.accountId, (mine = new IdMap()));
    mine.set(rec.id, rec);
    if (rec.strategyId) {
      const list = this.strategyOrders.get(rec.strategyId) ?? [];
      list.push(rec);
      this.strategyOrders.set(rec.strategyId, list);
    }
  }

  /** Follows a status change: working set of the contract, live sets, archival once final. */
  statusChanged(rec: OrderRec, status: string, final: boolean): void {
    let set = this.working.get(rec.contractId);
    if (!set) this.working.set(rec.contractId, (set = new IdMap()));
    if (status === 'Working') set.set(rec.id, rec);
    else set.delete(rec.id);
    if (!final) return;
    this.live.delete(rec.id);
    this.liveByAccount.get(rec.accountId)?.delete(rec.id);
    this.retire(rec);
  }

  /** Working orders of a contract (a copy: matching changes the set). */
  workingOf(contractId: number): OrderRec[] {
    const set = this.working.get(contractId);
    return set && set.size > 0 ? [...set.values()] : [];
  }

  /** Contracts that have (or had) working orders. */
  workingContracts(): number[] {
    return [...this.working.keys()];
  }

  /** Live orders of an account, optionally of one contract. */
  liveOf(accountId: number, contractId?: number): OrderRec[] {
    const out: OrderRec[] = [];
    for (const rec of this.liveByAccount.get(accountId)?.values() ?? []) if (contractId === undefined || rec.contractId === contractId) out.push(rec);
    return out;
  }

  /** Every live order (a copy). */
  allLive(): OrderRec[] {
    return [...this.live.values()];
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
}
