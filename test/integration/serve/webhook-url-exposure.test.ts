/**
 * A webhook URL trades on its own (with only its token's narrowing of the guards), so it must not
 * become a way around an API key's limits: over real HTTP against `serve --paper`,
 * - a read-only key reads a token without its URL (it could otherwise buy with it);
 * - a key that narrows the guards cannot create, change or rotate tokens, nor read a URL, so it
 *   cannot trade past its narrowing through one; it may still list and delete them;
 * - a trade-only key's guard answers do not show the account's P&L and positions;
 * - an id far longer than any real one answers 404, never reaching the store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, startServe, type Served } from '../../support/processes.js';
import { http } from '../../support/http.js';

let s: Served;
let account: string;
let session: Record<string, string>;
let tokenId: string;

beforeAll(async () => {
  s = await startServe();
  account = s.accounts[0]!;
  const signed = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } });
  const cookie = /^(tg_session=[^;]+);/.exec(signed.headers.get('set-cookie') ?? '')![1]!;
  session = { cookie, 'x-csrf-token': signed.json.csrfToken as string };
  const created = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: account, name: 'unnarrowed' } });
  expect(created.status).toBe(201);
  expect(created.headers.get('cache-control')).toBe('no-store');
  tokenId = created.json.id as string;
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

describe('webhook URLs and the credentials that may hold them', () => {
  it('shows the URL to an unnarrowed trade key and to the web session, never to a read-only key', async () => {
    const full = await http(s.url, 'GET', `/api/v1/webhook-tokens/${tokenId}`, { key: s.apiKey });
    expect(full.status).toBe(200);
    expect(full.json.url).toMatch(/\/api\/v1\/webhooks\/whk_/);
    expect(full.headers.get('cache-control')).toBe('no-store');
    const web = await http(s.url, 'GET', `/api/v1/webhook-tokens/${tokenId}`, { headers: { cookie: session.cookie! } });
    expect(web.json.url).toBe(full.json.url);

    const reader = await createKey(s, 'demo', 'read', 'reader');
    const read = await http(s.url, 'GET', `/api/v1/webhook-tokens/${tokenId}`, { key: reader.key });
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ id: tokenId, accountId: account });
    expect(read.json.url).toBeUndefined();
    expect(read.text).not.toContain('whk_');
  });

  it('refuses a key that narrows the guards every way to a URL that would trade past its narrowing', async () => {
    const narrowed = await createKey(s, 'demo', 'read,trade', 'mes-only');
    const put = await http(s.url, 'PUT', `/api/v1/api-keys/${narrowed.id}/guards`, { headers: session, body: { maxOrderQty: 1, allowedProducts: ['MES'] } });
    expect(put.status).toBe(200);
    // Its own orders are narrowed…
    const order = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: narrowed.key, body: { symbol: 'ES1!', side: 'buy', qty: 2 } });
    expect(order.status).toBe(403);
    expect(order.json.code).toBe('RISK_GUARD');
    // …and no token route hands it an unnarrowed URL.
    const create = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: narrowed.key, body: { accountId: account, name: 'bypass' } });
    expect(create.status).toBe(403);
    expect(create.json).toMatchObject({ code: 'INSUFFICIENT_SCOPE' });
    expect(create.json.detail).toMatch(/narrows the risk guards/);
    const patch = await http(s.url, 'PATCH', `/api/v1/webhook-tokens/${tokenId}`, { key: narrowed.key, body: { guards: null } });
    expect(patch.status).toBe(403);
    const rotate = await http(s.url, 'POST', `/api/v1/webhook-tokens/${tokenId}/rotate`, { key: narrowed.key });
    expect(rotate.status).toBe(403);
    const read = await http(s.url, 'GET', `/api/v1/webhook-tokens/${tokenId}`, { key: narrowed.key });
    expect(read.status).toBe(200);
    expect(read.json.url).toBeUndefined();
    // Nothing changed, and the token count did not grow.
    const list = await http(s.url, 'GET', '/api/v1/webhook-tokens', { key: narrowed.key });
    expect(list.status).toBe(200);
    expect((list.json.data as { name: string }[]).map((t) => t.name)).toEqual(['unnarrowed']);
    // Unknown tokens stay 404 for it, as for anyone; deleting (which only takes power away) is allowed.
    expect((await http(s.url, 'POST', '/api/v1/webhook-tokens/nosuchtoken/rotate', { key: narrowed.key })).status).toBe(404);
    const spare = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: account, name: 'spare' } });
    expect((await http(s.url, 'DELETE', `/api/v1/webhook-tokens/${spare.json.id as string}`, { key: narrowed.key })).status).toBe(204);

    // With its narrowing removed in the web app, the same key manages tokens again.
    await http(s.url, 'PUT', `/api/v1/api-keys/${narrowed.id}/guards`, { headers: session, body: {} });
    const again = await http(s.url, 'POST', `/api/v1/webhook-tokens/${tokenId}/rotate`, { key: narrowed.key });
    expect(again.status).toBe(200);
    expect(again.json.url).toMatch(/whk_/);
  });

  it('refuses a key that narrows the guards whatever would loosen what bounds trading: guards, unlock, strategies, connections', async () => {
    const narrowed = await createKey(s, 'demo', 'read,trade', 'narrow-admin');
    expect((await http(s.url, 'PUT', `/api/v1/api-keys/${narrowed.id}/guards`, { headers: session, body: { maxOrderQty: 1 } })).status).toBe(200);
    // The owner's kill switch, guards and a strategy a webhook URL trades with.
    expect((await http(s.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key: s.apiKey, body: { maxOrderQty: 2 } })).status).toBe(200);
    expect((await http(s.url, 'POST', `/api/v1/accounts/${account}/lock`, { key: s.apiKey, body: { flatten: false } })).status).toBe(200);
    const strategy = await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: 'guarded', symbol: 'MES1!', qty: 1, stopLoss: { ticks: 10 } } });
    expect(strategy.status).toBe(201);
    const strategyId = strategy.json.id as string;
    const connections = await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey });
    const connectionId = (connections.json.data as { id: string }[])[0]!.id;

    for (const [method, path, body] of [
      ['PUT', `/api/v1/accounts/${account}/guards`, {}],
      ['POST', `/api/v1/accounts/${account}/unlock`, undefined],
      ['POST', '/api/v1/strategies', { name: 'wide', symbol: 'ES1!', qty: 50 }],
      ['PATCH', `/api/v1/strategies/${strategyId}`, { qty: 50, stopLoss: null }],
      ['DELETE', `/api/v1/strategies/${strategyId}`, undefined],
      ['POST', '/api/v1/connections', {}],
      ['PATCH', `/api/v1/connections/${connectionId}`, { name: 'mine now' }],
      ['DELETE', `/api/v1/connections/${connectionId}`, undefined],
      ['POST', '/api/v1/connections/tradovate', { environment: 'demo', username: 'u', password: 'p' }],
    ] as const) {
      const res = await http(s.url, method, path, { key: narrowed.key, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.json, `${method} ${path}`).toMatchObject({ code: 'INSUFFICIENT_SCOPE' });
      expect(res.json.detail).toMatch(/narrows the risk guards/);
    }
    // Nothing moved: still locked with the owner's guards, the strategy as it was, the connection kept.
    const guards = await http(s.url, 'GET', `/api/v1/accounts/${account}/guards`, { key: s.apiKey });
    expect(guards.json).toMatchObject({ guards: { maxOrderQty: 2 }, lock: { guard: 'kill_switch' } });
    const kept = await http(s.url, 'GET', `/api/v1/strategies/${strategyId}`, { key: s.apiKey });
    expect(kept.json).toMatchObject({ qty: 1, stopLoss: { ticks: 10 } });
    const after = await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey });
    expect(after.json.data).toEqual(connections.json.data);
    // Another user's or an unknown id stays 404 for it, as for anyone.
    expect((await http(s.url, 'PATCH', '/api/v1/strategies/nosuchstrategy', { key: narrowed.key, body: { qty: 2 } })).status).toBe(404);
    // What keeps the account safe stays allowed: the kill switch.
    expect((await http(s.url, 'POST', `/api/v1/accounts/${account}/lock`, { key: narrowed.key, body: { flatten: false } })).status).toBe(200);
    // The owner lifts it and clears the guards again for the tests after.
    expect((await http(s.url, 'POST', `/api/v1/accounts/${account}/unlock`, { key: s.apiKey })).status).toBe(200);
    expect((await http(s.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key: s.apiKey, body: {} })).status).toBe(200);
  });

  it("does not show a trade-only key the account's P&L and positions in guard and lock answers", async () => {
    const trader = await createKey(s, 'demo', 'trade', 'trade-only');
    for (const [method, path, body] of [
      ['PUT', `/api/v1/accounts/${account}/guards`, {}],
      ['POST', `/api/v1/accounts/${account}/lock`, { flatten: false }],
      ['POST', `/api/v1/accounts/${account}/unlock`, undefined],
    ] as const) {
      const res = await http(s.url, method, path, { key: trader.key, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${path}`).toBe(200);
      expect(res.json.live, `${method} ${path}`).toBeNull();
    }
    // The same answers carry it for a key that may read.
    const res = await http(s.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key: s.apiKey, body: {} });
    expect(res.json.live).toMatchObject({ positions: expect.any(Array) });
  });

  it('answers 404 for an id longer than any real one, on every kind of id', async () => {
    const id = 'A'.repeat(5000);
    for (const [method, path] of [
      ['GET', `/api/v1/strategies/${id}`],
      ['PATCH', `/api/v1/webhook-tokens/${id}`],
      ['POST', `/api/v1/webhook-tokens/${id}/rotate`],
      ['DELETE', `/api/v1/connections/${id}`],
      ['POST', `/api/v1/webhooks/${id}`],
    ] as const) {
      const res = await http(s.url, method, path, { key: s.apiKey, ...(method === 'PATCH' ? { body: {} } : {}) });
      expect(res.status, `${method} ${path.slice(0, 40)}`).toBe(404);
      expect(res.json.code).toBe('NOT_FOUND');
    }
    expect((await http(s.url, 'GET', '/healthz')).status).toBe(200);
  });
});
