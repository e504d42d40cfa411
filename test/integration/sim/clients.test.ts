/**
 * The paper broker against frames written the way public Tradovate clients write them: the
 * broker's own JavaScript tutorials and trading-strategy bot and community SDKs build requests
 * with template literals and `JSON.stringify`, authorize with a quoted token, sync with only
 * `{users}` or `{accounts}`, and read a subscription's answer before they listen for its data.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, rest, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;
let now = Date.parse('2026-11-20T15:00:00Z');

beforeEach(async () => {
  now = Date.parse('2026-11-20T15:00:00Z');
  sim = await startSim({ priceStepMs: 0, seed: 5, clock: () => now });
  await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
});
afterEach(async () => {
  await sim.close();
});

/** A frame exactly as the tutorials' `request({url, query, body})` builds it: `${url}\n${id}\n${query}\n${JSON.stringify(body)}`. */
const templateFrame = (url: string, id: number, query?: string, body?: unknown) => `${url}\n${id}\n${query}\n${JSON.stringify(body)}`;

async function raw(c: RawClient, id: number, frame: string): Promise<Msg> {
  const answer = c.next((m) => m.i === id && m.s !== undefined);
  c.send(frame);
  return answer;
}

describe('authorize', () => {
  it('accepts the token JSON-quoted, as an object, or raw; a wrong quoted token is still 401', async () => {
    const { token } = await userWithToken(sim, 'ann');
    for (const body of [JSON.stringify(token), JSON.stringify({ token }), JSON.stringify({ accessToken: token }), token]) {
      const c = await RawClient.connect(sim.wsUrl);
      expect(await raw(c, 0, `authorize\n0\n\n${body}`)).toEqual({ s: 200, i: 0 });
      expect((await raw(c, 1, templateFrame('account/list', 1))).s).toBe(200);
      c.close();
    }
    const c = await RawClient.connect(sim.wsUrl);
    expect(await raw(c, 0, `authorize\n0\n\n${JSON.stringify('not-the-token')}`)).toMatchObject({ s: 401, d: 'Invalid access token' });
    c.close();
  });
});

describe('template-literal framing', () => {
  it('reads a body line of `undefined` (and a query line of `undefined`) as none', async () => {
    const { token, accountIds } = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, token);
    expect(templateFrame('account/list', 5)).toBe('account/list\n5\nundefined\nundefined');
    const list = await raw(c, 5, templateFrame('account/list', 5));
    expect(list.s).toBe(200);
    expect(list.d.map((a: Msg) => a.id)).toEqual(accountIds);
    const product = await raw(c, 6, templateFrame('product/find', 6, 'name=ES'));
    expect(product).toMatchObject({ s: 200, d: { name: 'ES', tickSize: 0.25, valuePerPoint: 50 } });
    // A body that is present is still read as JSON, pretty-printed across lines included.
    const placed = await raw(c, 7, `order/placeorder\n7\n\n${JSON.stringify({ accountId: accountIds[0], action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true }, null, 2)}`);
    expect(placed.d.orderId).toEqual(expect.any(Number));
    expect((await raw(c, 8, 'order/placeorder\n8\n\n{not json')).s).toBe(400);
    c.close();
  });

  it('treats `undefined` as no body on REST too', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const res = await fetch(`${sim.restUrl}/account/list`, { method: 'POST', body: 'undefined', headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
  });
});

