/**
 * Last prices for the contracts the actor must value (positions of accounts with a daily loss
 * limit or profit target): `md/subscribeQuote` per contract, `md` events → a price per
 * contract (the last trade, else the middle of bid and offer).
 *
 * Where the broker serves market data on the trading socket (the paper broker), subscriptions
 * ride on it and die with it: after a reconnect the owner resets the feed and asks again. Where
 * it keeps market data on its own host (Tradovate's md-demo/md), the feed opens that socket
 * itself when it first needs a quote, closes it when it needs none, and after a drop opens it
 * again on a later `want` (not sooner than RETRY_MS after a failure).
 */
import type { Logger } from '../../log.js';
import type { BrokerConnection } from './connection.js';
import { TradovateSocket } from './ws-client.js';

type Entry = { price?: unknown } | undefined;

/** How long after a failed market-data socket the feed waits before opening another. */
const RETRY_MS = 5000;

/** The price a quote message carries for its contract, if any. */
export function quotePrice(entries: Record<string, Entry> | undefined): number | undefined {
  const trade = Number(entries?.Trade?.price);
  if (Number.isFinite(trade)) return trade;
  const bid = Number(entries?.Bid?.price);
  const offer = Number(entries?.Offer?.price);
  return Number.isFinite(bid) && Number.isFinite(offer) ? (bid + offer) / 2 : undefined;
}

/** What the feed uses of the broker connection. */
export type QuoteConnection = Pick<BrokerConnection, 'send' | 'marketDataToken'>;

/** Quote subscriptions of one connection. */
export class QuoteFeed {
  private readonly subscribed = new Set<number>();
  private socket: TradovateSocket | null = null;
  private opening: Promise<TradovateSocket | null> | null = null;
  private failedAt = -Infinity;

  constructor(
    private readonly conn: QuoteConnection,
    private readonly onPrice: (contractId: number, price: number) => void,
    private readonly log: Logger,
    /** The market-data socket's URL when it is not the trading socket. */
    private readonly mdWsUrl?: string,
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
      this.request('md/subscribeQuote', id).catch((err: unknown) => {
        this.subscribed.delete(id);
        this.log.warn({ err, contractId: id }, 'quote subscription failed; open P&L uses the last fill');
      });
    }
    for (const id of [...this.subscribed]) {
      if (wanted.has(id)) continue;
      this.subscribed.delete(id);
      this.request('md/unsubscribeQuote', id).catch(() => undefined);
    }
    if (this.mdWsUrl && wanted.size === 0 && this.socket) this.close();
  }

  /** Forgets every subscription on the trading socket (the socket they lived on is gone). */
  reset(): void {
    if (!this.mdWsUrl) this.subscribed.clear();
  }

  /** Closes the market-data socket, if the feed opened one. */
  close(): void {
    const s = this.socket;
    this.socket = null;
    this.subscribed.clear();
    s?.close();
  }

  private async request(endpoint: string, contractId: number): Promise<unknown> {
    if (!this.mdWsUrl) return this.conn.send(endpoint, { symbol: contractId });
    const socket = await this.marketDataSocket();
    if (!socket) throw new Error('market data socket unavailable');
    return socket.request(endpoint, { body: { symbol: contractId } });
  }

  private marketDataSocket(): Promise<TradovateSocket | null> {
    if (this.socket?.open) return Promise.resolve(this.socket);
    if (this.opening) return this.opening;
    const token = this.conn.marketDataToken();
    if (!token || Date.now() - this.failedAt < RETRY_MS) return Promise.resolve(null);
    this.opening = TradovateSocket.connect(this.mdWsUrl!, token, {
      onEvent: (m) => {
        if (m.event === 'md') this.handle(m.data);
      },
      onClose: (reason) => {
        if (reason === 'client') return;
        // Subscriptions died with the socket: the next `want` asks again on a new one.
        this.socket = null;
        this.subscribed.clear();
        this.failedAt = Date.now();
      },
    })
      .then((s) => (this.socket = s))
      .catch((err: unknown) => {
        this.failedAt = Date.now();
        this.log.warn({ err }, 'market data socket did not open; open P&L uses the last fill');
        return null;
      })
      .finally(() => {
        this.opening = null;
      });
    return this.opening;
  }
}
