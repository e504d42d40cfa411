/**
 * Position keeping for the paper broker: net position and average price per account and
 * contract, FIFO pairing of closing fills (`fillPair`), realized P&L into `cashBalance`.
 *
 * Same FIFO rule as domain/trades.ts, applied differently: a broker books each fill the
 * moment it matches (the fillPair and the cash move are events of that fill), while
 * pairTrades pairs a finished fill list after the fact for the service's trade history.
 */
import type { Entity, SimState } from './state.js';

interface Lot {
  fillId: number;
  qty: number;
  price: number;
  buy: boolean;
}

interface PositionBook {
  entity: Entity;
  lots: Lot[];
}

const cents = (n: number): number => Math.round(n * 100) / 100;

/** Positions of every account; owns the `position`, `fillPair` and cash P&L events. */
export class Positions {
  private readonly books = new Map<string, PositionBook>();
  /** Non-flat books per account, and accounts holding each contract: the rules and liquidation read these, never every book. */
  private readonly open = new Map<number, Set<PositionBook>>();
  private readonly holders = new Map<number, Set<number>>();

  constructor(private readonly state: SimState) {}

  /** Net position of an account in a contract (0 when none). */
  netPos(accountId: number, contractId: number): number {
    return (this.books.get(`${accountId}:${contractId}`)?.entity.netPos as number | undefined) ?? 0;
  }

  /** Contracts in which an account holds a non-zero position. */
  openContracts(accountId: number): number[] {
    return [...(this.open.get(accountId) ?? [])].map((b) => b.entity.contractId as number);
  }

  /** Accounts holding a non-zero position in a contract. */
  holdersOf(contractId: number): ReadonlySet<number> | undefined {
    return this.holders.get(contractId);
  }

  /** Open P&L of an account at the last prices (account currency, unrounded). */
  openPnL(accountId: number): number {
    let pnl = 0;
    for (const b of this.open.get(accountId) ?? []) {
      const e = b.entity;
      const contractId = e.contractId as number;
      pnl += (this.state.prices.last(contractId) - (e.netPrice as number)) * (e.netPos as number) * this.state.contracts.productOf(contractId).pointValue;
    }
    return pnl;
  }

  private track(book: PositionBook, accountId: number, contractId: number): void {
    const flat = book.entity.netPos === 0;
    let mine = this.open.get(accountId);
    let holders = this.holders.get(contractId);
    if (flat) {
      mine?.delete(book);
      holders?.delete(accountId);
      return;
    }
    if (!mine) this.open.set(accountId, (mine = new Set()));
    if (!holders) this.holders.set(contractId, (holders = new Set()));
    mine.add(book);
    holders.add(accountId);
  }

  /** Position entity by id. */
  byId(positionId: number): Entity | undefined {
    return this.state.get('position', positionId);
  }

  /** Books one fill: updates the position, pairs closing quantity FIFO, books realized P&L. */
  apply(accountId: number, contractId: number, fill: Entity): void {
    const s = this.state;
    const key = `${accountId}:${contractId}`;
    let book = this.books.get(key);
    const qty = fill.qty as number;
    const price = fill.price as number;
    const buy = fill.action === 'Buy';
    const fresh = !book;
    if (!book) {
      const entity: Entity = {
        id: s.id(), accountId, contractId, timestamp: s.timestamp(), tradeDate: s.tradeDate(), netPos: 0,
        bought: 0, boughtValue: 0, sold: 0, soldValue: 0, prevPos: 0,
      };
      book = { entity, lots: [] };
      this.books.set(key, book);
    }
    const pairs: Entity[] = [];
    let remaining = qty;
    let realized = 0;
    const pointValue = s.contracts.productOf(contractId).pointValue;
    while (remaining > 0 && book.lots.length > 0 && book.lots[0]!.buy !== buy) {
      const lot = book.lots[0]!;
      const m = Math.min(remaining, lot.qty);
      const buyPrice = buy ? price : lot.price;
      const sellPrice = buy ? lot.price : price;
      pairs.push({
        id: s.id(), positionId: book.entity.id, buyFillId: buy ? fill.id : lot.fillId,
        sellFillId: buy ? lot.fillId : fill.id, qty: m, buyPrice, sellPrice, active: true,
      });
      realized += (sellPrice - buyPrice) * m * pointValue;
      lot.qty -= m;
      remaining -= m;
      if (lot.qty === 0) book.lots.shift();
    }
    if (remaining > 0) book.lots.push({ fillId: fill.id, qty: remaining, price, buy });

    const e = book.entity;
    const openQty = book.lots.reduce((n, l) => n + l.qty, 0);
    const changes: Record<string, unknown> = {
      timestamp: s.timestamp(),
      netPos: (e.netPos as number) + (buy ? qty : -qty),
      bought: (e.bought as number) + (buy ? qty : 0),
      boughtValue: cents((e.boughtValue as number) + (buy ? qty * price : 0)),
      sold: (e.sold as number) + (buy ? 0 : qty),
      soldValue: cents((e.soldValue as number) + (buy ? 0 : qty * price)),
    };
    if (openQty > 0) changes.netPrice = book.lots.reduce((n, l) => n + l.qty * l.price, 0) / openQty;
    else delete e.netPrice;
    if (fresh) {
      Object.assign(e, changes);
      s.create('position', e, accountId);
    } else {
      s.update('position', e, changes);
    }
    this.track(book, accountId, contractId);
    for (const p of pairs) s.create('fillPair', p, accountId);
    if (pairs.length > 0) this.bookPnL(accountId, cents(realized));
  }

  private bookPnL(accountId: number, realized: number): void {
    const account = this.state.accounts.get(accountId);
    const cash = account && this.state.get('cashBalance', account.cashBalanceId);
    if (!cash) return;
    this.state.update('cashBalance', cash, {
      timestamp: this.state.timestamp(),
      amount: cents((cash.amount as number) + realized),
      realizedPnL: cents((cash.realizedPnL as number) + realized),
      weekRealizedPnL: cents((cash.weekRealizedPnL as number) + realized),
    });
  }
}
