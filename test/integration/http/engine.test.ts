/**
 * The HTTP engine over real sockets: routing on both prefixes, auth and scopes, the exact
 * rate limit and its headers, body rules, problems, request ids, Server-Timing, docs.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngine, type EngineHarness } from '../../support/engine.js';

let h: EngineHarness;

beforeAll(async () => {
  h = await startEngine({ rateLimitPerMin: 120 }, { fakeClock: true });
});
afterAll(async () => {
  await h.stop();
});

const json = (key: string, body: unknown, extra: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'X-API-Key': key, 'Content-Type': 'application/json', ...extra },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});

/** Sends a raw request with node:http (for bodies fetch will not send as-is). */
function raw(path: string, opts: { method: string; headers: Record<string, string>; body?: Buffer }): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(h.url(path), { method: opts.method, headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

describe('routing', () => {
  it('serves a route under /api/v1 and /v1 with path params and validated query', async () => {
    for (const prefix of ['/api/v1', '/v1']) {
      const res = await fetch(h.url(`${prefix}/things/a%20b?limit=5`), { headers: { 'X-API-Key': h.keys.read } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toEqual({ id: 'a b', limit: 5 });
    }
  });

  it('answers 404 NOT_FOUND problems for unknown paths, outside the prefixes too', async () => {
    for (const path of ['/api/v1/nothing', '/v2/things/1', '/']) {
      const res = await fetch(h.url(path));
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({ code: 'NOT_FOUND', status: 404, title: 'Not found' });
    }
  });

  it('answers 405 with Allow for a known path under another method', async () => {
    const res = await fetch(h.url('/v1/things/1'), { method: 'PATCH', headers: { 'X-API-Key': h.keys.rw } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('DELETE, GET, HEAD');
    expect(await res.json()).toMatchObject({ code: 'METHOD_NOT_ALLOWED' });
  });

  it('answers 204 without a body', async () => {
    const res = await fetch(h.url('/v1/things/1'), { method: 'DELETE', headers: { 'X-API-Key': h.keys.trade } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
  });

  it('serves /healthz, /readyz, /api-docs and /api-docs/openapi.json', async () => {
    expect((await fetch(h.url('/healthz'))).status).toBe(200);
    expect(await (await fetch(h.url('/readyz'))).json()).toEqual({ status: 'ready' });
    const doc = (await (await fetch(h.url('/api-docs/openapi.json'))).json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/things/{id}', '/accounts/{id}/orders', '/connection-health/stream']));
    const page = await fetch(h.url('/api-docs'));
    expect(page.headers.get('content-type')).toContain('text/html');
    // The browser policy of the app pages, with only its inline stylesheet allowed.
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*frame-ancestors 'none'/);
    expect(page.headers.get('content-security-policy')).not.toMatch(/script-src/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    const html = await page.text();
    expect(html).toContain('id="problem-idempotency-key-reused"');
    expect(html).not.toMatch(/<script|https?:\/\/(?!json-schema)/);
  });
});

describe('auth and scopes', () => {
  it('gives one identical 401 body for missing, malformed, unknown and revoked keys', async () => {
    const revoked = await h.store.apiKeys.create({ userId: h.userId, name: 'gone', scopes: ['read'] });
    await h.store.apiKeys.revokeById(revoked.record.id);
    const bodies = new Set<string>();
    const unknown = `${h.keys.read.slice(0, -4)}AAAA`;
    for (const key of [undefined, 'garbage', unknown, revoked.key]) {
      const res = await fetch(h.url('/v1/things/1'), { headers: key ? { 'X-API-Key': key, 'X-Forwarded-For': 'x' } : {} });
      expect(res.status).toBe(401);
      bodies.add(await res.text());
    }
    expect(bodies.size).toBe(1);
    expect(JSON.parse([...bodies][0]!)).toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('answers 403 INSUFFICIENT_SCOPE with requiredScope: a trade-only key cannot read, a read-only key cannot write', async () => {
    const read = await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': h.keys.trade } });
    expect(read.status).toBe(403);
    expect(await read.json()).toMatchObject({ code: 'INSUFFICIENT_SCOPE', requiredScope: 'read' });
    const write = await fetch(h.url('/v1/accounts/1/orders'), json(h.keys.read, { symbol: 'ES', qty: 1 }));
    expect(write.status).toBe(403);
    expect(await write.json()).toMatchObject({ requiredScope: 'trade' });
    // A valid key refused for its scope is still a keyed answer: it counts, and says so.
    const again = await fetch(h.url('/v1/accounts/1/orders'), json(h.keys.read, { symbol: 'ES', qty: 1 }));
    expect(again.headers.get('ratelimit-policy')).toBe('"key";q=120;w=60');
    expect(Number(again.headers.get('x-ratelimit-remaining'))).toBe(Number(write.headers.get('x-ratelimit-remaining')) - 1);
  });

  it('authenticates webhooks by the path token: unknown token → 404 like an unknown route', async () => {
    const ok = await fetch(h.url(`/api/v1/webhooks/${h.webhookToken}`), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{"action":"buy"}' });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ ok: true, principal: expect.stringMatching(/^webhook:/) });
    expect(ok.headers.get('ratelimit-policy')).toBe('"webhook";q=120;w=60');
    const bad = await fetch(h.url('/api/v1/webhooks/whk_nope_nope'), { method: 'POST', body: '{"action":"buy"}' });
    expect(bad.status).toBe(404);
    expect(await bad.text()).toBe(await (await fetch(h.url('/api/v1/nothing'))).text());
  });
});

describe('bodies and validation (never 5xx)', () => {
  const post = (body: string | Buffer, headers: Record<string, string> = {}) =>
    raw('/v1/accounts/1/orders', { method: 'POST', headers: { 'X-API-Key': h.keys.rw, 'Content-Type': 'application/json', ...headers }, body: Buffer.from(body) });

  it('rejects malformed JSON with 400 VALIDATION_FAILED', async () => {
    const res = await post('{"symbol": "ES", ');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: '' }] });
  });

  it('lists wrong types and unknown fields by path', async () => {
    const res = await post(JSON.stringify({ symbol: 5, qty: 'two', stopLos: 3 }));
    expect(res.status).toBe(400);
    const errors = (JSON.parse(res.body) as { errors: { path: string }[] }).errors.map((e) => e.path).sort();
    expect(errors).toEqual(['qty', 'stopLos', 'symbol']);
  });

  it('rejects a body that is not JSON with 415, but webhooks accept text/plain', async () => {
    expect((await post('{"symbol":"ES","qty":1}', { 'Content-Type': 'text/plain' })).status).toBe(415);
    expect((await post('symbol=ES', { 'Content-Type': 'application/x-www-form-urlencoded' })).status).toBe(415);
  });

  it('answers 413 for a body over the limit, announced or chunked', async () => {
    const big = Buffer.alloc(70 * 1024, 'a');
    const announced = await post(big);
    expect(announced.status).toBe(413);
    expect(JSON.parse(announced.body)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    const chunked = await post(big, { 'Transfer-Encoding': 'chunked' });
    expect(chunked.status).toBe(413);
  });

  it('authenticates before looking at the body: a bad key gets 401 whatever the body', async () => {
    for (const body of [Buffer.alloc(70 * 1024, 'a'), Buffer.from('{not json')]) {
      const res = await raw('/v1/accounts/1/orders', { method: 'POST', headers: { 'X-API-Key': 'tgk_x_y', 'Content-Type': 'application/json' }, body });
      expect(res.status).toBe(401);
    }
  });

  it('answers 400 INVALID_IDEMPOTENCY_KEY for empty, too long or non-visible keys', async () => {
    for (const key of ['', 'x'.repeat(256), 'has space', 'tab\there']) {
      const res = await post('{"symbol":"ES","qty":1}', { 'Idempotency-Key': key });
      expect(res.status, JSON.stringify(key)).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
    }
  });

  it('turns an unexpected error into 500 INTERNAL with the request id, never a bare 500', async () => {
    const res = await fetch(h.url('/v1/boom'), { headers: { 'X-API-Key': h.keys.read, 'X-Request-Id': 'req-123' } });
    expect(res.status).toBe(500);
    expect(res.headers.get('x-request-id')).toBe('req-123');
    expect(await res.json()).toMatchObject({ code: 'INTERNAL', requestId: 'req-123' });
  });
});

describe('request ids and Server-Timing', () => {
  it('generates a request id when none is given and reports the stages, the handler metrics and the total', async () => {
    const res = await fetch(h.url('/v1/accounts/1/orders'), json(h.keys.rw, { symbol: 'ES', qty: 1 }));
    expect(res.status).toBe(201);
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[\w-]{8}-[0-9a-z]+$/);
    // Distinct per request, under this process's prefix.
    const next = (await fetch(h.url('/healthz'))).headers.get('x-request-id');
    expect(next).not.toBe(id);
    expect(next!.slice(0, 9)).toBe(id!.slice(0, 9));
    expect(res.headers.get('server-timing')).toMatch(/^auth;dur=\d+\.\d\d, validate;dur=\d+\.\d\d, broker;dur=1\.5, total;dur=\d+(\.\d)?$/);
  });

  it('does not take a request id that holds an API key or webhook token: ids are logged and echoed as they are (fuzz probe: a key sent as X-Request-Id was in the access log)', async () => {
    const res = await fetch(h.url('/healthz'), { headers: { 'X-Request-Id': h.keys.read } });
    expect(res.headers.get('x-request-id')).not.toContain(h.keys.read.slice(0, 30));
    expect(res.headers.get('x-request-id')).toMatch(/^[\w-]{8}-[0-9a-z]+$/);
    const token = `whk_${'a'.repeat(12)}_${'b'.repeat(32)}`;
    expect((await fetch(h.url('/healthz'), { headers: { 'X-Request-Id': `id-${token}` } })).headers.get('x-request-id')).not.toContain(token);
    expect((await fetch(h.url('/healthz'), { headers: { 'X-Request-Id': 'tgk_order-1' } })).headers.get('x-request-id')).toBe('tgk_order-1');
  });
});

describe('rate limit: exactly N per key in any rolling 60 s', () => {
  it('lets exactly 120 of 150 requests through, with correct headers and Retry-After, then frees at 60.000 s', async () => {
    const key = (await h.store.apiKeys.create({ userId: h.userId, name: 'burst', scopes: ['read'] })).key;
    const t0 = h.now.value;
    const results = await Promise.all(
      Array.from({ length: 150 }, () => fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': key } }).then(async (r) => ({ status: r.status, headers: r.headers, body: await r.text() }))),
    );
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(120);
    expect(limited).toHaveLength(30);
    const remaining = ok.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 120 }, (_, i) => i));
    for (const r of ok) {
      expect(r.headers.get('ratelimit-policy')).toBe('"key";q=120;w=60');
      expect(r.headers.get('x-ratelimit-limit')).toBe('120');
      expect(r.headers.get('x-ratelimit-reset')).toBe(String(Math.ceil((t0 + 60_000) / 1000)));
      expect(r.headers.get('retry-after')).toBeNull();
    }
    for (const r of limited) {
      expect(r.headers.get('retry-after')).toBe('60');
      expect(r.headers.get('ratelimit')).toBe('"key";r=0;t=60');
      expect(JSON.parse(r.body)).toMatchObject({ code: 'RATE_LIMITED' });
    }
    h.now.value = t0 + 59_999;
    expect((await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': key } })).status).toBe(429);
    h.now.value = t0 + 60_000;
    const freed = await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': key } });
    expect(freed.status).toBe(200);
    // All 120 were logged at t0, so the whole window expired at exactly t0 + 60 s.
    expect(freed.headers.get('x-ratelimit-remaining')).toBe('119');
  });

  it('limits failed authentications per IP: the 31st failure within a minute is 429, valid keys still pass', async () => {
    h.now.value += 120_000;
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': `tgk_${i}_bad` } })).status);
    expect(statuses.slice(0, 30).every((s) => s === 401)).toBe(true);
    expect(statuses[30]).toBe(429);
    // A valid key from the same address is not locked out by someone else's failures.
    expect((await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': h.keys.read } })).status).toBe(200);
    expect((await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': 'tgk_x_bad' } })).status).toBe(429);
    h.now.value += 60_000;
    expect((await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': h.keys.read } })).status).toBe(200);
  });
});

describe('behind a reverse proxy (TRUST_PROXY)', () => {
  const bad = (t: EngineHarness, forwardedFor?: string) =>
    fetch(t.url('/v1/things/1'), { headers: { 'X-API-Key': 'tgk_x_bad', ...(forwardedFor && { 'X-Forwarded-For': forwardedFor }) } }).then((r) => r.status);

  it('counts failed authentications per client the trusted proxy names, so one client cannot lock out the others', async () => {
    const t = await startEngine({ trustProxy: 'loopback' }, { fakeClock: true });
    try {
      for (let i = 0; i < 30; i++) expect(await bad(t, '198.51.100.1')).toBe(401);
      expect(await bad(t, '198.51.100.1')).toBe(429);
      // A name the client wrote itself, left of what the proxy appended, changes nothing.
      expect(await bad(t, '203.0.113.50, 198.51.100.1')).toBe(429);
      // Another client behind the same proxy is not locked out.
      expect(await bad(t, '198.51.100.2')).toBe(401);
    } finally {
      await t.stop();
    }
  });

  it('without TRUST_PROXY, X-Forwarded-For is ignored: the peer is the client', async () => {
    const t = await startEngine({}, { fakeClock: true });
    try {
      for (let i = 0; i < 30; i++) expect(await bad(t, `198.51.100.${i}`)).toBe(401);
      expect(await bad(t, '198.51.100.200')).toBe(429);
    } finally {
      await t.stop();
    }
  });
});

