/**
 * The paper broker's control API, one block per row of DESIGN §11 plus the additions
 * (accounts, limits, shutdown, p-tickets, 429): each effect observed from a plain client.
 */
import { request as httpRequest } from 'node:http';
import { isLoopback } from '../../../src/sim/control.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, rest, syncedClient, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;

beforeEach(async () => {
  sim = await startSim({ priceStepMs: 0, heartbeatMs: 50, clientTimeoutMs: 10_000 });
});
afterEach(async () => {
  await sim.close();
});

const login = (name = 'ann', extra: Record<string, unknown> = {}) => rest(sim, 'POST', '/auth/accesstokenrequest', { name, password: 'pw', ...extra });

describe('POST /control/users and /control/accounts', () => {
  it('creates a user with accounts and returns numeric ids; duplicates are 409', async () => {
    const r = await ctl(sim, 'POST', '/users', { name: 'ann', password: 'pw', accounts: [{ name: 'EVAL1', balance: 50000 }, { name: 'EVAL2' }] });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ userId: expect.any(Number), name: 'ann', accounts: [{ id: expect.any(Number), name: 'EVAL1' }, { id: expect.any(Number), name: 'EVAL2' }] });
    expect((await ctl(sim, 'POST', '/users', { name: 'ann', password: 'x' })).status).toBe(409);
    expect((await ctl(sim, 'POST', '/users', { name: 'bob' })).status).toBe(400);
    const more = await ctl(sim, 'POST', '/accounts', { user: 'ann', name: 'EVAL3', balance: 25000 });
    expect(more).toEqual({ status: 201, body: { id: expect.any(Number), name: 'EVAL3' } });
    const token = (await login()).body.accessToken;
    const list = await rest(sim, 'GET', '/account/list', undefined, token);
    expect(list.body.map((a: Msg) => a.name)).toEqual(['EVAL1', 'EVAL2', 'EVAL3']);
  });

  it('refuses a bad account spec before creating anything, so the corrected retry succeeds', async () => {
    const bad = await ctl(sim, 'POST', '/users', { name: 'cat', password: 'pw', accounts: [{ name: 'C1' }, { name: 'C2', balance: -5 }] });
    expect(bad).toEqual({ status: 400, body: { error: 'balance must be a non-negative number' } });
    expect((await ctl(sim, 'POST', '/users', { name: 'cat', password: 'pw', accounts: 'C1' })).status).toBe(400);
    expect((await ctl(sim, 'GET', '/state')).body.users).toEqual([]);
    expect((await ctl(sim, 'POST', '/users', { name: 'cat', password: 'pw', accounts: [{ name: 'C1' }, { name: 'C2' }] })).status).toBe(201);
  });
});

describe('account names', () => {
  it('are unique per user: two logins may both have an account named X, one login cannot have two active ones', async () => {
    const ann = await ctl(sim, 'POST', '/users', { name: 'ann', password: 'pw', accounts: [{ name: 'SAME1' }] });
    const bob = await ctl(sim, 'POST', '/users', { name: 'bob', password: 'pw', accounts: [{ name: 'SAME1' }] });
    expect([ann.status, bob.status]).toEqual([201, 201]);
    expect(bob.body.accounts[0].id).not.toBe(ann.body.accounts[0].id);
    expect(await ctl(sim, 'POST', '/accounts', { user: 'ann', name: 'SAME1' })).toEqual({ status: 409, body: { error: 'account SAME1 exists' } });
    // Each user's name lookups (accountSpec, account/find) find its own account.
    const token = (await login('bob')).body.accessToken;
    const found = await rest(sim, 'GET', '/account/find?name=SAME1', undefined, token);
    expect(found.body.id).toBe(bob.body.accounts[0].id);
    // A reset or a reactivation checks the account's own user only.
    const reset = await ctl(sim, 'POST', `/accounts/${ann.body.accounts[0].id}/reset`, {});
    expect(reset.status).toBe(201);
  });
});

