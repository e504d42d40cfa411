/**
 * Paper broker order flows over a plain `ws` client: sync snapshot + props events for a full
 * lifecycle, OSO legs, multibracket strategies, liquidation, risk rejects, unknown symbols.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, syncedClient, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;
let c: RawClient;
let accountId: number;
let userId: number;
let snapshot: Msg;

beforeEach(async () => {
  sim = await startSim({ priceStepMs: 0, seed: 7 });
  const u = await userWithToken(sim, 'ann', ['A', 'B']);
  accountId = u.accountIds[0]!;
  userId = u.userId;
  ({ c, snapshot } = await syncedClient(sim, u.token, u.userId));
  await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
});
afterEach(async () => {
  c.close();
  await sim.close();
});

const order = (extra: Record<string, unknown>) => ({
  accountSpec: 'ann-A', accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true, ...extra,
});
const statusOf = async (orderId: number, status: string) => c.event('order', (e) => e.id === orderId && e.ordStatus === status);

describe('sync', () => {
  it('answers user/syncrequest with a snapshot holding every collection, filtered to the user', () => {
    expect(snapshot.users).toEqual([expect.objectContaining({ id: userId, name: 'ann' })]);
    expect(snapshot.accounts.map((a: Msg) => a.name)).toEqual(['ann-A', 'ann-B']);
    expect(snapshot.cashBalances).toHaveLength(2);
    for (const k of ['positions', 'orders', 'fills', 'fillPairs', 'commands', 'orderStrategies', 'orderStrategyLinks', 'contracts']) {
      expect(snapshot[k]).toEqual([]);
    }
  });

  it('honours the accounts and entityTypes filters for the snapshot and the events', async () => {
    const u = await userWithToken(sim, 'bob', ['X', 'Y']);
    const other = await RawClient.authorized(sim.wsUrl, u.token);
    const r = await other.request('user/syncrequest', '', { accounts: [u.accountIds[1]], entityTypes: ['order'] });
    expect(r.d.accounts).toEqual([]);
    expect(r.d.orders).toEqual([]);
    const place = (id: number, name: string) => other.request('order/placeorder', '', { ...order({ accountId: id, accountSpec: name }), orderType: 'Limit', price: 4000 });
    const first = await place(u.accountIds[0]!, 'bob-X');
    const second = await place(u.accountIds[1]!, 'bob-Y');
    await other.event('order', (e) => e.id === second.d.orderId && e.ordStatus === 'Working');
    expect(other.messages.filter((m) => m.e === 'props').every((m) => m.d.entityType === 'order' && m.d.entity.accountId === u.accountIds[1])).toBe(true);
    expect(other.events('order').some((e) => e.entity.id === first.d.orderId)).toBe(false);
    // Tradovate's partner rule: an explicit empty entityTypes list syncs nothing.
    const empty = await other.request('user/syncrequest', '', { users: [u.userId], entityTypes: [] });
    expect(empty.d.accounts).toEqual([]);
    other.close();
  });
});

describe('order lifecycle', () => {
  it('place → partial fill → fill → position → close → fillPair, with one id sequence', async () => {
    const placed = await c.request('order/placeorder', '', order({ orderType: 'Limit', price: 4990, orderQty: 3, clOrdId: 'mine-1' }));
    expect(placed.s).toBe(200);
    const id = placed.d.orderId;
    await statusOf(id, 'Working');
    expect(c.events('command')[0].entity).toMatchObject({ id, orderId: id, commandType: 'New', clOrdId: 'mine-1', isAutomated: true });
    expect(c.events('orderVersion')[0].entity).toMatchObject({ id, orderId: id, orderQty: 3, orderType: 'Limit', price: 4990 });
    expect(c.events('order')[0]).toMatchObject({ eventType: 'Created', entity: { id, ordStatus: 'PendingNew' } });

    expect((await ctl(sim, 'POST', `/orders/${id}/fill`, { qty: 1 })).body).toMatchObject({ filledQty: 1, ordStatus: 'Working' });
    const partial = await c.event('executionReport', (e) => e.orderId === id && e.execType === 'Trade');
    expect(partial.entity).toMatchObject({ cumQty: 1, lastQty: 1, lastPx: 4990, ordStatus: 'Working' });

    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4989.75 });
    await statusOf(id, 'Filled');
    const fills = c.events('fill').filter((f) => f.entity.orderId === id);
    expect(fills.reduce((n, f) => n + f.entity.qty, 0)).toBe(3);
    expect(fills.length).toBeGreaterThanOrEqual(2);
    const pos = await c.event('position', (e) => e.netPos === 3);
    expect(pos.entity).toMatchObject({ accountId, netPrice: 4990, bought: 3 });

    const exit = await c.request('order/placeorder', '', order({ action: 'Sell', orderQty: 3 }));
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
    await statusOf(exit.d.orderId, 'Filled');
    await c.event('position', (e) => e.netPos === 0);
    const pairs = c.events('fillPair').map((p) => p.entity);
    expect(pairs.reduce((n, p) => n + p.qty, 0)).toBe(3);
    expect(pairs.every((p) => p.buyPrice === 4990 && p.sellPrice === 4989.75)).toBe(true);
    const cash = await c.event('cashBalance', (e) => e.realizedPnL !== 0);
    expect(cash.entity.realizedPnL).toBe(-0.25 * 3 * 50);
    // order, its first command and its first orderVersion share one id; every other entity gets the next one.
    const shared = new Set(['order', 'command', 'orderVersion']);
    const ids = c.messages.filter((m) => m.e === 'props' && !shared.has(m.d.entityType) && m.d.eventType === 'Created').map((m) => m.d.entity.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toBeGreaterThan(id);
  });

  it('cancels a working order ({commandId} then executionReport Canceled) and refuses a late cancel asynchronously', async () => {
    const placed = await c.request('order/placeorder', '', order({ orderType: 'Limit', price: 4900 }));
    const cancel = await c.request('order/cancelorder', '', { orderId: placed.d.orderId });
    expect(cancel.d).toEqual({ commandId: expect.any(Number) });
    await statusOf(placed.d.orderId, 'Canceled');
    const report = await c.event('executionReport', (e) => e.orderId === placed.d.orderId && e.execType === 'Canceled');
    expect(report.entity.ordStatus).toBe('Canceled');
    const late = await c.request('order/cancelorder', '', { orderId: placed.d.orderId });
    const rejected = await c.event('commandReport', (e) => e.commandId === late.d.commandId);
    expect(rejected.entity).toMatchObject({ commandStatus: 'ExecutionRejected', rejectReason: 'TooLate' });
  });

  it('modifies an order: orderVersion id == command id, Replaced, and a marketable modify fills', async () => {
    const placed = await c.request('order/placeorder', '', order({ orderType: 'Limit', price: 4900 }));
    const mod = await c.request('order/modifyorder', '', { orderId: placed.d.orderId, orderQty: 1, orderType: 'Limit', price: 5000 });
    const version = await c.event('orderVersion', (e) => e.id === mod.d.commandId);
    expect(version.entity).toMatchObject({ orderId: placed.d.orderId, price: 5000 });
    await c.event('executionReport', (e) => e.execType === 'Replaced');
    await statusOf(placed.d.orderId, 'Filled');
  });

  it('answers an unknown symbol like Tradovate: failureReason UnknownReason, "Access is denied"', async () => {
    const r = await c.request('order/placeorder', '', order({ symbol: 'E6H9' }));
    expect(r).toMatchObject({ s: 200, d: { failureReason: 'UnknownReason', failureText: 'Access is denied' } });
  });

  it('rejects over-limit orders as commandReport RiskRejected + order Rejected', async () => {
    await ctl(sim, 'POST', `/accounts/${accountId}/limits`, { maxOrderQty: 2, maxPosition: 3 });
    const big = await c.request('order/placeorder', '', order({ orderQty: 5 }));
    expect(big.d.orderId).toEqual(expect.any(Number));
    const report = await c.event('commandReport', (e) => e.commandId === big.d.orderId && e.commandStatus === 'RiskRejected');
    expect(report.entity).toMatchObject({ rejectReason: 'MaxOrderQtyLimitReached', text: 'Your maximum order quantity has been met.' });
    await statusOf(big.d.orderId, 'Rejected');
    for (let i = 0; i < 2; i++) await statusOf((await c.request('order/placeorder', '', order({ orderQty: 2 - i }))).d.orderId, 'Filled');
    const over = await c.request('order/placeorder', '', order({ orderQty: 1 }));
    const posReject = await c.event('commandReport', (e) => e.commandId === over.d.orderId && e.commandStatus === 'RiskRejected');
    expect(posReject.entity.rejectReason).toBe('MaxPosLimitReached');
    const reduce = await c.request('order/placeorder', '', order({ action: 'Sell', orderQty: 2 }));
    await statusOf(reduce.d.orderId, 'Filled');
  });
});

describe('brackets', () => {
  const oso = (extra: Record<string, unknown> = {}) => order({
    orderType: 'Limit', price: 4990, orderQty: 2,
    bracket1: { action: 'Sell', orderType: 'Limit', price: 5010 },
    bracket2: { action: 'Sell', orderType: 'Stop', stopPrice: 4980 },
    ...extra,
  });

  it('keeps OSO legs Suspended until the entry fills, activates them for the filled qty, OCO on fill', async () => {
    const r = await c.request('order/placeoso', '', oso());
    const { orderId, oso1Id, oso2Id } = r.d;
    expect([orderId, oso1Id, oso2Id].every((n) => typeof n === 'number')).toBe(true);
    await statusOf(oso1Id, 'Suspended');
    await statusOf(oso2Id, 'Suspended');
    await statusOf(orderId, 'Working');
    await ctl(sim, 'POST', `/orders/${orderId}/fill`, { qty: 1 });
    await statusOf(oso1Id, 'Working');
    await statusOf(oso2Id, 'Working');
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.orders.filter((o: Msg) => o.parentId === orderId).map((o: Msg) => o.orderQty)).toEqual([1, 1]);
    await ctl(sim, 'POST', `/orders/${orderId}/fill`, {});
    await c.event('orderVersion', (e) => e.orderId === oso1Id && e.orderQty === 2);
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5010 });
    await statusOf(oso1Id, 'Filled');
    await statusOf(oso2Id, 'Canceled');
    await c.event('position', (e) => e.netPos === 0);
  });

  it('cancels the other leg when one OSO leg is cancelled', async () => {
    const { d } = await c.request('order/placeoso', '', oso({ orderType: 'Market' }));
    await statusOf(d.oso2Id, 'Working');
    await c.request('order/cancelorder', '', { orderId: d.oso1Id });
    await statusOf(d.oso1Id, 'Canceled');
    await statusOf(d.oso2Id, 'Canceled');
  });

  it('cancels suspended legs with an unfilled entry', async () => {
    const { d } = await c.request('order/placeoso', '', oso());
    await c.request('order/cancelorder', '', { orderId: d.orderId });
    await statusOf(d.oso1Id, 'Canceled');
    await statusOf(d.oso2Id, 'Canceled');
  });

  it('starts a multibracket strategy whose legs appear via orderStrategyLink at signed offsets from the fill', async () => {
    const params = { entryVersion: { orderQty: 2, orderType: 'Market', timeInForce: 'Day' }, brackets: [{ qty: 2, profitTarget: 10, stopLoss: -5, trailingStop: false }] };
    const r = await c.request('orderstrategy/startorderstrategy', '', {
      accountId, accountSpec: 'ann-A', symbol: 'ESZ6', action: 'Buy', orderStrategyTypeId: 2, params: JSON.stringify(params),
    });
    expect(r.d.orderStrategy).toMatchObject({ accountId, orderStrategyTypeId: 2, action: 'Buy' });
    const strategyId = r.d.orderStrategy.id;
    await c.event('orderStrategyLink', (e) => e.orderStrategyId === strategyId && e.label === 'sl1');
    const links = c.events('orderStrategyLink').map((l) => l.entity).filter((l) => l.orderStrategyId === strategyId);
    expect(links.map((l) => l.label)).toEqual(['entry', 'tp1', 'sl1']);
    const versions = new Map(c.events('orderVersion').map((v) => [v.entity.orderId, v.entity]));
    expect(versions.get(links[1].orderId)).toMatchObject({ orderType: 'Limit', price: 5010, orderQty: 2 });
    expect(versions.get(links[2].orderId)).toMatchObject({ orderType: 'Stop', stopPrice: 4995, orderQty: 2 });
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4995 });
    await statusOf(links[2].orderId, 'Filled');
    await statusOf(links[1].orderId, 'Canceled');
    await c.event('orderStrategy', (e) => e.id === strategyId && e.status === 'ExecutionFinished');
    const bad = await c.request('orderstrategy/startorderstrategy', '', { accountId, symbol: 'ESZ6', action: 'Buy', orderStrategyTypeId: 2, params });
    expect(bad.d).toEqual({ errorText: 'Invalid or missed parameters' });
  });

  it('refuses a price at or below zero like an exchange: an order, an OSO with such a leg (its entry too), a strategy leg computed past zero', async () => {
    const reason = async (orderId: number) => (await c.event('commandReport', (e) => e.commandId === orderId && e.commandStatus === 'ExecutionRejected')).entity;
    const limit = await c.request('order/placeorder', '', order({ orderType: 'Limit', price: -10 }));
    await statusOf(limit.d.orderId, 'Rejected');
    expect(await reason(limit.d.orderId)).toMatchObject({ rejectReason: 'InvalidPrice', text: 'Price must be positive' });

    // The stop leg would rest at -10: the entry never trades unprotected.
    const { d } = await c.request('order/placeoso', '', oso({ orderType: 'Market', bracket2: { action: 'Sell', orderType: 'Stop', stopPrice: -10 } }));
    await statusOf(d.orderId, 'Rejected');
    expect(await reason(d.orderId)).toMatchObject({ rejectReason: 'InvalidPrice', text: 'Bracket refused: Price must be positive' });
    await statusOf(d.oso2Id, 'Rejected');
    expect(c.events('fill').some((f) => f.entity.orderId === d.orderId)).toBe(false);

    // A stop 6000 points below a fill at 5000: the leg is refused when the entry fills (the alarm is the client's to raise).
    const params = { entryVersion: { orderQty: 1, orderType: 'Market', timeInForce: 'Day' }, brackets: [{ qty: 1, profitTarget: 10, stopLoss: -6000, trailingStop: false }] };
    const r = await c.request('orderstrategy/startorderstrategy', '', { accountId, accountSpec: 'ann-A', symbol: 'ESZ6', action: 'Buy', orderStrategyTypeId: 2, params: JSON.stringify(params) });
    const sl = (await c.event('orderStrategyLink', (e) => e.orderStrategyId === r.d.orderStrategy.id && e.label === 'sl1')).entity.orderId;
    await statusOf(sl, 'Rejected');
    expect(await reason(sl)).toMatchObject({ rejectReason: 'InvalidPrice', text: 'Price must be positive' });
  });

  it('places OCO pairs: {orderId, ocoId}; filling one cancels the other', async () => {
    const { d } = await c.request('order/placeoco', '', order({ action: 'Sell', orderType: 'Limit', price: 5020, other: { action: 'Sell', orderType: 'Stop', stopPrice: 4980 } }));
    await statusOf(d.ocoId, 'Working');
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 4979 });
    await statusOf(d.ocoId, 'Filled');
    await statusOf(d.orderId, 'Canceled');
  });
});

describe('liquidateposition', () => {
  it('cancels the contract’s working orders and closes the position at market', async () => {
    const entry = await c.request('order/placeorder', '', order({ orderQty: 2 }));
    await statusOf(entry.d.orderId, 'Filled');
    const resting = await c.request('order/placeorder', '', order({ orderType: 'Limit', price: 4900 }));
    const contractId = (await c.event('position')).entity.contractId;
    const r = await c.request('order/liquidateposition', '', { accountId, contractId, admin: false });
    expect(r.d.orderId).toEqual(expect.any(Number));
    await statusOf(resting.d.orderId, 'Canceled');
    await statusOf(r.d.orderId, 'Filled');
    await c.event('position', (e) => e.netPos === 0);
  });
});
