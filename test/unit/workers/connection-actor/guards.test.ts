import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GuardEvent } from '../../../../src/actors/protocol.js';
import type { QuoteFeed } from '../../../../src/broker/tradovate/quotes.js';
import { guardConfig, NO_GUARDS, type GuardConfig, type LockState } from '../../../../src/domain/guards.js';
import { tradingDay, zonedToUtc } from '../../../../src/domain/trading-time.js';
import { GuardKeeper } from '../../../../workers/connection-actor/guards.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, CONTRACT, fakeActorContext, newOrder } from '../../../support/broker-link.js';
import { rejected, thrown } from '../../../support/errors.js';

// Monday 2026-11-23 10:00 America/Chicago.
const MON_10 = zonedToUtc(2026, 11, 23, 600, 'America/Chicago');
const MON_15 = zonedToUtc(2026, 11, 23, 15 * 60, 'America/Chicago');
const DAY = tradingDay(MON_10);
const WINDOWS = { timeZone: 'America/Chicago', flattenAtEnd: true, windows: [{ days: ['mon' as const], start: '08:30', end: '15:00' }] };

/** A quote feed that records what the keeper asks of it. */
function quoteFeed() {
  const calls: string[] = [];
  const feed = {
    want: (ids: ReadonlySet<number>) => calls.push(`want ${[...ids].sort((a, b) => a - b).join(',')}`),
    reset: () => calls.push('reset'),
    close: () => calls.push('close'),
  };
  return { feed: feed as unknown as QuoteFeed, calls };
}

function setup(config: Partial<GuardConfig> | null, lock: LockState | null = null, opts: { quotes?: QuoteFeed; more?: Record<string, Partial<GuardConfig>>; startAt?: number } = {}) {
  const { broker, ctx, events } = fakeActorContext(50);
  const clock = { now: opts.startAt ?? MON_10 };
  const initial = Object.fromEntries([
    ...(config ? [[ACCOUNT, { config: guardConfig(config), lock }]] : []),
    ...Object.entries(opts.more ?? {}).map(([id, c]) => [id, { config: guardConfig(c), lock: null }]),
  ]);
  const keeper = new GuardKeeper({ ctx, now: () => clock.now, tickMs: 1000, initial, ...(opts.quotes ? { quotes: opts.quotes } : {}) });
  ctx.guards = keeper;
  const guardEvents = () => events.filter((e): e is GuardEvent => e.type === 'guard');
  // Resolves with the first guard event that matches, as soon as it is emitted.
  const waiters = new Set<() => void>();
  const emit = ctx.emit;
  ctx.emit = (e) => {
    emit(e);
    for (const w of [...waiters]) w();
  };
  const event = (action: GuardEvent['action'], guard?: GuardEvent['guard']) =>
    new Promise<GuardEvent>((resolve) => {
      const check = () => {
        const e = guardEvents().find((x) => x.action === action && (guard === undefined || x.guard === guard));
        if (e) {
          waiters.delete(check);
          resolve(e);
        }
      };
      waiters.add(check);
      check();
    });
  // Lets a flatten the keeper started run to its end (the fake broker answers without timers).
  const settle = () => new Promise((r) => setTimeout(r, 0));
  // A position of `qty` (negative: short) taken at `price`, bypassing the guards.
  const position = (qty: number, price = 5000) => {
    const id = broker.addOrder({ action: qty > 0 ? 'Buy' : 'Sell', qty: Math.abs(qty) });
    broker.fill(id, Math.abs(qty), price);
  };
  return { broker, ctx, keeper, clock, guardEvents, event, settle, position };
}

