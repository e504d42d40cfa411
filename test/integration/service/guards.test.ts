/**
 * Risk guards through the whole service (HTTP front, supervisor, actor threads) against the
 * paper broker, the way users meet them: a burst of 50 concurrent webhook alerts against a max
 * position of 3; a losing sequence that reaches the daily loss limit (working orders cancelled,
 * flat, entries refused until the next trading day — across a restart —, exits still allowed);
 * a trading window closing; the kill switch; a token's narrowing. The actors' clock is a fake
 * the test moves: no test waits for a real trading day or window.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { tradingDay, zonedToUtc } from '../../../src/domain/trading-time.js';
import { eventually, http } from '../../support/http.js';
import { startInProcessService, type InProcessService } from '../../support/service.js';
import { control, restClient, simState } from '../../support/sim.js';
import { openHealthStream, type HealthStream } from '../../support/sse.js';

const front = resolveSymbol('ES', new Date());
if (!front.ok) throw new Error(front.reason);
const ES = front.contract;

let s: InProcessService;
let acc: string;
let stream: HealthStream | undefined;

beforeEach(async () => {
  s = await startInProcessService();
  acc = s.accounts[0]!;
  await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
});
afterEach(async () => {
  stream?.close();
  stream = undefined;
  await s?.close();
});

const putGuards = async (guards: unknown) => {
  const r = await s.api('PUT', `/api/v1/accounts/${acc}/guards`, guards);
  expect(r.status, r.text).toBe(200);
  return r.json;
};
const order = (body: Record<string, unknown>) => s.api('POST', `/api/v1/accounts/${acc}/orders`, { symbol: 'ES1!', side: 'buy', qty: 1, ...body });
const atBroker = async () => {
  const state = await simState(s.sim);
  const mine = (xs: any[]) => xs.filter((x) => String(x.accountId) === acc);
  return {
    net: mine(state.positions).reduce((n: number, p: any) => n + p.netPos, 0),
    orders: mine(state.orders),
    working: mine(state.orders).filter((o: any) => o.ordStatus === 'Working'),
  };
};
const guardEvents = (action?: string) => (stream?.events ?? []).filter((e: any) => e.type === 'guard' && (!action || e.action === action)) as any[];

describe('risk guards through the service', () => {
  it('50 concurrent webhook alerts with a max position of 3: 3 placed, 47 refused with RISK_GUARD, never above 3 at the broker', async () => {
    await putGuards({ maxPositionPerContract: 3 });
    stream = await openHealthStream(s.url, s.apiKey);
    const token = await s.api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'burst' });
    const alerts = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        http(token.json.url, 'POST', '', { raw: JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, id: `a${i}` }), headers: { 'content-type': 'text/plain' } }),
      ),
    );
    const placed = alerts.filter((r) => r.status === 201);
    const refused = alerts.filter((r) => r.status === 403);
    expect(placed).toHaveLength(3);
    expect(refused).toHaveLength(47);
    for (const r of refused) expect(r.json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_position', limit: 3, value: 4, accountId: acc });
    const broker = await atBroker();
    expect(broker.orders).toHaveLength(3);
    expect(broker.net).toBe(3);
    await eventually(async () => guardEvents('refused').length === 47, '47 refusals on the health stream', 5000);
    // `id`: the SSE id the stream support reads from the message's id: line (the payload itself is exact).
    expect(guardEvents('refused')[0]).toEqual({ type: 'guard', accountId: acc, guard: 'max_position', action: 'refused', ts: expect.any(Number), detail: 'the position could reach 4 contracts (max 3)', id: expect.any(Number) });
    // Exits still go: the position can be closed by an alert.
    const token2 = http(token.json.url, 'POST', '', { raw: JSON.stringify({ action: 'sell', symbol: 'ES1!', qty: 3 }) });
    expect((await token2).status).toBe(201);
    await eventually(async () => (await atBroker()).net === 0, 'flat after the exit');
  });

  it('a losing sequence reaches the daily loss limit: working orders cancelled, flat, entries refused until the next trading day (even across a restart), exits allowed', async () => {
    const now = Date.now();
    s.setClock(now);
    await putGuards({ dailyLossLimit: 500 });
    stream = await openHealthStream(s.url, s.apiKey);
    // A losing round trip: −3 points on 1 ES = −$150 realized.
    expect((await order({})).status).toBe(201);
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4997 });
    expect((await order({ side: 'sell' })).status).toBe(201);
    await eventually(async () => (await s.api('GET', `/api/v1/accounts/${acc}/guards`)).json.live.day.realized === -150, 'realized −150');
    // Long 2 at 4997 and a resting buy limit; the price falls 3.5 points: −150 − 2 × 3.5 × 50 = −500.
    expect((await order({ qty: 2 })).status).toBe(201);
    expect((await order({ type: 'limit', price: 4900 })).status).toBe(201);
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4994 });
    await eventually(async () => (await s.api('GET', `/api/v1/accounts/${acc}/guards`)).json.live.day.pnl === -450, 'P&L −450 from the quote');
    expect(guardEvents('locked')).toEqual([]);
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4993.5 });

    const locked = await eventually(async () => guardEvents('locked')[0], 'locked by the daily loss limit', 5000);
    expect(locked).toMatchObject({ accountId: acc, guard: 'daily_loss', detail: 'P&L of the day -500 reached the daily loss limit of 500' });
    await eventually(async () => guardEvents('flattened')[0], 'flattened', 5000);
    const broker = await atBroker();
    expect(broker.net).toBe(0);
    expect(broker.working).toEqual([]);
    const until = new Date(tradingDay(now).end).toISOString();
    const refused = await order({});
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ code: 'RISK_GUARD', guard: 'daily_loss', limit: until });
    expect((await s.api('POST', `/api/v1/accounts/${acc}/unlock`)).json).toMatchObject({ code: 'CONFLICT', guard: 'daily_loss', lockedUntil: until });
    await eventually(async () => s.store.guards.get(s.userId, acc)?.lock?.guard === 'daily_loss', 'the lock stored');

    // A position opened at the broker directly (another platform) can still be closed through the service.
    const direct = await restClient(s.sim, s.login.name, s.login.password);
    const placed = await direct('order/placeorder', { accountId: Number(acc), action: 'Buy', symbol: ES, orderQty: 2, orderType: 'Market', isAutomated: true });
    expect(placed.orderId).toBeGreaterThan(0);
    await eventually(async () => (await s.api('GET', `/api/v1/accounts/${acc}/positions`)).json.data[0]?.netQty === 2, 'long 2 seen by the service');
    expect((await order({ side: 'sell', qty: 3 })).json).toMatchObject({ code: 'RISK_GUARD', guard: 'daily_loss' });
    expect((await order({ side: 'sell', qty: 2 })).status).toBe(201);
    await eventually(async () => (await atBroker()).net === 0, 'flat after the exit');

    // A restart does not lift the lock.
    await s.restart();
    expect((await order({})).json).toMatchObject({ code: 'RISK_GUARD', guard: 'daily_loss' });
    expect((await s.api('GET', `/api/v1/accounts/${acc}/guards`)).json.lock).toMatchObject({ guard: 'daily_loss', until });

    // The next trading day: the lock lifts and entries go through.
    s.setClock(tradingDay(now).end + 60_000);
    await eventually(async () => (await order({})).status === 201, 'entries allowed on the next trading day', 5000);
    await eventually(async () => s.store.guards.get(s.userId, acc)?.lock === null, 'the lock cleared in the store');
  });

  it('a trading window closes: the account is flattened and entries are refused', async () => {
    const ct = (minutes: number) => zonedToUtc(2026, 11, 23, minutes, 'America/Chicago'); // a Monday
    s.setClock(ct(10 * 60));
    stream = await openHealthStream(s.url, s.apiKey);
    const view = await putGuards({ tradingWindows: { timeZone: 'America/Chicago', flattenAtEnd: true, windows: [{ days: ['mon'], start: '08:30', end: '10:30' }] } });
    expect(view.live.inWindow).toBe(true);
    expect((await order({ qty: 2 })).status).toBe(201);
    expect((await order({ type: 'limit', price: 4900 })).status).toBe(201);
    s.setClock(ct(10 * 60 + 30));
    await eventually(async () => guardEvents('flattened')[0], 'flattened at the window end', 5000);
    expect(guardEvents('flattened')[0]).toMatchObject({ guard: 'trading_window' });
    const broker = await atBroker();
    expect(broker.net).toBe(0);
    expect(broker.working).toEqual([]);
    const refused = await order({});
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ code: 'RISK_GUARD', guard: 'trading_window', value: 'Mon 10:30 America/Chicago' });
    expect((await order({ side: 'sell' })).json.guard).toBe('trading_window');
  });

  it('kill switch: lock → flat and refused; unlock → allowed', async () => {
    expect((await order({ qty: 2 })).status).toBe(201);
    expect((await order({ type: 'limit', price: 4900 })).status).toBe(201);
    const locked = await s.api('POST', `/api/v1/accounts/${acc}/lock`);
    expect(locked.status, locked.text).toBe(200);
    expect(locked.json).toMatchObject({ lock: { guard: 'kill_switch', until: null }, flatten: { positions: [{ symbol: ES, closedQty: 2, status: 'liquidated' }] } });
    expect(locked.json.flatten.cancelledOrderIds).toHaveLength(1);
    const broker = await atBroker();
    expect(broker.net).toBe(0);
    expect(broker.working).toEqual([]);
    const before = broker.orders.length;
    expect((await order({})).json).toMatchObject({ code: 'RISK_GUARD', guard: 'kill_switch' });
    // Nothing reached the broker; flatten is never refused.
    expect((await atBroker()).orders).toHaveLength(before);
    expect((await s.api('POST', `/api/v1/accounts/${acc}/flatten`, {})).status).toBe(200);
    expect((await s.api('POST', `/api/v1/accounts/${acc}/unlock`)).json.lock).toBeNull();
    expect((await order({})).status).toBe(201);
  });

  it('a webhook token’s narrowing and an API key’s refuse what the account would allow', async () => {
    await putGuards({ maxOrderQty: 10 });
    const token = await s.api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'tight', guards: { maxOrderQty: 1, direction: 'long_only' } });
    const alert = (body: unknown) => http(token.json.url, 'POST', '', { raw: JSON.stringify(body) });
    expect((await alert({ action: 'buy', symbol: 'ES', qty: 2 })).json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_order_qty', limit: 1, value: 2 });
    expect((await alert({ action: 'sell', symbol: 'ES', qty: 1 })).json).toMatchObject({ code: 'RISK_GUARD', guard: 'direction' });
    expect((await alert({ action: 'buy', symbol: 'ES', qty: 1 })).status).toBe(201);
    // The key's narrowing (set on the web app's API Keys page) applies from its next request.
    const me = (await s.api('GET', '/api/v1/me')).json;
    await s.store.apiKeys.setGuards(s.userId, me.key.id, { allowedProducts: ['MES'] });
    expect((await order({ qty: 2 })).json).toMatchObject({ code: 'RISK_GUARD', guard: 'allowed_products', limit: ['MES'], value: 'ES' });
    expect((await s.api('PUT', `/api/v1/api-keys/${me.key.id}/guards`, {})).status).toBe(403);
  });
});
