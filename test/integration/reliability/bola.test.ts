/**
 * BOLA (DESIGN §3 "objects the caller does not own are 404, never 403"; OWASP API1): every
 * object route of the route table (every path with a `:param`), called by user B with user
 * A's ids, answers 404 NOT_FOUND with exactly the body a truly unknown id gets, leaks none
 * of A's data and changes none of A's objects. Over real HTTP against `serve --paper`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteDef } from '../../../src/http/route-types.js';
import type { RouteDeps } from '../../../src/http/routes/common.js';
import { buildRoutes } from '../../../src/http/routes/index.js';
import { createKey, cli, startServe, type Served } from '../../support/processes.js';
import { eventually, http, type Reply } from '../../support/http.js';
import { simState } from '../../support/sim.js';

// The table only: building it reads no dependency. Session-only routes refuse API keys before
// any lookup (403 SESSION_REQUIRED); their BOLA cells run with sessions in web-session-security.
const OBJECT_ROUTES: RouteDef<any, any>[] = buildRoutes({} as RouteDeps).filter((r) => r.path.includes(':') && r.scope !== 'session');

/** Bodies that pass validation, so the ownership check is what answers. */
const BODIES: Record<string, unknown> = {
  'POST /accounts/:id/orders': { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 },
  'POST /accounts/:id/flatten': {},
  'PATCH /strategies/:id': { name: 'hijacked' },
  'PATCH /webhook-tokens/:id': { name: 'hijacked' },
  'PATCH /connections/:id': { name: 'hijacked' },
  'POST /webhooks/:token': { action: 'buy', symbol: 'ES1!', qty: 1 },
  'PUT /accounts/:id/guards': { maxOrderQty: 1 },
  'POST /accounts/:id/lock': { flatten: true },
};

interface Owned {
  key: string;
  account: string;
  strategy: string;
  tokenId: string;
  token: string;
  orderId: string;
  connection: string;
}

let s: Served;
let victim: Owned;
let b: Owned;

/** Same length and alphabet as `id`, but not an id anyone holds. */
function unknownLike(id: string): string {
  const tail = id.slice(-4);
  const swap = (c: string) => (/\d/.test(c) ? String((Number(c) + 5) % 10) : c === 'Z' ? 'Y' : 'Z');
  return id.slice(0, -4) + [...tail].map(swap).join('');
}

/** Creates a strategy, a webhook token and a resting order for one user. */
async function populate(key: string, account: string, tag: string): Promise<Owned> {
  const strategy = await http(s.url, 'POST', '/api/v1/strategies', { key, body: { name: `${tag}-strategy`, description: `${tag} secret plan` } });
  expect(strategy.status, strategy.text).toBe(201);
  const token = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key, body: { accountId: account, name: `${tag}-token` } });
  expect(token.status, token.text).toBe(201);
  const order = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 } });
  expect(order.status, order.text).toBe(201);
  const connections = (await http(s.url, 'GET', '/api/v1/connections', { key })).json.data as { id: string; accountIds: string[] }[];
  const connection = connections.find((c) => c.accountIds.includes(account))!.id;
  return { key, account, strategy: strategy.json.id, tokenId: token.json.id, token: token.json.token, orderId: order.json.orderId, connection };
}

/** A's ids in a route path (`victim`), unknown ids of the same shape (`unknown`), or B's own ids (`own`). */
function pathFor(route: RouteDef<any, any>, ids: 'victim' | 'unknown' | 'own', prefix: string): string {
  const a = ids === 'own' ? b : victim;
  const pick = (id: string) => (ids === 'unknown' ? unknownLike(id) : id);
  return (
    prefix +
    route.path.replace(/:(\w+)/g, (_, param: string) => {
      if (param === 'orderId') return pick(a.orderId);
      if (param === 'token') {
        // A well-formed token naming A's token id with a secret that is not A's.
        const forged = `whk_${victim.tokenId}_${b.token.split('_')[2]}`;
        if (ids === 'own') return b.token;
        return ids === 'victim' ? forged : `whk_${unknownLike(victim.tokenId)}_${b.token.split('_')[2]}`;
      }
      if (param !== 'id') throw new Error(`route ${route.method} ${route.path}: no BOLA fixture for :${param}`);
      if (route.path.startsWith('/accounts/')) return pick(a.account);
      if (route.path.startsWith('/strategies/')) return pick(a.strategy);
      if (route.path.startsWith('/webhook-tokens/')) return pick(a.tokenId);
      if (route.path.startsWith('/connections/')) return pick(a.connection);
      throw new Error(`route ${route.method} ${route.path}: no BOLA fixture for :id`);
    })
  );
}