afterEach(() => {
  vi.useRealTimers();
});

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

  it('check (a dry run) answers what admit would, holding nothing and reporting nothing', () => {
    const { keeper, guardEvents, position } = setup({ maxOrderQty: 2, maxPositionPerContract: 3 });
    expect(keeper.check(newOrder({ qty: 3 }))).toMatchObject({ guard: 'max_order_qty', limit: 2, value: 3 });
    expect(keeper.check(newOrder({ qty: 2 }))).toBeNull();
    expect(keeper.check(newOrder({ qty: 2 }))).toBeNull();
    expect(keeper.exposure.contract(ACCOUNT, CONTRACT)).toEqual({ net: 0, buying: 0, selling: 0 });
    // Against the live position: long 2, one more is within the limit, two are not; a sell is an exit.
    position(2);
    expect(keeper.check(newOrder({ qty: 1 }))).toBeNull();
    expect(keeper.check(newOrder({ qty: 2 }))).toMatchObject({ guard: 'max_position', value: 4 });
    expect(keeper.check(newOrder({ side: 'sell', qty: 2 }))).toBeNull();
    expect(keeper.check({ ...newOrder(), narrowing: [{ allowedProducts: ['NQ'] }] })).toMatchObject({ guard: 'allowed_products' });
    expect(guardEvents()).toEqual([]);
  });

  it('check sees a lock as admit does', async () => {
    const { keeper } = setup({});
    await keeper.lock(ACCOUNT, false, 'test');
    expect(keeper.check(newOrder())).toMatchObject({ guard: 'kill_switch' });
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

  it('an admitted entry holds its contracts until released: a second entry is checked against it', () => {
    const { keeper } = setup({ maxPositionPerContract: 2 });
    const hold = keeper.admit(newOrder({ qty: 2 }))!;
    expect(keeper.exposure.contract(ACCOUNT, CONTRACT)).toEqual({ net: 0, buying: 2, selling: 0 });
    expect(thrown(() => keeper.admit(newOrder())).extensions).toMatchObject({ guard: 'max_position', value: 3 });
    hold.release();
    expect(keeper.admit(newOrder())).not.toBeNull();
  });

  it('a token’s narrowing applies even to an account without guards', () => {
    const { keeper } = setup(null);
    const err = thrown(() => keeper.admit({ ...newOrder(), narrowing: [{ allowedProducts: ['NQ'] }] }));
    expect(err.extensions).toMatchObject({ guard: 'allowed_products', value: 'ES' });
  });

  it('a narrowing tightens the account’s own guards for its orders only, before and after orders without one', () => {
    const { keeper } = setup({ maxOrderQty: 5 });
    keeper.admit(newOrder({ qty: 3 }))!.release();
    expect(thrown(() => keeper.admit({ ...newOrder({ qty: 3 }), narrowing: [{ maxOrderQty: 2 }] })).extensions).toMatchObject({ guard: 'max_order_qty', limit: 2 });
    keeper.admit(newOrder({ qty: 5 }))!.release();
    expect(thrown(() => keeper.admit(newOrder({ qty: 6 }))).extensions).toMatchObject({ limit: 5 });
  });

  it('webhookFlatOnly refuses alerts but not API orders while the contract is not flat', () => {
    const { keeper, position } = setup({ webhookFlatOnly: true });
    position(1);
    expect(keeper.admit(newOrder())).not.toBeNull();
    expect(keeper.admit({ ...newOrder(), origin: 'api' })).not.toBeNull();
    expect(thrown(() => keeper.admit({ ...newOrder(), origin: 'webhook' })).extensions).toMatchObject({ guard: 'flat_only' });
  });

  it('a product outside the symbol catalogue is its symbol without month and year', () => {
    const { broker, keeper } = setup({ allowedProducts: ['XYZ'] });
    broker.mirror.apply('contract', 'Created', { id: 9, name: 'XYZZ6' });
    expect(keeper.admit(newOrder({ symbol: 'XYZZ6' }))).not.toBeNull();
    keeper.setGuards(ACCOUNT, guardConfig({ allowedProducts: ['ES'] }));
    expect(thrown(() => keeper.admit(newOrder({ symbol: 'XYZZ6' }))).extensions).toMatchObject({ guard: 'allowed_products', value: 'XYZ' });
  });

  it('while locked: entries refused, exits placed', async () => {
    const { broker, ctx, keeper } = setup({});
    const entry = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(entry.order.orderId), 2, 5000);
    await keeper.lock(ACCOUNT, false);
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions).toMatchObject({ guard: 'kill_switch', limit: null });
    // An exit carrying a bracket is an entry: its legs would open a new position once it has closed this one.
    expect((await rejected(placeOrder(ctx, newOrder({ side: 'sell', qty: 2, takeProfit: { price: 4990 }, stopLoss: { price: 5010 } })))).extensions).toMatchObject({ guard: 'kill_switch' });
    const exit = await placeOrder(ctx, newOrder({ side: 'sell', qty: 2 }));
    expect(exit.order.side).toBe('sell');
    // Both lots are covered by the working exit: one more sell would open a short — an entry.
    expect((await rejected(placeOrder(ctx, newOrder({ side: 'sell', qty: 1 })))).extensions).toMatchObject({ guard: 'kill_switch' });
  });

  it('a partial exit (reduce-only) of a bracketed position is an exit, though the legs work on its side: long-only or locked', async () => {
    const { broker, ctx, keeper } = setup({ direction: 'long_only' });
    const entry = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 3, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    broker.fill(Number(entry.order.orderId), 3, 5000);
    // A plain sell on top of legs for the whole position is still an entry (README "Risk guards").
    expect((await rejected(placeOrder(ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null })))).extensions).toMatchObject({ guard: 'direction' });
    const partial = await placeOrder(ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true } as never));
    expect(partial.order.side).toBe('sell');
    await keeper.lock(ACCOUNT, false);
    expect((await placeOrder(ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true } as never))).order.side).toBe('sell');
  });

  it('a contract the connection cannot name yet is a retryable 503 naming it, not a guess', () => {
    const { keeper } = setup({ maxPositionPerContract: 1 });
    const err = thrown(() => keeper.admit(newOrder({ symbol: 'NQZ6' })));
    expect(err).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1 });
    expect(err.message).toContain('NQZ6');
  });
});

