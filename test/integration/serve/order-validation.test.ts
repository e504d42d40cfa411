/**
 * What the API refuses before anything reaches the broker, over real HTTP against
 * `serve --paper`: a bracket's tick-offset legs are checked from where the entry really fills
 * (never a stop past zero), by the API and by webhook alerts alike; order ids in paths are exact;
 * a webhook qty is digits only; strategy leg prices and guard products that could never trade
 * are refused when written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let acc: string;
let hook: string;
const ES = frontOf('ES').contract;
const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });
const place = (body: unknown) => api('POST', `/api/v1/accounts/${acc}/orders`, body);
const alert = (body: unknown) => http(hook, 'POST', '', { raw: JSON.stringify(body), headers: { 'content-type': 'text/plain' } });
const working = async () => (await api('GET', `/api/v1/accounts/${acc}/working-orders`)).json.data as any[];
const brokerOrders = async () => (await simState(s)).orders.length as number;

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', WEBHOOK_RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
  const t = await api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'TV' });
  expect(t.status, t.text).toBe(201);
  hook = t.json.url;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('tick-offset legs hang from the real fill', () => {
  const refused = (r: { status: number; json: any; text: string }, leg: string, anchor: number) => {
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', band: { min: 1000, max: 25000, reference: 5000 }, anchor: { price: anchor } });
    expect(r.json.errors).toEqual([{ path: leg, message: expect.stringContaining(`the expected fill ${anchor}`) }]);
  };

  it('a buy limit above the market with a stop wider than the fill is refused, nothing sent (the audit’s -10000 stop)', async () => {
    const before = await brokerOrders();
    const r = await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 20000, stopLoss: { ticks: 60000 } });
    refused(r, 'stopLoss.ticks', 5000);
    expect(r.json.detail).toContain('is -10000, outside 1000..25000');
    expect(await brokerOrders()).toBe(before);
  });

  it('the same order through a webhook alert is refused the same way', async () => {
    const before = await brokerOrders();
    const r = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 20000, stopLoss: { ticks: 60000 } });
    refused(r, 'stopLoss.ticks', 5000);
    expect(await brokerOrders()).toBe(before);
  });

  it('a market order is checked from the live price, not the reference price', async () => {
    await control(s, 'POST', '/prices', { symbol: ES, price: 3000 });
    try {
      const before = await brokerOrders();
      refused(await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', stopLoss: { ticks: 15990 } }), 'stopLoss.ticks', 3000);
      expect(await brokerOrders()).toBe(before);
      const ok = await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', stopLoss: { ticks: 7990 } });
      expect(ok.status, ok.text).toBe(201);
      await eventually(async () => (await working()).find((o) => o.orderId === ok.json.legs.stopLoss)?.stopPrice === 1002.5, 'stop at 3000 - 1997.5');
    } finally {
      await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
      expect((await api('POST', `/api/v1/accounts/${acc}/flatten`, {})).status).toBe(200);
    }
  });

  it('a bracket at fixed prices is checked against where the entry fills: a market buy’s stop above the market is refused, nothing sent', async () => {
    const before = await brokerOrders();
    const r = await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', stopLoss: { price: 5010 }, takeProfit: { price: 5020 } });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'stopLoss.price', message: expect.stringContaining('must be below the expected fill 5000') }] });
    // A dry run says the same (new-user probe: it answered 200 with guardsChecked, and the order was refused).
    const dry = await api('POST', `/api/v1/accounts/${acc}/orders?dryRun=true`, { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', stopLoss: { price: 5010 }, takeProfit: { price: 5020 } });
    expect(dry.status, dry.text).toBe(400);
    expect(dry.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'stopLoss.price' }] });
    // The same through a buy limit above the market: it fills at the market, under its stop.
    const limit = await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 5010, stopLoss: { price: 5005 }, takeProfit: { price: 5020 } });
    expect(limit.status, limit.text).toBe(400);
    expect(await brokerOrders()).toBe(before);
  });

  it('a buy limit above the market with a sane stop is placed, and its stop rests from the fill', async () => {
    const r = await place({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 20000, stopLoss: { ticks: 20 } });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ status: 'filled', avgFillPrice: 5000 });
    await eventually(async () => (await working()).find((o) => o.orderId === r.json.legs.stopLoss)?.stopPrice === 4995, 'stop 20 ticks under 5000');
    expect((await api('POST', `/api/v1/accounts/${acc}/flatten`, {})).status).toBe(200);
  });
});

describe('order ids in paths are matched exactly, like account ids', () => {
  it('a loose spelling of a working order’s id is 404 and cancels nothing; the exact id cancels it', async () => {
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4800 });
    expect(r.status, r.text).toBe(201);
    const id = r.json.orderId as string;
    const n = Number(id);
    for (const loose of [`0${id}`, `0x${n.toString(16)}`, `${id}.0`, `${id}.0000000001`, (n / 10).toString() + 'e1', `+${id}`, `${id}%20`, `%20${id}`]) {
      const c = await api('DELETE', `/v1/accounts/${acc}/orders/${loose}`);
      expect(c.status, `${loose}: ${c.text}`).toBe(404);
      expect(c.json.code).toBe('NOT_FOUND');
    }
    expect((await working()).map((o) => o.orderId)).toContain(id);
    const c = await api('DELETE', `/api/v1/accounts/${acc}/orders/${id}`);
    expect(c.status, c.text).toBe(200);
    expect(c.json.order).toMatchObject({ orderId: id, status: 'cancelled' });
  });
});

describe('webhook qty', () => {
  it('a string qty is digits only, as the error says: "1.0" and " 1" are refused, "1" is placed', async () => {
    const before = await brokerOrders();
    for (const qty of ['1.0', ' 1', '1 ', '1e0']) {
      const r = await alert({ action: 'buy', symbol: 'ES1!', qty, orderType: 'limit', price: 4800 });
      expect(r.status, `${JSON.stringify(qty)}: ${r.text}`).toBe(400);
      expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'qty', message: expect.stringContaining('digits only in a string') }] });
    }
    expect(await brokerOrders()).toBe(before);
    const ok = await alert({ action: 'buy', symbol: 'ES1!', qty: '1', orderType: 'limit', price: 4800 });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.order).toMatchObject({ qty: 1, status: 'working' });
    expect((await api('DELETE', `/api/v1/accounts/${acc}/orders/${ok.json.order.orderId}`)).status).toBe(200);
  });
});

describe('strategies and guards refuse what could never trade, when they are written', () => {
  it('a strategy whose stop is 1e21 is 400 at POST (not when an alert fires), naming the leg', async () => {
    const r = await api('POST', '/api/v1/strategies', { name: 'audit', takeProfit: { price: 4000.1 }, stopLoss: { price: 1e21 } });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', errors: [{ path: 'stopLoss.price' }] });
    const es = await api('POST', '/api/v1/strategies', { name: 'es', symbol: 'ES1!', takeProfit: { price: 4000.1 } });
    expect(es.status, es.text).toBe(400);
    expect(es.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'takeProfit.price' }] });
    expect((await api('GET', '/api/v1/strategies')).json.data).toEqual([]);
  });

  it('allowedProducts with an unknown root is 400 naming it, instead of silently blocking every entry', async () => {
    const r = await api('PUT', `/api/v1/accounts/${acc}/guards`, { allowedProducts: ['ES', 'ZZZ'] });
    expect(r.status, r.text).toBe(400);
    expect(r.json.code).toBe('VALIDATION_FAILED');
    expect(r.json.errors).toEqual([{ path: 'allowedProducts', message: expect.stringContaining('unknown product root ZZZ') }]);
    expect((await api('GET', `/api/v1/accounts/${acc}/guards`)).json.guards.allowedProducts).toBeNull();
  });
});
