/**
 * HTTP fuzzing (DESIGN §3, §14; reliability-anchors F2/E1): fast-check generates bodies
 * (random JSON, wrong types, huge numbers, unicode, deep nesting up to the 64 KiB limit,
 * broken JSON), headers (Idempotency-Key variants, X-API-Key garbage, content types), path
 * ids and symbols against the order, flatten, strategy, webhook-token and webhook routes of
 * a real `serve --paper`. Every answer must be a status the route documents in
 * /api-docs/openapi.json, every error an RFC 9457 problem from the catalogue, never a 5xx,
 * never a hang, and the server must still serve normal requests afterwards.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEMS } from '../../../src/domain/problems.js';
import { openApiPath } from '../../../src/http/openapi.js';
import { http, httpFrom, type Reply } from '../../support/http.js';
import { type Served, startServe } from '../../support/processes.js';

const RUNS = 1500;
const SEED = Number(process.env.RELIABILITY_SEED ?? 20261121);
const REQUEST_TIMEOUT_MS = 10_000;

let s: Served;
let account: string;
let strategyId: string;
let tokenId: string;
let token: string;
let documented: Record<string, Record<string, { responses: Record<string, unknown> }>>;
let sourceSeq = 0;

interface Target {
  method: 'POST' | 'PATCH';
  /** Route table path, for the OpenAPI lookup. */
  route: string;
  path: (id: string | undefined) => string;
}

const TARGETS: Target[] = [
  { method: 'POST', route: '/accounts/:id/orders', path: (id) => `/api/v1/accounts/${id ?? account}/orders` },
  { method: 'POST', route: '/accounts/:id/flatten', path: (id) => `/v1/accounts/${id ?? account}/flatten` },
  { method: 'POST', route: '/strategies', path: () => '/api/v1/strategies' },
  { method: 'PATCH', route: '/strategies/:id', path: (id) => `/api/v1/strategies/${id ?? strategyId}` },
  { method: 'POST', route: '/webhook-tokens', path: () => '/api/v1/webhook-tokens' },
  { method: 'PATCH', route: '/webhook-tokens/:id', path: (id) => `/v1/webhook-tokens/${id ?? tokenId}` },
  { method: 'POST', route: '/webhooks/:token', path: (id) => `/api/v1/webhooks/${id ?? token}` },
];

/** Header-safe text (Node refuses control characters and code points above U+00FF in headers). */
const latin1 = (max: number) =>
  fc.array(fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(0x09)), { maxLength: max }).map((cs) => String.fromCharCode(...cs));

const symbol = fc.oneof(
  fc.constantFrom('ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', 'MNQ', 'CL1!', 'ESZ6', 'ESZ26', 'ESA9', 'XYZ1!', 'NYMEX:CL1!', 'FOO:ES1!', 'es1!', ''),
  fc.tuple(fc.constantFrom('ES', 'NQ', 'GC', 'ZB', '6E', 'Q'), fc.constantFrom('F', 'H', 'M', 'U', 'Z', 'A', '1'), fc.integer({ min: -1, max: 120 })).map(([r, m, y]) => `${r}${m}${y}`),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
);

const weirdNumber = fc.constantFrom(1e308, -1e308, 5e-324, -0, 0, -1, 1.5, 2 ** 53 + 2, Number.MAX_SAFE_INTEGER, 4999.99, 5000.25, 1e21);
const scalar = fc.oneof(fc.jsonValue({ maxDepth: 2 }), weirdNumber, symbol, fc.constantFrom('buy', 'sell', 'market', 'limit', 'stop', 'day', 'gtc', 'close', 'flatten', 'long'));
const leg = fc.oneof(scalar, fc.record({ price: scalar }, { requiredKeys: [] }), fc.record({ ticks: scalar }, { requiredKeys: [] }), fc.array(scalar, { maxLength: 3 }));
const FIELDS = [
  'symbol', 'ticker', 'side', 'action', 'qty', 'quantity', 'contracts', 'type', 'orderType', 'price', 'stopPrice', 'timeInForce',
  'takeProfit', 'stopLoss', 'clientOrderId', 'id', 'time', 'name', 'description', 'accountId', 'strategyId', 'trailAmount', '__proto__', 'constructor',
];
const shaped = fc.dictionary(fc.constantFrom(...FIELDS), fc.oneof(scalar, leg, symbol), { maxKeys: 8 });

