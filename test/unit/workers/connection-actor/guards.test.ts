import { describe, expect, it } from 'vitest';
import type { GuardEvent } from '../../../../src/actors/protocol.js';
import { guardConfig, type GuardConfig, type LockState } from '../../../../src/domain/guards.js';
import { tradingDay, zonedToUtc } from '../../../../src/domain/trading-time.js';
import { GuardKeeper } from '../../../../workers/connection-actor/guards.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, CONTRACT, fakeActorContext, newOrder } from '../../../support/broker-link.js';
import { rejected, thrown } from '../../../support/errors.js';

// Monday 2026-11-23 10:00 America/Chicago.
const MON_10 = zonedToUtc(2026, 11, 23, 600, 'America/Chicago');

function setup(config: Partial<GuardConfig> | null, lock: LockState | null = null) {
  const { broker, ctx, events } = fakeActorContext(50);
  const clock = { now: MON_10 };
  const keeper = new GuardKeeper({ ctx, now: () => clock.now, tickMs: 1000, initial: config ? { [ACCOUNT]: { config: guardConfig(config), lock } } : {} });
  ctx.guards = keeper;
  const guardEvents = () => events.filter((e): e is GuardEvent => e.type === 'guard');
  const settle = () => new Promise((r) => setTimeout(r, 0));
  return { broker, ctx, keeper, clock, guardEvents, settle };
}

describe('GuardKeeper.admit', () => {
  it('a timed-out order’s contracts stay held until its outcome is known: bound to the order the broker reports, released by a late refusal', async () => {
    const { broker, ctx } = setup({ maxPositionPerContract: 1 });
    const refused = broker.timeOut('order/placeorder');
    expect((await rejected(placeOrder(ctx, newOrder()))).code).toBe('BROKER_TIMEOUT');
    // However long the broker takes (longer than the settle wait here), the contract counts.
    await new Promise((res) => setTimeout(res, 100));
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions).toMatchObject({ guard: 'max_position' });
    refused.refuse(400, 'No usable value for symbol');
    const placed = await placeOrder(ctx, newOrder());
    expect(placed.reconciled).toBe(false);

    const { broker: b2, ctx: c2 } = setup({ maxPositionPerContract: 1 });
    const late = b2.timeOut('order/placeorder');
    await rejected(placeOrder(c2, newOrder()));
    late.execute();
    late.answer();
    // The working order now counts by its own events: still one contract, never two.
    expect((await rejected(placeOrder(c2, newOrder()))).extensions).toMatchObject({ guard: 'max_position', value: 2 });
    expect(c2.unknown.size).toBe(0);
  });

  it('an account without guards and an order without narrowing hold nothing', () => {
    const { keeper } = setup(null);
    expect(keeper.admit(newOrder())).toBeNull();
  });

  it('a refused entry reaches no broker, is reported as a guard event and names the guard', async () => {
    const { broker, ctx, guardEvents } = setup({ maxOrderQty: 2 });
    const err = await rejected(placeOrder(ctx, newOrder({ qty: 3 })));
    expect(err).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'max_order_qty', limit: 2, value: 3, accountId: ACCOUNT } });
    expect(broker.sent).toEqual([]);
    expect(guardEvents()).toMatchObject([{ type: 'guard', connectionId: 'c1', accountId: ACCOUNT, guard: 'max_order_qty', action: 'refused', ts: MON_10 }]);
  });

  it('a token’s narrowing applies even to an account without guards', () => {
    const { keeper } = setup(null);
    const err = thrown(() => keeper.admit({ ...newOrder(), narrowing: [{ allowedProducts: ['NQ'] }] }));
    expect(err.extensions).toMatchObject({ guard: 'allowed_products', value: 'ES' });
  });

  it('while locked: entries refused, exits placed', async () => {
    const { broker, ctx, keeper } = setup({});
    const entry = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(entry.order.orderId), 2, 5000);
    await keeper.lock(ACCOUNT, false);
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions).toMatchObject({ guard: 'kill_switch', limit: null });
    const exit = await placeOrder(ctx, newOrder({ side: 'sell', qty: 2 }));
    expect(exit.order.side).toBe('sell');
    // Both lots are covered by the working exit: one more sell would open a short — an entry.
    expect((await rejected(placeOrder(ctx, newOrder({ side: 'sell', qty: 1 })))).extensions).toMatchObject({ guard: 'kill_switch' });
  });

  it('a contract the connection cannot name yet is a retryable 503, not a guess', () => {
    const { keeper } = setup({ maxPositionPerContract: 1 });
    expect(thrown(() => keeper.admit(newOrder({ symbol: 'NQZ6' }))).code).toBe('BROKER_UNAVAILABLE');
  });
});

