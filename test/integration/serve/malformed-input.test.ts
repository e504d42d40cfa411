/**
 * Hostile and broken input over real HTTP against `serve --paper`: malformed JSON, wrong
 * types, unknown fields, oversized bodies, bad Idempotency-Keys, wrong media types and
 * fuzzed bodies → the documented 4xx problem, never a 5xx.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteDef } from '../../../src/http/route-types.js';
import type { RouteDeps } from '../../../src/http/routes/common.js';
import { buildRoutes } from '../../../src/http/routes/index.js';
import { http, httpFrom } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';
import { simState } from '../../support/sim.js';

// The route table only: building it reads no dependency. The webhook receiver has its own rules (lenient JSON).
const ROUTES: RouteDef<any, any>[] = buildRoutes({} as RouteDeps).filter((r) => r.scope === 'read' || r.scope === 'trade');

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

  it('every path of /api-docs answers the methods it does not list with 405 and Allow, and the document says so', async () => {
    const doc = (await http(s.url, 'GET', '/api-docs/openapi.json')).json;
    const problem = doc.components.responses.Problem;
    expect(problem.description).toContain('405 METHOD_NOT_ALLOWED');
    expect(problem.headers.Allow).toEqual({ $ref: '#/components/headers/Allow' });
    const paths = doc.paths as Record<string, Record<string, any>>;
    // A concrete path can fit more than one template (`/connections/tradovate` is also `/connections/{id}`): Allow is all of theirs.
    const fits = (template: string, concrete: string) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(concrete);
    let checked = 0;
    for (const [template, item] of Object.entries(paths)) {
      const concrete = template.replace(/\{[^}]+\}/g, 'x1');
      const all = Object.entries(paths).filter(([t]) => fits(t, concrete)).flatMap(([, i]) => Object.keys(i).map((m) => m.toUpperCase()));
      const allow = [...new Set([...all, ...(all.includes('GET') ? ['HEAD'] : [])])].sort().join(', ');
      const root = Object.values(item)[0].servers !== undefined;
      const path = `${root ? '' : '/api/v1'}${concrete}`;
      for (const op of Object.values(item)) expect(op.responses.default, `${template}`).toEqual({ $ref: '#/components/responses/Problem' });
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !all.includes(m))) {
        const r = await http(s.url, method, path);
        expect(r.status, `${method} ${path}`).toBe(405);
        expect(r.headers.get('allow'), `${method} ${path}`).toBe(allow);
        expect(r.json.code).toBe('METHOD_NOT_ALLOWED');
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(50);
  });
});

describe('every route that takes a body answers broken bodies with the documented 4xx', () => {
  /** Each write route of the table that takes a body, with a path to an owned object (fresh fixtures, created once). */
  async function bodyRoutes(): Promise<[string, string, string][]> {
    const strategy = (await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: 'broken-bodies' } })).json.id as string;
    const token = (await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: acc, name: 'broken-bodies' } })).json.id as string;
    const connection = ((await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data as { id: string; accountIds: string[] }[]).find((c) => c.accountIds.includes(acc))!.id;
    const owned = (path: string) => (path.startsWith('/strategies') ? strategy : path.startsWith('/webhook-tokens') ? token : path.startsWith('/connections') ? connection : acc);
    return ROUTES.filter((r) => (r.method === 'POST' || r.method === 'PUT' || r.method === 'PATCH') && r.body).map((r) => {
      const path = `/api/v1${r.path.replace(':id', owned(r.path))}`;
      return [`${r.method} ${r.path}`, r.method, r.path === '/accounts/:id/orders' ? `${path}?dryRun=true` : path];
    });
  }

  it('malformed JSON, a non-object, a wrong type, an unknown field → 400 VALIDATION_FAILED; over 64 KiB → 413', async () => {
    const failures: string[] = [];
    const routes = await bodyRoutes();
    expect(routes.map(([name]) => name).sort()).toEqual(
      [
        'PATCH /strategies/:id',
        'PATCH /webhook-tokens/:id',
        'PATCH /connections/:id',
        'POST /accounts/:id/flatten',
        'POST /accounts/:id/lock',
        'POST /accounts/:id/orders',
        'PUT /accounts/:id/guards',
        'POST /connections',
        'POST /connections/tradovate',
        'POST /strategies',
        'POST /webhook-tokens',
      ].sort(),
    );
    const cases: [string, string, number, string][] = [
      ['malformed JSON', '{"name": ', 400, 'VALIDATION_FAILED'],
      ['an array', '[]', 400, 'VALIDATION_FAILED'],
      ['null', 'null', 400, 'VALIDATION_FAILED'],
      ['a wrong type', '{"name": 5, "symbol": 5, "accountId": 5, "accounts": 5}', 400, 'VALIDATION_FAILED'],
      ['an unknown field', '{"nmae": "typo"}', 400, 'VALIDATION_FAILED'],
      ['a body over 64 KiB', JSON.stringify({ name: 'x'.repeat(70_000) }), 413, 'PAYLOAD_TOO_LARGE'],
    ];
    for (const [name, method, path] of routes) {
      for (const [what, raw, status, code] of cases) {
        const r = await http(s.url, method, path, { key: s.apiKey, raw, headers: { 'content-type': 'application/json' } });
        if (r.status !== status || r.json?.code !== code || !r.headers.get('content-type')?.includes('application/problem+json')) {
          failures.push(`${name} with ${what}: ${r.status} ${r.text.slice(0, 160)}`);
        }
      }
      if (method === 'POST' || method === 'PUT') {
        const r = await http(s.url, method, path, { key: s.apiKey, raw: '{}', headers: { 'content-type': 'text/plain' } });
        if (r.status !== 415 || r.json?.code !== 'UNSUPPORTED_MEDIA_TYPE') failures.push(`${name} as text/plain: ${r.status} ${r.text.slice(0, 160)}`);
      }
    }
    expect(failures).toEqual([]);
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
