/**
 * Connection lifecycle of an actor against the real paper broker: drops and resync, token
 * expiry, bad credentials (bounded auth attempts), account deactivation and reactivation.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { restClient } from '../../support/sim.js';
import { startActorHarness, SYMBOL, type ActorHarness } from '../../support/actor.js';
import type { AccountsEvent } from '../../../src/actors/protocol.js';

let h: ActorHarness | undefined;
let proxy: Server | undefined;

afterEach(async () => {
  await h?.close();
  h = undefined;
  await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
  proxy = undefined;
});

test('a dropped connection goes RECONNECTING then CONNECTED, and orders placed meanwhile appear after resync', async () => {
  h = await startActorHarness({ tuning: { backoffBaseMs: 600, backoffMaxMs: 1200 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  const other = await restClient(h.sim, h.user.name, h.user.password);

  await h.control('POST', '/connections/drop', { user: h.user.name });
  const down = await h.nextStatus('RECONNECTING');
  expect(down.reason).toBe('disconnect');
  const stale = await h.callError({ type: 'working-orders', accountId: account });
  expect(stale.code).toBe('BROKER_UNAVAILABLE');
  expect((await h.callError({ type: 'positions', accountId: account })).code).toBe('BROKER_UNAVAILABLE');
  const placed = await other('order/placeorder', {
    accountId: Number(account), action: 'Buy', symbol: SYMBOL, orderQty: 1, orderType: 'Limit', price: 4950, isAutomated: true,
  });
  expect(placed.orderId).toBeTypeOf('number');

  const up = await h.nextStatus('CONNECTED');
  expect(up.reason).toBe('reconnect');
  const working = await h.call({ type: 'working-orders', accountId: account });
  expect(working.map((o) => o.orderId)).toEqual([String(placed.orderId)]);
  expect(working[0]).toMatchObject({ price: 4950, role: 'single', requestedSymbol: null });
});

test('silence from the broker trips the watchdog: RECONNECTING, then CONNECTED once frames flow again', async () => {
  h = await startActorHarness({ tuning: { silenceMs: 700, backoffBaseMs: 200, backoffMaxMs: 400 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  await h.control('POST', '/faults', { silent: true });
  const down = await h.nextStatus('RECONNECTING');
  expect(down.detail).toContain('silence');
  await h.control('DELETE', '/faults');
  await h.nextStatus('CONNECTED');
});

test('expired tokens: AUTH_EXPIRED, then a fresh login and CONNECTED', async () => {
  h = await startActorHarness({ tuning: { accountPollMs: 150 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  await h.control('POST', '/auth/expire', { user: h.user.name });
  const expired = await h.nextStatus('AUTH_EXPIRED');
  expect(expired.reason).toBe('auth-expired');
  const back = await h.nextStatus('CONNECTED');
  expect(back.reason).toBe('reconnect');
  expect(await h.call({ type: 'working-orders', accountId: String(h.user.accounts[0]!.id) })).toEqual([]);
});

test('an order the broker refuses with 401 (its token died: the session was ended elsewhere) is sent again once the connection has logged in again, not lost (fault probe: the next alert answered 503 and was never placed)', async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  await h.control('POST', '/auth/expire', { user: h.user.name });
  // Three at once: the first meets the 401, the others arrive while the connection logs in again
  // (re-probe: those answered 503 and were lost); each is placed once.
  const order = (clOrdId: string) => ({ type: 'place-order' as const, accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy' as const, qty: 1, orderType: 'limit' as const, price: 4990, timeInForce: 'day' as const, clOrdId });
  // The broker answers slowly, so the new login takes a while: orders sent once AUTH_EXPIRED is seen arrive inside it.
  await h.control('POST', '/faults', { latencyMs: 300 });
  const first = h.call(order('after-401'));
  await h.nextStatus('AUTH_EXPIRED');
  const placed = await Promise.all([first, h.call(order('during-1')), h.call(order('during-2'))]);
  await h.control('DELETE', '/faults');
  expect(placed.map((p) => p.order.status)).toEqual(['working', 'working', 'working']);
  expect(h.events.filter((e) => e.type === 'status').map((e) => (e as { status: string }).status)).toEqual(['CONNECTING', 'CONNECTED', 'AUTH_EXPIRED', 'CONNECTED']);
  const orders = (await h.control('GET', '/state')).orders as { clOrdId: string | null }[];
  for (const id of ['after-401', 'during-1', 'during-2']) expect(orders.filter((o) => o.clOrdId === id), id).toHaveLength(1);
});

test('bad credentials: FAILED with fatal-error, and the broker sees a bounded number of login attempts', async () => {
  let attempts = 0;
  let target = '';
  // A counting proxy in front of the broker's REST API.
  proxy = createServer((req, res) => {
    if (req.url?.toLowerCase().includes('accesstokenrequest')) attempts++;
    const up = httpRequest(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', () => r()));
  const port = (proxy.address() as AddressInfo).port;
  h = await startActorHarness({ password: 'wrong-password', restUrl: (sim) => { target = sim.url; return `http://127.0.0.1:${port}/v1`; } });
  h.actor.start();
  const failed = await h.nextStatus('FAILED');
  expect(failed.reason).toBe('fatal-error');
  expect(failed.detail).toContain('Incorrect username or password');
  await h.actor.conn.done();
  expect(attempts).toBe(1);
  expect(JSON.stringify(h.events)).not.toContain('wrong-password');
  // FAILED has given up: its own code, not the transient BROKER_UNAVAILABLE that invites retries.
  expect((await h.callError({ type: 'working-orders', accountId: '1' })).code).toBe('CONNECTION_FAILED');
});

test('a broker whose login endpoint cannot be reached: CONNECTING says why (not "starting" for ever), once per reason', async () => {
  // A port nothing listens on: every login attempt fails to connect.
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  h = await startActorHarness({ restUrl: () => `http://127.0.0.1:${port}/v1`, tuning: { backoffBaseMs: 20, backoffMaxMs: 50 } });
  h.actor.start();
  await expect.poll(() => h!.events.filter((e) => e.type === 'status' && e.status === 'CONNECTING' && /^not connected yet: .+; retrying$/.test(e.detail ?? '')).length, { timeout: 10_000 }).toBe(1);
  // More failed attempts with the same reason add no events.
  await new Promise((r) => setTimeout(r, 300));
  expect(h.events.filter((e) => e.type === 'status' && e.status === 'CONNECTING')).toHaveLength(2);
});

test('a p-captcha on login is FAILED at once (no retry storm)', async () => {
  h = await startActorHarness();
  await h.control('POST', '/faults', { pTicketSeconds: 1, pTicketCaptcha: true, pTicketTarget: 'auth' });
  h.actor.start();
  const failed = await h.nextStatus('FAILED');
  expect(failed.detail).toContain('captcha');
});

/** Requests the paper broker received, per endpoint. */
const requestsAt = async (h: ActorHarness): Promise<Record<string, number>> => (await h.control('GET', '/state')).requests;