/** Nested arrays/objects, as JSON text, up to depth `max` (bounded below 64 KiB). */
const deep = fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.boolean()).map(([depth, objects]) =>
  objects ? `${'{"a":'.repeat(Math.min(depth, 12_000))}1${'}'.repeat(Math.min(depth, 12_000))}` : `${'['.repeat(depth)}${']'.repeat(depth)}`,
);

const rawBody = fc.oneof(
  { weight: 4, arbitrary: shaped.map((d) => JSON.stringify(d)) },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: fc.constantFrom('{"qty": 1e999}', '{"qty": -0}', '{"qty": 123456789012345678901234567890}', '{"symbol":"ES","side":"buy","qty":1', '', 'null', '[]', '"x"', '{"a":1,"a":2}', '\uFEFF{}') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  { weight: 1, arbitrary: fc.integer({ min: 64 * 1024 - 64, max: 64 * 1024 + 64 }).map((n) => JSON.stringify({ name: 'x'.repeat(n) })) },
);

/** Mostly a valid value, sometimes anything: most cases get past the outer checks and reach the handlers. */
const field = <T>(valid: fc.Arbitrary<T>) => fc.oneof({ weight: 5, arbitrary: valid as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: scalar });
const validSymbol = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('ES1!', 'MES', 'NQ!', 'CME_MINI:ES1!', 'MNQ1!', 'ES') }, { weight: 1, arbitrary: symbol });
const name = fc.string({ minLength: 1, maxLength: 30 });
const ACCOUNT = '$ACCOUNT';
const bracket = fc.oneof({ weight: 4, arbitrary: fc.record({ ticks: fc.integer({ min: 4, max: 40 }) }) }, { weight: 1, arbitrary: leg });
const opt = { requiredKeys: [] as never[] };

/** Bodies shaped like each route's request, with some fields wrong. */
const SHAPED: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  '/accounts/:id/orders': fc.record(
    { symbol: field(validSymbol), side: field(fc.constantFrom('buy', 'sell')), qty: field(fc.integer({ min: 1, max: 2 })), type: field(fc.constantFrom('market')), takeProfit: bracket, stopLoss: bracket, clientOrderId: field(name) },
    { requiredKeys: ['symbol', 'side', 'qty'] },
  ),
  '/accounts/:id/flatten': fc.record({ symbol: field(validSymbol) }, opt),
  '/strategies': fc.record({ name: field(name), description: field(name), symbol: field(validSymbol), qty: field(fc.integer({ min: 1, max: 5 })), orderType: field(fc.constantFrom('market', 'limit')) }, { requiredKeys: ['name'] }),
  '/strategies/:id': fc.record({ name: field(name), description: field(name), symbol: field(validSymbol), qty: field(fc.integer({ min: 1, max: 5 })) }, opt),
  '/webhook-tokens': fc.record({ accountId: field(fc.constant(ACCOUNT)), name: field(name), strategyId: field(fc.string({ maxLength: 16 })) }, { requiredKeys: ['accountId', 'name'] }),
  '/webhook-tokens/:id': fc.record({ accountId: field(fc.constant(ACCOUNT)), name: field(name) }, opt),
  '/webhooks/:token': fc.record(
    { action: field(fc.constantFrom('buy', 'sell', 'long', 'short', 'close', 'flatten')), symbol: field(validSymbol), ticker: field(validSymbol), qty: field(fc.constantFrom(1, '1', 2, 1e308, '100000', 2 ** 53)), orderType: field(fc.constantFrom('market')), takeProfit: bracket, stopLoss: bracket, id: field(fc.uuid()), time: field(fc.date().map((d) => d.toISOString())) },
    { requiredKeys: ['action'] },
  ),
};

