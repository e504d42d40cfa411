/**
 * Broker faults → a true health stream (DESIGN §8, §10, §14; reliability-anchors B1/B2):
 * with an SSE client connected to `serve --paper`, the paper broker's control API drops the
 * socket, goes silent, expires the token and hands out a penalty ticket. The stream must
 * report each transition as it happens and the recovery after it; orders sent meanwhile get
 * 503 BROKER_UNAVAILABLE with Retry-After, and their retry with the same Idempotency-Key
 * places exactly one order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { clOrdIdFor } from '../../../src/domain/order-plan.js';
import { openHealthStream, type HealthEvent, type HealthStream } from '../../support/sse.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let stream: HealthStream;
let connectionId: string;
let userId: string;
const ES = frontOf('ES').contract;

const isStatus = (status: string) => (e: HealthEvent) => e.type === 'status' && e.connectionId === connectionId && e.status === status;
const place = (key: string) =>
  http(s.url, 'POST', `/api/v1/accounts/${s.accounts[0]}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' }, headers: { 'Idempotency-Key': key } });
const brokerOrders = async (key: string) => ((await simState(s)).orders as { clOrdId: string | null }[]).filter((o) => o.clOrdId === clOrdIdFor(userId, key));
const connectionStatus = async () => ((await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data as any[])[0].status as string;

/** The 503 contract for orders while the connection is not CONNECTED. */
function expectUnavailable(r: Awaited<ReturnType<typeof place>>): void {
  expect(r.status, r.text).toBe(503);
  expect(r.json.code).toBe('BROKER_UNAVAILABLE');
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
  connectionId = (await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data[0].id;
  userId = (await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey })).json.user.id;
  stream = await openHealthStream(s.url, s.apiKey);
  await stream.waitFor((e) => e.type === 'snapshot' && e.connectionId === connectionId && e.status === 'CONNECTED', 0, 5_000);
}, 60_000);
afterAll(async () => {
  stream?.close();
  expect(await s?.stop()).toBe(0);
});

