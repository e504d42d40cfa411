/**
 * The actor's view of its broker state for the front: accounts (active, or inactive once the
 * broker stops reporting them), working orders with roles and linkage, positions, closed
 * trades, and lookup by clOrdId. Reads the mirror; remembers only what the broker cannot
 * (requested symbol, client order id, re-placed legs).
 */
import type { Entity, Mirror } from '../../src/broker/tradovate/mirror.js';
import { AppError } from '../../src/domain/problems.js';
import { contractName, statusOf, toOrderRecord, type OrderNote } from '../../src/broker/tradovate/order-records.js';
import { IdMap, IdSet } from '../../src/domain/id-map.js';
import { pairTrades, type FillInput } from '../../src/domain/trades.js';
import { FINAL_STATUSES, parseOrderId, type AccountRecord, type ClosedTrade, type OrderRecord, type PositionRecord } from '../../src/domain/orders.js';
import type { ConnectionSpec } from '../../src/domain/connections.js';
import type { WorkingOrdersPage } from '../../src/actors/protocol.js';

/**
 * Page versions, shared by every actor of this worker thread so they only grow, even across an
 * actor replaced on the same worker: the supervisor compares them per worker.
 */
let pageVersions = 0;

/** The order model over one connection's mirror. */
export class OrderModel {
  /** By order id (an IdMap: it grows with every order placed, and must not rehash all of them at once). */
  private readonly notes = new IdMap<OrderNote>();
  /** The notes of any order, for records of legs the broker created on its own. */
  private readonly noteById = (orderId: number): OrderNote | undefined => this.notes.get(orderId);
  private readonly known = new Map<string, AccountRecord>();
  private lastAccountsJson = '';
  /**
   * Orders whose broker status is not final, per account: a read walks these, not the
   * account's whole history (which only grows). Kept by the mirror's change feed.
   */
  private readonly live = new Map<number, IdSet>();
  /** Working orders of an account as JSON texts, one per record, until anything changes. */
  /** Working orders serialized once per change, oldest first, with their ids (for `after`). */
  private readonly pages = new Map<string, { texts: string[]; ids: number[] }>();
  /** Version of the working orders: moves with every change that may alter a record. */
  private version = ++pageVersions;
  /** A page went out since the last change (the front may be keeping it). */
  private served = false;

  /** `pagesChanged`: told the new version when working orders change after a page was served. */
  constructor(
    private readonly mirror: Mirror,
    private readonly spec: ConnectionSpec,
    private readonly pagesChanged: (version: number) => void = () => {},
  ) {
    mirror.onChange((change) => {
      if (change.eventType === 'Snapshot') {
        this.reindexLive();
        this.fileReplacedLegs();
      }
      else if (change.entityType === 'order' && change.entity) this.track(change.entity, change.eventType === 'Deleted');
      // A record reads its versions, fills, reports, legs and contract: any of these may
      // change it, so every serialized page is dropped (reads recompute on demand).
      if (change.entityType !== 'account' && change.entityType !== 'cashBalance') this.changed();
    });
  }

  /** Drops the pages the front may keep (the broker went quiet: they may be stale, and a read must ask). */
  forgetPages(): void {
    this.changed();
  }

  /** Drops the serialized pages; tells the front once when it may hold one. */
  private changed(): void {
    this.version = ++pageVersions;
    if (this.pages.size > 0) this.pages.clear();
    if (!this.served) return;
    this.served = false;
    this.pagesChanged(this.version);
  }

  private track(order: Entity, deleted: boolean): void {
    const account = Number(order.accountId);
    let set = this.live.get(account);
    if (!deleted && !FINAL_STATUSES.has(statusOf(order.ordStatus, 0))) {
      if (!set) this.live.set(account, (set = new IdSet()));
      set.add(order.id);
    } else set?.delete(order.id);
  }

  private reindexLive(): void {
    this.live.clear();
    for (const o of this.mirror.all('order')) this.track(o, false);
  }