const stripVolatile = (r: Reply) => ({ ...(r.json ?? {}), requestId: undefined, instance: undefined });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  await cli(s, ['users', 'add', 'bob']);
  const bobKey = (await createKey(s, 'bob', 'read,trade')).key;
  const conn = await http(s.url, 'POST', '/api/v1/connections', { key: bobKey, body: { name: 'Bob paper', accounts: [{ name: 'B1' }] } });
  expect(conn.status, conn.text).toBe(201);
  const bobAccount = await eventually(async () => {
    const list = (await http(s.url, 'GET', '/api/v1/connections', { key: bobKey })).json.data as any[];
    return list.find((c) => c.status === 'CONNECTED' && c.accountIds.length === 1)?.accountIds[0] as string | undefined;
  }, "bob's connection");
  victim = await populate(s.apiKey, s.accounts[0]!, 'alice');
  b = await populate(bobKey, bobAccount, 'bob');
}, 90_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('BOLA: user B with user A’s ids', () => {
  it('has a fixture for every object route of the table, and B’s own ids work on every GET', async () => {
    expect(OBJECT_ROUTES.length).toBeGreaterThanOrEqual(12);
    for (const route of OBJECT_ROUTES) expect(() => pathFor(route, 'victim', '')).not.toThrow();
    // The control: the fixtures name real objects, so a 404 below is the ownership check.
    for (const route of OBJECT_ROUTES.filter((r) => r.method === 'GET')) {
      const r = await http(s.url, 'GET', pathFor(route, 'own', '/api/v1'), { key: b.key });
      expect(r.status, `${route.path}: ${r.text}`).toBe(200);
    }
  });

  it('answers 404 NOT_FOUND with the unknown-id body on every object route, under both prefixes', async () => {
    const before = (await simState(s)).orders.length;
    const failures: string[] = [];
    for (const route of OBJECT_ROUTES) {
      for (const prefix of ['/api/v1', '/v1']) {
        const body = BODIES[`${route.method} ${route.path}`];
        const call = (path: string) => http(s.url, route.method, path, { key: b.key, ...(body !== undefined ? { body } : {}) });
        const foreign = await call(pathFor(route, 'victim', prefix));
        const unknown = await call(pathFor(route, 'unknown', prefix));
        const where = `${route.method} ${prefix}${route.path}`;
        if (foreign.status !== 404) failures.push(`${where}: ${foreign.status} ${foreign.text.slice(0, 200)}`);
        if (foreign.json?.code !== 'NOT_FOUND') failures.push(`${where}: code ${foreign.json?.code}`);
        if (!String(foreign.headers.get('content-type')).startsWith('application/problem+json')) failures.push(`${where}: content-type ${foreign.headers.get('content-type')}`);
        if (JSON.stringify(stripVolatile(foreign)) !== JSON.stringify(stripVolatile(unknown))) {
          failures.push(`${where}: foreign ${foreign.text} ≠ unknown ${unknown.text}`);
        }
        for (const secret of [victim.account, victim.strategy, victim.tokenId, victim.orderId, victim.connection, 'alice']) {
          if (foreign.text.includes(secret)) failures.push(`${where}: body names ${secret}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect((await simState(s)).orders.length, 'nothing reached the broker').toBe(before);
  }, 60_000);

  it('answers 404 for A’s order id under B’s own account (the order id alone is no capability)', async () => {
    const r = await http(s.url, 'DELETE', `/api/v1/accounts/${b.account}/orders/${victim.orderId}`, { key: b.key });
    expect(r.status, r.text).toBe(404);
    expect(r.json.code).toBe('NOT_FOUND');
  });

  it('leaves every A object as it was', async () => {
    const guards = await http(s.url, 'GET', `/api/v1/accounts/${victim.account}/guards`, { key: victim.key });
    expect(guards.json).toMatchObject({ guards: { maxOrderQty: null }, lock: null });
    const strategy = await http(s.url, 'GET', `/api/v1/strategies/${victim.strategy}`, { key: victim.key });
    expect(strategy.status).toBe(200);
    expect(strategy.json.name).toBe('alice-strategy');
    const token = await http(s.url, 'GET', `/api/v1/webhook-tokens/${victim.tokenId}`, { key: victim.key });
    expect(token.status).toBe(200);
    expect(token.json.url).toContain(victim.token);
    const connections = await http(s.url, 'GET', '/api/v1/connections', { key: victim.key });
    expect((connections.json.data as any[]).map((c) => [c.id, c.status])).toEqual([[victim.connection, 'CONNECTED']]);
    expect(token.json).toMatchObject({ name: 'alice-token', accountId: victim.account });
    const working = await http(s.url, 'GET', `/api/v1/accounts/${victim.account}/working-orders`, { key: victim.key });
    expect((working.json.data as any[]).map((o) => o.orderId)).toContain(victim.orderId);
    const positions = await http(s.url, 'GET', `/api/v1/accounts/${victim.account}/positions`, { key: victim.key });
    expect((positions.json.data as any[]).filter((p) => p.netQty !== 0)).toEqual([]);
  });

  it('lists none of A’s objects to B', async () => {
    for (const path of ['/api/v1/accounts', '/api/v1/connections', '/api/v1/strategies', '/api/v1/webhook-tokens', '/api/v1/me']) {
      const r = await http(s.url, 'GET', path, { key: b.key });
      expect(r.status, `${path}: ${r.text}`).toBe(200);
      for (const secret of [victim.account, ...s.accounts, victim.strategy, victim.tokenId, 'alice-', 'demo']) expect(r.text, `${path} names ${secret}`).not.toContain(secret);
    }
  });

  it('binds B’s alert to B’s account even when the payload names A’s account', async () => {
    const r = await http(s.url, 'POST', `/api/v1/webhooks/${b.token}`, { body: { action: 'buy', symbol: 'ES1!', qty: 1, account: victim.account, accountId: victim.account } });
    expect(r.status, r.text).toBe(201);
    expect(r.json.accountId).toBe(b.account);
    expect(r.json.order.accountId).toBe(b.account);
  });
});