describe('setGuards', () => {
  it('new guards apply to the next order at once; a lock stays', async () => {
    const { keeper } = setup({ maxOrderQty: 1 });
    keeper.admit(newOrder())!.release();
    expect(keeper.setGuards(ACCOUNT, guardConfig({ maxOrderQty: 3 })).config.maxOrderQty).toBe(3);
    keeper.admit(newOrder({ qty: 3 }))!.release();
    await keeper.lock(ACCOUNT, false);
    expect(keeper.setGuards(ACCOUNT, guardConfig({})).lock).toMatchObject({ guard: 'kill_switch' });
  });

  it('an account without guards gets them', () => {
    const { keeper } = setup(null);
    keeper.setGuards(ACCOUNT, guardConfig({ maxOrderQty: 1 }));
    expect(thrown(() => keeper.admit(newOrder({ qty: 2 }))).extensions).toMatchObject({ guard: 'max_order_qty' });
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
    expect(guardEvents()[1]!.detail).toBe('cancelled 1 orders, ESZ6 liquidated (1)');
    expect(keeper.unlock(ACCOUNT).lock).toBeNull();
    expect(guardEvents().at(-1)).toMatchObject({ guard: 'kill_switch', action: 'unlocked', detail: 'unlocked', lock: null });
  });

  it('an order whose outcome is unknown (broker timeout) when the kill switch flattens: the flatten stays owed, and closes its position once it fills', async () => {
    const { broker, ctx, keeper, clock, guardEvents, settle } = setup(null);
    const late = broker.timeOut('order/placeorder');
    const req = newOrder({ orderType: 'market', price: null });
    expect((await rejected(placeOrder(ctx, req))).code).toBe('BROKER_TIMEOUT');
    const r = await keeper.lock(ACCOUNT, true, 'stop');
    expect(r.flatten).toMatchObject({ positions: [] });
    expect(r.status.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
    expect(guardEvents().at(-1)!.detail).toContain('no known outcome yet');
    // The broker carries the order out late, and it fills: the next tick's flatten closes it.
    late.execute();
    late.answer();
    const id = Number(ctx.model.findByClOrdId(ACCOUNT, req.clOrdId)!.id);
    broker.fill(id, 1, 5000);
    expect(ctx.model.positions(ACCOUNT)).toHaveLength(1);
    clock.now += 1000;
    keeper.tick();
    await vi.waitFor(() => expect(ctx.model.positions(ACCOUNT)).toEqual([]));
    await settle();
    expect(keeper.status(ACCOUNT).lock).toMatchObject({ guard: 'kill_switch' });
    expect(keeper.status(ACCOUNT).lock?.flattenOwed).toBeUndefined();
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened', detail: 'stop: cancelled 0 orders, ESZ6 liquidated (1)' });
  });

  it('an order still on its way to the broker after the flatten’s wait: the flatten stays owed, and closes its position once it fills', async () => {
    const { broker, ctx, keeper, clock, guardEvents } = setup(null);
    const held = broker.hold('order/placeorder');
    const entry = placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    await held.reached;
    const r = await keeper.lock(ACCOUNT, true, 'away');
    expect(r.flatten).toMatchObject({ positions: [], outstandingOrders: 1 });
    expect(r.status.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
    held.release();
    broker.fill(Number((await entry).order.orderId), 1, 5000);
    clock.now += 1000;
    keeper.tick();
    await vi.waitFor(() => expect(ctx.model.positions(ACCOUNT)).toEqual([]));
    await vi.waitFor(() => expect(keeper.status(ACCOUNT).lock?.flattenOwed).toBeUndefined());
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened', detail: 'away: cancelled 0 orders, ESZ6 liquidated (1)' });
  });

  it('without a reason the lock says “kill switch”; locking again keeps the first lock and reports nothing new', async () => {
    const { keeper, clock, guardEvents } = setup(null);
    await keeper.lock(ACCOUNT, false);
    clock.now += 60_000;
    const again = await keeper.lock(ACCOUNT, false, 'again');
    expect(again.status.lock).toEqual({ guard: 'kill_switch', since: MON_10, until: null, detail: 'kill switch' });
    expect(guardEvents().filter((e) => e.action === 'locked')).toHaveLength(1);
    // The account had no guards: it still has none, only the lock.
    expect(again.status.config).toEqual(NO_GUARDS);
  });

  it('the flatten summary names every position closed, says when there was none, and which liquidations failed', async () => {
    const { broker, keeper, guardEvents, position } = setup(null);
    expect((await keeper.lock(ACCOUNT, true)).flatten).toMatchObject({ cancelledOrderIds: [], positions: [] });
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened', detail: 'cancelled 0 orders, no position' });
    keeper.unlock(ACCOUNT);
    position(1);
    broker.mirror.apply('contract', 'Created', { id: 2, name: 'NQZ6' });
    broker.mirror.apply('position', 'Created', { id: 600, accountId: Number(ACCOUNT), contractId: 2, netPos: -2, netPrice: 20000 });
    await keeper.lock(ACCOUNT, true);
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened', detail: 'cancelled 0 orders, ESZ6 liquidated (1), NQZ6 liquidated (2)' });
    keeper.unlock(ACCOUNT);
    position(2);
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'UnknownReason', failureText: 'market closed' });
    await keeper.lock(ACCOUNT, true);
    // A failed liquidation is not a flatten done: it is said as a failure (fault probe: 'flattened'), and owed (run again every tick).
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flatten-failed', detail: 'cancelled 0 orders, ESZ6 failed; a position was not closed: flattening again every second until it is' });
    expect(keeper.status(ACCOUNT).lock).toMatchObject({ flattenOwed: true });
  });

  it('a flatten that fails keeps the lock and is retried on the tick until it goes through', async () => {
    const { broker, ctx, keeper, guardEvents, event, settle } = setup(null);
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.connected = false;
    const r = await keeper.lock(ACCOUNT, true);
    expect(r.flatten).toEqual({ error: 'broker connection is RECONNECTING; the lock holds, and the flatten is retried until it goes through' });
    expect(r.status.lock?.guard).toBe('kill_switch');
    expect(guardEvents().at(-1)).toMatchObject({ guard: 'kill_switch', action: 'flatten-failed', detail: 'broker connection is RECONNECTING; the lock holds, and the flatten is retried until it goes through' });
    keeper.tick();
    await settle();
    expect(guardEvents().filter((e) => e.action === 'flatten-failed')).toHaveLength(1);
    broker.connected = true;
    keeper.tick();
    expect(await event('flattened', 'kill_switch')).toMatchObject({ detail: 'kill switch: cancelled 0 orders, ESZ6 liquidated (1)' });
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
  });

  it.each([
    ['NOT_FOUND', 'an account the connection does not have', '99', () => {}],
    ['ACCOUNT_INACTIVE', 'an account the broker no longer reports', ACCOUNT, (s: ReturnType<typeof setup>) => s.broker.mirror.apply('account', 'Deleted', { id: Number(ACCOUNT) })],
  ])('lock with flatten answers %s for %s (nothing to retry)', async (code, _what, accountId, drop) => {
    const s = setup(null);
    drop(s);
    expect((await rejected(s.keeper.lock(accountId, true))).code).toBe(code);
  });

  it('unlock of an account that is not locked changes nothing and reports nothing', () => {
    const { keeper, guardEvents } = setup({ maxOrderQty: 1 });
    expect(keeper.unlock(ACCOUNT).lock).toBeNull();
    expect(keeper.unlock('99').lock).toBeNull();
    expect(guardEvents()).toEqual([]);
  });
});