describe('DELETE /control/users?name=', () => {
  it('removes a login: its accounts vanish, its tokens and sockets stop, and its names are free again', async () => {
    const u = await userWithToken(sim, 'ann', ['A']);
    const { c } = await syncedClient(sim, u.token, u.userId);
    const removed = await ctl(sim, 'DELETE', '/users?name=ann');
    expect(removed).toEqual({ status: 200, body: { userId: u.userId, name: 'ann', accounts: u.accountIds } });
    await c.closed;
    expect((await rest(sim, 'GET', '/account/list', undefined, u.token)).status).toBe(401);
    expect((await login('ann')).body.errorText).toBeTruthy();
    expect((await ctl(sim, 'GET', '/state')).body.users).toEqual([]);
    expect((await ctl(sim, 'POST', '/users', { name: 'ann', password: 'pw', accounts: [{ name: 'ann-A' }] })).status).toBe(201);
    expect((await ctl(sim, 'DELETE', '/users?name=nobody')).status).toBe(404);
    // Its accounts cannot come back: 409, not a 500 (fuzz probe).
    for (const action of ['reset', 'reactivate']) {
      const r = await ctl(sim, 'POST', `/accounts/${u.accountIds[0]}/${action}`, {});
      expect(r, action).toEqual({ status: 409, body: { error: `account ${u.accountIds[0]} belonged to a login that was removed` } });
    }
    expect((await ctl(sim, 'POST', `/accounts/${u.accountIds[0]}/deactivate`, {})).status).toBe(200);
  });
});

describe('GET /control/state', () => {
  it('dumps users, accounts, orders, positions and fills, optionally for one user', async () => {
    const a = await userWithToken(sim, 'ann');
    await userWithToken(sim, 'bob');
    await ctl(sim, 'POST', '/prices', { symbol: 'MESZ6', price: 5000 });
    const c = await RawClient.authorized(sim.wsUrl, a.token);
    await c.request('order/placeorder', '', { accountId: a.accountIds[0], action: 'Buy', symbol: 'MESZ6', orderQty: 2, orderType: 'Market', clOrdId: 'k1' });
    const all = (await ctl(sim, 'GET', '/state')).body;
    expect(all.users.map((u: Msg) => u.name)).toEqual(['ann', 'bob']);
    const ann = (await ctl(sim, 'GET', '/state?user=ann')).body;
    expect(ann.users).toEqual([{ userId: a.userId, name: 'ann', accounts: [{ id: a.accountIds[0], name: 'ann-A1', active: true }] }]);
    expect(ann.orders).toEqual([expect.objectContaining({ symbol: 'MESZ6', ordStatus: 'Filled', filledQty: 2, avgPx: 5000, clOrdId: 'k1' })]);
    expect(ann.positions).toEqual([expect.objectContaining({ symbol: 'MESZ6', netPos: 2, netPrice: 5000 })]);
    expect(ann.fills.reduce((n: number, f: Msg) => n + f.qty, 0)).toBe(2);
    expect(ann.prices).toEqual({ MESZ6: 5000 });
    c.close();
  });
});

