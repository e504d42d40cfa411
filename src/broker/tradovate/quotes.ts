/**
 * Last prices for the contracts the actor must value (positions of accounts with a daily loss
 * limit or profit target): `md/subscribeQuote` per contract, `md` events → a price per
 * contract (the last trade, else the middle of bid and offer). Subscriptions die with the
 * socket: after a reconnect the owner resets the feed and asks again.
 */
import type { Logger } from '../../log.js';
import type { BrokerConnection } from './connection.js';

type Entry = { price?: unknown } | undefined;

/** The price a quote message carries for its contract, if any. */
export function quotePrice(entries: Record<string, Entry> | undefined): number | undefined {
  const trade = Number(entries?.Trade?.price);
  if (Number.isFinite(trade)) return trade;
  const bid = Number(entries?.Bid?.price);
  const offer = Number(entries?.Offer?.price);
  return Number.isFinite(bid) && Number.isFinite(offer) ? (bid + offer) / 2 : undefined;
}

/** Quote subscriptions of one connection. */
export class QuoteFeed {
  private readonly subscribed = new Set<number>();

  constructor(
    private readonly conn: Pick<BrokerConnection, 'send'>,
    private readonly onPrice: (contractId: number, price: number) => void,
    private readonly log: Logger,
  ) {}

  /** Reads the prices of one `md` event (`{quotes:[{contractId, entries}]}`). */
  handle(data: unknown): void {
    const quotes = (data as { quotes?: unknown } | null)?.quotes;
    if (!Array.isArray(quotes)) return;
    for (const q of quotes as { contractId?: unknown; entries?: Record<string, Entry> }[]) {
      const price = quotePrice(q?.entries);
      if (typeof q?.contractId === 'number' && price !== undefined) this.onPrice(q.contractId, price);
    }
  }

  /** Subscribes to `wanted` contracts and drops the rest. */
  want(wanted: ReadonlySet<number>): void {
    for (const id of wanted) {
      if (this.subscribed.has(id)) continue;
      this.subscribed.add(id);
      this.conn.send('md/subscribeQuote', { symbol: id }).catch((err: unknown) => {
        this.subscribed.delete(id);
        this.log.warn({ err, contractId: id }, 'quote subscription failed; open P&L uses the last fill');
      });
    }
    for (const id of [...this.subscribed]) {
      if (wanted.has(id)) continue;
      this.subscribed.delete(id);
      this.conn.send('md/unsubscribeQuote', { symbol: id }).catch(() => undefined);
    }
  }

  /** Forgets every subscription (the socket they lived on is gone). */
  reset(): void {
    this.subscribed.clear();
  }
}
