/**
 * Numbers that are not prices or quantities, and query parameters a route does not take, are
 * refused before any broker traffic: real HTTP against `serve --paper`, checked against the
 * paper broker's own order book.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';
import { control, simState } from '../../support/sim.js';

let s: Served;
let acc: string;
let hook: string;
const front = (root: string) => {
  const r = resolveSymbol(root, new Date());
  if (!r.ok) throw new Error(r.reason);
  return r.contract;
};
const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });
const place = (body: unknown, query = '') => api('POST', `/api/v1/accounts/${acc}/orders${query}`, body);
/** Orders the paper broker holds, of any state: nothing refused here may ever reach it. */
const brokerOrders = async () => ((await simState(s)).orders ?? []) as unknown[];

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', WEBHOOK_RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
  await control(s, 'POST', '/prices', { symbol: front('ES'), price: 5000 });
  await control(s, 'POST', '/prices', { symbol: front('MES'), price: 5000 });
  await control(s, 'POST', '/prices', { symbol: front('CL'), price: 71 });
  const t = await api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'TV' });
  expect(t.status, t.text).toBe(201);
  hook = t.json.url;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('prices and quantities (items 4 and 9)', () => {
  it('refuses numbers that are not prices, and none reaches the broker', async () => {
    const before = (await brokerOrders()).length;
    for (const [body, code, path] of [
      [{ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 5e-324 }, 'PRICE_OUT_OF_RANGE', 'price'],
      [{ symbol: 'ES', side: 'sell', qty: 1, type: 'limit', price: 1e21 }, 'PRICE_OUT_OF_RANGE', 'price'],
      [{ symbol: 'ES', side: 'buy', qty: 1, type: 'stop', stopPrice: 0.25 }, 'PRICE_OUT_OF_RANGE', 'stopPrice'],
      [{ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 1000.2500000001 }, 'VALIDATION_FAILED', 'price'],
      [{ symbol: 'MES', side: 'buy', qty: 1, type: 'market', stopLoss: { ticks: 100_000 } }, 'PRICE_OUT_OF_RANGE', 'stopLoss.ticks'],
      [{ symbol: 'MES', side: 'buy', qty: 1, type: 'limit', price: 4990, stopLoss: { ticks: 100_000 } }, 'PRICE_OUT_OF_RANGE', 'stopLoss.ticks'],
      [{ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4990, takeProfit: { price: 1e21 } }, 'PRICE_OUT_OF_RANGE', 'takeProfit.price'],
      [{ symbol: 'ES', side: 'buy', qty: 10_001, type: 'market' }, 'VALIDATION_FAILED', 'qty'],
    ] as const) {
      const r = await place(body);
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expect(r.json.code).toBe(code);
      expect(r.json.errors.map((e: { path: string }) => e.path)).toEqual([path]);
    }
    expect(await brokerOrders()).toHaveLength(before);
  });

  it('sends the exact tick price when the client’s number carries float noise', async () => {
    const r = await place({ symbol: 'CL', side: 'buy', qty: 1, type: 'limit', price: 70.97999999999999 });
    expect(r.status, r.text).toBe(201);
    expect(r.json.price).toBe(70.98);
    const atBroker = (await brokerOrders()) as { id: number; price?: number }[];
    expect(atBroker.find((o) => String(o.id) === r.json.orderId)?.price).toBe(70.98);
  });

  it('refuses a webhook quantity of "1e3" and a leg with a zero price; nothing is placed', async () => {
    const before = (await brokerOrders()).length;
    const alert = (body: unknown) => http(hook, 'POST', '', { raw: JSON.stringify(body), headers: { 'content-type': 'text/plain' } });
    const qty = await alert({ action: 'buy', symbol: 'ES1!', qty: '1e3' });
    expect(qty.status, qty.text).toBe(400);
    expect(qty.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'qty' }] });
    const leg = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, stopLoss: { price: 0 } });
    expect(leg.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'stopLoss.price' }] });
    const far = await alert({ action: 'buy', symbol: 'MES1!', qty: 1, stopLoss: { ticks: 100000 } });
    expect(far.json).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', errors: [{ path: 'stopLoss.ticks' }] });
    const trail = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, stopLoss: { ticks: 20, trailing: true } });
    expect(trail.json).toMatchObject({ code: 'WEBHOOK_UNSUPPORTED' });
    expect(await brokerOrders()).toHaveLength(before);
  });
});