  /**
   * A re-placed bracket leg (clOrdId `rp-<id of the leg it replaced>`, cancel.ts) is filed by a
   * note of this actor's; after a restart the note is gone. After every snapshot, each such
   * order without a note is filed as the leg it replaced (that leg's role, bracket, symbol and
   * client id; that leg may be a re-placed one itself, so oldest first), or, with that leg gone
   * from the mirror, by its own type (a limit takes the profit, a stop stops the loss). Filed as
   * a plain order instead, it escapes the sweep that cancels legs once their position is flat,
   * and would open a new, unprotected position when it fired.
   */
  private fileReplacedLegs(): void {
    const replaced: { id: number; replacing: number }[] = [];
    const seen = new Set<number>();
    const consider = (orderId: number, clOrdId: unknown) => {
      if (typeof clOrdId !== 'string' || !clOrdId.startsWith('rp-') || seen.has(orderId) || this.notes.has(orderId)) return;
      const replacing = Number(clOrdId.slice(3));
      if (!Number.isSafeInteger(replacing)) return;
      seen.add(orderId);
      replaced.push({ id: orderId, replacing });
    };
    for (const cmd of this.mirror.all('command')) consider(Number(cmd.orderId), cmd.clOrdId);
    for (const o of this.mirror.all('order')) consider(o.id, o.clOrdId);
    replaced.sort((a, b) => a.id - b.id);
    for (const { id, replacing } of replaced) {
      const self = this.record(id);
      if (!self) continue;
      const old = this.record(replacing);
      const role = old?.role === 'take_profit' || old?.role === 'stop_loss' ? old.role : self.type === 'limit' ? 'take_profit' : 'stop_loss';
      const bracketId = old?.bracketId ?? null;
      this.notes.set(id, { role, bracketId, requestedSymbol: old?.requestedSymbol ?? null, clientOrderId: old?.clientOrderId ?? null });
      if (bracketId !== null) {
        const entry = Number(bracketId);
        this.notes.set(entry, Object.assign({}, this.notes.get(entry), { legs: { takeProfit: role === 'take_profit' ? String(id) : null, stopLoss: role === 'stop_loss' ? String(id) : null } }));
      }
    }
  }

  /** Merges what tradegate knows about an order it placed. */
  note(orderId: number, note: OrderNote): void {
    this.notes.set(orderId, Object.assign({}, this.notes.get(orderId), note));
    this.changed();
  }

  /** Drops tradegate's note of an order the actor no longer keeps (finished-orders.ts). */
  forget(orderId: number): void {
    this.notes.delete(orderId);
  }

  noteOf(orderId: number): OrderNote | undefined {
    return this.notes.get(orderId);
  }

  /**
   * Recomputes accounts from the mirror. An account is active while the broker reports it
   * (and does not flag it inactive); one seen before and now missing stays listed, inactive.
   * Returns the list when it changed since the last call, else null.
   */
  refreshAccounts(): AccountRecord[] | null {
    const reported = new Set<string>();
    for (const a of this.mirror.all('account')) {
      const id = String(a.id);
      const active = a.active !== false && a.archived !== true && a.closed !== true;
      if (active) reported.add(id);
      this.known.set(id, {
        id,
        name: typeof a.name === 'string' ? a.name : id,
        connectionId: this.spec.connectionId,
        broker: this.spec.broker,
        environment: this.spec.environment,
        active,
      });
    }
    for (const [id, rec] of this.known) if (!reported.has(id) && rec.active) this.known.set(id, { ...rec, active: false });
    const list = this.accounts();
    const json = JSON.stringify(list);
    if (json === this.lastAccountsJson) return null;
    this.lastAccountsJson = json;
    return list;
  }

  /** Every account seen on this connection, inactive ones included, by id. */
  accounts(): AccountRecord[] {
    return [...this.known.values()].sort((a, b) => Number(a.id) - Number(b.id) || a.id.localeCompare(b.id));
  }

  /** The broker account entity for a request, or a coded error. */
  account(accountId: string): Entity {
    const rec = this.known.get(accountId);
    const entity = this.mirror.get('account', Number(accountId));
    if (!rec) throw new AppError('NOT_FOUND', `account ${accountId} is not on this connection`);
    // The spec fixes the detail text: exactly "Account is inactive" (the catalogue title).
    if (!rec.active || !entity) throw new AppError('ACCOUNT_INACTIVE', undefined, { accountId });
    return entity;
  }