describe('kill switch', () => {
  it('lock flattens (cancel, then liquidate), reports locked then flattened; unlock lifts it', async () => {
    const { broker, ctx, keeper, guardEvents } = setup(null);
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.addOrder({ price: 4900 });
    const r = await keeper.lock(ACCOUNT, true, 'lunch');
    expect(r.status.lock).toMatchObject({ guard: 'kill_switch', until: null, detail: 'lunch' });
    expect(r.flatten).toMatchObject({ cancelledOrderIds: [expect.any(String)], positions: [{ status: 'liquidated', closedQty: 1 }] });
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    expect(guardEvents().map((e) => [e.guard, e.action])).toEqual([['kill_switch', 'locked'], ['kill_switch', 'flattened']]);
    expect(guardEvents()[0]!.lock).toMatchObject({ guard: 'kill_switch' });
    expect(keeper.unlock(ACCOUNT).lock).toBeNull();
    expect(guardEvents().at(-1)).toMatchObject({ action: 'unlocked', lock: null });
  });

  it('a flatten that fails keeps the lock and is retried on the tick until it goes through', async () => {
    const { broker, ctx, keeper, guardEvents, settle } = setup(null);
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.connected = false;
    const r = await keeper.lock(ACCOUNT, true);
    expect(r.flatten).toMatchObject({ error: expect.stringContaining('RECONNECTING') });
    expect(r.status.lock?.guard).toBe('kill_switch');
    keeper.tick();
    await settle();
    expect(guardEvents().filter((e) => e.action === 'flatten-failed')).toHaveLength(1);
    broker.connected = true;
    keeper.tick();
    await new Promise((res) => setTimeout(res, 100));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened', guard: 'kill_switch' });
  });
});

describe('trading windows', () => {
  it('entries refused outside; with flattenAtEnd the account is flattened when the window closes', async () => {
    const windows = { timeZone: 'America/Chicago', flattenAtEnd: true, windows: [{ days: ['mon' as const], start: '08:30', end: '15:00' }] };
    const { broker, ctx, keeper, clock, guardEvents } = setup({ tradingWindows: windows });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    keeper.tick();
    expect(keeper.status(ACCOUNT).inWindow).toBe(true);
    clock.now = zonedToUtc(2026, 11, 23, 15 * 60, 'America/Chicago');
    keeper.tick();
    await new Promise((res) => setTimeout(res, 100));
    expect(broker.bodies('order/liquidateposition')).toEqual([expect.objectContaining({ accountId: 7, contractId: CONTRACT })]);
    expect(guardEvents().find((e) => e.action === 'flattened')).toMatchObject({ guard: 'trading_window' });
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions).toMatchObject({ guard: 'trading_window', value: 'Mon 15:00 America/Chicago' });
    // Starting outside a window is not a window closing: nothing is flattened at start-up.
    const late = setup({ tradingWindows: windows });
    late.clock.now = clock.now;
    late.keeper.tick();
    late.keeper.tick();
    expect(late.broker.bodies('order/liquidateposition')).toEqual([]);
  });
});

