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
 *
 * Placing a bracket with tick offsets asks for the contract's last price (`lastPrice`): the
 * feed subscribes if it has to and keeps the subscription PIN_MS after the last such ask, so
 * the next bracket in that contract finds the price at hand.
 */
import type { Logger } from '../../log.js';
import type { BrokerConnection } from './connection.js';
import { TradovateSocket } from './ws-client.js';

type Entry = { price?: unknown } | undefined;

/** How long after a failed market-data socket the feed waits before opening another. */
const RETRY_MS = 5000;

/** How long a contract stays subscribed after the last `lastPrice` ask. */
const PIN_MS = 10 * 60_000;

/** How long `lastPrice` waits for the first quote of a contract it had to subscribe to. */
export const FIRST_QUOTE_WAIT_MS = 1000;

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
  /** Last price per subscribed contract (live: dropped with the subscription). */
  private readonly prices = new Map<number, number>();
  /** Contracts `lastPrice` asked for → until when they stay subscribed. */
  private readonly pinned = new Map<number, number>();
  /** Contracts whose subscription failed → until when `lastPrice` does not ask again. */
  private readonly unavailable = new Map<number, number>();
  private readonly waiters = new Map<number, Set<(price: number | undefined) => void>>();
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
      if (typeof q?.contractId !== 'number' || price === undefined) continue;
      if (this.subscribed.has(q.contractId)) this.prices.set(q.contractId, price);
      this.settle(q.contractId, price);
      this.onPrice(q.contractId, price);
    }
  }

  /** Subscribes to `wanted` contracts (and those `lastPrice` still pins) and drops the rest. */
  want(wanted: ReadonlySet<number>): void {
    const now = Date.now();
    const all = new Set(wanted);
    for (const [id, until] of this.pinned) {
      if (until > now) all.add(id);
      else this.pinned.delete(id);
    }
    for (const id of all) this.subscribe(id);
    for (const id of [...this.subscribed]) {
      if (all.has(id)) continue;
      this.subscribed.delete(id);
      this.prices.delete(id);
      this.request('md/unsubscribeQuote', id).catch(() => undefined);
    }
    if (this.mdWsUrl && all.size === 0 && this.socket) this.close();
  }

  /**
   * The contract's last price: at once while it is subscribed and quoted; otherwise it is
   * subscribed (and kept PIN_MS) and the first quote is awaited up to `waitMs`. Undefined when
   * no quote comes (no market data for it, a subscription that failed a moment ago).
   */
  lastPrice(contractId: number, waitMs = FIRST_QUOTE_WAIT_MS): Promise<number | undefined> {
    const now = Date.now();
    this.pinned.set(contractId, now + PIN_MS);
    const known = this.prices.get(contractId);
    if (known !== undefined) return Promise.resolve(known);
    if ((this.unavailable.get(contractId) ?? 0) > now) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      let waiting = this.waiters.get(contractId);
      if (!waiting) this.waiters.set(contractId, (waiting = new Set()));
      const done = (price: number | undefined) => {
        clearTimeout(timer);
        waiting.delete(done);
        resolve(price);
      };
      const timer = setTimeout(() => done(undefined), waitMs);
      waiting.add(done);
      this.subscribe(contractId);
    });
  }

  /** Forgets every subscription on the trading socket (the socket they lived on is gone). */
  reset(): void {
    if (this.mdWsUrl) return;
    this.subscribed.clear();
    this.prices.clear();
  }

  /** Closes the market-data socket, if the feed opened one. */
  close(): void {
    const s = this.socket;
    this.socket = null;
    this.subscribed.clear();
    this.prices.clear();
    s?.close();
  }

  private subscribe(id: number): void {
    if (this.subscribed.has(id)) return;
    this.subscribed.add(id);
    this.request('md/subscribeQuote', id).catch((err: unknown) => {
      this.subscribed.delete(id);
      this.prices.delete(id);
      this.unavailable.set(id, Date.now() + RETRY_MS);
      this.settle(id, undefined);
      this.log.warn({ err, contractId: id }, 'quote subscription failed; open P&L uses the last fill, brackets are checked without the market');
    });
  }

  /** Answers whoever waits for the contract's first quote. */
  private settle(contractId: number, price: number | undefined): void {
    const waiting = this.waiters.get(contractId);
    if (!waiting) return;
    this.waiters.delete(contractId);
    for (const done of [...waiting]) done(price);
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
        this.prices.clear();
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
