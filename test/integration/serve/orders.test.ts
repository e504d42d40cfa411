/**
 * Acceptance walk of the spec's order rules over real HTTP against `serve --paper`:
 * every symbol form, market/limit/stop with and without brackets, the cancel state table
 * (DESIGN §6), working orders vs trade history, flatten.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { openHealthStream } from '../../support/sse.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let acc: string;
const FRONT = (() => {
  const r = resolveSymbol('ES', new Date());
  if (!r.ok) throw new Error(r.reason);
  return r;
})();
const ES = FRONT.contract;
/** TradingView's ticker of the front contract's own chart, e.g. ESZ2026. */
const ES_DATED = `ES${FRONT.monthCode}${FRONT.year}`;
const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
const place = (body: unknown, headers?: Record<string, string>) => api('POST', `/api/v1/accounts/${acc}/orders`, body, headers);
const working = async () => (await api('GET', `/v1/accounts/${acc}/working-orders`)).json.data as any[];
const positions = async () => (await api('GET', `/api/v1/accounts/${acc}/positions`)).json.data as any[];

beforeAll(async () => {
  // Polling reads would trip the 120/min limit; the limit has its own acceptance test.
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

/** Liquidations the paper broker has been asked for so far. */
const liquidationCount = async (): Promise<number> => ((await simState(s)).requests?.['order/liquidateposition'] as number | undefined) ?? 0;

describe('placing orders', () => {
  it('places a market order in every symbol form; the response names the resolved contract', async () => {
    for (const symbol of ['ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', `ES${ES.slice(2, 3)}${new Date().getUTCFullYear() % 100}`, ES, ES_DATED]) {
      const r = await place({ symbol, side: 'buy', qty: 1, type: 'market' });
      expect(r.status, `${symbol}: ${r.text}`).toBe(201);
      expect(r.json).toMatchObject({ symbol: ES, requestedSymbol: symbol, status: 'filled', role: 'single' });
      expect(r.headers.get('server-timing')).toMatch(/actor;dur=[\d.]+, broker;dur=[\d.]+, settle;dur=[\d.]+, total;dur=[\d.]+/);
    }
    expect((await positions()).find((p) => p.symbol === ES)?.netQty).toBe(7);
  });

  it('places limit, stop and stop-limit orders, and market/limit/stop with a bracket, in every symbol form', async () => {
    const forms = ['ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', `ES${ES.slice(2, 3)}${new Date().getUTCFullYear() % 100}`, ES, ES_DATED];
    const absolute = { takeProfit: { price: 5200 }, stopLoss: { price: 4700 } };
    const relative = { takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } };
    const cases: [string, Record<string, unknown>, 'single' | 'entry'][] = [
      ['limit', { type: 'limit', price: 4900 }, 'single'],
      ['stop', { type: 'stop', stopPrice: 5100 }, 'single'],
      ['stop_limit', { type: 'stop_limit', stopPrice: 5100, price: 5101 }, 'single'],
      ['limit + absolute bracket', { type: 'limit', price: 4900, ...absolute }, 'entry'],
      ['stop + relative bracket', { type: 'stop', stopPrice: 5100, ...relative }, 'entry'],
      ['market + relative bracket', { type: 'market', ...relative }, 'entry'],
      ['market + absolute bracket', { type: 'market', ...absolute }, 'entry'],
    ];
    for (const symbol of forms) {
      for (const [name, fields, role] of cases) {
        const r = await place({ symbol, side: 'buy', qty: 1, ...fields });
        expect(r.status, `${symbol} ${name}: ${r.text}`).toBe(201);
        expect(r.json, `${symbol} ${name}`).toMatchObject({ symbol: ES, requestedSymbol: symbol, type: fields.type, role, status: fields.type === 'market' ? 'filled' : 'working' });
        if (role === 'entry') expect(r.json.bracketId, `${symbol} ${name}`).toBe(r.json.orderId);
        if (fields.type === 'market') {
          // Filled at once: the broker holds both protective legs for the position.
          expect(r.json.legs.takeProfit && r.json.legs.stopLoss, `${symbol} ${name} legs`).toBeTruthy();
        } else {
          expect((await working()).map((o) => o.orderId), `${symbol} ${name}`).toContain(r.json.orderId);
          const c = await api('DELETE', `/v1/accounts/${acc}/orders/${r.json.orderId}`);
          expect(c.status, `${symbol} ${name} cancel: ${c.text}`).toBe(200);
        }
      }
    }
    const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    expect(f.status, f.text).toBe(200);
    await eventually(async () => (await working()).length === 0 && (await positions()).every((p) => p.netQty === 0), 'flat after the walk');
  });

  it('answers 400 UNKNOWN_SYMBOL and sends nothing to the broker', async () => {
    const before = (await simState(s)).orders.length;
    const r = await place({ symbol: 'XYZ1!', side: 'buy', qty: 1 });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    expect(r.json).toMatchObject({ code: 'UNKNOWN_SYMBOL', symbol: 'XYZ1!' });
    expect(r.json.detail).toContain('XYZ1!');
    expect((await simState(s)).orders.length).toBe(before);
  });

  it('answers 400 for an off-tick price naming the field', async () => {
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4990.1 });
    expect(r.status).toBe(400);
    expect(r.json.errors).toEqual([expect.objectContaining({ path: 'price' })]);
  });

  it('dryRun with an Idempotency-Key is 400, even a key an order already used (never 422 IDEMPOTENCY_KEY_REUSED)', async () => {
    const key = `dry-after-real-${Date.now()}`;
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900 };
    const real = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body, headers: { 'Idempotency-Key': key } });
    expect(real.status, real.text).toBe(201);
    for (const k of [key, `${key}-unused`]) {
      const dry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders?dryRun=true`, { key: s.apiKey, body, headers: { 'Idempotency-Key': k } });
      expect(dry.status, dry.text).toBe(400);
      expect(dry.json.code).toBe('VALIDATION_FAILED');
    }
    expect((await api('DELETE', `/api/v1/accounts/${acc}/orders/${real.json.orderId}`)).status).toBe(200);
  });

  it('dryRun returns the plan and sends nothing', async () => {
    const before = (await simState(s)).orders.length;
    const r = await api('POST', `/api/v1/accounts/${acc}/orders?dryRun=true`, { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4990, takeProfit: { ticks: 40 } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ dryRun: true, symbol: ES, takeProfit: { price: 5000 } });
    expect((await simState(s)).orders.length).toBe(before);
  });
});

describe('cancel (DESIGN §6 state table)', () => {
  it('entry unfilled with TP/SL: cancelling the entry removes both legs', async () => {
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4950, takeProfit: { price: 4960 }, stopLoss: { price: 4940 } });
    expect(r.status, r.text).toBe(201);
    const entry = r.json.orderId as string;
    expect((await working()).map((o) => o.orderId)).toContain(entry);
    const c = await api('DELETE', `/v1/accounts/${acc}/orders/${entry}`);
    expect(c.status, c.text).toBe(200);
    expect(c.json.order).toMatchObject({ orderId: entry, status: 'cancelled' });
    expect(c.json.removedLegIds).toHaveLength(2);
    const ids = (await working()).map((o) => o.orderId);
    for (const id of [entry, ...c.json.removedLegIds]) expect(ids).not.toContain(id);
  });

  it('a stop entry with a relative bracket rests at the broker and cancels cleanly', async () => {
    const r = await place({ symbol: 'ES!', side: 'buy', qty: 1, type: 'stop', stopPrice: 5100, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ type: 'stop', status: 'working' });
    const c = await api('DELETE', `/v1/accounts/${acc}/orders/${r.json.orderId}`);
    expect(c.status, c.text).toBe(200);
  });

  it('entry partly filled: the remainder is cancelled, the filled part stays a position (never flattens)', async () => {
    const before = (await positions()).find((p) => p.symbol === ES)?.netQty ?? 0;
    // Market pinned at 5000: the legs (5100 / 4800) rest once they activate for the filled lot.
    const r = await place({ symbol: 'ES', side: 'buy', qty: 3, type: 'limit', price: 4900, takeProfit: { price: 5100 }, stopLoss: { price: 4800 } });
    expect(r.status, r.text).toBe(201);
    await control(s, 'POST', `/orders/${r.json.orderId}/fill`, { qty: 1 });
    await eventually(async () => (await working()).find((o) => o.orderId === r.json.orderId && o.filledQty === 1), 'partial fill');
    const c = await api('DELETE', `/v1/accounts/${acc}/orders/${r.json.orderId}`);
    expect(c.status, c.text).toBe(200);
    expect(c.json.remainderCancelled).toBe(true);
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === before + 1, 'position of the filled part');
    expect((await working()).map((o) => o.orderId)).not.toContain(r.json.orderId);
    // The filled lot keeps its protection: both legs rest, sized to the filled quantity.
    const legs = (await working()).filter((o) => o.bracketId === r.json.orderId);
    expect(legs.map((o) => [o.role, o.qty]).sort()).toEqual([['stop_loss', 1], ['take_profit', 1]]);
  });

  it('filled bracket: cancelling one leg keeps the position and re-places the survivor under a new id', async () => {
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(r.status, r.text).toBe(201);
    const { takeProfit, stopLoss } = r.json.legs;
    expect(takeProfit && stopLoss).toBeTruthy();
    const c = await api('DELETE', `/v1/accounts/${acc}/orders/${takeProfit}`);
    expect(c.status, c.text).toBe(200);
    expect(c.json.replaced).toMatchObject({ replacedOrderId: stopLoss });
    const ids = (await working()).map((o) => o.orderId);
    expect(ids).toContain(c.json.replaced.newOrderId);
    expect(ids).not.toContain(stopLoss);
    expect((await positions()).find((p) => p.symbol === ES)?.netQty).toBe(1);
  });

  it("the spec's exit of one symbol (an ordinary opposite order) leaves no bracket legs working: they are cancelled and reported on the stream", async () => {
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
      expect(r.status, r.text).toBe(201);
      // A resting bracket elsewhere in the book: its legs wait for their entry and stay.
      const resting = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4800, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
      expect(resting.status, resting.text).toBe(201);
      const exit = await place({ symbol: 'ES', side: 'sell', qty: 1, type: 'market' });
      expect(exit.status, exit.text).toBe(201);
      expect((await positions()).filter((p) => p.netQty !== 0)).toEqual([]);
      // A stream opens with the last 15 minutes' alerts (replayed): this one is the exit's.
      const { event: alert } = await stream.waitFor((e) => e.type === 'bracket-alert' && e.orderId === r.json.orderId, 0, 10_000);
      // Cut before the market exit was sent (a stop filling meanwhile could not add to it).
      expect(alert).toMatchObject({ orderId: r.json.orderId, detail: expect.stringContaining(`fitted to the ${ES} position long 1 with a market exit of 1 about to be sent on it`) });
      await eventually(async () => (await working()).every((o) => o.bracketId === resting.json.orderId), 'only the resting bracket left');
      expect((await working()).map((o) => o.orderId)).toEqual([resting.json.orderId]);
    } finally {
      stream.close();
    }
  });

  it('an order already final answers 409 ORDER_NOT_WORKING with its state', async () => {
    const r = await place({ symbol: 'ES', side: 'sell', qty: 1, type: 'market' });
    const c = await api('DELETE', `/v1/accounts/${acc}/orders/${r.json.orderId}`);
    expect(c.status).toBe(409);
    expect(c.json.code).toBe('ORDER_NOT_WORKING');
  });

  it('404 for an order id on another account path of nobody', async () => {
    const c = await api('DELETE', `/v1/accounts/999999/orders/1`);
    expect(c.status).toBe(404);
  });
});

describe('working orders vs history, flatten', () => {
  it('flatten clears orders and positions; closed trades show on the legacy /orders path', async () => {
    await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4800 });
    const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-1' });
    expect(f.status, f.text).toBe(200);
    await eventually(async () => (await working()).length === 0 && (await positions()).every((p) => p.netQty === 0), 'flat account');
    const history = await api('GET', `/v1/accounts/${acc}/orders`);
    expect(history.status).toBe(200);
    expect(history.json.data.length).toBeGreaterThan(0);
    expect(history.json.data[0]).toMatchObject({ accountId: acc, symbol: ES });
    expect(history.json.data[0]).toHaveProperty('pnl');
  });

  it('a flatten whose liquidation the broker did not confirm holds its key: a same-key retry is 409 IN_USE, then the 200 once the position closed, and no second liquidation is sent (cluster probe: the 504 freed the key)', async () => {
    const opened = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' });
    expect(opened.status, opened.text).toBe(201);
    const liquidations = liquidationCount;
    const before = await liquidations();
    // Every broker request answered after 25 s: the liquidation's 10 s deadline passes, and the
    // position does not close within the 10 s the flatten then watches it.
    await control(s, 'POST', '/faults', { latencyMs: 25_000 });
    try {
      const first = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-unconfirmed' });
      expect(first.status, first.text).toBe(504);
      expect(first.json.positions).toEqual([expect.objectContaining({ symbol: ES, status: 'failed', code: 'BROKER_TIMEOUT' })]);
      const retry = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-unconfirmed' });
      expect(retry.status, retry.text).toBe(409);
      expect(retry.json.code).toBe('IDEMPOTENCY_KEY_IN_USE');
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    // The liquidation lands (25 s after it was sent): the retry gets the flatten's 200, replayed alike.
    const done = await eventually(async () => {
      const r = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-unconfirmed' });
      return r.status === 200 ? r : undefined;
    }, 'the retry answered with the flatten once the position closed', 15_000);
    // What it closed, as the last look that saw it open found it (1: the liquidation landed 5 s after the 504).
    expect(done.json.positions).toEqual([{ symbol: ES, closedQty: 1, status: 'liquidated', detail: 'closed after this flatten was answered 504 (by its liquidation, or another exit)' }]);
    const again = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-unconfirmed' });
    expect([again.status, again.text]).toEqual([200, done.text]);
    expect(await liquidations()).toBe(before + 1);
    expect((await positions()).every((p) => p.netQty === 0)).toBe(true);
  }, 60_000);

  it('a flatten whose leg cancels the broker answers after their deadline waits for them to land, then liquidates (re-probe at 28 s a request: the cancels landed after the flatten gave up, and the position stayed open without its legs)', async () => {
    const opened = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(opened.status, opened.text).toBe(201);
    await eventually(async () => (await working()).length === 2, 'its two legs working');
    const atBroker = async () => ((await simState(s)).positions as { accountId: number; netPos: number }[]).find((p) => String(p.accountId) === acc)?.netPos ?? 0;
    // 28 s a request: both waves of leg cancels pass their 10 s deadlines, and the 5 s the flatten then
    // watches, before the first lands (the OCO then takes the other leg).
    await control(s, 'POST', '/faults', { latencyMs: 28_000 });
    try {
      const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-late-cancels' });
      expect(f.status, f.text).toBe(504);
      await eventually(async () => (await atBroker()) === 0, 'flat at the broker', 60_000);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions()).every((p) => p.netQty === 0) && (await working()).length === 0, 'flat here, nothing working');
  }, 120_000);

  it('a liquidation the broker answers after its 10 s deadline, the position closing within another 10 s, is a liquidation: 200, not a failure (re-probe: at 12 s a request every flatten failed, and a reversal whose close was done opened nothing)', async () => {
    const opened = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' });
    expect(opened.status, opened.text).toBe(201);
    const liquidations = liquidationCount;
    const before = await liquidations();
    await control(s, 'POST', '/faults', { latencyMs: 13_000 });
    try {
      const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, undefined, { 'Idempotency-Key': 'flatten-late-answer' });
      expect(f.status, f.text).toBe(200);
      expect(f.json.positions).toEqual([{ symbol: ES, closedQty: 1, status: 'liquidated', detail: 'the broker answered after its deadline; the position closed' }]);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(await liquidations()).toBe(before + 1);
    expect((await positions()).every((p) => p.netQty === 0)).toBe(true);
  }, 40_000);
});

describe('POST /api/v1/accounts/{id}/flatten with a symbol', () => {
  async function holdAndRest(): Promise<string> {
    const held = await place({ symbol: 'ES', side: 'buy', qty: 2, type: 'market' });
    expect(held.status, held.text).toBe(201);
    const resting = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4800 });
    expect(resting.status, resting.text).toBe(201);
    return resting.json.orderId as string;
  }

  it.each(['ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', `ESZ${new Date().getUTCFullYear() % 100}`, 'es1!'])(
    'a matching symbol in the form %s cancels the resting orders and liquidates the position',
    async (symbol) => {
      await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
      const resting = await holdAndRest();
      const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, { symbol });
      expect(f.status, f.text).toBe(200);
      expect(f.json).toMatchObject({ accountId: acc, symbol: ES, positions: [{ symbol: ES, closedQty: 2, status: 'liquidated' }] });
      expect(f.json.cancelledOrderIds).toContain(resting);
      expect(await working()).toEqual([]);
      expect((await positions()).filter((p) => p.netQty !== 0)).toEqual([]);
    },
  );

  it('a matching symbol flattens the whole account, on all symbols (spec: "Account flat")', async () => {
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    const resting = await holdAndRest();
    const nq = await place({ symbol: 'NQ', side: 'sell', qty: 1, type: 'market' });
    expect(nq.status, nq.text).toBe(201);
    const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, { symbol: 'NQ1!' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.cancelledOrderIds).toContain(resting);
    expect(f.json.positions.map((p: { symbol: string }) => p.symbol).sort()).toEqual([ES, nq.json.symbol].sort());
    expect(await working()).toEqual([]);
    expect((await positions()).filter((p) => p.netQty !== 0)).toEqual([]);
  });

  it('a contract the account does not hold → 409 SYMBOL_MISMATCH naming both, nothing touched', async () => {
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    const resting = await holdAndRest();
    const ordersBefore = (await simState(s)).orders.length;
    const f = await api('POST', `/api/v1/accounts/${acc}/flatten`, { symbol: 'NQ1!' });
    expect(f.status, f.text).toBe(409);
    expect(f.headers.get('content-type')).toContain('application/problem+json');
    expect(f.json).toMatchObject({ code: 'SYMBOL_MISMATCH', held: [ES] });
    expect((await working()).map((o) => o.orderId)).toEqual([resting]);
    expect((await positions()).find((p) => p.symbol === ES)?.netQty).toBe(2);
    expect((await simState(s)).orders.length).toBe(ordersBefore);
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
  });
});

describe('connections', () => {
  it('adds a paper connection on the embedded broker; its accounts join the user’s accounts', async () => {
    const r = await api('POST', '/api/v1/connections', { name: 'Second', accounts: [{ name: 'P1' }, { name: 'P2' }] });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ name: 'Second', broker: 'paper', environment: 'paper' });
    const conn = await eventually(async () => {
      const list = (await api('GET', '/api/v1/connections')).json.data as any[];
      return list.find((c) => c.id === r.json.id && c.status === 'CONNECTED' && c.accountIds.length === 2);
    }, 'new connection connected');
    const accounts = (await api('GET', '/api/v1/accounts')).json.data as any[];
    expect(accounts.map((a) => a.id)).toEqual(expect.arrayContaining([...s.accounts, ...conn.accountIds]));
    const order = await http(s.url, 'POST', `/api/v1/accounts/${conn.accountIds[0]}/orders`, { key: s.apiKey, body: { symbol: 'MES', side: 'buy', qty: 1 } });
    expect(order.status, order.text).toBe(201);
  });
});

describe('/api-docs', () => {
  it('documents every route with its request and response schemas, and renders a page', async () => {
    const doc = (await http(s.url, 'GET', '/api-docs/openapi.json')).json;
    expect(doc.openapi).toMatch(/^3\.1/);
    const paths = Object.keys(doc.paths);
    for (const p of ['/api/v1/accounts/{id}/orders', '/api/v1/webhooks/{token}', '/api/v1/webhook-tokens/{id}', '/api/v1/accounts/{id}/flatten']) {
      expect(paths.some((x) => x === p || x.endsWith(p.replace('/api/v1', ''))), p).toBe(true);
    }
    const text = JSON.stringify(doc);
    expect(text).toContain('stopLoss');
    expect(text).toContain('{{strategy.order.action}}');
    const page = await http(s.url, 'GET', '/api-docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    // Its policy allows its one inline stylesheet by hash, no inline style or script beyond it.
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).not.toContain('unsafe-inline');
    const style = /<style>([\s\S]*?)<\/style>/.exec(page.text)![1]!;
    expect(csp).toContain(`style-src 'sha256-${createHash('sha256').update(style).digest('base64')}'`);
  });
});
