/**
 * Revocation takes effect on the next request although the server remembers verified keys
 * and tokens in memory: the CLI, another process, revokes a key the server has just served,
 * and the very next request with it is 401. The same for a webhook token deleted through the
 * API (the server's own write), a key revoked from the web app (session + CSRF) and the
 * session itself once signed out, and a key revoked while requests with it keep arriving.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../support/http.js';
import { cli, createKey, startServe, type Served } from '../../support/processes.js';

let s: Served;

beforeAll(async () => {
  s = await startServe();
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('revocation with cached credentials', () => {
  it('a key revoked by the CLI while the server runs is refused on the next request', async () => {
    const k = await createKey(s, 'demo', 'read');
    for (let i = 0; i < 3; i++) expect((await http(s.url, 'GET', '/api/v1/me', { key: k.key })).status).toBe(200);
    await cli(s, ['keys', 'revoke', k.id]);
    // No wait, no retry: the first request after the CLI returned.
    expect((await http(s.url, 'GET', '/api/v1/me', { key: k.key })).status).toBe(401);
    // Other keys keep working (the whole cache was dropped, not poisoned).
    expect((await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey })).status).toBe(200);
  });

  it('a key revoked from the web app is refused on the next request; a signed-out session at once', async () => {
    const signed = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } });
    expect(signed.status, signed.text).toBe(200);
    const cookie = /^(tg_session=[^;]+);/.exec(signed.headers.get('set-cookie') ?? '')![1]!;
    const session = { cookie, 'x-csrf-token': signed.json.csrfToken as string };
    const created = await http(s.url, 'POST', '/api/v1/api-keys', { headers: session, body: { name: 'web-revoke', scopes: ['read'] } });
    expect(created.status, created.text).toBe(201);
    // Served (and so remembered) before the revocation.
    for (let i = 0; i < 3; i++) expect((await http(s.url, 'GET', '/api/v1/me', { key: created.json.key as string })).status).toBe(200);
    expect((await http(s.url, 'DELETE', `/api/v1/api-keys/${created.json.id as string}`, { headers: session })).status).toBe(204);
    expect((await http(s.url, 'GET', '/api/v1/me', { key: created.json.key as string })).status).toBe(401);
    // Its guard narrowing is gone with it: 404, like any use after delete.
    const guards = `/api/v1/api-keys/${created.json.id as string}/guards`;
    expect((await http(s.url, 'GET', guards, { headers: session })).json).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect((await http(s.url, 'PUT', guards, { headers: session, body: { maxOrderQty: 1 } })).json).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { cookie } })).status).toBe(200);
    expect((await http(s.url, 'DELETE', '/api/v1/session', { headers: session })).status).toBe(204);
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { cookie } })).status).toBe(401);
    expect((await http(s.url, 'GET', '/api/v1/accounts', { headers: { cookie } })).status).toBe(401);
  });

  it('a key revoked mid-stream stops exactly at the revocation', async () => {
    const k = await createKey(s, 'demo', 'read');
    const statuses: number[] = [];
    let revoked = false;
    const revoking = cli(s, ['keys', 'revoke', k.id]).then(() => (revoked = true));
    // Paced so the key stays within its 120 requests per minute while the CLI runs.
    while (!revoked) {
      statuses.push((await http(s.url, 'GET', '/api/v1/me', { key: k.key })).status);
      await new Promise((r) => setTimeout(r, 40));
    }
    await revoking;
    statuses.push((await http(s.url, 'GET', '/api/v1/me', { key: k.key })).status);
    // 200s, then only 401s: once refused, never served again.
    expect(statuses.filter((c) => c !== 200 && c !== 401), JSON.stringify(statuses)).toEqual([]);
    const first401 = statuses.indexOf(401);
    expect(first401).toBeGreaterThanOrEqual(0);
    expect(statuses.slice(first401).every((c) => c === 401)).toBe(true);
    expect(statuses.slice(0, first401).every((c) => c === 200)).toBe(true);
  });

  it('a webhook token deleted through the API stops on the next alert', async () => {
    const created = await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: s.accounts[0], name: 'revoke-me' } });
    expect(created.status).toBe(201);
    const path = `/api/v1/webhooks/${created.json.token as string}`;
    const alert = (id: string) => ({ action: 'buy', symbol: 'ES1!', qty: 1, type: 'limit', price: 1000, id });
    expect((await http(s.url, 'POST', path, { body: alert('a1') })).status).toBe(201);
    expect((await http(s.url, 'DELETE', `/api/v1/webhook-tokens/${created.json.id as string}`, { key: s.apiKey })).status).toBe(204);
    expect((await http(s.url, 'POST', path, { body: alert('a2') })).status).toBe(404);
  });
});