describe('POST /control/accounts/{id}/deactivate and /reactivate', () => {
  it('makes the account vanish (Deleted event, list, snapshot, orders refused) and brings it back', async () => {
    const u = await userWithToken(sim, 'ann', ['A', 'B']);
    const [gone, kept] = u.accountIds as [number, number];
    const { c } = await syncedClient(sim, u.token, u.userId);
    const off = await ctl(sim, 'POST', `/accounts/${gone}/deactivate`);
    expect(off.body).toMatchObject({ id: gone, active: false });
    const deleted = await c.event('account', (e, t) => e.id === gone && t === 'Deleted');
    expect(deleted.entity.name).toBe('ann-A');
    expect((await c.request('account/list', '', undefined)).d.map((a: Msg) => a.id)).toEqual([kept]);
    const snap = await c.request('user/syncrequest', '', { users: [u.userId], entityTypes: ['account', 'cashBalance'] });
    expect(snap.d.accounts.map((a: Msg) => a.id)).toEqual([kept]);
    expect(snap.d.cashBalances.map((b: Msg) => b.accountId)).toEqual([kept]);
    const refused = await c.request('order/placeorder', '', { accountId: gone, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market' });
    expect(refused.d).toEqual({ failureReason: 'UnknownReason', failureText: 'Access is denied' });
    await ctl(sim, 'POST', `/accounts/${gone}/reactivate`);
    await c.event('account', (e, t) => e.id === gone && t === 'Created');
    expect((await c.request('account/list', '', undefined)).d.map((a: Msg) => a.id)).toEqual([gone, kept]);
    c.close();
  });
});

describe('POST /control/accounts/{id}/limits', () => {
  it('sets and clears max order quantity', async () => {
    const u = await userWithToken(sim, 'ann');
    const set = await ctl(sim, 'POST', `/accounts/${u.accountIds[0]}/limits`, { maxOrderQty: 1 });
    expect(set.body).toEqual({ id: u.accountIds[0], maxOrderQty: 1, maxPosition: null, dailyLossLimit: null, trailingDrawdown: null });
    const cleared = await ctl(sim, 'POST', `/accounts/${u.accountIds[0]}/limits`, { maxOrderQty: null });
    expect(cleared.body.maxOrderQty).toBeNull();
    const refused = await ctl(sim, 'POST', `/accounts/${u.accountIds[0]}/limits`, { maxOrderQty: 3, maxPosition: 'many' });
    expect(refused.status).toBe(400);
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.accounts[0]).toMatchObject({ maxOrderQty: null, maxPosition: null });
  });
});

describe('POST /control/prices', () => {
  it('sets the last price (tick-checked) and fills resting orders it crosses', async () => {
    const u = await userWithToken(sim, 'ann');
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
    expect((await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000.1 })).status).toBe(400);
    expect((await ctl(sim, 'POST', '/prices', { symbol: 'XXZ6', price: 1 })).status).toBe(404);
    const { c } = await syncedClient(sim, u.token, u.userId);
    const r = await c.request('order/placeorder', '', { accountId: u.accountIds[0], action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Limit', price: 4995 });
    await c.event('order', (e) => e.id === r.d.orderId && e.ordStatus === 'Working');
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4994 });
    const fill = await c.event('fill', (e) => e.orderId === r.d.orderId);
    expect(fill.entity.price).toBe(4995);
    c.close();
  });
});

describe('POST /control/orders/{id}/fill', () => {
  it('fills part, then the rest; refuses orders that are not working', async () => {
    const u = await userWithToken(sim, 'ann');
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
    const { c } = await syncedClient(sim, u.token, u.userId);
    const r = await c.request('order/placeorder', '', { accountId: u.accountIds[0], action: 'Sell', symbol: 'ESZ6', orderQty: 4, orderType: 'Limit', price: 5100 });
    expect((await ctl(sim, 'POST', `/orders/${r.d.orderId}/fill`, { qty: 5 })).status).toBe(400);
    expect((await ctl(sim, 'POST', `/orders/${r.d.orderId}/fill`, { qty: 1, price: 5101 })).body).toEqual({ orderId: r.d.orderId, filledQty: 1, ordStatus: 'Working' });
    expect((await ctl(sim, 'POST', `/orders/${r.d.orderId}/fill`, {})).body.ordStatus).toBe('Filled');
    expect((await ctl(sim, 'POST', `/orders/${r.d.orderId}/fill`, {})).status).toBe(409);
    await c.event('position', (e) => e.netPos === -4);
    c.close();
  });
});

