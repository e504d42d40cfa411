/**
 * Paper broker wire protocol, driven by a plain `ws` client: framing, heartbeats, authorize
 * timeout, 4-line parsing, REST auth (errors in HTTP 200, renewal, 401 on expiry).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, rest, userWithToken } from '../../support/sim.js';

let sim: SimHandle;
let now = Date.parse('2026-11-20T15:00:00Z');

beforeEach(async () => {
  now = Date.parse('2026-11-20T15:00:00Z');
  sim = await startSim({ heartbeatMs: 50, clientTimeoutMs: 400, authorizeTimeoutMs: 300, priceStepMs: 0, clock: () => now });
});
afterEach(async () => {
  await sim.close();
});

describe('access tokens over REST', () => {
  it('answers a good login with accessToken, mdAccessToken, expirationTime and userId', async () => {
    const { userId } = await userWithToken(sim, 'ann');
    const r = await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ userId, name: 'ann', userStatus: 'Active', hasLive: false });
    expect(typeof r.body.accessToken).toBe('string');
    expect(typeof r.body.mdAccessToken).toBe('string');
    expect(Date.parse(r.body.expirationTime)).toBe(now + 80 * 60_000);
  });

  it('reports bad credentials as HTTP 200 with errorText', async () => {
    await userWithToken(sim, 'ann');
    const r = await rest(sim, 'POST', '/auth/accessTokenRequest', { name: 'ann', password: 'wrong' });
    expect(r.status).toBe(200);
    expect(r.body.errorText).toMatch(/Incorrect username or password/);
    expect(r.body.accessToken).toBeUndefined();
  });

  it('reads entities with a Bearer token and refuses requests without one (case-insensitive paths)', async () => {
    const { token, accountIds } = await userWithToken(sim, 'ann', ['A', 'B']);
    const list = await rest(sim, 'GET', '/Account/List', undefined, token);
    expect(list.status).toBe(200);
    expect(list.body.map((a: { id: number }) => a.id)).toEqual(accountIds);
    expect((await rest(sim, 'GET', '/account/list')).status).toBe(401);
    expect((await rest(sim, 'GET', '/account/list', undefined, 'not-a-token')).status).toBe(401);
  });

  it('expires tokens after their lifetime (401), and renewal before expiry extends the session', async () => {
    const { token } = await userWithToken(sim, 'ann');
    now += 70 * 60_000;
    const renewed = await rest(sim, 'GET', '/auth/renewaccesstoken', undefined, token);
    expect(renewed.status).toBe(200);
    expect(renewed.body.accessToken).not.toBe(token);
    expect(Date.parse(renewed.body.expirationTime)).toBe(now + 80 * 60_000);
    now += 20 * 60_000; // past the original expiry, inside the renewed one
    expect((await rest(sim, 'GET', '/account/list', undefined, renewed.body.accessToken)).status).toBe(200);
    now += 61 * 60_000;
    expect((await rest(sim, 'GET', '/account/list', undefined, renewed.body.accessToken)).status).toBe(401);
    expect((await rest(sim, 'GET', '/auth/renewaccesstoken', undefined, renewed.body.accessToken)).status).toBe(401);
  });

  it('keeps at most two sessions per user: a third login revokes the oldest', async () => {
    const { token: first } = await userWithToken(sim, 'ann');
    const second = (await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' })).body.accessToken;
    const third = (await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' })).body.accessToken;
    expect((await rest(sim, 'GET', '/account/list', undefined, first)).status).toBe(401);
    expect((await rest(sim, 'GET', '/account/list', undefined, second)).status).toBe(200);
    expect((await rest(sim, 'GET', '/account/list', undefined, third)).status).toBe(200);
  });

  it('finds contracts of known roots and answers 404 for unknown ones', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const es = await rest(sim, 'GET', '/contract/find?name=ESZ6', undefined, token);
    expect(es.body).toMatchObject({ name: 'ESZ6' });
    const again = await rest(sim, 'GET', '/contract/find?name=esz6', undefined, token);
    expect(again.body.id).toBe(es.body.id);
    expect((await rest(sim, 'GET', `/contract/item?id=${es.body.id}`, undefined, token)).body.name).toBe('ESZ6');
    expect((await rest(sim, 'GET', '/contract/find?name=E6H9', undefined, token)).status).toBe(404);
    const product = await rest(sim, 'GET', '/product/find?name=MES', undefined, token);
    expect(product.body).toMatchObject({ name: 'MES', tickSize: 0.25, valuePerPoint: 5 });
  });
});

describe('WebSocket framing', () => {
  it('sends o on open, answers authorize with a[{s:200,i}], and h at the configured cadence', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.connect(sim.wsUrl.replace('/v1/websocket', '/V1/WebSocket'));
    expect(c.frames[0]).toBe('o');
    c.send(`authorize\n7\n\n${token}`);
    await c.nextFrame((f) => f.startsWith('a'));
    expect(c.frames).toContain('a[{"s":200,"i":7}]');
    c.send('[]');
    await c.nextFrame((f) => f === 'h');
    await c.nextFrame((f) => f === 'h');
    c.close();
  });

  it('sends h every 2.5 s by default, never faster (the gap is bounded from below only: a slow machine is late, not early)', async () => {
    const standard = await startSim({ priceStepMs: 0 });
    try {
      // Authorized, so the default 5 s authorize timeout cannot close the socket mid-wait.
      const c = await RawClient.authorized(standard.wsUrl, (await userWithToken(standard, 'ann')).token);
      const at: number[] = [];
      c.ws.on('message', (data) => data.toString() === 'h' && at.push(performance.now()));
      await c.nextFrame((f) => f === 'h', 4000);
      await c.nextFrame((f) => f === 'h', 4000);
      expect(at).toHaveLength(2);
      expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(2400);
      c.close();
    } finally {
      await standard.close();
    }
  }, 15_000);

  it('answers a bad token on authorize with 401 "Invalid access token"', async () => {
    const c = await RawClient.connect(sim.wsUrl);
    const r = await c.request('authorize', '', 'bogus');
    expect(r).toEqual({ s: 401, i: 1, d: 'Invalid access token' });
    c.close();
  });

  it('closes a socket that does not authorize in time with a c[code,"reason"] frame', async () => {
    const c = await RawClient.connect(sim.wsUrl);
    const frame = await c.nextFrame((f) => f.startsWith('c'), 2000);
    expect(frame).toMatch(/^c\[\d+,"Authorization timeout"\]$/);
    await c.closed;
  });

  it('drops a client that sends no [] heartbeats, and keeps one that does', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const silent = await RawClient.authorized(sim.wsUrl, token);
    const chatty = await RawClient.authorized(sim.wsUrl, token);
    const beat = setInterval(() => chatty.send('[]'), 100);
    const frame = await silent.nextFrame((f) => f.startsWith('c'), 3000);
    expect(frame).toBe('c[3000,"Client heartbeat timeout"]');
    await silent.closed;
    const r = await chatty.request('account/list', '', undefined);
    expect(r.s).toBe(200);
    clearInterval(beat);
    chatty.close();
  });

  it('reads a request with a missing empty query line the way Tradovate does: 400 naming the field', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, token);
    c.send('order/placeorder\n5\n{"accountId":1,"action":"Buy","symbol":"ESZ6","orderQty":1,"orderType":"Market"}');
    const r = await c.next((m) => m.i === 5);
    expect(r.s).toBe(400);
    expect(r.d).toMatch(/^No usable value for/);
    c.close();
  });

  it('rejects single-quoted JSON with 400, unknown endpoints with 404, requests before authorize with 401', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.connect(sim.wsUrl);
    expect((await c.request('account/list', '', undefined)).s).toBe(401);
    await c.request('authorize', '', token);
    const bad = await c.request('order/placeorder', '', "{'accountId':1}");
    expect(bad.s).toBe(400);
    const missing = await c.request('quote/subscribe', '', undefined);
    expect(missing).toEqual({ s: 404, i: missing.i, d: '"Not found: quote/subscribe"' });
    c.send('account/list\nnot-a-number\n\n');
    const noId = await c.next((m) => m.s === 400 && m.i === undefined);
    expect(noId.d).toBe('Invalid request id');
    c.close();
  });

  it('answers 401 on an authorized socket once the token has expired, until re-authorized with a fresh token', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, token);
    expect((await c.request('account/list', '', undefined)).s).toBe(200);
    expect((await ctl(sim, 'POST', '/auth/expire', { user: 'ann' })).body.expired).toBe(1);
    expect((await c.request('account/list', '', undefined)).s).toBe(401);
    expect((await c.request('auth/renewaccesstoken', '', undefined)).s).toBe(401);
    const fresh = (await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' })).body.accessToken;
    expect((await c.request('authorize', '', fresh)).s).toBe(200);
    expect((await c.request('account/list', '', undefined)).s).toBe(200);
    c.close();
  });

  it('streams md quotes for a subscribed contract: the current one at once, then each price change', async () => {
    const { token } = await userWithToken(sim, 'ann');
    await ctl(sim, 'POST', '/prices', { symbol: 'NQZ6', price: 18000 });
    const c = await RawClient.authorized(sim.wsUrl, token);
    const first = c.next((m) => m.e === 'md');
    expect((await c.request('md/subscribeQuote', '', { symbol: 'NQZ6' })).s).toBe(200);
    const quote = (await first).d.quotes[0];
    expect(quote.entries.Trade.price).toBe(18000);
    const moved = c.next((m) => m.e === 'md' && m.d.quotes[0].entries.Bid.price === 18001.25);
    await ctl(sim, 'POST', '/prices', { symbol: 'NQZ6', price: 18001.25 });
    expect((await moved).d.quotes[0].contractId).toBe(quote.contractId);
    expect((await c.request('md/subscribeQuote', '', { symbol: 'XXZ6' })).s).toBe(400);
    c.close();
  });

  it('renews over the socket and keeps the session alive past the first expiry', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, token);
    now += 75 * 60_000;
    const renewed = await c.request('auth/renewaccesstoken', '', undefined);
    expect(renewed.s).toBe(200);
    expect(typeof renewed.d.accessToken).toBe('string');
    now += 10 * 60_000;
    expect((await c.request('account/list', '', undefined)).s).toBe(200);
    c.close();
  });
});