describe('query parameters (item 8)', () => {
  it('a misspelt dryRun is a 400 naming it, and never places an order', async () => {
    const before = (await brokerOrders()).length;
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' }, '?dryrun=true');
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'query.dryrun', message: 'Unknown query parameter' }] });
    expect(await brokerOrders()).toHaveLength(before);
  });

  it('a parameter named __proto__ is an unknown parameter like any other, never a real order', async () => {
    const before = (await brokerOrders()).length;
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' }, '?__proto__=dryRun');
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'query.__proto__' }] });
    expect(await brokerOrders()).toHaveLength(before);
    expect((await api('GET', '/api/v1/accounts?__proto__=1')).status).toBe(400);
    const twice = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' }, '?dryRun=true&__proto__=x&__proto__=y');
    expect(twice.status).toBe(400);
  });

  it('a parameter given twice is refused rather than the last one winning', async () => {
    const r = await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' }, '?dryRun=true&dryRun=false');
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'query.dryRun', message: 'given more than once' }] });
  });

  it('reads and writes without query parameters refuse any, lists refuse unknown ones', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/me?verbose=1'],
      ['GET', `/api/v1/accounts?limt=5`],
      ['POST', `/api/v1/accounts/${acc}/flatten?force=true`],
      ['DELETE', `/api/v1/accounts/${acc}/orders/1?all=true`],
    ]) {
      const r = await api(method!, path!);
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(400);
      expect(r.json.code).toBe('VALIDATION_FAILED');
    }
    expect((await api('GET', '/api/v1/accounts?limit=1')).status).toBe(200);
    expect((await place({ symbol: 'ES', side: 'buy', qty: 1, type: 'market' }, '?dryRun=true')).status).toBe(200);
  });

  it('a route that takes no body refuses one with fields, naming them, and acts on nothing; none, {} or null pass (clients probe: unlock {"flatten": true} unlocked and ignored flatten)', async () => {
    const locked = await api('POST', `/api/v1/accounts/${acc}/lock`, { reason: 'body test' });
    expect(locked.status, locked.text).toBe(200);
    const refused = await api('POST', `/api/v1/accounts/${acc}/unlock`, { flatten: true, totallyUnknown: 1 });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'flatten', message: 'Unknown field' }, { path: 'totallyUnknown', message: 'Unknown field' }] });
    expect((await api('GET', `/api/v1/accounts/${acc}/guards`)).json.lock).not.toBeNull();
    const text = await http(s.url, 'DELETE', `/api/v1/accounts/${acc}/orders/1`, { key: s.apiKey, raw: 'cancel please', headers: { 'content-type': 'text/plain' } });
    expect([text.status, text.json.code]).toEqual([400, 'VALIDATION_FAILED']);
    for (const body of ['{}', 'null', ' ']) {
      const r = await http(s.url, 'POST', `/api/v1/accounts/${acc}/unlock`, { key: s.apiKey, raw: body, headers: { 'content-type': 'application/json' } });
      expect(r.status, `${body}: ${r.text}`).toBe(200);
      await api('POST', `/api/v1/accounts/${acc}/lock`, { reason: 'again' });
    }
    expect((await api('POST', `/api/v1/accounts/${acc}/unlock`)).status).toBe(200);
  });

  it("a token's alerts take ?limit= and their own ?cursor=: an unknown parameter or a cursor they did not give out is a 400", async () => {
    const id = (await api('GET', '/api/v1/webhook-tokens')).json.data[0].id as string;
    for (const query of ['zzUnknown=1', 'cursor=abc', 'limit=0', 'limit=101']) {
      const r = await api('GET', `/api/v1/webhook-tokens/${id}/alerts?${query}`);
      expect(r.status, `${query}: ${r.text}`).toBe(400);
      expect(r.json.code).toBe('VALIDATION_FAILED');
    }
    expect((await api('GET', `/api/v1/webhook-tokens/${id}/alerts?limit=100`)).status).toBe(200);
  });

  it('limit is decimal digits: an exponent, hex, a sign, a space or a fraction is a 400', async () => {
    for (const limit of ['1e2', '0x10', '%2B5', '+5', '%205', '1.0', '-1']) {
      for (const path of ['/api/v1/accounts', '/api/v1/connections', `/api/v1/accounts/${acc}/working-orders`]) {
        const r = await api('GET', `${path}?limit=${limit}`);
        expect(r.status, `${path}?limit=${limit}: ${r.text}`).toBe(400);
        expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'query.limit' }] });
      }
    }
    expect((await api('GET', '/api/v1/accounts?limit=500')).status).toBe(200);
  });

  it("a cursor names its list: another list's nextCursor is a 400 like a made-up one", async () => {
    const first = await api('GET', '/api/v1/accounts?limit=1');
    const cursor = first.json.nextCursor as string;
    expect(cursor).toEqual(expect.any(String));
    expect((await api('GET', `/api/v1/accounts?limit=1&cursor=${cursor}`)).json.data).toHaveLength(1);
    for (const path of ['/api/v1/connections', '/api/v1/webhook-tokens', '/api/v1/strategies', `/api/v1/accounts/${acc}/positions`]) {
      const r = await api('GET', `${path}?cursor=${cursor}`);
      expect(r.status, `${path}: ${r.text}`).toBe(400);
      expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', detail: 'query.cursor: not a cursor returned by this list' });
    }
  });
});