describe('POST /control/connections/drop and /connections/shutdown', () => {
  it('drops one user’s sockets abruptly (no c frame) and leaves others alone', async () => {
    const a = await userWithToken(sim, 'ann');
    const b = await userWithToken(sim, 'bob');
    const ca = await RawClient.authorized(sim.wsUrl, a.token);
    const cb = await RawClient.authorized(sim.wsUrl, b.token);
    expect((await ctl(sim, 'POST', '/connections/drop', { user: 'ann' })).body).toEqual({ dropped: 1 });
    const { code } = await ca.closed;
    expect(code).toBe(1006);
    expect(ca.frames.some((f) => f.startsWith('c'))).toBe(false);
    expect((await cb.request('account/list', '', undefined)).s).toBe(200);
    const shutdown = cb.next((m) => m.e === 'shutdown');
    expect((await ctl(sim, 'POST', '/connections/shutdown', { reasonCode: 'Maintenance' })).body).toEqual({ closed: 1 });
    const ev = await shutdown;
    expect(ev.d.reasonCode).toBe('Maintenance');
    await cb.closed;
  });

  it('drops every user’s sockets when no user is named; an unknown user is 404', async () => {
    const a = await userWithToken(sim, 'ann');
    const b = await userWithToken(sim, 'bob');
    const sockets = await Promise.all([RawClient.authorized(sim.wsUrl, a.token), RawClient.authorized(sim.wsUrl, b.token)]);
    expect((await ctl(sim, 'POST', '/connections/drop', { user: 'nobody' })).status).toBe(404);
    expect((await ctl(sim, 'POST', '/connections/drop', {})).body).toEqual({ dropped: 2 });
    expect((await Promise.all(sockets.map((s) => s.closed))).map((c) => c.code)).toEqual([1006, 1006]);
  });
});

describe('POST /control/auth/expire', () => {
  it('expires the user’s tokens now', async () => {
    const a = await userWithToken(sim, 'ann');
    const b = await userWithToken(sim, 'bob');
    expect((await ctl(sim, 'POST', '/auth/expire', { user: 'ann' })).body).toEqual({ expired: 1 });
    expect((await rest(sim, 'GET', '/account/list', undefined, a.token)).status).toBe(401);
    expect((await rest(sim, 'GET', '/account/list', undefined, b.token)).status).toBe(200);
    expect((await ctl(sim, 'POST', '/auth/expire', {})).body).toEqual({ expired: 1 });
    expect((await rest(sim, 'GET', '/account/list', undefined, b.token)).status).toBe(401);
  });
});

