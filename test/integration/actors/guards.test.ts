/**
 * Risk guards inside a connection actor against the real paper broker: a burst of concurrent
 * entries cannot pass a max position, exits pass whatever the guards say, the kill switch
 * locks and flattens, the daily loss limit trips on open P&L from quotes and locks until the
 * next trading day (the actor's clock is a shared fake), and guard events are reported.
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { startActorHarness, SYMBOL, type ActorHarness } from '../../support/actor.js';
import { guardConfig, type GuardConfig } from '../../../src/domain/guards.js';
import { tradingDay } from '../../../src/domain/trading-time.js';
import type { GuardEvent, PlaceOrderRequest } from '../../../src/actors/protocol.js';
import { eventually } from '../../support/http.js';

let h: ActorHarness;
let account: string;
let seq = 0;
const clock = new BigInt64Array(new SharedArrayBuffer(8));

async function start(guards: Partial<GuardConfig>): Promise<void> {
  clock[0] = 0n;
  h = await startActorHarness({ tuning: { fakeClock: clock, guardTickMs: 20 }, guardsFor: (ids) => ({ [String(ids[0])]: { config: guardConfig(guards), lock: null } }) });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  account = String(h.user.accounts[0]!.id);
}

afterEach(async () => {
  await h?.close();
});

function order(over: Partial<PlaceOrderRequest> = {}): PlaceOrderRequest {
  return {
    type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: 'ES1!', side: 'buy', qty: 1,
    orderType: 'market', price: null, timeInForce: 'day', clOrdId: `g-${process.pid}-${++seq}`, ...over,
  };
}

const guardEvents = () => h.events.filter((e): e is GuardEvent => e.type === 'guard');
const net = async () => ((await h.control('GET', '/state')).positions as any[]).filter((p) => String(p.accountId) === account).reduce((n, p) => n + p.netPos, 0);

describe('max position', () => {
  beforeEach(() => start({ maxPositionPerContract: 3 }));

  test('50 concurrent entries with a max position of 3: three reach the broker, 47 are refused with RISK_GUARD', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, () => h.actor.handle(order())));
    const ok = results.filter((r) => r.ok);
    const refused = results.filter((r) => !r.ok);
    expect(ok).toHaveLength(3);
    expect(refused).toHaveLength(47);
    for (const r of refused) expect(!r.ok && r.error).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'max_position', limit: 3, value: 4 } });
    const state = await h.control('GET', '/state');
    expect(state.orders.filter((o: any) => String(o.accountId) === account)).toHaveLength(3);
    expect(await net()).toBe(3);
    expect(guardEvents().filter((e) => e.action === 'refused')).toHaveLength(47);
  });

  test('working entries count: a resting buy limit of 2 leaves room for 1', async () => {
    await h.call(order({ orderType: 'limit', price: 4900, qty: 2 }));
    const err = await h.callError(order({ qty: 2 }));
    expect(err).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'max_position', limit: 3, value: 4 } });
    await h.call(order({ qty: 1 }));
  });

  test('an exit passes even at the limit; an order that would cross to the other side is an entry', async () => {
    await h.call(order({ qty: 3 }));
    await h.until(() => (h.actor.guards.exposure.total(account) === 3 ? true : undefined));
    await h.call(order({ side: 'sell', qty: 1 }));
    const crossing = await h.callError(order({ side: 'sell', qty: 6, orderType: 'limit', price: 5100 }));
    expect(crossing).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'max_position', value: 4 } });
  });
});

describe('kill switch', () => {
  beforeEach(() => start({}));

  test('lock flattens and refuses entries but not exits; unlock allows entries again', async () => {
    await h.call(order({ qty: 2 }));
    await h.call(order({ orderType: 'limit', price: 4900 }));
    const locked = await h.call({ type: 'lock', accountId: account, flatten: true });
    expect(locked.status.lock).toMatchObject({ guard: 'kill_switch', until: null });
    expect(locked.flatten).toMatchObject({ positions: [{ status: 'liquidated', closedQty: 2 }] });
    expect(await net()).toBe(0);
    expect((await h.call({ type: 'working-orders', accountId: account }))).toEqual([]);
    expect(await h.callError(order())).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'kill_switch' } });
    expect(guardEvents().map((e) => e.action)).toEqual(['locked', 'flattened', 'refused']);
    await h.call({ type: 'unlock', accountId: account });
    await h.call(order());
    expect(guardEvents().at(-1)).toMatchObject({ action: 'unlocked', lock: null });
  });
});

describe('daily loss limit', () => {
  beforeEach(() => start({ dailyLossLimit: 500 }));

  test('open loss from quotes reaches the limit: working orders cancelled, flat, locked until the next trading day', async () => {
    const now = Date.now();
    clock[0] = BigInt(now);
    await h.call(order({ qty: 2 }));
    await h.call(order({ orderType: 'limit', price: 4800 }));
    await h.until(() => (h.actor.guards.pnl.held(account).length === 1 ? true : undefined));
    await h.control('POST', '/prices', { symbol: SYMBOL, price: 4996 });
    await eventually(async () => h.actor.guards.status(account).day.open === -400, 'open P&L −400 from the quote', 3000);
    await h.control('POST', '/prices', { symbol: SYMBOL, price: 4995 });
    const locked = await eventually(async () => guardEvents().find((e) => e.action === 'locked'), 'locked', 3000);
    expect(locked).toMatchObject({ guard: 'daily_loss', lock: { guard: 'daily_loss', until: tradingDay(now).end } });
    await eventually(async () => guardEvents().find((e) => e.action === 'flattened'), 'flattened', 5000);
    expect(await net()).toBe(0);
    expect(await h.call({ type: 'working-orders', accountId: account })).toEqual([]);
    expect(await h.callError(order())).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'daily_loss' } });
    expect(await h.callError({ type: 'unlock', accountId: account })).toMatchObject({ code: 'CONFLICT' });
    // The next trading day: the lock lifts and the day's P&L starts from zero.
    clock[0] = BigInt(tradingDay(now).end + 60_000);
    await eventually(async () => guardEvents().find((e) => e.action === 'unlocked'), 'unlocked at the next trading day', 3000);
    expect(h.actor.guards.status(account).day.pnl).toBe(0);
    await h.call(order());
  });
});