describe('broker faults and the health stream', () => {
  it('dropped socket → RECONNECTING, then CONNECTED once resynced', async () => {
    const from = stream.events.length;
    const t0 = Date.now();
    await control(s, 'POST', '/connections/drop', {});
    const down = await stream.waitFor(isStatus('RECONNECTING'), from, 5_000);
    expect(down.event.reason).toBe('disconnect');
    expect(down.event.ts).toBeGreaterThanOrEqual(t0);
    const up = await stream.waitFor(isStatus('CONNECTED'), down.index, 10_000);
    expect(up.event.reason).toBe('reconnect');
    expect(await connectionStatus()).toBe('CONNECTED');
  }, 20_000);

  it('silent broker → reads answer 503 after two missed heartbeats (5 s), before the watchdog; then RECONNECTING; orders meanwhile get 503 with Retry-After; recovery when the silence lifts', async () => {
    const from = stream.events.length;
    const read = (path: string) => http(s.url, 'GET', `/api/v1/accounts/${s.accounts[0]}/${path}`, { key: s.apiKey });
    // A page kept on the front before the silence must not be served through it either.
    expect((await read('working-orders')).status).toBe(200);
    await control(s, 'POST', '/faults', { silent: true });
    const t0 = Date.now();
    try {
      // Refused while the connection still says CONNECTED: the watchdog waits 10 s.
      const quiet = await eventually(async () => {
        const r = await read('positions');
        return r.status === 503 ? r : undefined;
      }, 'positions refused while the broker is quiet', 8_500);
      expect(Date.now() - t0).toBeLessThan(8_500);
      expect(quiet.json).toMatchObject({ code: 'BROKER_UNAVAILABLE', connectionStatus: 'CONNECTED' });
      expect(quiet.json.detail).toMatch(/^no word from the broker for \d+\.\d s/);
      expect(quiet.headers.get('retry-after')).toBe('1');
      // The front drops the page it kept once the actor's notice arrives (another port: a moment later at most).
      await eventually(async () => (await read('working-orders')).status === 503, 'working orders refused too', 1_000);
      expect((await read('guards')).json.live).toBeNull();
      // Nor is an order sent into it (its outcome would be unknown): 503, nothing at the broker.
      const quietOrder = await place('during-quiet');
      expect(quietOrder.status, quietOrder.text).toBe(503);
      expect(await brokerOrders('during-quiet')).toHaveLength(0);
      const down = await stream.waitFor(isStatus('RECONNECTING'), from, 20_000);
      expect(down.event.detail ?? '').toMatch(/silence|no frame/);
      expect(await connectionStatus()).toBe('RECONNECTING');
      const before = (await simState(s)).orders.length;
      expectUnavailable(await place('during-silence'));
      expect((await simState(s)).orders.length).toBe(before);
    } finally {
      await control(s, 'POST', '/faults', { silent: false });
    }
    await stream.waitFor(isStatus('CONNECTED'), from, 40_000);
    const r = await place('during-silence');
    expect(r.status, r.text).toBe(201);
    expect(await brokerOrders('during-silence')).toHaveLength(1);
  }, 75_000);

  it('expired token → AUTH_EXPIRED on the next broker call, then CONNECTED with a new token; the order lands once', async () => {
    const from = stream.events.length;
    await control(s, 'POST', '/auth/expire', {});
    const first = await place('around-expiry');
    const expired = await stream.waitFor(isStatus('AUTH_EXPIRED'), from, 10_000);
    expect(expired.event.reason).toBe('auth-expired');
    const up = await stream.waitFor(isStatus('CONNECTED'), expired.index, 15_000);
    expect(up.event.reason).toBe('reconnect');
    if (first.status !== 201) expectUnavailable(first);
    const again = await place('around-expiry');
    expect(again.status, again.text).toBe(201);
    if (first.status === 201) expect(again.text).toBe(first.text);
    expect(await brokerOrders('around-expiry')).toHaveLength(1);
  }, 30_000);

  it('penalty ticket on re-authentication → recovery only after the ticket’s wait', async () => {
    const from = stream.events.length;
    await control(s, 'POST', '/faults', { pTicketSeconds: 2, pTicketTarget: 'auth' });
    await control(s, 'POST', '/auth/expire', {});
    const first = await place('around-p-ticket');
    const expired = await stream.waitFor(isStatus('AUTH_EXPIRED'), from, 10_000);
    const up = await stream.waitFor(isStatus('CONNECTED'), expired.index, 20_000);
    expect(up.event.ts - expired.event.ts, 'waited out p-time before re-authenticating').toBeGreaterThanOrEqual(1_900);
    expect((await simState(s)).faults.pTicketSeconds ?? null, 'the ticket was consumed').toBeNull();
    if (first.status !== 201) expectUnavailable(first);
    const again = await place('around-p-ticket');
    expect(again.status, again.text).toBe(201);
    expect(await brokerOrders('around-p-ticket')).toHaveLength(1);
  }, 30_000);

  it('penalty ticket on an order → the order is resent after p-time and placed exactly once', async () => {
    await control(s, 'POST', '/faults', { pTicketSeconds: 1, pTicketTarget: 'orders' });
    const t0 = Date.now();
    const r = await place('order-p-ticket');
    expect(r.status, r.text).toBe(201);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(await brokerOrders('order-p-ticket')).toHaveLength(1);
  }, 20_000);

  it('reported exactly the transitions the faults caused, in order, each outage ending in CONNECTED', () => {
    const statuses = stream.events.filter((e) => e.type === 'status' && e.connectionId === connectionId).map((e) => `${e.status}/${e.reason}`);
    // drop, silence, token expiry, token expiry with a p-ticket; the order p-ticket is no outage.
    expect(statuses).toEqual([
      'RECONNECTING/disconnect', 'CONNECTED/reconnect',
      'RECONNECTING/disconnect', 'CONNECTED/reconnect',
      'AUTH_EXPIRED/auth-expired', 'CONNECTED/reconnect',
      'AUTH_EXPIRED/auth-expired', 'CONNECTED/reconnect',
    ]);
  });
});
