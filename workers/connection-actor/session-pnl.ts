/**
 * Profit and loss of the current trading day per account, for the daily loss limit and the
 * profit target: realized P&L of the fill pairs the broker booked since the day began, minus
 * the fees it reported for the day's fills (`fillFee`), plus open P&L of the positions (their
 * average price against the last quote, or the last fill when no quote has come yet).
 *
 * Kept incrementally: a pair, a fee, a position change or a price costs O(1) per account it
 * touches; a resync snapshot recounts the day from the broker's own timestamps.
 *
 * A position carried over into the day counts from its value when the day began, as a prop firm
 * measures the day (equity now against equity at 17:00 CT): the open P&L the positions had at the
 * roll is the day's `carried`, taken off what they make or lose since (a profit carried past 17:00
 * must not cushion the new day's loss). Known from the roll this process saw; a process started
 * mid-day counts carried positions from their average price.
 */
import type { Entity, Mirror, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { contractRoot } from '../../src/domain/symbols.js';
import { tradingDay } from '../../src/domain/trading-time.js';
import { latestPositions } from './exposure.js';

/** Fee fields of Tradovate's `fillFee` entity. */
const FEE_FIELDS = ['commission', 'clearingFee', 'exchangeFee', 'nfaFee', 'brokerageFee', 'ipFee', 'orderRoutingFee', 'datafeedFee', 'otherFee'];

interface Holding {
  net: number;
  avg: number;
  /** This holding's share of the account's open P&L. */
  open: number;
}

interface Day {
  realized: number;
  fees: number;
  open: number;
  /** Open P&L (against average prices) of the positions held when the day began. */
  carried: number;
  holdings: Map<number, Holding>;
}

/** One account's P&L of the day. */
export interface DayPnl {
  realized: number;
  fees: number;
  open: number;
  total: number;
}

const round = (n: number): number => Math.round(n * 100) / 100;

/** Day P&L of one connection's accounts. */
export class SessionPnl {
  private day: { start: number; end: number };
  private readonly accounts = new Map<string, Day>();
  private readonly marks = new Map<number, number>();
  private readonly quoted = new Set<number>();
  private readonly holders = new Map<number, Set<string>>();
  private readonly seen = new Set<string>();
  /**
   * Pairs whose contract the mirror does not hold yet, by contract: a resync snapshot carries no
   * contracts (they are asked for after it), and a pair valued then would count $0 for good.
   * Counted once the contract arrives.
   */
  private readonly unvalued = new Map<number, { pair: Entity; live: boolean }[]>();

  constructor(
    private readonly mirror: Mirror,
    private readonly now: () => number,
    /** Called after an account's P&L changed. */
    private readonly changed: (accountId: string) => void,
  ) {
    this.day = tradingDay(now());
    mirror.onChange((c) => this.apply(c));
    this.rebuild();
  }

  /** The trading day counted: [start, end) in ms. */
  get window(): { start: number; end: number } {
    return this.day;
  }

  /** The account's P&L of the day. */
  of(accountId: string): DayPnl {
    const d = this.accounts.get(accountId);
    if (!d) return { realized: 0, fees: 0, open: 0, total: 0 };
    const open = d.open - d.carried;
    return { realized: round(d.realized), fees: round(d.fees), open: round(open), total: round(d.realized - d.fees + open) };
  }

  /** Contracts any account holds a position in. */
  heldByAny(): Set<number> {
    const out = new Set<number>();
    for (const d of this.accounts.values()) for (const [id, h] of d.holdings) if (h.net !== 0) out.add(id);
    return out;
  }

  /** Contracts the account holds a position in. */
  held(accountId: string): number[] {
    const out: number[] = [];
    for (const [id, h] of this.accounts.get(accountId)?.holdings ?? []) if (h.net !== 0) out.push(id);
    return out;
  }

  /** A new last price (a quote): open P&L of every holder moves. */
  mark(contractId: number, price: number): void {
    // A price from after the day's end belongs to the next day: the day rolls first.
    this.roll();
    this.quoted.add(contractId);
    this.setMark(contractId, price);
  }

  /** Starts a new day when `now` has passed the current one's end; true when it did. */
  roll(): boolean {
    const now = this.now();
    if (now < this.day.end) return false;
    this.day = tradingDay(now);
    for (const [accountId, d] of this.accounts) {
      d.realized = 0;
      d.fees = 0;
      d.carried = d.open;
      this.changed(accountId);
    }
    return true;
  }

  private account(accountId: string): Day {
    let d = this.accounts.get(accountId);
    if (!d) this.accounts.set(accountId, (d = { realized: 0, fees: 0, open: 0, carried: 0, holdings: new Map() }));
    return d;
  }

  private pointValue(contractId: number): number {
    const name = this.mirror.get('contract', contractId)?.name;
    return typeof name === 'string' ? (contractRoot(name)?.pointValue ?? 0) : 0;
  }

  private setMark(contractId: number, price: number): void {
    if (!Number.isFinite(price)) return;
    this.marks.set(contractId, price);
    for (const accountId of this.holders.get(contractId) ?? []) this.revalue(accountId, contractId);
  }

  private revalue(accountId: string, contractId: number): void {
    const d = this.account(accountId);
    const h = d.holdings.get(contractId);
    if (!h) return;
    const mark = this.marks.get(contractId);
    const open = mark === undefined || h.net === 0 ? 0 : (mark - h.avg) * h.net * this.pointValue(contractId);
    d.open += open - h.open;
    h.open = open;
    this.changed(accountId);
  }

  private apply(change: MirrorChange): void {
    const e = change.entity;
    if (change.entityType === '*') return this.rebuild();
    // Likewise a fill, a pair or a position change: counted in the day it happened.
    this.roll();
    if (!e || change.eventType === 'Deleted') return;
    switch (change.entityType) {
      case 'position':
        return this.position(e);
      case 'fillPair':
        return this.pair(e, true);
      case 'fillFee':
        return this.fee(e, true);
      case 'fill':
        // Until a quote arrives, the latest fill is the best price there is.
        if (!this.quoted.has(Number(e.contractId))) this.setMark(Number(e.contractId), Number(e.price));
        return;
      case 'contract': {
        const waiting = this.unvalued.get(e.id);
        this.unvalued.delete(e.id);
        for (const w of waiting ?? []) this.pair(w.pair, w.live);
        for (const accountId of this.holders.get(e.id) ?? []) this.revalue(accountId, e.id);
        return;
      }
    }
  }

  private position(p: Entity): void {
    const accountId = String(p.accountId);
    const contractId = Number(p.contractId);
    const d = this.account(accountId);
    const h = d.holdings.get(contractId) ?? { net: 0, avg: 0, open: 0 };
    d.holdings.set(contractId, h);
    h.net = Number(p.netPos ?? 0);
    h.avg = Number(p.netPrice ?? 0);
    let holders = this.holders.get(contractId);
    if (!holders) this.holders.set(contractId, (holders = new Set()));
    if (h.net !== 0) holders.add(accountId);
    else holders.delete(accountId);
    this.revalue(accountId, contractId);
  }

  /** A fill pair closes quantity: its realized P&L counts when it closes inside the day. */
  private pair(pair: Entity, live: boolean): void {
    const key = `p${pair.id}`;
    if (this.seen.has(key) || pair.active === false) return;
    const position = this.mirror.get('position', Number(pair.positionId));
    if (!position) return;
    if (!live && !this.inDay(pair.buyFillId, pair.sellFillId)) return;
    const contractId = Number(position.contractId);
    if (!this.mirror.get('contract', contractId)) {
      let waiting = this.unvalued.get(contractId);
      if (!waiting) this.unvalued.set(contractId, (waiting = []));
      waiting.push({ pair, live });
      return;
    }
    this.seen.add(key);
    const realized = (Number(pair.sellPrice) - Number(pair.buyPrice)) * Number(pair.qty ?? 0) * this.pointValue(contractId);
    const accountId = String(position.accountId);
    this.account(accountId).realized += realized;
    this.changed(accountId);
  }

  private fee(fee: Entity, live: boolean): void {
    const key = `f${fee.id}`;
    if (this.seen.has(key)) return;
    const fill = this.mirror.get('fill', fee.id);
    const order = fill && this.mirror.get('order', Number(fill.orderId));
    if (!order) return;
    if (!live && !this.inDay(fee.id)) return;
    this.seen.add(key);
    let amount = 0;
    for (const f of FEE_FIELDS) if (typeof fee[f] === 'number') amount += fee[f] as number;
    const accountId = String(order.accountId);
    this.account(accountId).fees += amount;
    this.changed(accountId);
  }

  /** Whether the latest of these fills happened inside the day (by the broker's timestamps). */
  private inDay(...fillIds: unknown[]): boolean {
    let latest = -Infinity;
    for (const id of fillIds) {
      const t = Date.parse(String(this.mirror.get('fill', Number(id))?.timestamp ?? ''));
      if (Number.isFinite(t)) latest = Math.max(latest, t);
    }
    return latest >= this.day.start;
  }

  private rebuild(): void {
    const sameDay = tradingDay(this.now()).start === this.day.start;
    this.day = tradingDay(this.now());
    const before = [...this.accounts.keys()];
    // What the day began with stays what it was through a resync of the same day.
    const carried = new Map(sameDay ? [...this.accounts].map(([id, d]) => [id, d.carried] as const) : []);
    this.accounts.clear();
    this.holders.clear();
    this.seen.clear();
    this.unvalued.clear();
    for (const p of latestPositions(this.mirror)) this.position(p);
    for (const pair of this.mirror.all('fillPair')) this.pair(pair, false);
    for (const fee of this.mirror.all('fillFee')) this.fee(fee, false);
    for (const [accountId, c] of carried) if (c !== 0) this.account(accountId).carried = c;
    for (const accountId of before) if (!this.accounts.has(accountId)) this.changed(accountId);
  }
}