  /** The broker order entity, scoped to an account. */
  orderEntity(accountId: string, orderId: string): Entity | undefined {
    const id = parseOrderId(orderId);
    if (id === undefined) return undefined;
    const o = this.mirror.get('order', id);
    return o && String(o.accountId) === accountId ? o : undefined;
  }

  /** OrderRecord for a broker order id. */
  record(orderId: number, fallbackSymbol?: string): OrderRecord | null {
    const o = this.mirror.get('order', orderId);
    return o ? toOrderRecord(this.mirror, o, this.notes.get(orderId), fallbackSymbol, this.noteById) : null;
  }

  /** Orders resting at the broker: unfilled entries, suspended and working legs. */
  workingOrders(accountId: string): OrderRecord[] {
    const out: OrderRecord[] = [];
    const ids = [...(this.live.get(Number(accountId)) ?? [])].sort((a, b) => a - b);
    for (const id of ids) {
      const o = this.mirror.get('order', id);
      if (!o) continue;
      const rec = toOrderRecord(this.mirror, o, this.notes.get(o.id), undefined, this.noteById);
      if (!FINAL_STATUSES.has(rec.status)) out.push(rec);
    }
    return out;
  }

  /** The working partial exits (reduce-only orders) of an account: notes first, so other orders cost no record. */
  workingReduceOnly(accountId: string): OrderRecord[] {
    const out: OrderRecord[] = [];
    for (const id of this.live.get(Number(accountId)) ?? []) {
      const note = this.notes.get(id);
      if (!note?.reduceOnly) continue;
      const o = this.mirror.get('order', id);
      if (!o) continue;
      const rec = toOrderRecord(this.mirror, o, note, undefined, this.noteById);
      if (!FINAL_STATUSES.has(rec.status)) out.push(rec);
    }
    return out;
  }

  /**
   * A page of workingOrders as JSON text, from records serialized once and kept until the
   * mirror changes: repeated reads of 150 orders cost a slice and a join, not 150 records.
   */
  workingOrdersPage(accountId: string, after: number, limit: number): WorkingOrdersPage {
    let page = this.pages.get(accountId);
    if (!page) {
      const records = this.workingOrders(accountId);
      page = { texts: records.map((r) => JSON.stringify(r)), ids: records.map((r) => Number(r.orderId)) };
      this.pages.set(accountId, page);
    }
    this.served = true;
    // Oldest first, by id: the page starts at the first order past `after`.
    let start = 0;
    let hi = page.ids.length;
    while (start < hi) {
      const mid = (start + hi) >>> 1;
      if (page.ids[mid]! <= after) start = mid + 1;
      else hi = mid;
    }
    const end = Math.min(start + limit, page.texts.length);
    const out: WorkingOrdersPage = { json: `[${page.texts.slice(start, end).join(',')}]`, total: page.texts.length, version: this.version, more: end < page.texts.length };
    if (end > start) out.lastId = page.ids[end - 1]!;
    return out;
  }

  /** Open positions (non-zero net), the newest position entity per contract. */
  positions(accountId: string): PositionRecord[] {
    const latest = new Map<number, Entity>();
    for (const p of this.mirror.by('position', 'accountId', Number(accountId))) {
      const c = Number(p.contractId);
      const prev = latest.get(c);
      if (!prev || p.id > prev.id) latest.set(c, p);
    }
    const out: PositionRecord[] = [];
    for (const p of latest.values()) {
      const netQty = Number(p.netPos ?? 0);
      if (netQty === 0) continue;
      out.push({
        accountId,
        symbol: contractName(this.mirror, p.contractId) ?? String(p.contractId),
        netQty,
        avgPrice: Number(p.netPrice ?? 0),
        openedAt: this.openedAt(accountId, Number(p.contractId), netQty) ?? (typeof p.timestamp === 'string' ? p.timestamp : null),
      });
    }
    return out.sort((a, b) => a.symbol.localeCompare(b.symbol));
  }