describe('status', () => {
  it('an account without guards: no guards, no lock, no window, nothing held', () => {
    const { keeper } = setup(null);
    expect(keeper.status('99')).toMatchObject({ accountId: '99', config: NO_GUARDS, lock: null, inWindow: null, positions: [] });
  });

  it('a lock whose day is over is lifted when status is read, before any tick', () => {
    const lock: LockState = { guard: 'daily_loss', since: MON_10 - 1000, until: MON_10 + 1000, detail: 'x' };
    const { keeper, clock, guardEvents } = setup({ dailyLossLimit: 1000 }, lock);
    expect(keeper.status(ACCOUNT).lock).toEqual(lock);
    clock.now = MON_10 + 1000;
    expect(keeper.status(ACCOUNT).lock).toBeNull();
    expect(guardEvents()).toMatchObject([{ guard: 'daily_loss', action: 'unlocked', detail: 'the next trading day began', lock: null }]);
  });

  it('a contract the connection has no name for is listed by its id', () => {
    const { broker, keeper } = setup({});
    broker.mirror.apply('order', 'Created', { id: 500, accountId: Number(ACCOUNT), contractId: 99, action: 'Sell', ordStatus: 'Working' });
    broker.mirror.apply('orderVersion', 'Created', { id: 501, orderId: 500, orderQty: 2 });
    expect(keeper.status(ACCOUNT).positions).toEqual([{ symbol: '99', net: 0, buying: 0, selling: 2, exposure: 2 }]);
  });
});

describe('clock and quotes', () => {
  it('start ticks every tickMs until stop; stop closes the quote feed', () => {
    vi.useFakeTimers();
    const quotes = quoteFeed();
    const { keeper } = setup({}, null, { quotes: quotes.feed });
    keeper.start();
    keeper.start();
    vi.advanceTimersByTime(2000);
    expect(quotes.calls).toEqual(['want ', 'want ']);
    keeper.stop();
    vi.advanceTimersByTime(2000);
    expect(quotes.calls).toEqual(['want ', 'want ', 'close']);
  });

  it('a keeper without a quote feed reconnects and stops all the same', () => {
    const { keeper } = setup({ dailyLossLimit: 100 });
    keeper.start();
    expect(() => keeper.connected()).not.toThrow();
    expect(() => keeper.stop()).not.toThrow();
  });

  it('quotes are wanted for the contracts every account holds, P&L limit or not (web probe: a limit saved against a stale day P&L locked and flattened at once), and only while connected', () => {
    const quotes = quoteFeed();
    const { broker, keeper } = setup({ dailyLossLimit: 100 }, null, { quotes: quotes.feed, more: { '8': { dailyProfitTarget: 100 }, '9': { maxOrderQty: 1 } } });
    otherPosition(broker, 7, 1, 500);
    otherPosition(broker, 8, 2, 501);
    otherPosition(broker, 9, 3, 502);
    keeper.tick();
    expect(quotes.calls.at(-1)).toBe('want 1,2,3');
    keeper.setGuards('9', guardConfig({ dailyLossLimit: 50 }));
    expect(quotes.calls.at(-1)).toBe('want 1,2,3');
    // After a reconnect the old socket's subscriptions are gone: forget them, then ask again.
    quotes.calls.length = 0;
    keeper.connected();
    expect(quotes.calls).toEqual(['reset', 'want 1,2,3']);
    quotes.calls.length = 0;
    broker.connected = false;
    keeper.tick();
    expect(quotes.calls).toEqual([]);
  });
});

/** A position entity on any account (the fake broker fills account 7 only). */
function otherPosition(broker: ReturnType<typeof setup>['broker'], accountId: number, contractId: number, id: number) {
  broker.mirror.apply('position', 'Created', { id, accountId, contractId, netPos: 1, netPrice: 100 });
}

