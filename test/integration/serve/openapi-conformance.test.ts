/**
 * The published OpenAPI document against the answers of a real `serve --paper`: a tour calls every
 * operation (with an API key, a web session or a webhook URL, as the operation wants), with
 * valid requests and typical mistakes. Every answer's status must be one the operation lists,
 * its Content-Type one the status documents, and its JSON body valid against the documented
 * schema (JSON Schema 2020-12, checked by ajv). What an API fuzzer or a generated client relies
 * on: the document describes what the service sends, not what it was meant to send.
 */
import { get, request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { eventually } from '../../support/http.js';
import { control } from '../../support/sim.js';
import { startServe, type Served } from '../../support/processes.js';

type Json = Record<string, any>;

let s: Served;
let doc: Json;
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
const validators = new Map<string, ValidateFunction>();
/** `METHOD /template` → statuses answered. */
const exercised = new Map<string, Set<number>>();
const failures: string[] = [];

const pointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** The operation a request path names: API routes under /api/v1 or /v1, service pages at the root. */
function operationOf(method: string, path: string): { template: string; op: Json } | undefined {
  const bare = path.split('?')[0]!;
  const candidates = [bare, bare.replace(/^\/(api\/)?v1(?=\/)/, '')];
  for (const [template, ops] of Object.entries(doc.paths as Json)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    const op = (ops as Json)[method.toLowerCase()];
    if (op && candidates.some((c) => re.test(c))) return { template, op };
  }
  return undefined;
}

interface Answer {
  status: number;
  headers: Headers;
  json: any;
}

/** Sends one request and checks its answer against the document; failures are collected, not thrown. */
async function call(method: string, path: string, opts: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers['x-api-key'] = opts.key;
  let body: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  // fetch sends the URL's own Host whatever is asked: a request naming another goes by node:http.
  const res = headers['host'] !== undefined ? await viaHttp(method, path, headers) : await fetch(`${s.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const streaming = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  // A stream never ends: its first bytes are enough, its body is not a document.
  const text = streaming ? '' : await res.text();
  if (streaming) await res.body?.cancel();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  const where = `${method} ${path} → ${res.status}`;
  const found = operationOf(method, path);
  if (!found) {
    failures.push(`${where}: no operation in the document`);
    return { status: res.status, headers: res.headers, json };
  }
  const name = `${method} ${found.template}`;
  if (!exercised.has(name)) exercised.set(name, new Set());
  exercised.get(name)!.add(res.status);
  const documented = found.op.responses[String(res.status)] as Json | undefined;
  if (!documented) {
    failures.push(`${where}: status not listed by ${name} (${text.slice(0, 120)})`);
    return { status: res.status, headers: res.headers, json };
  }
  const content = (documented.content ?? {}) as Json;
  const contentType = res.headers.get('content-type') ?? '';
  if (res.status === 204 || (text === '' && !streaming)) {
    if (Object.keys(content).length > 0 && res.status !== 204) failures.push(`${where}: empty body, the document promises ${Object.keys(content)}`);
    return { status: res.status, headers: res.headers, json };
  }
  const media = Object.keys(content).find((m) => contentType.split(';')[0]!.trim() === m);
  if (!media) {
    failures.push(`${where}: Content-Type ${contentType || '(none)'}, documented ${Object.keys(content).join(', ') || 'no body'}`);
    return { status: res.status, headers: res.headers, json };
  }
  // A problem's code is one the status's description names: a client switching on `code` learns
  // the codes from the document (fuzz probe: 403 ACCOUNT_INACTIVE on reads listed only INSUFFICIENT_SCOPE).
  if (res.status >= 400 && typeof (json as { code?: unknown } | undefined)?.code === 'string' && !new RegExp(`\\b${(json as { code: string }).code}\\b`).test(String(documented.description))) {
    failures.push(`${where}: code ${(json as { code: string }).code} not named by the ${res.status} response of ${name} ("${documented.description}")`);
  }
  if (media.includes('json')) {
    const ref = `openapi#/paths/${pointer(found.template)}/${method.toLowerCase()}/responses/${res.status}/content/${pointer(media)}/schema`;
    let validate = validators.get(ref);
    if (!validate) validators.set(ref, (validate = ajv.compile({ $ref: ref })));
    if (!validate(json)) failures.push(`${where}: body does not match the schema: ${ajv.errorsText(validate.errors)} in ${text.slice(0, 200)}`);
  }
  return { status: res.status, headers: res.headers, json };
}

/** A body-less request sent with exactly `headers` (Host included), its answer as a fetch Response. */
function viaHttp(method: string, path: string, headers: Record<string, string>): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request(`${s.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const out = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') out.set(name, value);
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode!, headers: out }));
      });
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  doc = (await (await fetch(`${s.url}/api-docs/openapi.json`)).json()) as Json;
  ajv.addSchema(doc, 'openapi');
  const es = resolveSymbol('ES', new Date());
  if (!es.ok) throw new Error(es.reason);
  await control(s, 'POST', '/prices', { symbol: es.contract, price: 5000 });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('the OpenAPI document describes the answers', () => {
  it('the docs page and the OpenAPI document come compressed when the client accepts it (same bytes once decoded), plain otherwise', async () => {
    const fetchRaw = (path: string, accept: string | undefined) =>
      new Promise<{ encoding: string | undefined; vary: string | undefined; body: Buffer }>((resolve, reject) => {
        get(`${s.url}${path}`, { headers: accept === undefined ? {} : { 'accept-encoding': accept } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ encoding: res.headers['content-encoding'], vary: res.headers['vary'], body: Buffer.concat(chunks) }));
        }).on('error', reject);
      });
    // /openapi.json (where API tools look first) is the same document.
    expect((await fetchRaw('/openapi.json', undefined)).body.equals((await fetchRaw('/api-docs/openapi.json', undefined)).body)).toBe(true);
    for (const path of ['/api-docs/openapi.json', '/api-docs']) {
      const plain = await fetchRaw(path, undefined);
      expect(plain.encoding).toBeUndefined();
      expect(plain.vary).toBe('Accept-Encoding');
      const gz = await fetchRaw(path, 'gzip');
      expect(gz.encoding).toBe('gzip');
      expect(gz.body.length).toBeLessThan(plain.body.length / 4);
      expect(gunzipSync(gz.body).equals(plain.body)).toBe(true);
      const br = await fetchRaw(path, 'gzip, br');
      expect(br.encoding).toBe('br');
      expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);
      expect((await fetchRaw(path, 'gzip;q=0')).encoding).toBeUndefined();
    }
  });

  it('every operation, called with valid requests and common mistakes, answers a documented status, type and body', async () => {
    const key = s.apiKey;
    const [acc, other] = s.accounts as [string, string];
    const A = '/api/v1';

    // Service pages.
    for (const p of ['/healthz', '/readyz', '/api-docs', '/api-docs/openapi.json', '/openapi.json']) await call('GET', p);
    // What the pipeline answers on any route, before the route's own work (fuzz probe: statuses no
    // operation listed): a body over the limit on a route that takes none, a Host naming another server.
    expect((await call('POST', `${A}/accounts/${acc}/unlock`, { key, raw: `{"a":"${'x'.repeat(70_000)}"}`, headers: { 'content-type': 'application/json' } })).status).toBe(413);
    expect((await call('GET', `${A}/me`, { key, headers: { host: 'elsewhere.example' } })).status).toBe(421);
    expect((await call('GET', '/healthz', { headers: { host: 'elsewhere.example' } })).status).toBe(421);

    // Accounts, orders, positions.
    await call('GET', `${A}/accounts`, { key });
    await call('GET', `${A}/accounts`, { key: 'tgk_not_a_key' });
    await call('GET', `/v1/accounts/${acc}`, { key });
    await call('GET', `${A}/accounts/99999999`, { key });
    await call('GET', `${A}/me`, { key });
    const resting = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900, takeProfit: { ticks: 20 }, stopLoss: { ticks: 10 } };
    const placed = await call('POST', `${A}/accounts/${acc}/orders`, { key, body: resting, headers: { 'idempotency-key': 'conf-1' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: resting, headers: { 'idempotency-key': 'conf-1' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: { ...resting, qty: 2 }, headers: { 'idempotency-key': 'conf-1' } });
    await call('POST', `${A}/accounts/${acc}/orders?dryRun=true`, { key, body: resting });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', takeProfit: { ticks: 20 }, stopLoss: { ticks: 10 } } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: { symbol: 'NOPE1!', side: 'buy', qty: 1, type: 'market' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'stop', stopPrice: 1 } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, raw: '{"symbol":', headers: { 'content-type': 'application/json' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, raw: '<order/>', headers: { 'content-type': 'text/xml' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: resting, headers: { 'idempotency-key': 'has space' } });
    await call('GET', `${A}/accounts/${acc}/orders`, { key });
    await call('GET', `${A}/accounts/${acc}/orders?limit=1`, { key });
    await call('GET', `${A}/accounts/${acc}/orders?limit=abc`, { key });
    await call('GET', `${A}/accounts/${acc}/working-orders`, { key });
    await call('GET', `${A}/accounts/${acc}/positions`, { key });
    const orderId = placed.json?.orderId as string;
    expect(orderId, 'the resting bracket was placed').toMatch(/^\d+$/);
    await call('DELETE', `${A}/accounts/${acc}/orders/${orderId}`, { key });
    await call('DELETE', `${A}/accounts/${acc}/orders/${orderId}`, { key });
    await call('DELETE', `${A}/accounts/${acc}/orders/123456789`, { key });
    await call('POST', `${A}/accounts/${acc}/flatten`, { key, body: { symbol: 'ES1!' } });
    await call('POST', `${A}/accounts/${acc}/flatten`, { key });
    await call('POST', `${A}/accounts/${acc}/flatten`, { key, body: { symbol: 'NQ1!' } });

    // Guards and the kill switch.
    await call('GET', `${A}/accounts/${acc}/guards`, { key });
    await call('PUT', `${A}/accounts/${acc}/guards`, { key, body: { maxOrderQty: 5 } });
    await call('PUT', `${A}/accounts/${acc}/guards`, { key, body: { maxOrderQty: -5 } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: { ...resting, qty: 6 } });
    await call('POST', `${A}/accounts/${acc}/lock`, { key, body: { reason: 'conformance' } });
    await call('POST', `${A}/accounts/${acc}/orders`, { key, body: resting });
    await call('POST', `${A}/accounts/${acc}/unlock`, { key });
    await call('POST', `${A}/accounts/${acc}/unlock`, { key });

    // Strategies and webhook tokens, then alerts on them.
    const strategy = await call('POST', `${A}/strategies`, { key, body: { name: 'conf', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 8 }, stopLoss: { ticks: 4 } } });
    await call('POST', `${A}/strategies`, { key, body: { name: 'conf', qty: 0 } });
    await call('GET', `${A}/strategies`, { key });
    await call('GET', `${A}/strategies/${strategy.json?.id}`, { key });
    await call('GET', `${A}/strategies/stg_missing`, { key });
    await call('PATCH', `${A}/strategies/${strategy.json?.id}`, { key, body: { qty: 2 } });
    const token = await call('POST', `${A}/webhook-tokens`, { key, body: { accountId: acc, name: 'conf', strategyId: strategy.json?.id } });
    await call('POST', `${A}/webhook-tokens`, { key, body: { accountId: '42', name: 'nowhere' } });
    const tokenId = token.json?.id as string;
    await call('GET', `${A}/webhook-tokens`, { key });
    await call('GET', `${A}/webhook-tokens/${tokenId}`, { key });
    await call('PATCH', `${A}/webhook-tokens/${tokenId}`, { key, body: { accountId: other } });
    const hook = `${A}/webhooks/${token.json?.token}`;
    const alert = { action: 'buy', ticker: 'ES1!', contracts: '1', orderType: 'limit', price: 4900, id: 'conf-alert', comment: 'unknown field' };
    await call('POST', hook, { raw: JSON.stringify(alert), headers: { 'content-type': 'text/plain' } });
    await call('POST', hook, { raw: JSON.stringify(alert), headers: { 'content-type': 'text/plain' } });
    await call('POST', hook, { body: { ...alert, contracts: '3' } });
    await call('POST', hook, { body: { action: 'buy', ticker: 'ES1!', trailingStop: 3 } });
    await call('POST', hook, { body: { action: 'close' } });
    await call('POST', `${A}/webhooks/whk_unknown_token`, { body: alert });
    await call('GET', `${A}/webhook-tokens/${tokenId}/alerts`, { key });
    await call('GET', `${A}/webhook-tokens/${tokenId}/alerts?limit=0`, { key });
    await call('POST', `${A}/webhook-tokens/${tokenId}/rotate`, { key });
    await call('DELETE', `${A}/webhook-tokens/${tokenId}`, { key });
    await call('DELETE', `${A}/webhook-tokens/${tokenId}`, { key });
    await call('DELETE', `${A}/strategies/${strategy.json?.id}`, { key });

    // Connections.
    const connections = await call('GET', `${A}/connections`, { key });
    const connectionId = connections.json?.data?.[0]?.id as string;
    await call('PATCH', `${A}/connections/${connectionId}`, { key, body: { name: 'renamed' } });
    await call('POST', `${A}/connections/${connectionId}/reconnect`, { key });
    const paper = await call('POST', `${A}/connections`, { key, body: { name: 'second', accounts: [{ name: 'CONF1' }] } });
    await call('POST', `${A}/connections`, { key, body: { name: 'bad', accounts: [{ name: 'has space' }] } });
    await call('POST', `${A}/connections/tradovate`, { key, body: { name: 'live', environment: 'nowhere' } });
    await call('DELETE', `${A}/connections/${paper.json?.id}`, { key });
    await call('DELETE', `${A}/connections/con_missing`, { key });
    await call('GET', `${A}/connection-health/stream`, { key });

    // An account the broker stopped reporting (an evaluation breached or reset): reads, cancel and trading refuse it.
    await control(s, 'POST', `/accounts/${other}/deactivate`);
    await eventually(async () => ((await (await fetch(`${s.url}${A}/accounts/${other}`, { headers: { "x-api-key": key } })).json()) as Json).active === false, "the account inactive");
    for (const path of ['positions', 'working-orders', 'orders']) await call('GET', `${A}/accounts/${other}/${path}`, { key });
    await call('DELETE', `${A}/accounts/${other}/orders/123456789`, { key });
    await call('POST', `${A}/accounts/${other}/orders`, { key, body: resting });
    await call('POST', `${A}/accounts/${other}/flatten`, { key });
    await control(s, 'POST', `/accounts/${other}/reactivate`);

    // The web session's routes (cookie, CSRF header on writes); an API key is refused there.
    await call('GET', `${A}/api-keys`, { key });
    const origin = { origin: s.url };
    await call('POST', `${A}/session`, { body: { name: s.login.name, password: 'wrong password' }, headers: origin });
    const session = await call('POST', `${A}/session`, { body: { name: s.login.name, password: s.login.password }, headers: origin });
    const web = { ...origin, cookie: (session.headers.get('set-cookie') ?? '').split(';')[0]!, 'x-csrf-token': session.json?.csrfToken as string };
    await call('GET', `${A}/session`, { headers: web });
    // A session's write without its CSRF token, on a session route and on an API route.
    const noCsrf = { origin: web.origin, cookie: web.cookie };
    await call('POST', `${A}/api-keys`, { body: { name: 'conf', scopes: ['read'] }, headers: noCsrf });
    await call('POST', `${A}/strategies`, { body: { name: 'csrf', symbol: 'ES1!', qty: 1 }, headers: noCsrf });
    await call('POST', `${A}/accounts/${acc}/orders`, { body: resting, headers: noCsrf });
    await call('GET', `${A}/api-keys`, { headers: web });
    const newKey = await call('POST', `${A}/api-keys`, { body: { name: 'conf', scopes: ['read'] }, headers: web });
    await call('POST', `${A}/api-keys`, { body: { name: 'conf', scopes: ['everything'] }, headers: web });
    await call('GET', `${A}/api-keys/${newKey.json?.id}/guards`, { headers: web });
    await call('PUT', `${A}/api-keys/${newKey.json?.id}/guards`, { body: { maxOrderQty: 2 }, headers: web });
    await call('DELETE', `${A}/api-keys/${newKey.json?.id}`, { headers: web });
    await call('GET', `${A}/api-keys/${newKey.json?.id}/guards`, { headers: web });
    await call('POST', `${A}/me/password`, { body: { currentPassword: 'not it', newPassword: 'a long new password' }, headers: web });
    const signedOut = await call('DELETE', `${A}/session`, { headers: web });
    expect(signedOut.status).toBe(204);
    await call('GET', `${A}/session`, { headers: web });
    const again = await call('POST', `${A}/session`, { body: { name: s.login.name, password: s.login.password }, headers: origin });
    const web2 = { ...origin, cookie: (again.headers.get('set-cookie') ?? '').split(';')[0]!, 'x-csrf-token': again.json?.csrfToken as string };
    await call('POST', `${A}/me/password`, { body: { currentPassword: s.login.password, newPassword: 'a long new password' }, headers: web2 });

    expect(failures).toEqual([]);
    // The tour reaches every operation, and a success answer of each but the two that need a real
    // Tradovate login or a FAILED connection.
    const operations = Object.entries(doc.paths as Json).flatMap(([template, ops]) => Object.keys(ops as Json).map((m) => `${m.toUpperCase()} ${template}`));
    expect(operations.filter((o) => !exercised.has(o))).toEqual([]);
    const needsABroker = ['POST /connections/tradovate', 'POST /connections/{id}/reconnect'];
    const noSuccess = operations.filter((o) => ![...exercised.get(o)!].some((st) => st < 300));
    expect(noSuccess.sort()).toEqual(needsABroker.sort());
  }, 60_000);
});