const idempotencyKey = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: fc.uuid() },
  { weight: 2, arbitrary: fc.oneof(fc.constantFrom('', ' ', 'k'.repeat(255), 'k'.repeat(256), '"quoted"', 'a b', 'same-key-1'), latin1(40)) },
);
const apiKey = fc.oneof(
  { weight: 12, arbitrary: fc.constant('valid') },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: latin1(80) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'abcXYZ019_'), maxLength: 60 }).map((t) => `tgk_${t}`) },
);
const contentType = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8') },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.oneof(fc.constantFrom('text/plain', 'text/plain; charset=utf-8', 'APPLICATION/JSON', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1'), latin1(30)) },
);
const pathId = fc.oneof(
  { weight: 10, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('..', '%00', '999999999999999999999', '-1', 'whk_', 'whk_x_y')).map((x) => encodeURIComponent(x) || 'x') },
);

const request = fc.constantFrom(...TARGETS).chain((target) =>
  fc.record({
    target: fc.constant(target),
    body: fc.oneof({ weight: 3, arbitrary: SHAPED[target.route]!.map((b) => JSON.stringify(b)) }, { weight: 2, arbitrary: rawBody }),
    idempotencyKey,
    apiKey,
    contentType,
    pathId,
  }),
);

/** Why an answer breaks the contract, or undefined when it keeps it. */
function violation(target: Target, r: Reply): string | undefined {
  if (r.status >= 500) return `5xx`;
  const op = documented[openApiPath(target.route)]?.[target.method.toLowerCase()];
  if (!op) return `route not in /api-docs`;
  if (!(String(r.status) in op.responses)) return `status ${r.status} not documented (${Object.keys(op.responses).join(',')})`;
  if (r.status >= 400) {
    if (!String(r.headers.get('content-type')).startsWith('application/problem+json')) return `content-type ${r.headers.get('content-type')}`;
    const code = r.json?.code as keyof typeof PROBLEMS | undefined;
    if (!code || !PROBLEMS[code]) return `code ${code} not in the catalogue`;
    if (PROBLEMS[code].status !== r.status || r.json.status !== r.status) return `code ${code} / status ${r.json.status} vs HTTP ${r.status}`;
  }
  return undefined;
}

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '1000000', WEBHOOK_RATE_LIMIT_PER_MIN: '1000000' });
  account = s.accounts[0]!;
  documented = (await http(s.url, 'GET', '/api-docs/openapi.json')).json.paths;
  const strategy = await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: 'fuzz' } });
  strategyId = strategy.json.id;
  const t = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: account, name: 'fuzz' } });
  tokenId = t.json.id;
  token = t.json.token;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('fuzzed requests against the write routes', () => {
  it('answer only documented statuses with catalogue problems, never a 5xx or a hang', async () => {
    const failures: string[] = [];
    await fc.assert(
      fc.asyncProperty(request, async (q) => {
        const headers: Record<string, string> = {};
        if (q.contentType !== undefined) headers['content-type'] = q.contentType;
        if (q.idempotencyKey !== undefined) headers['idempotency-key'] = q.idempotencyKey;
        if (q.apiKey !== undefined) headers['x-api-key'] = q.apiKey === 'valid' ? s.apiKey : q.apiKey;
        // A fresh loopback source per case: bad keys on purpose must not trip the per-IP auth limiter for the next case.
        sourceSeq += 1;
        const from = `127.${1 + (sourceSeq >> 16)}.${(sourceSeq >> 8) & 255}.${(sourceSeq & 255) || 1}`;
        const path = q.target.path(q.pathId);
        const r = await Promise.race([
          httpFrom(from, s.url, q.target.method, path, { raw: q.body.split(ACCOUNT).join(account), headers }),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer in time')), REQUEST_TIMEOUT_MS)),
        ]);
        const why = violation(q.target, r);
        if (why) failures.push(`${q.target.method} ${path} ${JSON.stringify(headers)} ${q.body.slice(0, 120)} → ${r.status} ${r.text.slice(0, 200)}: ${why}`);
        return why === undefined;
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, interruptAfterTimeLimit: 60_000 },
    ).catch((err: unknown) => {
      throw new Error(`${failures.join('\n')}\n${err instanceof Error ? err.message.split('\n').slice(0, 3).join('\n') : String(err)}`);
    });
    expect(failures).toEqual([]);
  }, 80_000);

  it('keeps serving: the process is up and a valid order still places', async () => {
    expect(s.proc.exitCode).toBeNull();
    expect((await http(s.url, 'GET', '/healthz')).status).toBe(200);
    const r = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' } });
    expect(r.status, r.text).toBe(201);
  });
});