describe('kill switch while the connection is FAILED (item 4)', () => {
  it('locks at once and says the flatten did not run; the owed flatten rides on the lock, so an actor started with it flattens once CONNECTED', async () => {
    const { broker, ctx, keeper, guardEvents } = setup(null);
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.failed = 'authentication refused: bad password';
    const r = await keeper.lock(ACCOUNT, true, 'before new credentials');
    expect(r.status.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
    expect(r.flatten).toEqual({ error: expect.stringMatching(/^not flattened: Broker connection failed \(authentication refused: bad password\).*flatten runs once the connection is CONNECTED again$/) });
    expect(thrown(() => keeper.admit(newOrder())).extensions).toMatchObject({ guard: 'kill_switch' });
    // Stored from the event, as the front stores every lock change.
    const stored = guardEvents().find((e) => e.action === 'flatten-failed')!;
    expect(stored).toMatchObject({ action: 'flatten-failed', lock: { flattenOwed: true } });
    // While FAILED the tick does not try (nor log) again.
    keeper.tick();
    await new Promise((res) => setTimeout(res, 20));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(0);

    // The connection restarts with new credentials: a new actor, started with the stored lock.
    broker.failed = undefined;
    const restarted = new GuardKeeper({ ctx, now: () => MON_10, tickMs: 1000, initial: { [ACCOUNT]: { config: guardConfig({}), lock: stored.lock! } } });
    ctx.guards = restarted;
    expect(thrown(() => restarted.admit(newOrder())).extensions).toMatchObject({ guard: 'kill_switch' });
    restarted.tick();
    await new Promise((res) => setTimeout(res, 100));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    const done = guardEvents().at(-1)!;
    expect(done).toMatchObject({ action: 'flattened', guard: 'kill_switch' });
    expect(done.lock).toEqual({ guard: 'kill_switch', since: expect.any(Number), until: null, detail: 'before new credentials' });
    expect(restarted.status(ACCOUNT).lock).not.toHaveProperty('flattenOwed');
  });

  it('guards can be read and set on a FAILED connection, and an unlock drops the owed flatten', async () => {
    const { broker, keeper } = setup(null);
    broker.failed = 'captcha';
    expect(keeper.setGuards(ACCOUNT, guardConfig({ maxOrderQty: 1 })).config.maxOrderQty).toBe(1);
    await keeper.lock(ACCOUNT, true);
    expect(keeper.unlock(ACCOUNT).lock).toBeNull();
    broker.failed = undefined;
    keeper.tick();
    await new Promise((res) => setTimeout(res, 50));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(0);
    expect(broker.sent.filter((x) => x.endpoint === 'order/cancelorder')).toHaveLength(0);
  });
});

describe('trading windows', () => {
  it('entries refused outside; with flattenAtEnd the account is flattened when the window closes', async () => {
    const { broker, ctx, keeper, clock, event, position } = setup({ tradingWindows: WINDOWS });
    position(1);
    keeper.tick();
    expect(keeper.status(ACCOUNT).inWindow).toBe(true);
    clock.now = MON_15;
    keeper.tick();
    expect(await event('flattened')).toMatchObject({ guard: 'trading_window', detail: 'the trading window ended: cancelled 0 orders, ESZ6 liquidated (1)' });
    expect(broker.bodies('order/liquidateposition')).toEqual([expect.objectContaining({ accountId: 7, contractId: CONTRACT })]);
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions).toMatchObject({ guard: 'trading_window', value: 'Mon 15:00 America/Chicago' });
  });

  it('a window that closes before the first tick still flattens: whether the account is inside is known when the guards are set or started', async () => {
    const started = setup({ tradingWindows: WINDOWS });
    started.position(1);
    started.clock.now = MON_15;
    started.keeper.tick();
    expect(await started.event('flattened')).toMatchObject({ guard: 'trading_window' });

    const set = setup(null);
    set.position(1);
    set.keeper.setGuards(ACCOUNT, { ...NO_GUARDS, tradingWindows: WINDOWS });
    set.clock.now = MON_15;
    set.keeper.tick();
    expect(await set.event('flattened')).toMatchObject({ guard: 'trading_window' });
    expect(set.broker.bodies('order/liquidateposition')).toEqual([expect.objectContaining({ accountId: 7, contractId: CONTRACT })]);
  });

  it('guards saved just after a window ended, before the tick saw it, still flatten (prop probe: the same guards saved 100 ms after the end cancelled the flatten; an entry then filled outside the window)', async () => {
    const { broker, keeper, clock, event, position } = setup({ tradingWindows: WINDOWS });
    position(2);
    keeper.tick();
    clock.now = MON_15 + 100;
    keeper.setGuards(ACCOUNT, guardConfig({ tradingWindows: WINDOWS }));
    expect(await event('flattened')).toMatchObject({ guard: 'trading_window', detail: expect.stringContaining('the trading window ended') });
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    // The tick after sees nothing more to do.
    keeper.tick();
    await new Promise((res) => setTimeout(res, 20));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
  });

  it('a window edited to have ended while holding flattens, as its end would have; one edited while outside changes nothing', async () => {
    const inside = setup({ tradingWindows: WINDOWS });
    inside.position(1);
    inside.keeper.tick();
    inside.keeper.setGuards(ACCOUNT, guardConfig({ tradingWindows: { ...WINDOWS, windows: [{ days: ['mon'], start: '08:30', end: '09:30' }] } }));
    expect(await inside.event('flattened')).toMatchObject({ guard: 'trading_window' });
    // Monday 07:00, before the window opens.
    const outside = setup({ tradingWindows: WINDOWS }, null, { startAt: zonedToUtc(2026, 11, 23, 7 * 60, 'America/Chicago') });
    outside.position(1);
    outside.keeper.tick();
    outside.keeper.setGuards(ACCOUNT, guardConfig({ tradingWindows: { ...WINDOWS, windows: [{ days: ['mon'], start: '08:30', end: '09:30' }] } }));
    await outside.settle();
    expect(outside.broker.bodies('order/liquidateposition')).toEqual([]);
  });

  it('nothing is flattened while inside a window, nor when the keeper starts outside one long after its end', async () => {
    const inside = setup({ tradingWindows: WINDOWS });
    inside.position(1);
    inside.keeper.tick();
    inside.keeper.tick();
    // Tuesday 05:00: 14 hours after Monday's window ended.
    const late = setup({ tradingWindows: WINDOWS }, null, { startAt: MON_15 + 14 * 3_600_000 });
    late.position(1);
    late.keeper.tick();
    late.keeper.tick();
    await inside.settle();
    for (const s of [inside, late]) {
      expect(s.broker.bodies('order/liquidateposition')).toEqual([]);
      expect(s.guardEvents()).toEqual([]);
    }
  });

  it('a keeper started after a window ended (the service was down at its end) owes the flatten it missed, and runs it once connected', async () => {
    const s = setup({ tradingWindows: WINDOWS }, null, { startAt: MON_15 + 10 * 60_000 });
    s.position(1);
    s.keeper.tick();
    expect(await s.event('flattened')).toMatchObject({ guard: 'trading_window', detail: expect.stringContaining('the trading window ended while this account’s connection was not running') });
    expect(s.broker.bodies('order/liquidateposition')).toHaveLength(1);
    s.keeper.tick();
    await s.settle();
    expect(s.guardEvents().filter((e) => e.action === 'flattened')).toHaveLength(1);
  });

  it.each([
    ['an account the connection does not have', '99', 'account 99 is not on this connection'],
    ['an account the broker no longer reports', ACCOUNT, 'Account is inactive'],
  ])('a guard flatten of %s is dropped, not retried', async (_what, accountId, message) => {
    const s = setup(null, null, { more: { [accountId]: { tradingWindows: WINDOWS } } });
    s.position(1);
    s.broker.mirror.apply('account', 'Deleted', { id: Number(accountId) });
    s.keeper.tick();
    s.clock.now = MON_15;
    s.keeper.tick();
    expect((await s.event('flatten-failed')).detail).toBe(`the trading window ended: ${message}`);
    await s.settle();
    // Were it still owed, the next tick would flatten it now that the account is back.
    s.broker.mirror.apply('account', 'Created', { id: Number(accountId), name: 'BACK', active: true });
    s.ctx.model.refreshAccounts();
    s.keeper.tick();
    await s.settle();
    expect(s.guardEvents().filter((e) => e.action === 'flattened')).toEqual([]);
  });
});

