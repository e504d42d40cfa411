/**
 * Scope × endpoint matrix, generated from the route table: every API route × {no key,
 * bad key, revoked key, read-only, trade-only, another user's key} → the expected status,
 * over real HTTP against `serve --paper`. Both path spellings are exercised.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteDef } from '../../../src/http/route-types.js';
import type { RouteDeps } from '../../../src/http/routes/common.js';
import { buildRoutes } from '../../../src/http/routes/index.js';
import { cli, createKey, startServe, type Served } from '../../support/processes.js';
import { http, httpFrom } from '../../support/http.js';

// The table only: building it reads no dependency.
const ROUTES: RouteDef<any, any>[] = buildRoutes({} as RouteDeps).filter((r) => r.scope === 'read' || r.scope === 'trade');

type Cred = 'none' | 'bad' | 'revoked' | 'read' | 'trade' | 'other';
const CREDS: Cred[] = ['none', 'bad', 'revoked', 'read', 'trade', 'other'];

let s: Served;
const keys: Partial<Record<Cred, string>> = {};
let account: string;

/** A request that passes auth and scope gives this status for the owner (no side effects beyond fixtures). */
const OWNER: Record<string, { status: number; body?: unknown }> = {
  // dryRun: a valid order that passes every check and sends nothing (path gets ?dryRun=true).
  'POST /accounts/:id/orders': { status: 200, body: { symbol: 'ES1!', side: 'buy', qty: 1 } },
  'DELETE /accounts/:id/orders/:orderId': { status: 404 },
  'GET /accounts/:id/working-orders': { status: 200 },
  'GET /accounts/:id/orders': { status: 200 },
  'GET /accounts': { status: 200 },
  'GET /accounts/:id': { status: 200 },
  'GET /accounts/:id/positions': { status: 200 },
  'POST /accounts/:id/flatten': { status: 400, body: { symbol: 'NOPE' } },
  'GET /me': { status: 200 },
  'GET /connections': { status: 200 },
  'POST /connections': { status: 400, body: { accounts: [] } },
  'PATCH /connections/:id': { status: 200, body: { name: 'Paper (embedded)' } },
  'POST /connections/:id/reconnect': { status: 409 },
  'DELETE /connections/:id': { status: 204 },
  'GET /strategies': { status: 200 },
  'POST /strategies': { status: 400, body: {} },
  'GET /strategies/:id': { status: 200 },
  'PATCH /strategies/:id': { status: 200, body: {} },
  'DELETE /strategies/:id': { status: 204 },
  'GET /webhook-tokens': { status: 200 },
  'POST /webhook-tokens': { status: 400, body: {} },
  'GET /webhook-tokens/:id': { status: 200 },
  'PATCH /webhook-tokens/:id': { status: 200, body: {} },
  'DELETE /webhook-tokens/:id': { status: 204 },
  'GET /webhook-tokens/:id/alerts': { status: 200 },
  'POST /webhook-tokens/:id/rotate': { status: 200 },
  'POST /connections/tradovate': { status: 400, body: {} },
  'GET /accounts/:id/guards': { status: 200 },
  'PUT /accounts/:id/guards': { status: 200, body: {} },
  // Locks without flattening (no cell after it places an order; the unlock cells that follow lift it).
  'POST /accounts/:id/lock': { status: 200, body: { flatten: false, reason: 'scope matrix' } },
  'POST /accounts/:id/unlock': { status: 200 },
};

/** Fresh owned objects per cell, so DELETE cells cannot disturb each other. */
async function pathFor(route: RouteDef<any, any>, n: number): Promise<string> {
  const prefix = n % 2 === 0 ? '/api/v1' : '/v1';
  let path = route.path.replace(':orderId', '999999999');
  if (path.startsWith('/accounts/:id')) path = path.replace(':id', account);
  if (path.startsWith('/strategies/:id')) {
    const r = await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: `fixture-${n}` } });
    path = path.replace(':id', r.json.id);
  }
  if (path.startsWith('/webhook-tokens/:id')) {
    const r = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: account, name: `fixture-${n}` } });
    path = path.replace(':id', r.json.id);
  }
  if (path.startsWith('/connections/:id')) {
    // DELETE gets a connection of its own; the others change nothing (the same name, 409 for a CONNECTED one).
    const list = (await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data as { id: string; accountIds: string[] }[];
    const id = route.method === 'DELETE' ? (await http(s.url, 'POST', '/api/v1/connections', { key: s.apiKey, body: {} })).json.id : list.find((c) => c.accountIds.includes(account))!.id;
    path = path.replace(':id', id);
  }
  if (route.method === 'POST' && route.path === '/accounts/:id/orders') path += '?dryRun=true';
  return prefix + path;
}

