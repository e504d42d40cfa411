/**
 * Live exposure per account and contract, kept incrementally from the broker's events so a
 * guard check reads it in O(1): the net position (from fills, so an order that fills moves
 * its quantity from "working" to "position" in the same event), the contracts of live orders
 * on each side (a one-cancels-other pair counts once, suspended bracket legs not at all), and
 * holds for orders on their way to the broker, which count until the broker reports them.
 *
 * A resync snapshot rebuilds everything once (O(orders)); every later event costs O(1) plus
 * the few versions and siblings of the order it touches.
 */
import type { Entity, Mirror, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { exposureOf, type ContractExposure } from '../../src/domain/guards.js';
import { IdMap, IdSet } from '../../src/domain/id-map.js';

interface Book extends ContractExposure {
  exposure: number;
}

interface AccountBook {
  contracts: Map<number, Book>;
  total: number;
}

/** What names an order's group: its OCO pair, its parent (bracket legs), or the order itself. */
type GroupKind = 'oco' | 'parent' | 'own';

interface Slot {
  accountId: string;
  contractId: number;
  side: 'buy' | 'sell';
  qty: number;
  /** The group is `groups[kind].get(group)`. */
  kind: GroupKind;
  group: number;
}

interface Group {
  members: Map<number, Slot>;
  buy: number;
  sell: number;
}

/** Contracts held for an order until the broker has reported it (then its own events count). */
export interface Hold {
  /** The broker's id of the order: the hold ends once the order's quantity is known from its events. */
  bind(orderId: number): void;
  /** Ends the hold (idempotent). */
  release(): void;
}

const GONE = new Set(['Canceled', 'Rejected', 'Expired']);

/** The newest position entity of every account and contract (a broker may keep one per trade date). */
export function latestPositions(mirror: Mirror): Entity[] {
  const latest = new Map<string, Entity>();
  for (const p of mirror.all('position')) {
    const key = `${p.accountId}|${p.contractId}`;
    const prev = latest.get(key);
    if (!prev || p.id > prev.id) latest.set(key, p);
  }
  return [...latest.values()];
}

/** Live exposure of one connection's accounts. */
export class Exposure {
  private readonly accounts = new Map<string, AccountBook>();
  // By order id (IdMap: these grow with every order and must not rehash all at once).
  private readonly slots = new IdMap<Slot>();
  /** Groups by kind, then by the id that names them. */
  private readonly groups: Readonly<Record<GroupKind, IdMap<Group>>> = { oco: new IdMap(), parent: new IdMap(), own: new IdMap() };
  private readonly filled = new IdMap<number>();
  private readonly seenFills = new IdSet();
  /** Fills that arrived before their order (the account is on the order). */
  private readonly orphans = new IdMap<Entity[]>();
  private readonly names = new Map<string, number>();
  private readonly holds = new Set<HeldOrder>();
  private readonly bound = new IdMap<HeldOrder>();

  constructor(private readonly mirror: Mirror) {
    mirror.onChange((change) => this.apply(change));
    this.rebuild();
  }

  /** The contract id of a contract name, once the broker has named it. */
  contractId(name: string): number | undefined {
    return this.names.get(name);
  }

  /** Exposure of an account in a contract (zeros when none). */
  contract(accountId: string, contractId: number): ContractExposure {
    const b = this.accounts.get(accountId)?.contracts.get(contractId);
    return b ? { net: b.net, buying: b.buying, selling: b.selling } : { net: 0, buying: 0, selling: 0 };
  }

  /** Sum of the exposure over the account's contracts. */
  total(accountId: string): number {
    return this.accounts.get(accountId)?.total ?? 0;
  }

  /** Every contract of an account with something in it. */
  contracts(accountId: string): { contractId: number; exposure: ContractExposure }[] {
    const out: { contractId: number; exposure: ContractExposure }[] = [];
    for (const [contractId, b] of this.accounts.get(accountId)?.contracts ?? []) {
      if (b.net !== 0 || b.buying !== 0 || b.selling !== 0) out.push({ contractId, exposure: { net: b.net, buying: b.buying, selling: b.selling } });
    }
    return out;
  }

  /** Holds `qty` contracts on `side` for an order about to be sent. */
  hold(accountId: string, contractId: number, side: 'buy' | 'sell', qty: number): Hold {
    const h = new HeldOrder(this, accountId, contractId, side, qty);
    this.holds.add(h);
    this.adjust(accountId, contractId, side, qty);
    return h;
  }

  /** @internal */
  bindHold(h: HeldOrder, orderId: number): void {
    if (!this.holds.has(h)) return;
    if (this.reported(orderId)) return this.endHold(h);
    this.bound.set(orderId, h);
    h.boundIds.push(orderId);
  }

  /** @internal */
  endHold(h: HeldOrder): void {
    if (!this.holds.delete(h)) return;
    // Its own ids, not a walk over every bound hold (hundreds are bound during a burst).
    for (const id of h.boundIds) if (this.bound.get(id) === h) this.bound.delete(id);
    this.adjust(h.accountId, h.contractId, h.side, -h.qty);
  }

  private book(accountId: string, contractId: number): Book {
    let acct = this.accounts.get(accountId);
    if (!acct) this.accounts.set(accountId, (acct = { contracts: new Map(), total: 0 }));
    let b = acct.contracts.get(contractId);
    if (!b) acct.contracts.set(contractId, (b = { net: 0, buying: 0, selling: 0, exposure: 0 }));
    return b;
  }

  private adjust(accountId: string, contractId: number, side: 'buy' | 'sell' | 'net', delta: number): void {
    if (delta === 0) return;
    const b = this.book(accountId, contractId);
    if (side === 'buy') b.buying += delta;
    else if (side === 'sell') b.selling += delta;
    else b.net += delta;
    const next = exposureOf(b);
    this.accounts.get(accountId)!.total += next - b.exposure;
    b.exposure = next;
  }

  private apply(change: MirrorChange): void {
    if (change.entityType === '*') return this.rebuild();
    // Only the snapshot change comes without an entity.
    const e = change.entity;
    if (!e) return;
    switch (change.entityType) {
      case 'contract':
        if (typeof e.name === 'string') this.names.set(e.name, e.id);
        return;
      case 'fill':
        if (change.eventType !== 'Deleted') this.fill(e);
        return;
      case 'order':
        if (change.eventType === 'Deleted') return this.place(e.id, null);
        this.recount(e.id);
        for (const f of this.orphans.get(e.id) ?? []) this.fill(f);
        this.orphans.delete(e.id);
        return;
      case 'orderVersion':
        if (typeof e.orderId === 'number') this.recount(e.orderId);
        return;
    }
  }

  private fill(f: Entity): void {
    if (this.seenFills.has(f.id) || f.active === false) return;
    const orderId = Number(f.orderId);
    const order = this.mirror.get('order', orderId);
    if (!order) {
      const list = this.orphans.get(orderId) ?? [];
      if (!list.some((x) => x.id === f.id)) list.push(f);
      this.orphans.set(orderId, list);
      return;
    }
    this.seenFills.add(f.id);
    const qty = Number(f.qty ?? 0);
    this.filled.set(orderId, (this.filled.get(orderId) ?? 0) + qty);
    this.adjust(String(order.accountId), Number(f.contractId ?? order.contractId), 'net', f.action === 'Sell' ? -qty : qty);
    this.recount(orderId);
  }

  /** Recomputes what an order still may fill, from its status, latest version and fills. */
  private recount(orderId: number): void {
    const o = this.mirror.get('order', orderId);
    if (!o) return this.place(orderId, null);
    const version = this.mirror.latestVersion(orderId);
    const status = String(o.ordStatus ?? '');
    const remaining = Math.max(0, Number(version?.orderQty ?? 0) - (this.filled.get(orderId) ?? 0));
    const qty = GONE.has(status) || status === 'Suspended' ? 0 : remaining;
    const oco = Number(o.ocoId ?? 0);
    const parent = Number(o.parentId ?? 0);
    const kind: GroupKind = oco ? 'oco' : parent ? 'parent' : 'own';
    const group = oco ? Math.min(oco, orderId) : parent || orderId;
    this.place(orderId, { accountId: String(o.accountId), contractId: Number(o.contractId), side: o.action === 'Sell' ? 'sell' : 'buy', qty, kind, group });
    const h = this.bound.get(orderId);
    if (h && this.reported(orderId)) this.endHold(h);
  }

  /** Whether the order's own events now account for it (its quantity is known, or it is over). */
  private reported(orderId: number): boolean {
    const o = this.mirror.get('order', orderId);
    return !!o && (this.mirror.latestVersion(orderId) !== undefined || GONE.has(String(o.ordStatus)));
  }

  private place(orderId: number, slot: Slot | null): void {
    const prev = this.slots.get(orderId);
    if (prev) {
      const g = this.groups[prev.kind].get(prev.group)!;
      g.members.delete(orderId);
      this.regroup(g, prev);
    }
    if (!slot || slot.qty === 0) {
      this.slots.delete(orderId);
      return;
    }
    this.slots.set(orderId, slot);
    let g = this.groups[slot.kind].get(slot.group);
    if (!g) this.groups[slot.kind].set(slot.group, (g = { members: new Map(), buy: 0, sell: 0 }));
    g.members.set(orderId, slot);
    this.regroup(g, slot);
  }

  /** A one-cancels-other group fills at most its largest member on each side. */
  private regroup(g: Group, where: Slot): void {
    let buy = 0;
    let sell = 0;
    for (const m of g.members.values()) {
      if (m.side === 'buy') buy = Math.max(buy, m.qty);
      else sell = Math.max(sell, m.qty);
    }
    this.adjust(where.accountId, where.contractId, 'buy', buy - g.buy);
    this.adjust(where.accountId, where.contractId, 'sell', sell - g.sell);
    g.buy = buy;
    g.sell = sell;
    if (g.members.size === 0) this.groups[where.kind].delete(where.group);
  }

  /** Rebuilds from a fresh snapshot: positions as reported, then every live order; holds carry over. */
  private rebuild(): void {
    this.accounts.clear();
    this.slots.clear();
    for (const groups of Object.values(this.groups)) groups.clear();
    this.filled.clear();
    this.seenFills.clear();
    this.orphans.clear();
    this.names.clear();
    for (const c of this.mirror.all('contract')) if (typeof c.name === 'string') this.names.set(c.name, c.id);
    for (const p of latestPositions(this.mirror)) this.adjust(String(p.accountId), Number(p.contractId), 'net', Number(p.netPos ?? 0));
    for (const f of this.mirror.all('fill')) {
      if (f.active === false) continue;
      this.seenFills.add(f.id);
      this.filled.set(Number(f.orderId), (this.filled.get(Number(f.orderId)) ?? 0) + Number(f.qty ?? 0));
    }
    // Holds count before the orders: recounting a reported order ends its hold, which takes the
    // hold's contracts back out of the books.
    for (const h of this.holds) this.adjust(h.accountId, h.contractId, h.side, h.qty);
    for (const o of this.mirror.all('order')) if (!GONE.has(String(o.ordStatus))) this.recount(o.id);
    for (const [orderId, h] of [...this.bound]) if (this.reported(orderId)) this.endHold(h);
  }
}

class HeldOrder implements Hold {
  /** The broker order ids this hold was bound to. */
  readonly boundIds: number[] = [];

  constructor(
    private readonly owner: Exposure,
    readonly accountId: string,
    readonly contractId: number,
    readonly side: 'buy' | 'sell',
    readonly qty: number,
  ) {}

  bind(orderId: number): void {
    this.owner.bindHold(this, orderId);
  }

  release(): void {
    this.owner.endHold(this);
  }
}