describe('user/syncrequest without entityTypes', () => {
  it('{users:[id]} answers the full snapshot, then streams props events for every entity type', async () => {
    const { token, userId, accountIds } = await userWithToken(sim, 'ann', ['A', 'B']);
    const trader = await RawClient.authorized(sim.wsUrl, token);
    await trader.request('order/placeorder', '', { accountId: accountIds[0], action: 'Buy', symbol: 'ESZ6', orderQty: 2, orderType: 'Market', isAutomated: true });
    await trader.request('order/placeorder', '', { accountId: accountIds[0], action: 'Sell', symbol: 'ESZ6', orderQty: 1, orderType: 'Limit', price: 5100, isAutomated: true });

    const c = await RawClient.authorized(sim.wsUrl, token);
    const snap = (await raw(c, 1, templateFrame('user/syncrequest', 1, undefined, { users: [userId] }))).d;
    expect(snap.users).toEqual([expect.objectContaining({ id: userId })]);
    expect(snap.accounts.map((a: Msg) => a.id)).toEqual(accountIds);
    expect(snap.cashBalances).toHaveLength(2);
    expect(snap.positions).toEqual([expect.objectContaining({ accountId: accountIds[0], netPos: 2 })]);
    expect(snap.orders).toHaveLength(2);
    for (const k of ['orderVersions', 'commands', 'commandReports', 'executionReports', 'fills']) expect(snap[k].length).toBeGreaterThan(0);
    expect(snap.contracts).toEqual([expect.objectContaining({ name: 'ESZ6' })]);
    expect(snap.contractMaturities).toEqual([expect.objectContaining({ id: snap.contracts[0].contractMaturityId, isFront: true })]);
    // The trading-strategy bot looks its product up in the snapshot by name prefix.
    expect(snap.products.find((p: Msg) => 'ESZ6'.startsWith(p.name))).toMatchObject({ name: 'ES', valuePerPoint: 50 });
    expect(snap.currencies).toEqual([expect.objectContaining({ name: 'USD' })]);

    const placed = await trader.request('order/placeorder', '', { accountId: accountIds[1], action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true });
    await c.event('position', (e) => e.accountId === accountIds[1] && e.netPos === 1);
    const id = placed.d.orderId;
    for (const type of ['order', 'orderVersion', 'command', 'commandReport', 'executionReport', 'fill']) {
      expect(c.events(type).some((e) => [e.entity.id, e.entity.orderId, e.entity.commandId].includes(id))).toBe(true);
    }
    trader.close();
    c.close();
  });

  it('{accounts:[id]} answers that account only, and streams its events only', async () => {
    const { token, accountIds } = await userWithToken(sim, 'ann', ['A', 'B']);
    const c = await RawClient.authorized(sim.wsUrl, token);
    const snap = (await raw(c, 1, templateFrame('user/syncrequest', 1, undefined, { accounts: [accountIds[1]] }))).d;
    expect(snap.accounts.map((a: Msg) => a.id)).toEqual([accountIds[1]]);
    expect(snap.cashBalances.map((b: Msg) => b.accountId)).toEqual([accountIds[1]]);
    const place = (accountId: number) => c.request('order/placeorder', '', { accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market', isAutomated: true });
    const other = await place(accountIds[0]!);
    const mine = await place(accountIds[1]!);
    await c.event('order', (e) => e.id === mine.d.orderId && e.ordStatus === 'Filled');
    expect(c.events('order').some((e) => e.entity.id === other.d.orderId)).toBe(false);
    c.close();
  });
});

describe('md/subscribeQuote', () => {
  it('answers with a `d` carrying the subscriptionId, in its own frame, before the first quote', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const c = await RawClient.authorized(sim.wsUrl, token);
    const answer = await raw(c, 3, templateFrame('md/subscribeQuote', 3, '', { symbol: 'ESZ6' }));
    const contract = (await c.request('contract/find', 'name=ESZ6', undefined)).d;
    expect(answer).toEqual({ s: 200, i: 3, d: { mode: 'RealTime', subscriptionId: contract.id } });
    const answerFrame = c.frames.find((f) => f.includes('"i":3'))!;
    expect(answerFrame).not.toContain('"e":"md"');
    // A client that only starts listening once the answer is in (EX-09 tutorial style) still gets the first quote.
    const quote = (await c.next((m) => m.e === 'md')).d.quotes[0];
    expect(quote).toMatchObject({ id: contract.id, contractId: contract.id, entries: { Trade: { price: 5000 }, Bid: { price: 5000 }, Offer: { price: 5000 } } });
    const moved = c.next((m) => m.e === 'md');
    await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5001 });
    expect((await moved).d.quotes[0].entries).toMatchObject({ Trade: { price: 5001 }, HighPrice: { price: 5001 }, TotalTradeVolume: { size: expect.any(Number) } });
    expect((await c.request('md/unsubscribeQuote', '', { symbol: 'ESZ6' })).d).toEqual({});
    c.close();
  });
});

describe('contracts', () => {
  it('contract/suggest lists a root’s listed contracts from the front month on', async () => {
    const { token } = await userWithToken(sim, 'ann');
    const r = await rest(sim, 'GET', '/contract/suggest?t=ES&l=3', undefined, token);
    expect(r.body.map((k: Msg) => k.name)).toEqual(['ESZ6', 'ESH7', 'ESM7']);
    const cl = await rest(sim, 'GET', '/contract/suggest?t=CLG&l=2', undefined, token);
    expect(cl.body.map((k: Msg) => k.name)).toEqual(['CLG7', 'CLG8']);
    expect((await rest(sim, 'GET', '/contract/suggest?t=ZZZ', undefined, token)).body).toEqual([]);
    // Suggested contracts are real: they can be found and traded.
    expect((await rest(sim, 'GET', `/contract/item?id=${r.body[1].id}`, undefined, token)).body.name).toBe('ESH7');
  });

  it('marks the front month isFront, and moves it on at the roll date', async () => {
    let { token } = await userWithToken(sim, 'ann');
    const maturity = async (name: string) => {
      const k = (await rest(sim, 'GET', `/contract/find?name=${name}`, undefined, token)).body;
      return (await rest(sim, 'GET', `/contractMaturity/item?id=${k.contractMaturityId}`, undefined, token)).body;
    };
    expect(await maturity('ESZ6')).toMatchObject({ isFront: true, expirationDate: expect.stringMatching(/^2026-12-18/) });
    expect((await maturity('ESH7')).isFront).toBe(false);
    now = Date.parse('2026-12-10T15:00:00Z'); // ES rolls 8 days before its expiry
    token = (await rest(sim, 'POST', '/auth/accesstokenrequest', { name: 'ann', password: 'pw' })).body.accessToken;
    expect((await maturity('ESZ6')).isFront).toBe(false);
    expect((await maturity('ESH7')).isFront).toBe(true);
  });
});
