/**
 * Trading rules of the paper broker over the wire: trailing stops (as orders and as the
 * `trailingStop: true` bracket a public bot sends on every entry), MIT orders, CME sessions
 * (Day orders expire at the close, nothing trades in the maintenance break) with a fake clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;
let c: RawClient;
let now = 0;

async function open(opts: { sessions?: 'cme' | 'none'; at?: string } = {}): Promise<{ accountId: number; userId: number }> {
  now = Date.parse(opts.at ?? '2026-11-20T15:00:00Z');
  sim = await startSim({ priceStepMs: 0, seed: 4, clock: () => now, sessions: opts.sessions });
  const u = await userWithToken(sim, 'ann');
  c = await RawClient.authorized(sim.wsUrl, u.token);
  // The trading-strategy bot syncs like this: users only, no entityTypes.
  await c.request('user/syncrequest', '', { users: [u.userId] });
  await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
  return { accountId: u.accountIds[0]!, userId: u.userId };
}
afterEach(async () => {
  c.close();
  await sim.close();
});

const setPrice = (price: number) => ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price });
const statusOf = (orderId: number, status: string) => c.event('order', (e) => e.id === orderId && e.ordStatus === status);

describe('trailing stops', () => {
  it('a trailingStop bracket (startorderstrategy, as the public bot sends it) trails the price up and fills on the way down', async () => {
    const { accountId } = await open();
    // The bot's offsets are rounded to cents, not ticks: the sim rounds them onto the grid.
    const params = JSON.stringify({ entryVersion: { orderQty: 1, orderType: 'Market' }, brackets: [{ qty: 1, profitTarget: 20.3, stopLoss: -4.9, trailingStop: true }] });
    const r = await c.request('orderStrategy/startOrderStrategy', '', { accountId, accountSpec: 'ann-A1', symbol: 'ESZ6', action: 'Buy', orderStrategyTypeId: 2, params });
    expect(r.d.orderStrategy).toMatchObject({ status: 'ActiveStrategy' });
    const sl = await c.event('orderStrategyLink', (e) => e.label === 'sl1');
    const tp = await c.event('orderStrategyLink', (e) => e.label === 'tp1');
    const slId = sl.entity.orderId;
    expect(c.events('orderVersion').find((e) => e.entity.orderId === slId)!.entity).toMatchObject({ orderType: 'TrailingStop', stopPrice: 4995, pegDifference: 5 });
    await statusOf(slId, 'Working');

    await setPrice(5008);
    await c.event('orderVersion', (e) => e.orderId === slId && e.stopPrice === 5003);
    await setPrice(5004); // a pull-back above the stop: it stays at 5003
    await setPrice(5010.5);
    await c.event('orderVersion', (e) => e.orderId === slId && e.stopPrice === 5005.5);
    expect(c.events('orderVersion').filter((e) => e.entity.orderId === slId).map((e) => e.entity.stopPrice)).toEqual([4995, 5003, 5005.5]);

    await setPrice(5005.25);
    await statusOf(slId, 'Filled');
    const fill = await c.event('fill', (e) => e.orderId === slId);
    expect(fill.entity).toMatchObject({ action: 'Sell', qty: 1, price: 5005.25 });
    await statusOf(tp.entity.orderId, 'Canceled');
    await c.event('orderStrategy', (e) => e.status === 'ExecutionFinished');
    await c.event('position', (e) => e.netPos === 0);
  });

  it('a TrailingStop order placed with pegDifference starts at that distance from the last price', async () => {
    const { accountId } = await open();
    const r = await c.request('order/placeorder', '', { accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'TrailingStop', pegDifference: 3, isAutomated: true });
    await c.event('orderVersion', (e) => e.orderId === r.d.orderId && e.stopPrice === 5003);
    await setPrice(4990);
    await c.event('orderVersion', (e) => e.orderId === r.d.orderId && e.stopPrice === 4993);
    await setPrice(4993.5);
    expect((await c.event('fill', (e) => e.orderId === r.d.orderId)).entity.price).toBe(4993.5);
  });
});

describe('MIT orders', () => {
  it('a sell MIT above the market rests until the price touches it, then fills at market', async () => {
    const { accountId } = await open();
    const r = await c.request('order/placeorder', '', { accountId, action: 'Sell', symbol: 'ESZ6', orderQty: 2, orderType: 'MIT', price: 5010, isAutomated: true });
    await statusOf(r.d.orderId, 'Working');
    await setPrice(5009.75);
    await setPrice(5010.5);
    await statusOf(r.d.orderId, 'Filled');
    expect(c.events('fill').filter((e) => e.entity.orderId === r.d.orderId).every((e) => e.entity.price === 5010.5)).toBe(true);
  });
});

describe('CME sessions', () => {
  it('expires Day orders at the 16:00 CT close, keeps GTC ones, refuses new orders until 17:00 CT, then matches again', async () => {
    const { accountId } = await open({ sessions: 'cme', at: '2026-11-23T21:30:00Z' }); // Monday 15:30 CT
    const place = (extra: Msg) => c.request('order/placeorder', '', { accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Limit', price: 4990, isAutomated: true, ...extra });
    const day = await place({ timeInForce: 'Day' });
    const gtc = await place({ timeInForce: 'GTC' });
    await statusOf(gtc.d.orderId, 'Working');

    now = Date.parse('2026-11-23T22:00:00Z'); // 16:00 CT: the maintenance break
    const refused = await place({ timeInForce: 'GTC' });
    await statusOf(day.d.orderId, 'Expired');
    const report = await c.event('commandReport', (e) => e.commandId === refused.d.orderId && e.commandStatus === 'ExecutionRejected');
    expect(report.entity).toMatchObject({ rejectReason: 'SessionClosed' });
    expect(c.events('order').filter((e) => e.entity.id === gtc.d.orderId).at(-1).entity.ordStatus).toBe('Working');

    await setPrice(4985); // the price moves in the break, but nothing trades
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.orders.find((o: Msg) => o.id === gtc.d.orderId).ordStatus).toBe('Working');
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.session).toMatchObject({ mode: 'cme', open: false, closedFor: 'maintenance' });

    now = Date.parse('2026-11-23T23:00:00Z'); // 17:00 CT: open again, trade date Tuesday
    await c.request('account/list', '', undefined);
    const fill = await c.event('fill', (e) => e.orderId === gtc.d.orderId);
    expect(fill.entity).toMatchObject({ price: 4985, tradeDate: { year: 2026, month: 11, day: 24 } });
  });

  it('runs the session clock on its own: a Day order expires at the close with no request at all', async () => {
    const { accountId } = await open({ sessions: 'cme', at: '2026-11-20T21:59:00Z' }); // Friday 15:59 CT
    const day = await c.request('order/placeorder', '', { accountId, action: 'Sell', symbol: 'ESZ6', orderQty: 1, orderType: 'Limit', price: 5050, isAutomated: true });
    await statusOf(day.d.orderId, 'Working');
    now = Date.parse('2026-11-20T22:00:00Z');
    await statusOf(day.d.orderId, 'Expired'); // within the broker's one-second session tick
  });

  it('with sessions off (the default) the market never closes and Day orders stay', async () => {
    const { accountId } = await open({ at: '2026-11-21T12:00:00Z' }); // Saturday
    const r = await c.request('order/placeorder', '', { accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true });
    await statusOf(r.d.orderId, 'Filled');
    expect((await ctl(sim, 'GET', '/state')).body.session).toMatchObject({ mode: 'none', open: true, tradeDateKey: 20261123 });
  });
});