  /** Raw broker position entities with a non-zero net (for flatten). */
  openPositionEntities(accountId: string): Entity[] {
    const latest = new Map<number, Entity>();
    for (const p of this.mirror.by('position', 'accountId', Number(accountId))) {
      const prev = latest.get(Number(p.contractId));
      if (!prev || p.id > prev.id) latest.set(Number(p.contractId), p);
    }
    return [...latest.values()].filter((p) => Number(p.netPos ?? 0) !== 0);
  }

  /** The account's net position in a contract, by name (0 when flat or unknown). */
  netPosition(accountId: string, symbol: string): number {
    const p = this.openPositionEntities(accountId).find((e) => (contractName(this.mirror, e.contractId) ?? String(e.contractId)) === symbol);
    return Number(p?.netPos ?? 0);
  }

  /** Fills of an account as pairing input. */
  fills(accountId: string, contractId?: number): FillInput[] {
    const out: FillInput[] = [];
    for (const f of this.mirror.all('fill')) {
      if (f.active === false) continue;
      const order = this.mirror.get('order', Number(f.orderId));
      const acct = f.accountId ?? order?.accountId;
      if (String(acct) !== accountId) continue;
      if (contractId !== undefined && Number(f.contractId) !== contractId) continue;
      out.push({
        fillId: String(f.id),
        orderId: String(f.orderId),
        accountId,
        symbol: contractName(this.mirror, f.contractId) ?? String(f.contractId),
        side: f.action === 'Sell' ? 'sell' : 'buy',
        qty: Number(f.qty ?? 0),
        price: Number(f.price ?? 0),
        timestamp: typeof f.timestamp === 'string' ? f.timestamp : new Date(0).toISOString(),
      });
    }
    return out;
  }

  /** Closed trades, FIFO-paired. */
  tradeHistory(accountId: string, pointValue: (symbol: string) => number): ClosedTrade[] {
    return pairTrades(this.fills(accountId), pointValue);
  }

  /** When the currently open lots of a position started (the oldest unpaired fill). */
  private openedAt(accountId: string, contractId: number, netQty: number): string | null {
    const fills = this.fills(accountId, contractId).sort((a, b) => (a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0));
    let net = 0;
    let since: string | null = null;
    for (const f of fills) {
      const before = net;
      net += f.side === 'buy' ? f.qty : -f.qty;
      if (before === 0 || Math.sign(before) !== Math.sign(net)) since = net === 0 ? null : f.timestamp;
    }
    return Math.sign(net) === Math.sign(netQty) ? since : null;
  }

  /**
   * The order a clOrdId was placed as, if the broker has it: a command carrying the clOrdId,
   * an order with it, or an order strategy whose uuid is it (its entry order).
   */
  findByClOrdId(accountId: string, clOrdId: string): Entity | undefined {
    // Bracket legs may carry their entry's clOrdId: the answer is the entry (no parent, oldest).
    let best: Entity | undefined;
    for (const cmd of this.mirror.by('command', 'clOrdId', clOrdId)) {
      const o = this.mirror.get('order', Number(cmd.orderId));
      if (!o || String(o.accountId) !== accountId) continue;
      const rank = (e: Entity) => (e.parentId ? 1 : 0);
      if (!best || rank(o) < rank(best) || (rank(o) === rank(best) && o.id < best.id)) best = o;
    }
    if (best) return best;
    // Indexed: this runs before every new order, and an account's history only grows.
    for (const o of this.mirror.by('order', 'clOrdId', clOrdId)) if (String(o.accountId) === accountId) return o;
    for (const s of this.mirror.by('orderStrategy', 'uuid', clOrdId)) {
      if (String(s.accountId) !== accountId) continue;
      const ids = this.mirror.by('orderStrategyLink', 'orderStrategyId', s.id).map((l) => Number(l.orderId)).sort((a, b) => a - b);
      const entry = ids.map((id) => this.mirror.get('order', id)).find((o) => o?.action === s.action);
      if (entry) return entry;
    }
    return undefined;
  }
}
