/**
 * The prop-firm evaluation flow end to end, through `serve --paper` as users run it: a paper
 * account with a daily loss limit at the embedded broker; orders placed through the service's
 * webhook lose past the limit; the broker liquidates the account and stops reporting it; the
 * service answers the token's alerts with 403 `Account is inactive`; a reset brings the account
 * back under a new id, and rebinding the token (PATCH) makes the next alert trade on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let acc: string;
const front = resolveSymbol('ES', new Date());
if (!front.ok) throw new Error(front.reason);
const ES = front.contract;

const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });
const price = (p: number) => control(s, 'POST', '/prices', { symbol: ES, price: p });
const accounts = async () => (await api('GET', '/api/v1/accounts')).json.data as { id: string; name: string; active: boolean }[];
const netAtBroker = async (id: string) => ((await simState(s)).positions as any[]).filter((p) => String(p.accountId) === id).reduce((n, p) => n + p.netPos, 0);

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
  await price(5000);
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('prop-firm evaluation account through the service', () => {
  it('loses past the daily loss limit → liquidated and inactive (403); reset → new id; PATCH rebinding resumes trading', async () => {
    const limits = await control(s, 'POST', `/accounts/${acc}/limits`, { dailyLossLimit: 500 });
    expect(limits).toMatchObject({ id: Number(acc), dailyLossLimit: 500 });
    const created = await api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'evaluation' });
    expect(created.status, created.text).toBe(201);
    const tokenId = created.json.id as string;
    const alert = (body: unknown) => http(created.json.url, 'POST', '', { raw: JSON.stringify(body), headers: { 'content-type': 'text/plain' } });
    const name = (await accounts()).find((a) => a.id === acc)!.name;

    // A losing round trip: long 1 at 5000, out at 4996 (−4 points × $50 = −$200 realized).
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).status).toBe(201);
    await eventually(async () => (await netAtBroker(acc)) === 1, 'long 1 at the broker');
    await price(4996);
    const closed = await alert({ action: 'close', symbol: 'ES1!' });
    expect(closed.status, closed.text).toBe(200);
    await eventually(async () => (await netAtBroker(acc)) === 0, 'flat after the close');

    // Long 2 at 4996, a resting buy limit below, and the price falls: −$200 − 2 × 3 × $50 = −$500 reaches the limit.
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 2 })).status).toBe(201);
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 4900 })).status).toBe(201);
    await eventually(async () => (await netAtBroker(acc)) === 2, 'long 2 at the broker');
    await price(4995);
    expect((await simState(s)).accounts.find((a: any) => String(a.id) === acc).breach).toBeFalsy();
    // An alert racing the breach is either placed before it (and liquidated with the rest) or refused as inactive.
    const [, racing] = await Promise.all([price(4993), alert({ action: 'buy', symbol: 'ES1!', qty: 1 })]);
    expect([201, 403], racing.text).toContain(racing.status);
    const held = racing.status === 201 ? 3 : 2;

    // The broker liquidated at the last price, cancelled the resting order and revoked the account.
    const state = await simState(s);
    const breached = state.accounts.find((a: any) => String(a.id) === acc);
    expect(breached.active).toBe(false);
    expect(breached.breach).toMatchObject({ rule: 'DailyLossLimit' });
    expect(state.orders.filter((o: any) => String(o.accountId) === acc && o.ordStatus === 'Working')).toEqual([]);
    const liquidation = state.fills.filter((f: any) => String(f.accountId) === acc && f.action === 'Sell' && f.price === 4993);
    expect(liquidation.reduce((n: number, f: any) => n + f.qty, 0)).toBe(held);
    expect(await netAtBroker(acc)).toBe(0);

    // The service sees the account go, and refuses the token's alerts (every kind) and API orders on it.
    await eventually(async () => (await accounts()).find((a) => a.id === acc)?.active === false, 'account inactive in the API', 5_000);
    for (const body of [{ action: 'buy', symbol: 'ES1!', qty: 1 }, { action: 'close' }]) {
      const r = await alert(body);
      expect(r.status, r.text).toBe(403);
      expect(r.json).toMatchObject({ code: 'ACCOUNT_INACTIVE', detail: 'Account is inactive' });
    }
    const direct = await api('POST', `/api/v1/accounts/${acc}/orders`, { symbol: 'ES1!', side: 'buy', qty: 1 });
    expect(direct.status, direct.text).toBe(403);
    expect((await api('GET', `/api/v1/webhook-tokens/${tokenId}`)).json).toMatchObject({ accountId: acc, accountActive: false });
    const ordersAtBroker = (await simState(s)).orders.length;

    // The evaluation is reset: a new account id with the same name and rules.
    const reset = await control(s, 'POST', `/accounts/${acc}/reset`);
    const fresh = String(reset.id);
    expect(fresh).not.toBe(acc);
    expect(reset).toMatchObject({ name, previousId: Number(acc), dailyLossLimit: 500 });
    const listed = await eventually(async () => (await accounts()).find((a) => a.id === fresh && a.active), 'the reset account in the API', 5_000);
    expect(listed.name).toBe(name);
    // Until it is rebound, the token still points at the old id.
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).status).toBe(403);
    expect((await simState(s)).orders.length).toBe(ordersAtBroker);

    const patched = await api('PATCH', `/api/v1/webhook-tokens/${tokenId}`, { accountId: fresh });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({ accountId: fresh, accountActive: true });
    const ok = await alert({ action: 'buy', symbol: 'ES1!', qty: 1 });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json).toMatchObject({ accountId: fresh, order: { accountId: fresh, symbol: ES } });
    await eventually(async () => (await netAtBroker(fresh)) === 1, 'long 1 on the reset account');
    const positions = (await api('GET', `/api/v1/accounts/${fresh}/positions`)).json.data;
    expect(positions).toMatchObject([{ accountId: fresh, symbol: ES, netQty: 1 }]);
  });
});
