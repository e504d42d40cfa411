/**
 * Hostile and broken input over real HTTP against `serve --paper`: malformed JSON, wrong
 * types, unknown fields, oversized bodies, bad Idempotency-Keys, wrong media types and
 * fuzzed bodies → the documented 4xx problem, never a 5xx.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, httpFrom, simState, startServe, type Served } from './serve-harness.js';

let s: Served;
let acc: string;
let webhookUrl: string;
const ordersPath = () => `/api/v1/accounts/${acc}/orders`;
const post = (raw: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  http(s.url, 'POST', ordersPath(), { key: s.apiKey, raw, headers });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', WEBHOOK_RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
  webhookUrl = (await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: acc, name: 'fuzz' } })).json.url;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('documented 4xx for broken requests', () => {
  it('malformed JSON → 400 VALIDATION_FAILED', async () => {
    const r = await post('{"symbol": "ES", ');
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('VALIDATION_FAILED');
  });

  it('wrong types → 400 naming the fields', async () => {
    const r = await post(JSON.stringify({ symbol: 5, side: 'up', qty: '1' }));
    expect(r.status).toBe(400);
    expect(r.json.errors.map((e: { path: string }) => e.path).sort()).toEqual(['qty', 'side', 'symbol']);
  });

  it('unknown fields (typo stopLos) → 400 naming the field', async () => {
    const r = await post(JSON.stringify({ symbol: 'ES', side: 'buy', qty: 1, stopLos: { ticks: 4 } }));
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.json.errors)).toContain('stopLos');
  });

  it('a body over 64 KiB → 413 PAYLOAD_TOO_LARGE', async () => {
    const r = await post(JSON.stringify({ symbol: 'ES', side: 'buy', qty: 1, clientOrderId: 'x'.repeat(70_000) })).catch((e: unknown) => e);
    if (r instanceof Error) throw r;
    expect((r as { status: number }).status).toBe(413);
  });

  it('a non-JSON media type → 415 on API routes, accepted text/plain on webhooks', async () => {
    expect((await post(JSON.stringify({ symbol: 'ES', side: 'buy', qty: 1 }), { 'content-type': 'text/plain' })).status).toBe(415);
    const wh = await http(webhookUrl, 'POST', '', { raw: '{"action":"buy","symbol":"ES","qty":1}', headers: { 'content-type': 'text/plain' } });
    expect(wh.status).toBe(201);
  });

  it.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['with a space', 'a b'],
  ])('a bad Idempotency-Key (%s) → 400 INVALID_IDEMPOTENCY_KEY, nothing placed', async (_name, key) => {
    const before = (await simState(s)).orders.length;
    const r = await httpFrom('127.0.0.1', s.url, 'POST', ordersPath(), { key: s.apiKey, body: { symbol: 'ES', side: 'buy', qty: 1 }, headers: { 'idempotency-key': key } });
    expect(r.status, r.text).toBe(400);
    expect(r.json.code).toBe('INVALID_IDEMPOTENCY_KEY');
    expect((await simState(s)).orders.length).toBe(before);
  });

  it('unknown routes and wrong methods → 404 / 405 problems', async () => {
    expect((await http(s.url, 'GET', '/api/v1/nope', { key: s.apiKey })).json.code).toBe('NOT_FOUND');
    expect((await http(s.url, 'PUT', ordersPath(), { key: s.apiKey })).status).toBe(405);
  });
});

describe('fuzzed bodies never produce a 5xx', () => {
  it('order bodies', async () => {
    const before = (await simState(s)).orders.length;
    const field = fc.oneof(fc.jsonValue(), fc.constantFrom('ES', 'ES1!', 'buy', 'limit', 5000.25, -1, 0, 1e308, '5000'));
    const body = fc.dictionary(fc.constantFrom('symbol', 'side', 'qty', 'type', 'price', 'stopPrice', 'takeProfit', 'stopLoss', 'timeInForce', 'x'), field);
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const r = await http(s.url, 'POST', `${ordersPath()}?dryRun=true`, { key: s.apiKey, body: b });
        expect(r.status, r.text).toBeLessThan(500);
        expect(r.status === 200 || (r.status >= 400 && typeof r.json?.code === 'string')).toBe(true);
      }),
      { numRuns: 150 },
    );
    expect((await simState(s)).orders.length).toBe(before);
  });

  it('webhook payloads', async () => {
    const body = fc.oneof(
      fc.string(),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc
        .dictionary(fc.constantFrom('action', 'ticker', 'qty', 'takeProfit', 'stopLoss', 'orderType', 'trailAmount', 'id'), fc.jsonValue())
        .map((d) => JSON.stringify({ ...d, action: typeof d.action === 'string' ? d.action : 'breakeven' })),
    );
    await fc.assert(
      fc.asyncProperty(body, async (raw) => {
        const r = await http(webhookUrl, 'POST', '', { raw, headers: { 'content-type': 'text/plain' } });
        expect(r.status, `${raw} → ${r.text}`).toBeLessThan(500);
      }),
      { numRuns: 150 },
    );
  });
});
