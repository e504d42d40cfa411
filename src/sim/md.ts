/**
 * Market data of the paper broker over the WebSocket: `md/subscribeQuote`, `md/subscribeDOM`,
 * `md/subscribeHistogram` (and their unsubscribes), `md/getChart` and `md/cancelChart`.
 *
 * Every subscription answers first and sends its first data in a later frame: public clients
 * match the answer by `i`, read `subscriptionId` / `realtimeId` from its `d`, and only then
 * start listening, so data in the same frame as the answer would be lost to them. A
 * subscription receives live data only after its first data has gone out, so a live bar can
 * never arrive before the history it belongs to. Per price change the cost is one tape record
 * plus one message per subscriber of that contract.
 */
import type { WsClient } from './core.js';
import type { HandlerContext, Handler } from './handlers.js';
import { history, historyPackets, liveUpdate, parseChartRequest, type ChartContext, type LiveChart } from './charts.js';
import { MarketTape, type ContractTape, type Tick } from './market.js';
import type { SimState } from './state.js';
import { asBody, num, ok, WireError, type WireResult } from './wire.js';

type Kind = 'quote' | 'dom' | 'histogram';

interface Sub {
  kind: Kind;
  contractId: number;
  client: WsClient;
  ready: boolean;
}

interface ChartSub extends LiveChart {
  kind: 'chart';
  contractId: number;
  client: WsClient;
  ready: boolean;
}

/** Live charts one socket may hold (each keeps a bar and a subscription slot). */
export const MAX_CHARTS_PER_CLIENT = 100;
const DOM_LEVELS = 10;

/** Subscriptions, the recorded tape and the messages built from it. */
export class MarketData {
  readonly tape: MarketTape;
  private readonly byContract = new Map<number, Set<Sub | ChartSub>>();
  private readonly byClient = new Map<WsClient, Map<string, Sub | ChartSub>>();
  private nextChartId = 1;

  constructor(
    private readonly state: SimState,
    private readonly ctx: ChartContext,
  ) {
    this.tape = new MarketTape(ctx.seed);
  }

  private tapeOf(contractId: number): ContractTape {
    const tick = this.state.contracts.productOf(contractId).tickSize;
    return this.tape.tape(contractId, tick, this.state.prices.last(contractId), this.state.clock());
  }

  /** Records a price change of a contract and sends it to its subscribers. */
  priceChanged(contractId: number): void {
    const price = this.state.prices.last(contractId);
    const tape = this.tape.get(contractId);
    if (!tape) {
      this.tapeOf(contractId);
      return;
    }
    const prev = tape.last;
    const session = this.state.session();
    const dayBefore = tape.day?.tradeDateKey;
    const tick = this.tape.record(tape, price, this.state.clock(), session.tradeDateKey);
    const subs = this.byContract.get(contractId);
    if (!subs || subs.size === 0) return;
    const cache = new Map<string, string>();
    for (const sub of subs) {
      if (!sub.ready) continue;
      if (sub.kind === 'chart') {
        sub.client.push(JSON.stringify({ e: 'chart', d: { charts: [liveUpdate(this.ctx, sub, tick, prev, session.tradeDateKey, tape.tickSize)] } }));
        continue;
      }
      let msg = cache.get(sub.kind);
      if (msg === undefined) {
        msg = sub.kind === 'histogram' ? this.histogramMessage(tape, dayBefore === tape.day?.tradeDateKey ? tick : undefined) : this.message(sub.kind, contractId);
        cache.set(sub.kind, msg);
      }
      sub.client.push(msg);
    }
  }

  private key(kind: Kind | 'chart', id: number): string {
    return `${kind}:${id}`;
  }

  private add(sub: Sub | ChartSub, key: string): void {
    let mine = this.byClient.get(sub.client);
    if (!mine) this.byClient.set(sub.client, (mine = new Map()));
    const old = mine.get(key);
    if (old) this.byContract.get(old.contractId)?.delete(old);
    mine.set(key, sub);
    let set = this.byContract.get(sub.contractId);
    if (!set) this.byContract.set(sub.contractId, (set = new Set()));
    set.add(sub);
  }

  private remove(client: WsClient, key: string): boolean {
    const sub = this.byClient.get(client)?.get(key);
    if (!sub) return false;
    this.byClient.get(client)!.delete(key);
    this.byContract.get(sub.contractId)?.delete(sub);
    return true;
  }

  /** Starts (or restarts) a quote, DOM or histogram subscription; the first message follows the answer. */
  subscribe(kind: Kind, contractId: number, client: WsClient): Record<string, unknown> {
    this.tapeOf(contractId);
    const sub: Sub = { kind, contractId, client, ready: false };
    const key = this.key(kind, contractId);
    this.add(sub, key);
    client.later(() => {
      if (this.byClient.get(client)?.get(key) !== sub) return;
      client.push(kind === 'histogram' ? this.histogramMessage(this.tapeOf(contractId)) : this.message(kind, contractId));
      sub.ready = true;
    });
    return { mode: 'RealTime', subscriptionId: contractId };
  }

  /** Ends a quote, DOM or histogram subscription. */
  unsubscribe(kind: Kind, contractId: number, client: WsClient): void {
    this.remove(client, this.key(kind, contractId));
  }