test('a socket dropped soon after it came up is reconnected with a growing backoff, not at once each time (protocol audit: the broker closing the oldest of too many sessions would be fought for ever)', async () => {
  h = await startActorHarness({ tuning: { backoffBaseMs: 200, backoffMaxMs: 5000 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const gaps: number[] = [];
  for (let i = 0; i < 4; i++) {
    await h.control('POST', '/connections/drop', { user: h.user.name });
    const down = await h.nextStatus('RECONNECTING');
    const up = await h.nextStatus('CONNECTED', 10_000);
    gaps.push(up.ts - down.ts);
  }
  // At once (under 100 ms plus the login) would be every gap; backed off, the fourth waits 800-1600 ms.
  expect(gaps[3]).toBeGreaterThanOrEqual(800);
  expect(gaps[3]!).toBeGreaterThan(gaps[0]!);
});

test('trading refused while the connection backs off brings the reconnect forward; a read does not (repeated drops grow the backoff to 30 s: an alert arriving as the broker came back was answered 503 and never placed)', async () => {
  // A socket dropped within 30 s of coming up is backed off: here 4–8 s.
  h = await startActorHarness({ tuning: { backoffBaseMs: 8000, backoffMaxMs: 8000 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  const connected = () => h!.events.filter((e) => e.type === 'status' && e.status === 'CONNECTED').length;
  // Past the least gap between attempts (2 s) since the one that connected.
  await new Promise((r) => setTimeout(r, 2100));
  await h.control('POST', '/connections/drop', { user: h.user.name });
  const down = await h.nextStatus('RECONNECTING');

  expect((await h.callError({ type: 'positions', accountId: account })).code).toBe('BROKER_UNAVAILABLE');
  await new Promise((r) => setTimeout(r, 1500));
  expect(connected()).toBe(1);

  const order = { type: 'place-order' as const, accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy' as const, qty: 1, orderType: 'limit' as const, price: 4950, timeInForce: 'day' as const, clOrdId: 'hurry-1' };
  expect((await h.callError(order)).code).toBe('BROKER_UNAVAILABLE');
  const up = await h.nextStatus('CONNECTED', 2500);
  expect(up.ts - down.ts).toBeLessThan(4000);
  // The alert's retry, a moment later, is placed.
  expect((await h.call({ ...order, clOrdId: 'hurry-2' })).order.status).toBe('working');
});

test("the broker's rate limit (429) on an order: FAILED at once, nothing more sent inside the hold (each request extends the lockout), orders answer 503 with the hold's Retry-After; after the hold it logs in again by itself (re-probe: CONNECTED for an hour that could not trade; then FAILED until someone noticed)", async () => {
  const holdMs = 2500;
  h = await startActorHarness({ tuning: { rateLimitHoldMs: holdMs } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  await h.control('POST', '/faults', { rateLimit429: true });
  const order = { type: 'place-order' as const, accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy' as const, qty: 1, orderType: 'limit' as const, price: 4990, timeInForce: 'day' as const };
  // The first request the broker answers 429 (the order's contract lookup, here) stops the connection.
  const first = await h.callError({ ...order, clOrdId: 'rl-1' });
  expect(first).toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  expect(first.retryAfterSeconds).toBeGreaterThan(0);
  const failed = await h.nextStatus('FAILED');
  expect(failed.detail).toContain('broker rate limit (429)');
  expect(failed.detail).toMatch(/logs in again by itself .* \(at \d{4}-\d\d-\d\dT[\d:.]+Z; POST \/connections\/\{id\}\/reconnect tries sooner\)/);
  expect(failed.retryAt).toBeGreaterThan(failed.ts);
  const sentAtFailure = await requestsAt(h);
  await h.control('DELETE', '/faults');
  const held = await h.callError({ ...order, clOrdId: 'rl-2' });
  expect(held).toMatchObject({ code: 'BROKER_UNAVAILABLE', extensions: { connectionStatus: 'FAILED' } });
  expect(held.retryAfterSeconds).toBeGreaterThan(0);
  expect(held.retryAfterSeconds).toBeLessThanOrEqual(Math.ceil(holdMs / 1000));
  expect((await h.control('GET', '/state')).orders).toHaveLength(0);
  // Nothing is asked of the broker inside the hold; then it logs in again and trades.
  const back = await h.nextStatus('RECONNECTING', holdMs + 5000);
  expect(await requestsAt(h)).toEqual(sentAtFailure);
  expect(back.ts - failed.ts).toBeGreaterThanOrEqual(holdMs - 100);
  expect(back.detail).toContain("rate-limit hold has passed");
  await h.nextStatus('CONNECTED');
  expect((await h.call({ ...order, clOrdId: 'rl-3' })).order.status).toBe('working');
});

test("a 429 on the token's renewal or on the login itself is a hold too: no renewal, no login inside it (re-probe: a renewal every 15 s, a login every few seconds, each extending the lockout)", async () => {
  const holdMs = 3000;
  // Tokens of 1.5 s: renewed every ~1.2 s while all is well.
  h = await startActorHarness({ tuning: { rateLimitHoldMs: holdMs }, sim: { tokenLifetimeMs: 1500 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  for (const deadline = Date.now() + 5000; ((await requestsAt(h))['auth/renewaccesstoken'] ?? 0) < 1; ) {
    if (Date.now() > deadline) throw new Error('no renewal before the 429');
    await new Promise((r) => setTimeout(r, 100));
  }
  await h.control('POST', '/faults', { rateLimit429: true });
  const failed = await h.nextStatus('FAILED', 5000);
  expect(failed.detail).toContain('broker rate limit (429)');
  const atFailure = await requestsAt(h);
  await new Promise((r) => setTimeout(r, holdMs - 500));
  expect(await requestsAt(h)).toEqual(atFailure);
  // Still 429 when the hold ends: the login meets it, and the next hold begins without another try.
  await h.nextStatus('RECONNECTING', 5000);
  const again = await h.nextStatus('FAILED', 5000);
  expect(again.detail).toContain('429) on login');
  const afterLogin = await requestsAt(h);
  expect(afterLogin['auth/accesstokenrequest']).toBe((atFailure['auth/accesstokenrequest'] ?? 0) + 1);
  await h.control('DELETE', '/faults');
  await new Promise((r) => setTimeout(r, holdMs - 500));
  expect(await requestsAt(h)).toEqual(afterLogin);
  await h.nextStatus('CONNECTED', 8000);
});

test('a p-ticket on an order is honoured: wait p-time, resend with the ticket, one order placed', async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  await h.control('POST', '/faults', { pTicketSeconds: 1, pTicketTarget: 'orders' });
  const r = await h.call({ type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'limit', price: 4990, timeInForce: 'day', clOrdId: 'pt-1' });
  expect(r.order.status).toBe('working');
  const state = await h.control('GET', '/state');
  expect(state.orders).toHaveLength(1);
});

test('the token is renewed before its expirationTime: the session outlives the original expiry', async () => {
  h = await startActorHarness({ sim: { tokenLifetimeMs: 2000 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  const placed = await h.call({ type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'limit', price: 4990, timeInForce: 'day', clOrdId: 'r0' });
  // The rule under test is about wall time at the broker (the sim's real clock): let the
  // first token's lifetime pass. Without renewal the cancel below meets a 401.
  await new Promise((r) => setTimeout(r, 2600));
  const cancel = await h.call({ type: 'cancel-order', accountId: account, orderId: placed.order.orderId });
  expect(cancel.order.status).toBe('cancelled');
  expect(h.events.filter((e) => e.type === 'status').map((e) => (e as { status: string }).status)).toEqual(['CONNECTING', 'CONNECTED']);
});

test('the broker budget: orders past it are refused BROKER_UNAVAILABLE with a retry time, nothing sent', async () => {
  // Connecting uses 3 of the 6 (login, authorize, resync) and the first order's contract lookup
  // one more: two orders fit, the third does not.
  h = await startActorHarness({ budget: { perMinute: 6, perHour: 100 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  const place = (n: number) => h!.actor.handle({ type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'limit', price: 4990, timeInForce: 'day', clOrdId: `b${n}` });
  expect((await place(1)).ok).toBe(true);
  expect((await place(2)).ok).toBe(true);
  const third = await place(3);
  expect(third.ok).toBe(false);
  if (!third.ok) {
    expect(third.error.code).toBe('BROKER_UNAVAILABLE');
    expect(third.error.retryAfterSeconds).toBeGreaterThan(0);
  }
  expect((await h.control('GET', '/state')).orders).toHaveLength(2);
});

test('deactivating an account turns it inactive (others unaffected); reactivating makes it active again', async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const [a1, a2] = h.user.accounts.map((a) => String(a.id)) as [string, string];
  const accountsEvent = async (pred: (e: AccountsEvent) => boolean) =>
    h!.until(() => h!.events.find((e): e is AccountsEvent => e.type === 'accounts' && pred(e)));
  await accountsEvent((e) => e.accounts.length === 2 && e.accounts.every((a) => a.active));

  await h.control('POST', `/accounts/${a1}/deactivate`);
  const off = await accountsEvent((e) => e.accounts.some((a) => a.id === a1 && !a.active));
  expect(off.accounts.find((a) => a.id === a2)?.active).toBe(true);
  expect(await h.call({ type: 'accounts' })).toEqual(off.accounts);
  const refused = await h.callError({ type: 'place-order', accountId: a1, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'market', timeInForce: 'day', clOrdId: 'x' });
  expect(refused.code).toBe('ACCOUNT_INACTIVE');

  await h.control('POST', `/accounts/${a1}/reactivate`);
  const on = await accountsEvent((e) => e.accounts.every((a) => a.active) && h!.events.indexOf(e) > h!.events.indexOf(off));
  expect(on.accounts.map((a) => a.id).sort()).toEqual([a1, a2].sort());
});

test('an account missing from the snapshot after a reconnect is inactive', async () => {
  h = await startActorHarness({ tuning: { backoffBaseMs: 300, backoffMaxMs: 600 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const a1 = String(h.user.accounts[0]!.id);
  await h.control('POST', '/connections/drop', { user: h.user.name });
  await h.nextStatus('RECONNECTING');
  // Revoked while we were away: no Deleted event reaches us; the resync must notice.
  await h.control('POST', `/accounts/${a1}/deactivate`);
  await h.nextStatus('CONNECTED');
  expect((await h.call({ type: 'accounts' })).find((a) => a.id === a1)?.active).toBe(false);
});

test('reads and cancels for an account the broker stopped reporting are ACCOUNT_INACTIVE, not stale data', async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const a1 = String(h.user.accounts[0]!.id);
  const placed = await h.call({ type: 'place-order', accountId: a1, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'limit', price: 4990, timeInForce: 'day', clOrdId: 'i1' });
  await h.control('POST', `/accounts/${a1}/deactivate`);
  await h.until(() => h!.actor.model.accounts().find((a) => a.id === a1 && !a.active));
  expect((await h.callError({ type: 'working-orders', accountId: a1 })).code).toBe('ACCOUNT_INACTIVE');
  expect((await h.callError({ type: 'positions', accountId: a1 })).code).toBe('ACCOUNT_INACTIVE');
  expect((await h.callError({ type: 'cancel-order', accountId: a1, orderId: placed.order.orderId })).code).toBe('ACCOUNT_INACTIVE');
  expect(await h.call({ type: 'working-orders', accountId: String(h.user.accounts[1]!.id) })).toEqual([]);
});

test('events the broker sent into a quiet spell shorter than the watchdog are not lost for good: the position check finds the broker flat, reads the whole state again, and the dead legs are gone (money probe: they made leg fitting cancel a new bracket\'s take-profit, the position left without a stop)', async () => {
  h = await startActorHarness({ tuning: { positionCheckMs: 400 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  const entry = { type: 'place-order' as const, accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy' as const, qty: 1, orderType: 'market' as const, timeInForce: 'day' as const, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } };
  await h.call({ ...entry, clOrdId: 'lost-1' });
  await expect.poll(async () => (await h!.call({ type: 'working-orders', accountId: account })).map((o) => o.role).sort()).toEqual(['stop_loss', 'take_profit']);
  // The broker goes quiet (its frames dropped), its stop fills meanwhile, and it speaks again.
  await h.control('POST', '/faults', { silent: true });
  await h.control('POST', '/prices', { symbol: SYMBOL, price: 4985 });
  await h.control('POST', '/prices', { symbol: SYMBOL, price: 5000 });
  const state = (await h.control('GET', '/state')) as { positions: { netPos: number }[]; orders: { ordStatus: string }[] };
  expect(state.positions.every((p) => p.netPos === 0)).toBe(true);
  await h.control('DELETE', '/faults');
  // Healed without a reconnect: flat, nothing working, as at the broker.
  await expect.poll(async () => (await h!.call({ type: 'positions', accountId: account })).length, { timeout: 5_000 }).toBe(0);
  expect(await h.call({ type: 'working-orders', accountId: account })).toEqual([]);
  // A new bracket keeps both its legs.
  await h.call({ ...entry, clOrdId: 'lost-2' });
  await expect.poll(async () => (await h!.call({ type: 'working-orders', accountId: account })).map((o) => o.role).sort()).toEqual(['stop_loss', 'take_profit']);
  await new Promise((r) => setTimeout(r, 1_500));
  const working = ((await h.control('GET', '/state')) as { orders: { ordStatus: string }[] }).orders.filter((o) => o.ordStatus === 'Working');
  expect(working).toHaveLength(2);
}, 30_000);

test('a quiet spell of over two heartbeats that ends on the same socket reads the whole state again: what the broker sent into it is not lost', async () => {
  h = await startActorHarness({ tuning: { positionCheckMs: 0, readQuietMs: 1_200 } });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const account = String(h.user.accounts[0]!.id);
  await h.call({ type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: SYMBOL, side: 'buy', qty: 1, orderType: 'market', timeInForce: 'day', clOrdId: 'quiet-1', stopLoss: { price: 4990 } });
  await expect.poll(async () => (await h!.call({ type: 'working-orders', accountId: account })).length).toBe(1);
  await h.control('POST', '/faults', { silent: true });
  await h.control('POST', '/prices', { symbol: SYMBOL, price: 4985 });
  await new Promise((r) => setTimeout(r, 2_000));
  await h.control('DELETE', '/faults');
  await expect.poll(async () => (await h!.call({ type: 'positions', accountId: account })).length, { timeout: 5_000 }).toBe(0);
  expect(await h.call({ type: 'working-orders', accountId: account })).toEqual([]);
}, 30_000);