describe('daily loss limit and profit target', () => {
  it('open loss reaching the limit locks until the next trading day and flattens; unlock is refused; the next day lifts it', async () => {
    const { broker, ctx, keeper, clock, guardEvents } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    keeper.pnl.mark(CONTRACT, 4995.25);
    expect(guardEvents()).toEqual([]);
    keeper.pnl.mark(CONTRACT, 4995);
    const day = tradingDay(MON_10);
    expect(guardEvents()[0]).toMatchObject({ guard: 'daily_loss', action: 'locked', lock: { guard: 'daily_loss', until: day.end } });
    await new Promise((res) => setTimeout(res, 100));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    expect(thrown(() => keeper.unlock(ACCOUNT))).toMatchObject({ code: 'CONFLICT', extensions: { guard: 'daily_loss' } });
    // Further quotes do not trip it again the same day.
    keeper.pnl.mark(CONTRACT, 4990);
    expect(guardEvents().filter((e) => e.action === 'locked')).toHaveLength(1);
    clock.now = day.end;
    keeper.tick();
    expect(keeper.status(ACCOUNT).lock).toBeNull();
    expect(guardEvents().at(-1)).toMatchObject({ action: 'unlocked', guard: 'daily_loss', lock: null });
  });

  it('a new trading day counts from zero at the first order, before any tick', async () => {
    const { broker, ctx, keeper, clock } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.mirror.apply('fillPair', 'Created', { id: 900, positionId: broker.mirror.all('position')[0]!.id, buyFillId: 1, sellFillId: 2, qty: 1, buyPrice: 5000, sellPrice: 4992 });
    expect(keeper.status(ACCOUNT).day.realized).toBe(-400);
    clock.now = tradingDay(MON_10).end + 1000;
    // Without the roll, −400 realized + −150 open would trip the limit on this check.
    keeper.pnl.mark(CONTRACT, 4997);
    await placeOrder(ctx, newOrder());
    expect(keeper.status(ACCOUNT)).toMatchObject({ lock: null, day: { realized: 0, open: -150 } });
  });

  it('a P&L lock restored at start-up for today does not trip (or report) again', () => {
    const day = tradingDay(MON_10);
    const lock: LockState = { guard: 'daily_loss', since: MON_10 - 1000, until: day.end, detail: 'x' };
    const { keeper, guardEvents } = setup({ dailyLossLimit: 1, dailyProfitTarget: null }, lock);
    keeper.pnl.mark(CONTRACT, 1);
    keeper.tick();
    expect(guardEvents()).toEqual([]);
    expect(keeper.status(ACCOUNT).lock).toEqual(lock);
  });

  it('the profit target trips the same way; a kill-switch lock stays in force', async () => {
    const { broker, ctx, keeper, guardEvents } = setup({ dailyProfitTarget: 100 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    await keeper.lock(ACCOUNT, false);
    keeper.pnl.mark(CONTRACT, 5002);
    expect(keeper.status(ACCOUNT).lock?.guard).toBe('kill_switch');
    await new Promise((res) => setTimeout(res, 100));
    expect(guardEvents().find((e) => e.action === 'flattened')).toMatchObject({ guard: 'profit_target' });
  });

  it('status shows the day, its P&L and the exposure per contract', async () => {
    const { broker, ctx, keeper } = setup({ maxPositionPerContract: 5 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    await placeOrder(ctx, newOrder({ price: 4990 }));
    keeper.pnl.mark(CONTRACT, 5001);
    const s = keeper.status(ACCOUNT);
    expect(s).toMatchObject({ accountId: ACCOUNT, config: { maxPositionPerContract: 5 }, lock: null, inWindow: null });
    expect(s.day).toMatchObject({ ...tradingDay(MON_10), open: 100, pnl: 100 });
    expect(s.positions).toEqual([{ symbol: 'ESZ6', net: 2, buying: 1, selling: 0, exposure: 3 }]);
  });
});