function expected(route: RouteDef<any, any>, cred: Cred): number {
  const own = OWNER[`${route.method} ${route.path}`]!;
  if (cred === 'none' || cred === 'bad' || cred === 'revoked') return 401;
  if ((cred === 'read' || cred === 'trade') && cred !== route.scope) return 403;
  if (cred === 'other' && route.path.includes(':id')) return 404;
  return own.status;
}

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  account = s.accounts[0]!;
  keys.read = (await createKey(s, 'demo', 'read')).key;
  keys.trade = (await createKey(s, 'demo', 'trade')).key;
  const revoked = await createKey(s, 'demo', 'read,trade');
  await cli(s, ['keys', 'revoke', revoked.id]);
  keys.revoked = revoked.key;
  keys.bad = 'tgk_AAAAAAAAAAAA_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  await cli(s, ['users', 'add', 'mallory']);
  keys.other = (await createKey(s, 'mallory', 'read,trade')).key;
}, 90_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('scope × endpoint matrix', () => {
  it('covers every read/trade route of the table', () => {
    expect(Object.keys(OWNER).sort()).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort());
  });

  it('answers the expected status in every cell', async () => {
    const failures: string[] = [];
    let n = 0;
    for (const [i, route] of ROUTES.entries()) {
      // One source address per route: at most 5 auth failures each, under the per-IP limit.
      const from = `127.0.0.${10 + i}`;
      for (const cred of CREDS) {
        n += 1;
        const path = await pathFor(route, n);
        const own = OWNER[`${route.method} ${route.path}`]!;
        const r = await httpFrom(from, s.url, route.method, path, {
          ...(keys[cred] !== undefined ? { key: keys[cred] } : {}),
          ...(own.body !== undefined ? { body: own.body } : {}),
        });
        const want = expected(route, cred);
        if (r.status !== want) failures.push(`${route.method} ${path} as ${cred}: ${r.status} (want ${want}) ${r.text.slice(0, 160)}`);
        if (want === 401 && r.json?.code !== 'UNAUTHENTICATED') failures.push(`${route.method} ${path} as ${cred}: code ${r.json?.code}`);
        if (want === 403 && (r.json?.code !== 'INSUFFICIENT_SCOPE' || r.json?.requiredScope !== route.scope)) {
          failures.push(`${route.method} ${path} as ${cred}: ${r.text.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  }, 60_000);

  it('covers the health stream too: read opens it (also for another user, who sees only their own), trade-only 403, bad keys 401', async () => {
    const open = async (cred: Cred) => {
      const ctl = new AbortController();
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (keys[cred] !== undefined) headers['x-api-key'] = keys[cred]!;
      const res = await fetch(`${s.url}/api/v1/connection-health/stream`, { headers, signal: ctl.signal });
      if (res.status !== 200) return { status: res.status, first: await res.text() };
      // What the stream sends on open (retry, then snapshots) arrives at once; an absence needs a bound.
      let first = '';
      const timer = setTimeout(() => ctl.abort(), 500);
      try {
        for (const reader = res.body!.getReader(); ; ) {
          const { value, done } = await reader.read();
          if (done) break;
          first += new TextDecoder().decode(value);
        }
      } catch {
        // aborted by the timer
      } finally {
        clearTimeout(timer);
        ctl.abort();
      }
      return { status: res.status, first };
    };
    const got: Record<string, number> = {};
    for (const cred of CREDS) got[cred] = (await open(cred)).status;
    expect(got).toEqual({ none: 401, bad: 401, revoked: 401, read: 200, trade: 403, other: 200 });
    // Another user's stream opens but names none of the demo user's connections.
    const demoConnection = (await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data[0].id as string;
    expect((await open('read')).first).toContain(demoConnection);
    expect((await open('other')).first).toMatch(/^retry: 3000/);
    expect((await open('other')).first).not.toContain(demoConnection);
  });

  it('gives one identical 401 body for missing, unknown and revoked keys (no oracle)', async () => {
    const bodies = await Promise.all(
      (['none', 'bad', 'revoked'] as const).map(async (c) => {
        const r = await http(s.url, 'GET', '/api/v1/me', keys[c] !== undefined ? { key: keys[c] } : {});
        return { ...r.json, requestId: undefined };
      }),
    );
    expect(bodies[1]).toEqual(bodies[0]);
    expect(bodies[2]).toEqual(bodies[0]);
  });
});