describe('webhook aliases', () => {
  it('two names of one field with different values are refused naming both, and nothing is placed; equal ones are accepted', async () => {
    const before = (await brokerOrders()).length;
    const alert = (body: unknown) => http(hook, 'POST', '', { raw: JSON.stringify(body), headers: { 'content-type': 'text/plain' } });
    const r = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 4 }, tp: { ticks: 5 } });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'takeProfit' }, { path: 'tp' }] });
    expect(await brokerOrders()).toHaveLength(before);
    const same = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 4 }, tp: { ticks: '4' } });
    expect(same.status, same.text).toBe(201);
    expect(same.json.warnings).toEqual(["'tp' ignored: takeProfit already given"]);
  });
  it('names and labels with control characters, bidirectional overrides or unpaired surrogates are refused (a terminal escape in a list, a name that reads as another, text with no UTF-8 form); plain unicode is fine', async () => {
    const evil = ['\u001b[31mEVIL\u001b[0m', 'a\u0000b', 'line\rover', 'abc\u202Egpj.exe', 'x\u0085y', 'a\u2028b', 'zero\u200Bwidth', 'rl\u200Fm', 'bom\uFEFF', 'al\u061Cm', 'lone\uD800', '\uDC00lone', 'pair\uDE00\uD83D'];
    const { json: conns } = await api('GET', '/api/v1/connections');
    const conn = conns.data[0].id as string;
    for (const name of evil) {
      for (const [method, path, body] of [
        ['PATCH', `/api/v1/connections/${conn}`, { name }],
        ['POST', '/api/v1/strategies', { name }],
        ['POST', '/api/v1/webhook-tokens', { accountId: acc, name }],
        ['POST', `/api/v1/accounts/${acc}/lock`, { flatten: false, reason: name }],
        ['POST', `/api/v1/accounts/${acc}/orders?dryRun=true`, { symbol: 'ES', side: 'buy', qty: 1, type: 'market', clientOrderId: name }],
      ] as const) {
        const r = await api(method, path, body);
        expect(r.status, `${method} ${path} ${JSON.stringify(name)}: ${r.text}`).toBe(400);
        expect(r.json.code).toBe('VALIDATION_FAILED');
      }
    }
    expect((await api('GET', `/api/v1/accounts/${acc}/guards`)).json.lock).toBeNull();
    const fine = await api('POST', '/api/v1/strategies', { name: 'Scalp — ES 📈 «long» 👨‍👩‍👧', description: 'line one\n\tline two' });
    expect(fine.status, fine.text).toBe(201);
    expect((await api('DELETE', `/api/v1/strategies/${fine.json.id}`)).status).toBe(204);
  });
});
