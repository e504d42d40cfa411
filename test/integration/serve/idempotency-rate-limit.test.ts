/**
 * Idempotency and the exact rate limit over real HTTP against `serve --paper`:
 * 50 concurrent identical POSTs with one Idempotency-Key → one broker order; the same key
 * with another body → 422; 150 requests on one key inside a second → exactly 120 pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, startServe, type Served } from '../../support/processes.js';
import { http } from '../../support/http.js';
import { parseResponses, rawExchange, rawRequest } from '../../support/raw-http.js';
import { simState } from '../../support/sim.js';

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

  it('a retry that spells a default or a null the first left out replays it; one that means another order is 422 (clients probe: a generated client retrying got 422 and could not learn the outcome)', async () => {
    const before = (await simState(s)).orders.length;
    const path = `/api/v1/accounts/${acc}/orders`;
    const send = (body: object, query = '') => http(s.url, 'POST', `${path}${query}`, { key: s.apiKey, body, headers: { 'idempotency-key': 'spelled-1' } });
    const first = await send({ symbol: 'ES1!', side: 'buy', qty: 1 });
    expect(first.status, first.text).toBe(201);
    for (const [body, query] of [
      [{ symbol: 'ES1!', side: 'buy', qty: 1 }, '?dryRun=false'],
      [{ symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', timeInForce: 'day' }, ''],
      [{ symbol: 'ES1!', side: 'buy', qty: 1, clientOrderId: null, takeProfit: null, stopLoss: null, price: null, stopPrice: null }, '?dryRun=0'],
    ] as const) {
      const again = await send(body, query);
      expect(again.status, `${JSON.stringify(body)}${query}: ${again.text}`).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(first.text);
    }
    expect((await send({ symbol: 'ES1!', side: 'buy', qty: 1, timeInForce: 'gtc' })).status).toBe(422);
    expect((await send({ symbol: 'ES1!', side: 'buy', qty: 1, clientOrderId: 'x' })).status).toBe(422);
    expect((await simState(s)).orders.length).toBe(before + 1);
  });

  it('a 400 is not stored: the key stays usable once the body is fixed', async () => {
    const bad = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'NOPE', side: 'buy', qty: 1 }, headers: { 'idempotency-key': 'fix-1' } });
    expect(bad.status).toBe(400);
    const good = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES', side: 'buy', qty: 1 }, headers: { 'idempotency-key': 'fix-1' } });
    expect(good.status).toBe(201);
  });
});

describe('rate limit', () => {
  it('a POST that creates without deduplicating refuses the header (400 INVALID_IDEMPOTENCY_KEY, nothing made) instead of making two under it (clients probe: two strategies, two webhook URLs, two connections); state-setting routes take it as they are', async () => {
    const count = async (path: string) => ((await http(s.url, 'GET', `/api/v1${path}`, { key: s.apiKey })).json.data as unknown[]).length;
    const creates: [string, unknown][] = [
      ['/strategies', { name: 'idem', symbol: 'ES1!' }],
      ['/webhook-tokens', { accountId: acc, name: 'idem' }],
      ['/connections', { name: 'idem' }],
    ];
    for (const [path, body] of creates) {
      const before = await count(path);
      for (let i = 0; i < 2; i++) {
        const r = await http(s.url, 'POST', `/api/v1${path}`, { key: s.apiKey, body, headers: { 'idempotency-key': 'create-once' } });
        expect(r.status, `${path}: ${r.text}`).toBe(400);
        expect(r.json).toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY', detail: expect.stringContaining('orders, flatten and webhook alerts only') });
      }
      expect(await count(path)).toBe(before);
    }
    expect((await http(s.url, 'GET', '/api/v1/strategies', { key: s.apiKey, headers: { 'idempotency-key': 'read' } })).status).toBe(200);
    // A state set (the kill switch above all) is never refused over the header.
    for (const action of ['lock', 'unlock']) {
      const r = await http(s.url, 'POST', `/api/v1/accounts/${acc}/${action}`, { key: s.apiKey, body: {}, headers: { 'idempotency-key': `state-${action}` } });
      expect(r.status, `${action}: ${r.text}`).toBe(200);
    }
    const guards = await http(s.url, 'PUT', `/api/v1/accounts/${acc}/guards`, { key: s.apiKey, body: { maxOrderQty: 50 }, headers: { 'idempotency-key': 'put' } });
    expect(guards.status, guards.text).toBe(200);
  });

  it('a write under If-Match naming an entity tag is 412 PRECONDITION_FAILED and does nothing (no answer carries one); `*` goes through (clients probe: a stale If-Match still wrote the guards)', async () => {
    const guardsPath = `/api/v1/accounts/${acc}/guards`;
    const before = (await http(s.url, 'GET', guardsPath, { key: s.apiKey })).json;
    const stale = await http(s.url, 'PUT', guardsPath, { key: s.apiKey, body: { maxOrderQty: 7 }, headers: { 'if-match': '"stale-etag"' } });
    expect(stale.status, stale.text).toBe(412);
    expect(stale.json.code).toBe('PRECONDITION_FAILED');
    expect((await http(s.url, 'GET', guardsPath, { key: s.apiKey })).json).toEqual(before);
    const orders = (await simState(s)).orders.length;
    const order = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1 }, headers: { 'if-match': 'W/"1"' } });
    expect(order.status, order.text).toBe(412);
    expect((await simState(s)).orders.length).toBe(orders);
    const any = await http(s.url, 'PUT', guardsPath, { key: s.apiKey, body: { maxOrderQty: 50 }, headers: { 'if-match': '*' } });
    expect(any.status, any.text).toBe(200);
    // The status line names the reason (fuzz probe: `412 Status`).
    const raw = await rawExchange(s.url, [rawRequest('PUT', guardsPath, [['X-API-Key', s.apiKey], ['Content-Type', 'application/json'], ['If-Match', '"x"']], '{}')]);
    expect(raw.text.split('\r\n')[0]).toBe('HTTP/1.1 412 Precondition Failed');
  });

  it('a write under If-None-Match: * ("only if none exists") is 412 and does nothing; naming tags, it goes through (fuzz probe: a strategy renamed, guards replaced)', async () => {
    const guardsPath = `/api/v1/accounts/${acc}/guards`;
    const before = (await http(s.url, 'GET', guardsPath, { key: s.apiKey })).json;
    for (const value of ['*', '"a", *']) {
      const r = await http(s.url, 'PUT', guardsPath, { key: s.apiKey, body: { maxOrderQty: 3 }, headers: { 'if-none-match': value } });
      expect(r.status, r.text).toBe(412);
      expect(r.json.code).toBe('PRECONDITION_FAILED');
    }
    expect((await http(s.url, 'GET', guardsPath, { key: s.apiKey })).json).toEqual(before);
    const strategies = await http(s.url, 'GET', '/api/v1/strategies', { key: s.apiKey });
    const made = await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: 'inm' }, headers: { 'if-none-match': '*' } });
    expect(made.status, made.text).toBe(412);
    expect((await http(s.url, 'GET', '/api/v1/strategies', { key: s.apiKey })).json).toEqual(strategies.json);
    const tagged = await http(s.url, 'PUT', guardsPath, { key: s.apiKey, body: { maxOrderQty: 40 }, headers: { 'if-none-match': '"v1"' } });
    expect(tagged.status, tagged.text).toBe(200);
    // A read ignores it.
    expect((await http(s.url, 'GET', guardsPath, { key: s.apiKey, headers: { 'if-none-match': '*' } })).status).toBe(200);
  });

  it('the fixed pages answer whatever headers come twice; the API refuses its credentials twice (fuzz probe: /healthz 400 behind a proxy repeating a header)', async () => {
    const twice: [string, string][] = [['Idempotency-Key', 'a'], ['Idempotency-Key', 'b'], ['X-Request-Id', 'r1'], ['X-Request-Id', 'r2']];
    const paths = ['/healthz', '/readyz', '/openapi.json', '/api/v1/me'];
    const { text } = await rawExchange(s.url, paths.map((path) => rawRequest('GET', path, path.startsWith('/api/') ? [...twice, ['X-API-Key', s.apiKey]] : twice)), { waitMs: 3000 });
    const answers = parseResponses(text, paths.map(() => 'GET'));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 400]);
    expect(JSON.parse(answers[3]!.body)).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

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
    const nowS = Date.now() / 1000;
    for (const r of ok) {
      // The IETF header agrees with the X- trio: r = remaining, t = seconds until the oldest slot frees.
      const m = /^"key";r=(\d+);t=(\d+)$/.exec(r.headers.get('ratelimit') ?? '');
      expect(m, r.headers.get('ratelimit') ?? 'no RateLimit header').not.toBeNull();
      expect(Number(m![1])).toBe(Number(r.headers.get('x-ratelimit-remaining')));
      expect(Number(m![2])).toBeLessThanOrEqual(60);
      const reset = Number(r.headers.get('x-ratelimit-reset'));
      // The oldest counted request was at most `elapsedS` ago: its slot frees 60 s after it.
      expect(reset).toBeGreaterThanOrEqual(Math.floor(nowS) - elapsedS + 59);
      expect(reset).toBeLessThanOrEqual(Math.ceil(nowS) + 60);
    }
    for (const r of limited) {
      expect(r.json.code).toBe('RATE_LIMITED');
      const retryAfter = Number(r.headers.get('retry-after'));
      // The oldest of the 120 frees its slot 60 s after it was counted, which was within `elapsedS` of now.
      expect(retryAfter).toBeGreaterThanOrEqual(60 - elapsedS);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(r.headers.get('ratelimit')).toBe(`"key";r=0;t=${retryAfter}`);
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
      // X-RateLimit-Reset is the epoch second the next slot frees: now + Retry-After (±1 s of rounding).
      expect(Math.abs(Number(r.headers.get('x-ratelimit-reset')) - (nowS + retryAfter))).toBeLessThanOrEqual(elapsedS + 1);
    }
  });

  it('webhooks are limited per token, not per key: 120 alerts pass on one token, the next 429, another token is unaffected', async () => {
    const token = async (name: string) => {
      const r = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: acc, name } });
      expect(r.status, r.text).toBe(201);
      return r.json.url as string;
    };
    const [busy, quiet] = [await token('busy'), await token('quiet')];
    // An alert the receiver refuses (400) after the limiter has counted it: nothing reaches the broker.
    const alert = (url: string) => http(url, 'POST', '', { raw: '{"action":"hold"}', headers: { 'content-type': 'text/plain' } });
    const replies = await Promise.all(Array.from({ length: 125 }, () => alert(busy)));
    expect(replies.filter((r) => r.status === 400)).toHaveLength(120);
    const limited = replies.filter((r) => r.status === 429);
    expect(limited).toHaveLength(5);
    for (const r of limited) {
      expect(r.json.code).toBe('RATE_LIMITED');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(r.headers.get('ratelimit-policy')).toBe('"webhook";q=120;w=60');
    }
    expect((await alert(quiet)).status).toBe(400);
    expect((await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey })).status).toBe(200);
  });
});
