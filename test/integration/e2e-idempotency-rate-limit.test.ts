/**
 * Idempotency and the exact rate limit over real HTTP against `serve --paper`:
 * 50 concurrent identical POSTs with one Idempotency-Key → one broker order; the same key
 * with another body → 422; 150 requests on one key inside a second → exactly 120 pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, http, simState, startServe, type Served } from './serve-harness.js';

let s: Served;
let acc: string;
beforeAll(async () => {
  s = await startServe();
  acc = s.accounts[0]!;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('Idempotency-Key', () => {
  it('50 concurrent identical POSTs place exactly one order; the rest are 409 or byte-identical replays', async () => {
    const before = (await simState(s)).orders.length;
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' };
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body, headers: { 'idempotency-key': 'burst-1' } })),
    );
    const created = replies.filter((r) => r.status === 201);
    const inUse = replies.filter((r) => r.status === 409);
    expect(created.length + inUse.length).toBe(50);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const r of inUse) {
      expect(r.json.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      expect(r.headers.get('retry-after')).toBe('1');
    }
    const first = created.find((r) => r.headers.get('idempotent-replayed') === null)!;
    expect(created.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    for (const r of created) expect(r.text).toBe(first.text);
    expect((await simState(s)).orders.length).toBe(before + 1);

    const replay = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body, headers: { 'idempotency-key': 'burst-1' } });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    expect((await simState(s)).orders.length).toBe(before + 1);
  });

  it('the same key with another body is 422 IDEMPOTENCY_KEY_REUSED and sends nothing', async () => {
    const before = (await simState(s)).orders.length;
    const r = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, {
      key: s.apiKey,
      body: { symbol: 'ES1!', side: 'buy', qty: 2, type: 'market' },
      headers: { 'idempotency-key': 'burst-1' },
    });
    expect(r.status).toBe(422);
    expect(r.json.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect((await simState(s)).orders.length).toBe(before);
  });

  it('a 400 is not stored: the key stays usable once the body is fixed', async () => {
    const bad = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'NOPE', side: 'buy', qty: 1 }, headers: { 'idempotency-key': 'fix-1' } });
    expect(bad.status).toBe(400);
    const good = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES', side: 'buy', qty: 1 }, headers: { 'idempotency-key': 'fix-1' } });
    expect(good.status).toBe(201);
  });
});

describe('rate limit', () => {
  it('150 requests on one key within a second: exactly 120 succeed, the rest 429 with Retry-After', async () => {
    const { key } = await createKey(s, 'demo', 'read', 'burst');
    const started = Date.now();
    const replies = await Promise.all(Array.from({ length: 150 }, () => http(s.url, 'GET', '/api/v1/me', { key })));
    const elapsedS = Math.ceil((Date.now() - started) / 1000);
    expect(elapsedS).toBeLessThan(30);
    const ok = replies.filter((r) => r.status === 200);
    const limited = replies.filter((r) => r.status === 429);
    expect(ok).toHaveLength(120);
    expect(limited).toHaveLength(30);
    for (const r of replies) {
      expect(r.headers.get('ratelimit-policy')).toBe('"key";q=120;w=60');
      expect(r.headers.get('x-ratelimit-limit')).toBe('120');
    }
    const remaining = ok.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 120 }, (_, i) => i));
    for (const r of limited) {
      expect(r.json.code).toBe('RATE_LIMITED');
      const retryAfter = Number(r.headers.get('retry-after'));
      // The oldest of the 120 frees its slot 60 s after it was counted, which was within `elapsedS` of now.
      expect(retryAfter).toBeGreaterThanOrEqual(60 - elapsedS);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(r.headers.get('ratelimit')).toBe(`"key";r=0;t=${retryAfter}`);
    }
  });
});
