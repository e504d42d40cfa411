import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/log.js';
import { QuoteFeed, quotePrice } from '../../../../src/broker/tradovate/quotes.js';
import { startSim, type SimHandle } from '../../../../src/sim/index.js';
import { control, rest, userWithToken } from '../../../support/sim.js';
import { eventually } from '../../../support/http.js';

let sim: SimHandle | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

function feed(fail = new Set<string>()) {
  const sent: [string, unknown][] = [];
  const prices: [number, number][] = [];
  const conn = {
    async send(endpoint: string, body?: unknown) {
      sent.push([endpoint, body]);
      if (fail.has(endpoint)) throw new Error('not here');
      return {};
    },
    marketDataToken: () => null,
  };
  return { sent, prices, feed: new QuoteFeed(conn, (c, p) => prices.push([c, p]), createLogger('silent')) };
}

describe('quotes', () => {
  it('the price of a quote is its last trade, else the middle of bid and offer', () => {
    expect(quotePrice({ Trade: { price: 5001.25 }, Bid: { price: 5001 } })).toBe(5001.25);
    expect(quotePrice({ Bid: { price: 5000 }, Offer: { price: 5000.5 } })).toBe(5000.25);
    expect(quotePrice({ Bid: { price: 5000 } })).toBeUndefined();
    expect(quotePrice(undefined)).toBeUndefined();
  });

  it('reads md events, ignoring what is not a quote', () => {
    const { feed: f, prices } = feed();
    f.handle({ quotes: [{ contractId: 1, entries: { Trade: { price: 10 } } }, { contractId: 'x', entries: { Trade: { price: 1 } } }, { contractId: 2 }] });
    f.handle({ doms: [] });
    f.handle(null);
    expect(prices).toEqual([[1, 10]]);
  });

  it('subscribes to what is wanted once, drops the rest, and asks again after a reset or a failure', async () => {
    const { feed: f, sent } = feed();
    f.want(new Set([1, 2]));
    f.want(new Set([1, 2]));
    f.want(new Set([2]));
    expect(sent).toEqual([
      ['md/subscribeQuote', { symbol: 1 }],
      ['md/subscribeQuote', { symbol: 2 }],
      ['md/unsubscribeQuote', { symbol: 1 }],
    ]);
    f.reset();
    f.want(new Set([2]));
    expect(sent.at(-1)).toEqual(['md/subscribeQuote', { symbol: 2 }]);
    const failing = feed(new Set(['md/subscribeQuote']));
    failing.feed.want(new Set([3]));
    await new Promise((r) => setImmediate(r));
    failing.feed.want(new Set([3]));
    expect(failing.sent).toHaveLength(2);
  });

  it('lastPrice subscribes, answers with the first quote, then from what it holds; the contract stays subscribed whatever the guards want', async () => {
    const { feed: f, sent } = feed();
    const first = f.lastPrice(7, 5000);
    expect(sent).toEqual([['md/subscribeQuote', { symbol: 7 }]]);
    f.handle({ quotes: [{ contractId: 7, entries: { Trade: { price: 5000 } } }] });
    expect(await first).toBe(5000);
    f.handle({ quotes: [{ contractId: 7, entries: { Trade: { price: 3000 } } }] });
    expect(await f.lastPrice(7)).toBe(3000);
    f.want(new Set());
    expect(sent).toHaveLength(1);
    expect(await f.lastPrice(7)).toBe(3000);
    // After a reconnect the old price is stale: the next ask waits for a fresh quote.
    f.reset();
    const again = f.lastPrice(7, 5000);
    expect(sent.at(-1)).toEqual(['md/subscribeQuote', { symbol: 7 }]);
    f.handle({ quotes: [{ contractId: 7, entries: { Trade: { price: 3100 } } }] });
    expect(await again).toBe(3100);
  });

  it('lastPrice answers undefined when no quote comes in time or the subscription fails, and does not ask again at once after a failure', async () => {
    const { feed: f } = feed();
    expect(await f.lastPrice(8, 20)).toBeUndefined();
    const failing = feed(new Set(['md/subscribeQuote']));
    expect(await failing.feed.lastPrice(9, 5000)).toBeUndefined();
    expect(await failing.feed.lastPrice(9, 5000)).toBeUndefined();
    expect(failing.sent).toHaveLength(1);
  });

  it('on a market-data host of its own: opens that socket when a quote is wanted, prices arrive on it, closes it when none is', async () => {
    sim = await startSim({ priceStepMs: 0, heartbeatMs: 500 });
    const { token } = await userWithToken(sim, `md${process.pid}`);
    await control(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
    const contract = await rest(sim, 'GET', '/contract/find?name=ESZ6', undefined, token);
    const prices: [number, number][] = [];
    const trading: string[] = [];
    const conn = {
      async send(endpoint: string) {
        trading.push(endpoint);
        return {};
      },
      marketDataToken: () => token,
    };
    const f = new QuoteFeed(conn, (c, p) => prices.push([c, p]), createLogger('silent'), sim.wsUrl);
    f.want(new Set([contract.body.id as number]));
    await eventually(async () => prices.length > 0, 'the first quote');
    await control(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4990.25 });
    await eventually(async () => prices.some(([, p]) => p === 4990.25), 'a quote at the new price');
    expect(trading).toEqual([]);
    f.want(new Set());
    const seen = prices.length;
    await control(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4980 });
    await new Promise((r) => setTimeout(r, 100));
    expect(prices).toHaveLength(seen);
  });
});
