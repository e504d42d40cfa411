/**
 * Prop-firm evaluation rules of paper accounts, seen by a synced client: a daily loss limit
 * or a trailing drawdown reached liquidates the account (admin orders at the last price),
 * then the broker stops reporting it; a reset brings it back under a new id.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, rest, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;
let c: RawClient;
let token: string;
let accountId: number;
let now = Date.parse('2026-11-20T15:00:00Z');

beforeEach(async () => {
  now = Date.parse('2026-11-20T15:00:00Z');
  sim = await startSim({ priceStepMs: 0, seed: 2, clock: () => now });
  const u = await userWithToken(sim, 'ann');
  token = u.token;
  accountId = u.accountIds[0]!;
  c = await RawClient.authorized(sim.wsUrl, token);
  await c.request('user/syncrequest', '', { users: [u.userId] });
  await setPrice(5000);
});
afterEach(async () => {
  c.close();
  await sim.close();
});

const setPrice = (price: number) => ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price });
const order = (extra: Msg) => c.request('order/placeorder', '', { accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true, ...extra });
const accountState = async (id = accountId) => (await ctl(sim, 'GET', '/state?user=ann')).body.accounts.find((a: Msg) => a.id === id);
const propsIndex = (pred: (m: Msg) => boolean) => c.messages.findIndex((m) => m.e === 'props' && pred(m.d));

describe('daily loss limit', () => {
  it('liquidates at the limit, cancels resting orders, then revokes the account (events in that order)', async () => {
    expect((await ctl(sim, 'POST', `/accounts/${accountId}/limits`, { dailyLossLimit: 500 })).body).toMatchObject({ dailyLossLimit: 500, trailingDrawdown: null });
    await order({ orderQty: 2 });
    const resting = await order({ orderType: 'Limit', price: 4900 });
    await setPrice(4995.25); // −475: inside the limit
    expect((await accountState()).active).toBe(true);
    await setPrice(4995); // −500: the limit
    const deleted = await c.event('account', (e, type) => e.id === accountId && type === 'Deleted');
    expect(deleted.entity.id).toBe(accountId);

    const liquidation = c.events('order').find((e) => e.entity.accountId === accountId && e.entity.admin === true)!.entity;
    expect(liquidation).toMatchObject({ action: 'Sell' });
    const fill = await c.event('fill', (e) => e.orderId === liquidation.id);
    expect(fill.entity).toMatchObject({ qty: 2, price: 4995 });
    await c.event('order', (e) => e.id === resting.d.orderId && e.ordStatus === 'Canceled');
    const flat = propsIndex((d) => d.entityType === 'position' && d.entity.netPos === 0);
    const cash = propsIndex((d) => d.entityType === 'cashBalance' && d.entity.realizedPnL === -500);
    const gone = propsIndex((d) => d.entityType === 'account' && d.eventType === 'Deleted');
    expect(flat).toBeGreaterThan(-1);
    expect(cash).toBeGreaterThan(-1);
    expect(gone).toBeGreaterThan(Math.max(flat, cash));

    expect(await accountState()).toMatchObject({ active: false, balance: 49_500, breach: { rule: 'DailyLossLimit', equity: 49_500, limit: 49_500 } });
    expect((await c.request('account/list', '', undefined)).d).toEqual([]);
    expect((await order({})).d).toEqual({ failureReason: 'UnknownReason', failureText: 'Access is denied' });
    const sync = await c.request('user/syncrequest', '', { users: [(await accountState()).userId] });
    expect(sync.d.accounts).toEqual([]);
  });

  it('counts realized and open P&L of the trade date only: a new trade date starts from the equity then', async () => {
    await ctl(sim, 'POST', `/accounts/${accountId}/limits`, { dailyLossLimit: 500 });
    await order({});
    await setPrice(4992);
    await order({ action: 'Sell' }); // −400 realized today
    now = Date.parse('2026-11-20T23:30:00Z'); // Friday 17:30 CT: the trade date is Monday now
    token = (await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' })).body.accessToken;
    await c.request('authorize', '', token);
    await order({});
    await setPrice(4984); // −400 on the new trade date (−800 overall)
    expect((await accountState()).active).toBe(true);
    expect((await accountState()).dayStartEquity).toBe(49_600);
    await setPrice(4982); // −500 on the new trade date
    await c.event('account', (e, type) => e.id === accountId && type === 'Deleted');
  });
});

describe('trailing drawdown', () => {
  it('trails the highest equity and breaches when equity falls the drawdown below it', async () => {
    await ctl(sim, 'POST', `/accounts/${accountId}/limits`, { trailingDrawdown: 1000 });
    await order({});
    await setPrice(5030); // equity 51,500: the high-water mark
    await setPrice(5010.25); // 51,012.50: 487.50 below it
    expect(await accountState()).toMatchObject({ active: true, highWater: 51_500 });
    await setPrice(5010); // 50,500: 1,000 below it
    await c.event('account', (e, type) => e.id === accountId && type === 'Deleted');
    expect((await accountState()).breach).toMatchObject({ rule: 'TrailingDrawdown', limit: 50_500 });
  });
});

describe('reset', () => {
  it('re-creates a breached account under a new id with its balance and rules; it trades, the old id does not', async () => {
    await ctl(sim, 'POST', `/accounts/${accountId}/limits`, { dailyLossLimit: 500, maxOrderQty: 5 });
    await order({});
    await setPrice(4990);
    await c.event('account', (e, type) => e.id === accountId && type === 'Deleted');

    const reset = await ctl(sim, 'POST', `/accounts/${accountId}/reset`, {});
    expect(reset.status).toBe(201);
    expect(reset.body).toMatchObject({ name: 'ann-A1', previousId: accountId, balance: 50_000, dailyLossLimit: 500, maxOrderQty: 5 });
    const fresh = reset.body.id;
    expect(fresh).not.toBe(accountId);
    await c.event('account', (e, type) => e.id === fresh && type === 'Created');
    expect((await c.request('account/list', '', undefined)).d.map((a: Msg) => a.id)).toEqual([fresh]);

    const placed = await c.request('order/placeorder', '', { accountSpec: 'ann-A1', action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true });
    const fill = await c.event('fill', (e) => e.orderId === placed.d.orderId);
    expect(c.events('order').find((e) => e.entity.id === placed.d.orderId)!.entity.accountId).toBe(fresh);
    expect(fill.entity.price).toBe(4990);
    expect((await order({})).d.failureText).toBe('Access is denied');
    // The old account cannot come back while an active account carries its name.
    expect((await ctl(sim, 'POST', `/accounts/${accountId}/reactivate`)).status).toBe(409);
  });

  it('resets an active account too: flattened and revoked first', async () => {
    await order({ orderQty: 3 });
    const reset = await ctl(sim, 'POST', `/accounts/${accountId}/reset`, { balance: 25_000 });
    expect(reset.body.balance).toBe(25_000);
    await c.event('account', (e, type) => e.id === accountId && type === 'Deleted');
    expect(await accountState()).toMatchObject({ active: false });
    expect((await ctl(sim, 'GET', '/state?user=ann')).body.positions.find((p: Msg) => p.accountId === accountId).netPos).toBe(0);
  });
});

describe('rules at account creation', () => {
  it('takes per-account rules in /control/users and /control/accounts, and refuses bad ones without creating anything', async () => {
    const created = await ctl(sim, 'POST', '/users', { name: 'bob', password: 'pw', accounts: [{ name: 'B1', dailyLossLimit: 300, trailingDrawdown: 2000 }] });
    const id = created.body.accounts[0].id;
    expect((await ctl(sim, 'GET', '/state?user=bob')).body.accounts[0]).toMatchObject({ id, dailyLossLimit: 300, trailingDrawdown: 2000 });
    expect((await ctl(sim, 'POST', '/users', { name: 'cy', password: 'pw', accounts: [{ name: 'C1', dailyLossLimit: -1 }] })).status).toBe(400);
    expect((await ctl(sim, 'GET', '/state?user=cy')).body.users).toEqual([]);
    const more = await ctl(sim, 'POST', '/accounts', { user: 'bob', name: 'B2', trailingDrawdown: 1500 });
    expect(more.status).toBe(201);
    expect((await ctl(sim, 'GET', '/state?user=bob')).body.accounts[1]).toMatchObject({ trailingDrawdown: 1500, dailyLossLimit: null });
  });

  it('gives every new account the broker-wide default rules (tradegate sim --daily-loss-limit)', async () => {
    const other = await startSim({ priceStepMs: 0, accountRules: { dailyLossLimit: 750 } });
    try {
      await ctl(other, 'POST', '/users', { name: 'dee', password: 'pw', accounts: [{ name: 'D1' }, { name: 'D2', dailyLossLimit: null }] });
      const accounts = (await ctl(other, 'GET', '/state')).body.accounts;
      expect(accounts.map((a: Msg) => a.dailyLossLimit)).toEqual([750, null]);
    } finally {
      await other.close();
    }
  });
});