describe('daily loss limit and profit target', () => {
  it('open loss reaching the limit locks until the next trading day and flattens; unlock is refused; the next day lifts it', async () => {
    const { broker, ctx, keeper, clock, guardEvents, event } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    keeper.pnl.mark(CONTRACT, 4995.25);
    expect(guardEvents()).toEqual([]);
    keeper.pnl.mark(CONTRACT, 4995);
    const detail = 'P&L of the day -500 reached the daily loss limit of 500';
    expect(guardEvents()[0]).toMatchObject({ guard: 'daily_loss', action: 'locked', detail, lock: { guard: 'daily_loss', until: DAY.end, detail } });
    expect(await event('flattened')).toMatchObject({ guard: 'daily_loss', detail: `${detail}: cancelled 0 orders, ESZ6 liquidated (2)` });
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    const until = new Date(DAY.end).toISOString();
    expect(thrown(() => keeper.unlock(ACCOUNT))).toMatchObject({
      code: 'CONFLICT',
      message: `the account is locked by daily_loss until ${until}: such a lock lifts when the next trading day begins`,
      extensions: { guard: 'daily_loss', lockedUntil: until },
    });
    // Further quotes do not trip it again the same day.
    keeper.pnl.mark(CONTRACT, 4990);
    expect(guardEvents().filter((e) => e.action === 'locked')).toHaveLength(1);
    clock.now = DAY.end;
    keeper.tick();
    expect(keeper.status(ACCOUNT).lock).toBeNull();
    expect(guardEvents().at(-1)).toMatchObject({ action: 'unlocked', guard: 'daily_loss', lock: null });
  });

  it('a daily-loss flatten owed (the broker did not answer) survives the kill switch thrown and lifted meanwhile: it runs once the broker is back (prop probe: long 2 for good)', async () => {
    const { broker, ctx, keeper, event } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    broker.failed = 'broker quiet';
    keeper.pnl.mark(CONTRACT, 4994);
    expect(await event('flatten-failed', 'daily_loss')).toMatchObject({ guard: 'daily_loss' });
    const locked = await keeper.lock(ACCOUNT, true, 'panic');
    expect(locked.flatten).toMatchObject({ error: expect.any(String) });
    expect(keeper.unlock(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss', flattenOwed: true });
    broker.failed = undefined;
    keeper.tick();
    expect(await event('flattened', 'daily_loss')).toMatchObject({ detail: expect.stringContaining('ESZ6 liquidated (2)') });
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    expect(keeper.status(ACCOUNT).lock).not.toHaveProperty('flattenOwed');
  });

  it('a daily loss tripping while the kill switch’s flatten is being retried stays owed after the unlock (re-probe: long 2 for good, flattenPending shown)', async () => {
    const { broker, ctx, keeper, event } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    broker.failed = 'broker quiet';
    expect((await keeper.lock(ACCOUNT, true, 'panic')).flatten).toMatchObject({ error: expect.any(String) });
    broker.failed = undefined;
    // The retry is on its way (held at the broker) when the loss trips.
    const held = broker.hold('order/liquidateposition');
    keeper.tick();
    await held.reached;
    keeper.pnl.mark(CONTRACT, 4994);
    expect(keeper.unlock(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss' });
    held.release();
    await new Promise((res) => setTimeout(res, 20));
    keeper.tick();
    expect(await event('flattened', 'daily_loss')).toMatchObject({ guard: 'daily_loss' });
  });

  it('a daily-loss lock under a kill switch survives a restart of the actor: the unlock leaves it, and its owed flatten runs (re-probe: after a restart the unlock freed the account and a buy filled)', async () => {
    const { broker, ctx, keeper, guardEvents } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    broker.failed = 'broker quiet';
    keeper.pnl.mark(CONTRACT, 4994);
    await keeper.lock(ACCOUNT, false, 'panic');
    // What the front stored: the lock of the last guard event that carried one.
    const stored = guardEvents().filter((e) => e.lock !== undefined).at(-1)!.lock!;
    expect(stored).toMatchObject({ guard: 'kill_switch', under: { guard: 'daily_loss', flattenOwed: true } });
    broker.failed = undefined;
    // (Started on a mirror that already holds the position: without the limit, as the keeper's P&L starts before it.)
    const restarted = new GuardKeeper({ ctx, now: () => MON_10, tickMs: 1000, initial: { [ACCOUNT]: { config: guardConfig({}), lock: stored } } });
    ctx.guards = restarted;
    expect(restarted.unlock(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss', until: DAY.end });
    expect(thrown(() => restarted.admit(newOrder())).extensions).toMatchObject({ guard: 'daily_loss' });
    restarted.tick();
    await new Promise((res) => setTimeout(res, 50));
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
  });

  it('a new trading day counts from zero at the first order, before any tick', async () => {
    const { broker, ctx, keeper, clock } = setup({ dailyLossLimit: 500 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    broker.fill(Number(o.order.orderId), 1, 5000);
    broker.mirror.apply('fillPair', 'Created', { id: 900, positionId: broker.mirror.all('position')[0]!.id, buyFillId: 1, sellFillId: 2, qty: 1, buyPrice: 5000, sellPrice: 4992 });
    expect(keeper.status(ACCOUNT).day.realized).toBe(-400);
    clock.now = DAY.end + 1000;
    // Without the roll, −400 realized + −150 open would trip the limit on this check.
    keeper.pnl.mark(CONTRACT, 4997);
    await placeOrder(ctx, newOrder());
    expect(keeper.status(ACCOUNT)).toMatchObject({ lock: null, day: { realized: 0, open: -150 } });
  });

  it('a tripped P&L lock is stored owing its flatten before the flatten is sent, and the flatten clears it', async () => {
    const { keeper, event, guardEvents, position } = setup({ dailyLossLimit: 100 });
    position(1);
    keeper.pnl.mark(CONTRACT, 4990);
    // The first event (what the front stores) already owes the flatten: a crash while it runs
    // leaves a stored lock that still owes it.
    expect(guardEvents()[0]).toMatchObject({ action: 'locked', lock: { guard: 'daily_loss', flattenOwed: true } });
    const done = await event('flattened', 'daily_loss');
    expect(done.lock).toMatchObject({ guard: 'daily_loss' });
    expect(done.lock).not.toHaveProperty('flattenOwed');
    expect(keeper.status(ACCOUNT).lock).not.toHaveProperty('flattenOwed');
  });

  it('a kill switch with flatten is stored owing it before it is sent; over an existing kill switch too', async () => {
    const { keeper, guardEvents, position } = setup({});
    position(1);
    const locked = keeper.lock(ACCOUNT, true);
    expect(guardEvents()[0]).toMatchObject({ action: 'locked', lock: { guard: 'kill_switch', flattenOwed: true } });
    expect((await locked).status.lock).not.toHaveProperty('flattenOwed');
    expect(guardEvents().at(-1)).toMatchObject({ action: 'flattened' });
    expect(guardEvents().at(-1)!.lock).not.toHaveProperty('flattenOwed');
    position(1);
    const again = keeper.lock(ACCOUNT, true);
    expect(guardEvents().at(-1)).toMatchObject({ action: 'locked', lock: { guard: 'kill_switch', flattenOwed: true } });
    expect((await again).status.lock).not.toHaveProperty('flattenOwed');
  });

  it.each([
    ['a daily loss lock', { guard: 'daily_loss', since: MON_10 - 1000, until: DAY.end, detail: 'P&L of the day -150 reached the daily loss limit of 100', flattenOwed: true }],
    ['a kill switch', { guard: 'kill_switch', since: MON_10 - 1000, until: null, detail: 'kill switch', flattenOwed: true }],
  ] as const)('%s restored still owing its flatten (the service died while it ran) flattens once connected, and no longer owes it', async (_what, stored) => {
    const { broker, keeper, event, position } = setup({ dailyLossLimit: 100 }, { ...stored });
    position(1);
    keeper.tick();
    const done = await event('flattened', stored.guard);
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    expect(done.lock).toMatchObject({ guard: stored.guard, detail: stored.detail });
    expect(done.lock).not.toHaveProperty('flattenOwed');
  });

  it('a P&L lock restored at start-up for today does not trip (or report, or flatten) again', async () => {
    const lock: LockState = { guard: 'daily_loss', since: MON_10 - 1000, until: DAY.end, detail: 'x' };
    const { broker, keeper, guardEvents, settle, position } = setup({ dailyLossLimit: 100, dailyProfitTarget: null }, lock);
    position(1);
    keeper.pnl.mark(CONTRACT, 4990);
    keeper.tick();
    await settle();
    expect(guardEvents()).toEqual([]);
    expect(broker.bodies('order/liquidateposition')).toEqual([]);
    expect(keeper.status(ACCOUNT).lock).toEqual(lock);
  });

  it('yesterday’s P&L lock, restored after its day ended, does not stand in for today’s', () => {
    const lock: LockState = { guard: 'daily_loss', since: DAY.start - 3_600_000, until: DAY.start, detail: 'yesterday' };
    const { keeper, position } = setup({ dailyLossLimit: 100 }, lock);
    position(1);
    keeper.pnl.mark(CONTRACT, 4990);
    expect(keeper.status(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss', since: MON_10, until: DAY.end });
  });

  it('the profit target trips the same way; a kill-switch lock stays in force', async () => {
    const { keeper, event, position } = setup({ dailyProfitTarget: 100 });
    position(1);
    await keeper.lock(ACCOUNT, false);
    keeper.pnl.mark(CONTRACT, 5002);
    expect(keeper.status(ACCOUNT).lock?.guard).toBe('kill_switch');
    expect(await event('flattened', 'profit_target')).toMatchObject({ detail: 'P&L of the day 100 reached the profit target of 100: cancelled 0 orders, ESZ6 liquidated (1)' });
  });

  it('a P&L limit reached under a kill switch still locks the account for the rest of the day when the kill switch is lifted', async () => {
    const { keeper, clock, event, guardEvents, position } = setup({ dailyLossLimit: 100 });
    position(1);
    await keeper.lock(ACCOUNT, false);
    keeper.pnl.mark(CONTRACT, 4990);
    await event('flattened', 'daily_loss');
    const status = keeper.unlock(ACCOUNT);
    expect(status.lock).toMatchObject({ guard: 'daily_loss', until: DAY.end, detail: 'P&L of the day -500 reached the daily loss limit of 100' });
    expect(guardEvents().slice(-2).map((e) => [e.guard, e.action])).toEqual([['kill_switch', 'unlocked'], ['daily_loss', 'locked']]);
    expect(thrown(() => keeper.admit(newOrder())).extensions).toMatchObject({ guard: 'daily_loss' });
    // Past its day, the kill switch lifted leaves nothing behind (and reports no lock).
    await keeper.lock(ACCOUNT, false);
    clock.now = DAY.end;
    expect(keeper.unlock(ACCOUNT).lock).toBeNull();
    expect(guardEvents().at(-1)).toMatchObject({ guard: 'kill_switch', action: 'unlocked' });
  });

  it('a kill switch over a P&L lock cannot be used to lift the P&L lock early', async () => {
    const { keeper, position } = setup({ dailyLossLimit: 100 });
    position(1);
    keeper.pnl.mark(CONTRACT, 4990);
    await keeper.lock(ACCOUNT, false);
    expect(keeper.unlock(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss', until: DAY.end });
  });

  it('a limit trips once a day, even under a kill switch and with the position still open', async () => {
    const { broker, keeper, event, settle, guardEvents, position } = setup({ dailyLossLimit: 100 });
    position(1);
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'UnknownReason', failureText: 'market closed' });
    await keeper.lock(ACCOUNT, false);
    keeper.pnl.mark(CONTRACT, 4990);
    expect((await event('flatten-failed', 'daily_loss')).detail).toMatch(/ESZ6 failed; a position was not closed: flattening again every second until it is$/);
    await settle();
    keeper.pnl.mark(CONTRACT, 4980);
    keeper.tick();
    await settle();
    expect(guardEvents().filter((e) => e.guard === 'daily_loss' && (e.action === 'flattened' || e.action === 'flatten-failed'))).toHaveLength(1);
  });

  it('a guard flatten that fails is reported once, retried on each tick, and reported again when it goes through', async () => {
    const { broker, keeper, event, settle, guardEvents, position } = setup({ dailyLossLimit: 100 });
    position(1);
    broker.connected = false;
    keeper.pnl.mark(CONTRACT, 4990);
    const detail = 'P&L of the day -500 reached the daily loss limit of 100';
    expect(await event('flatten-failed')).toMatchObject({ guard: 'daily_loss', detail: `${detail}: broker connection is RECONNECTING; retrying` });
    await settle();
    keeper.tick();
    await settle();
    expect(guardEvents().filter((e) => e.action === 'flatten-failed')).toHaveLength(1);
    broker.connected = true;
    keeper.tick();
    expect(await event('flattened')).toMatchObject({ guard: 'daily_loss', detail: `${detail}: cancelled 0 orders, ESZ6 liquidated (1)` });
  });

  it('an entry sent while the kill switch’s flatten is still running is refused at once, not after the flatten (re-probe: a slow broker made it a 504 for an order never sent)', async () => {
    const { broker, keeper, ctx, position } = setup({});
    position(1);
    await ctx.conn.ensureContract({ name: 'ESZ6' });
    const held = broker.hold('order/liquidateposition');
    const locking = keeper.lock(ACCOUNT, true);
    await held.reached;
    const t0 = Date.now();
    const refused = await rejected(placeOrder(ctx, newOrder()));
    expect(refused).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'kill_switch' } });
    expect(Date.now() - t0).toBeLessThan(500);
    held.release();
    await locking;
  });

  it('a flatten whose liquidation failed is not done: the lock keeps owing it, and it runs again until the position is closed', async () => {
    const { broker, keeper, guardEvents, settle, position } = setup({ dailyLossLimit: 100 });
    position(1);
    // The liquidation times out (the broker never carries it out).
    broker.timeOut('order/liquidateposition');
    keeper.pnl.mark(CONTRACT, 4990);
    await expect.poll(() => guardEvents().some((e) => e.action === 'flatten-failed')).toBe(true);
    await settle();
    expect(guardEvents().find((e) => e.action === 'flatten-failed')!.detail).toMatch(/a position was not closed: flattening again every second until it is$/);
    expect(keeper.status(ACCOUNT).lock).toMatchObject({ guard: 'daily_loss', flattenOwed: true });
    keeper.tick();
    await expect.poll(() => broker.bodies('order/liquidateposition').length).toBe(2);
    await expect.poll(() => keeper.status(ACCOUNT).lock?.flattenOwed).toBeUndefined();
  });

  it('unlock while the kill switch’s flatten is running drops it: when that flatten fails, it is not run again on the unlocked account', async () => {
    const { broker, keeper, settle, position } = setup({});
    position(1);
    broker.addOrder({ action: 'Buy', orderType: 'Limit', qty: 1, price: 4900 });
    // The flatten's cancel is answered with a refusal, once the account has been unlocked.
    broker.handlers['order/cancelorder'] = () => ({ failureReason: 'UnknownReason', failureText: 'broker busy' });
    const held = broker.hold('order/cancelorder');
    const locking = keeper.lock(ACCOUNT, true);
    await held.reached;
    keeper.unlock(ACCOUNT);
    held.release();
    const r = await locking;
    expect(r.status.lock).toBeNull();
    expect(r.flatten).toMatchObject({ error: expect.stringMatching(/the account was unlocked meanwhile: not retried$/) });
    await settle();
    keeper.tick();
    keeper.tick();
    await settle();
    expect(broker.bodies('order/liquidateposition')).toEqual([]);
    expect(broker.bodies('order/cancelorder')).toHaveLength(1);
  });

  it('a guard flatten in flight is not started twice (the window ends during a P&L flatten)', async () => {
    const { broker, keeper, clock, event, settle, position } = setup({ dailyLossLimit: 100, tradingWindows: WINDOWS });
    position(1);
    keeper.tick();
    const held = broker.hold('order/liquidateposition');
    keeper.pnl.mark(CONTRACT, 4990);
    await held.reached;
    clock.now = MON_15;
    keeper.tick();
    keeper.tick();
    await settle();
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
    held.release();
    await event('flattened', 'daily_loss');
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
  });

  it('status shows the day, its P&L and the exposure per contract', async () => {
    const { broker, ctx, keeper } = setup({ maxPositionPerContract: 5 });
    const o = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, qty: 2 }));
    broker.fill(Number(o.order.orderId), 2, 5000);
    await placeOrder(ctx, newOrder({ price: 4990 }));
    keeper.pnl.mark(CONTRACT, 5001);
    const s = keeper.status(ACCOUNT);
    expect(s).toMatchObject({ accountId: ACCOUNT, config: { maxPositionPerContract: 5 }, lock: null, inWindow: null });
    expect(s.day).toMatchObject({ ...DAY, open: 100, pnl: 100 });
    expect(s.positions).toEqual([{ symbol: 'ESZ6', net: 2, buying: 1, selling: 0, exposure: 3 }]);
  });
});