describe('POST /control/faults', () => {
  it('rejectAuth answers accesstokenrequest with errorText until cleared', async () => {
    await userWithToken(sim, 'ann');
    await ctl(sim, 'POST', '/faults', { rejectAuth: true });
    expect((await login()).body.errorText).toMatch(/Incorrect username or password/);
    await ctl(sim, 'DELETE', '/faults');
    expect((await login()).body.accessToken).toEqual(expect.any(String));
  });

  it('pTicketSeconds answers the next login with a p-ticket; the resend with it works after p-time', async () => {
    await userWithToken(sim, 'ann');
    await ctl(sim, 'POST', '/faults', { pTicketSeconds: 1 });
    const first = (await login()).body;
    expect(first).toEqual({ 'p-ticket': expect.any(String), 'p-time': 1, 'p-captcha': false });
    const early = (await login('ann', { 'p-ticket': first['p-ticket'] })).body;
    expect(early['p-ticket']).toBe(first['p-ticket']);
    await new Promise((r) => setTimeout(r, 1050));
    expect((await login('ann', { 'p-ticket': first['p-ticket'] })).body.accessToken).toEqual(expect.any(String));
  });

  it('p-tickets on order requests answer s:200 with the ticket and do not place the order', async () => {
    const u = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, u.token);
    await ctl(sim, 'POST', '/faults', { pTicketSeconds: 3, pTicketTarget: 'orders', pTicketCaptcha: true });
    const body = { accountId: u.accountIds[0], action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market' };
    const r = await c.request('order/placeorder', '', body);
    expect(r).toMatchObject({ s: 200, d: { 'p-time': 3, 'p-captcha': true } });
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.orders).toEqual([]);
    const again = await c.request('order/placeorder', '', { ...body, 'p-ticket': r.d['p-ticket'] });
    expect(again.d['p-captcha']).toBe(true);
    c.close();
  });

  it('rateLimit429 answers 429 with an empty body on REST and {s:429,i} on WS', async () => {
    const u = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, u.token);
    await ctl(sim, 'POST', '/faults', { rateLimit429: true });
    const res = await fetch(`${sim.restUrl}/account/list`, { headers: { authorization: `Bearer ${u.token}` } });
    expect(res.status).toBe(429);
    expect(await res.text()).toBe('');
    const r = await c.request('account/list', '', undefined);
    expect(r).toEqual({ s: 429, i: r.i });
    c.close();
  });

  it('silent stops every frame (no h, no responses) without closing the socket; clearing restores it', async () => {
    const u = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, u.token);
    await c.nextFrame((f) => f === 'h');
    await ctl(sim, 'POST', '/faults', { silent: true });
    const count = c.frames.length;
    c.send('account/list\n99\n\n');
    await new Promise((r) => setTimeout(r, 300));
    expect(c.frames.length).toBeLessThanOrEqual(count + 1); // at most an `h` already in flight
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    await ctl(sim, 'POST', '/faults', { silent: false });
    expect((await c.request('account/list', '', undefined)).s).toBe(200);
    expect(c.messages.some((m) => m.i === 99)).toBe(false);
    c.close();
  });

  it('refuses a latency beyond ten minutes instead of overflowing the timer', async () => {
    expect((await ctl(sim, 'POST', '/faults', { latencyMs: 1e12 })).status).toBe(400);
    expect((await ctl(sim, 'GET', '/faults')).body.latencyMs).toBe(0);
  });

  it('latencyMs delays responses and keeps their order', async () => {
    const u = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, u.token);
    await ctl(sim, 'POST', '/faults', { latencyMs: 150 });
    const started = Date.now();
    const answers = await Promise.all([1, 2, 3].map(() => c.request('account/list', '', undefined)));
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    const order = c.messages.filter((m) => answers.some((a) => a.i === m.i)).map((m) => m.i);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    c.close();
  });
});

describe('loopback only', () => {
  // Tests send traffic to loopback addresses only, so the refusal of other peers is checked on the
  // predicate the server applies to every control request's remote address.
  it('refuses what a web page makes a browser send (Origin, Sec-Fetch-Site) and a DNS-rebound Host, and changes nothing', async () => {
    const send = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const url = new URL(`${sim.controlUrl}/faults`);
        const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'text/plain', ...headers } }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ latencyMs: 5000 }));
      });
    for (const headers of [{ origin: 'http://evil.example' } as Record<string, string>, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, { host: 'evil.example:8091' }, { host: 'rebind.attacker.test' }]) {
      const res = await send(headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
    }
    expect((await ctl(sim, 'GET', '/faults')).body).toMatchObject({ latencyMs: 0 });
    // Its own clients are served: no Origin, a loopback Host by address or name.
    for (const host of [`127.0.0.1:${new URL(sim.controlUrl).port}`, 'localhost', '[::1]:1']) expect((await send({ host })).status, host).toBe(200);
  });

  it('serves loopback peers and refuses every other peer address', async () => {
    for (const a of ['127.0.0.1', '127.0.0.2', '::1', '::ffff:127.0.0.1']) expect(isLoopback(a), a).toBe(true);
    for (const a of ['10.0.0.5', '192.168.1.2', '::ffff:10.0.0.5', 'fe80::1', '0.0.0.0', '', undefined]) expect(isLoopback(a), String(a)).toBe(false);
    const open = await startSim({ priceStepMs: 0 });
    try {
      const local = await fetch(`${open.controlUrl}/state`);
      expect(local.status).toBe(200);
    } finally {
      await open.close();
    }
  });
});