  /** Starts a chart: history then live bars (or ticks) under one id, which is both `historicalId` and `realtimeId`. */
  getChart(contractId: number, body: Record<string, unknown>, client: WsClient): WireResult {
    const req = parseChartRequest(body, this.state.clock());
    if (typeof req === 'string') throw new WireError(400, req);
    const charts = [...(this.byClient.get(client)?.values() ?? [])].filter((s) => s.kind === 'chart').length;
    if (charts >= MAX_CHARTS_PER_CLIENT) throw new WireError(400, `At most ${MAX_CHARTS_PER_CLIENT} charts per connection; cancel one first`);
    const id = this.nextChartId++;
    const sub: ChartSub = { kind: 'chart', id, resolution: req.resolution, contractId, client, ready: false };
    const key = this.key('chart', id);
    this.add(sub, key);
    client.later(() => {
      if (this.byClient.get(client)?.get(key) !== sub) return;
      const tape = this.tapeOf(contractId);
      const h = history(this.ctx, tape, req);
      const last = h.bars?.[h.bars.length - 1];
      if (last) sub.current = { ...last };
      const td = this.state.session().tradeDateKey;
      client.push(JSON.stringify({ e: 'chart', d: { charts: historyPackets(id, td, tape.tickSize, h) } }));
      sub.ready = true;
    });
    return ok({ mode: 'RealTime', historicalId: id, realtimeId: id, subscriptionId: id });
  }

  /** Ends a chart by its id. */
  cancelChart(id: number, client: WsClient): boolean {
    return this.remove(client, this.key('chart', id));
  }

  /** Forgets every subscription of a closed socket. */
  drop(client: WsClient): void {
    const mine = this.byClient.get(client);
    if (!mine) return;
    for (const sub of mine.values()) this.byContract.get(sub.contractId)?.delete(sub);
    this.byClient.delete(client);
  }

  /** The current quote (or DOM) message of a contract. */
  message(kind: 'quote' | 'dom', contractId: number): string {
    const s = this.state;
    const price = s.prices.last(contractId);
    const timestamp = s.timestamp();
    if (kind === 'dom') {
      const tick = s.contracts.productOf(contractId).tickSize;
      const level = (i: number) => {
        const p = Math.round(price / tick) + i;
        // Stable pseudo-random depth per price level, so the book does not flicker on every step.
        return { price: Number((p * tick).toFixed(10)), size: 5 + (Math.imul(p, 2654435761) >>> 0) % 60 };
      };
      const bids = Array.from({ length: DOM_LEVELS }, (_, i) => level(-i));
      const offers = Array.from({ length: DOM_LEVELS }, (_, i) => level(i));
      return JSON.stringify({ e: 'md', d: { doms: [{ contractId, timestamp, bids, offers }] } });
    }
    const day = this.tape.get(contractId)?.day;
    const lastTick = this.tape.get(contractId)?.ticks.last();
    // No spread: the paper market has unlimited liquidity at the last price.
    const entries: Record<string, unknown> = { Bid: { price, size: 10 }, Offer: { price, size: 10 }, Trade: { price, size: lastTick?.size ?? 1 } };
    if (day) {
      entries.TotalTradeVolume = { size: day.volume };
      entries.OpeningPrice = { price: day.open };
      entries.HighPrice = { price: day.high };
      entries.LowPrice = { price: day.low };
      if (day.settlement !== undefined) entries.SettlementPrice = { price: day.settlement };
    }
    return JSON.stringify({ e: 'md', d: { quotes: [{ id: contractId, timestamp, contractId, entries }] } });
  }

  /** Histogram of the trade date: all levels (`refresh`) or just the level `tick` changed. */
  private histogramMessage(tape: ContractTape, tick?: Tick): string {
    const s = this.state;
    const session = s.session();
    const day = tape.day && tape.day.tradeDateKey === session.tradeDateKey ? tape.day : undefined;
    const items: Record<string, number> = {};
    const base = day?.base ?? s.prices.last(tape.contractId);
    if (day && tick) {
      const level = Math.round((tick.price - day.base) / tape.tickSize);
      items[level] = day.histogram.get(level) ?? 0;
    } else if (day) for (const [level, volume] of day.histogram) items[level] = volume;
    const histogram = { contractId: tape.contractId, timestamp: s.timestamp(), tradeDate: session.tradeDate, base, items, refresh: !tick };
    return JSON.stringify({ e: 'md', d: { histograms: [histogram] } });
  }
}

/** The contract a market data request names (`symbol`: a name or a contract id). */
function contractOf(c: HandlerContext): number {
  const symbol = asBody(c.body).symbol;
  const contracts = c.core.engine.state.contracts;
  const contract = typeof symbol === 'number' ? contracts.item(symbol) : typeof symbol === 'string' ? contracts.find(symbol) : undefined;
  if (!contract) throw new WireError(400, `Unknown symbol: ${String(symbol)}`);
  return contract.id;
}

function socketOf(c: HandlerContext): WsClient {
  if (!c.client) throw new WireError(400, 'Market data is available on the WebSocket only');
  return c.client;
}

/** The market data endpoints (lower case). */
export function marketDataHandlers(): Array<[string, Handler]> {
  const sub = (kind: Kind, subscribe: boolean): Handler => (c) => {
    const contractId = contractOf(c);
    const client = socketOf(c);
    if (subscribe) return ok(c.core.md.subscribe(kind, contractId, client));
    c.core.md.unsubscribe(kind, contractId, client);
    return ok({});
  };
  return [
    ['md/subscribequote', sub('quote', true)],
    ['md/unsubscribequote', sub('quote', false)],
    ['md/subscribedom', sub('dom', true)],
    ['md/unsubscribedom', sub('dom', false)],
    ['md/subscribehistogram', sub('histogram', true)],
    ['md/unsubscribehistogram', sub('histogram', false)],
    ['md/getchart', (c) => {
      const contractId = contractOf(c);
      return c.core.md.getChart(contractId, asBody(c.body), socketOf(c));
    }],
    ['md/cancelchart', (c) => {
      const id = num(asBody(c.body), 'subscriptionId');
      return c.core.md.cancelChart(id, socketOf(c)) ? ok({}) : { s: 404, d: `No chart subscription ${id}` };
    }],
  ];
}
