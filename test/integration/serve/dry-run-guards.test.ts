/**
 * A dry run answers what the real order would meet, risk guards included: over real HTTP against
 * `serve --paper`, an order the account's guards (or the key's narrowing) would refuse is the same
 * 403 RISK_GUARD as a dry run, against the live position; one they admit is the plan with
 * `guardsChecked: true`; and neither sends anything to the broker nor reports a refusal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { createKey, startServe, type Served } from '../../support/processes.js';

let s: Served;
let account: string;
const ES = frontOf('ES').contract;

const dryRun = (body: Record<string, unknown>, key = s.apiKey) =>
  http(s.url, 'POST', `/api/v1/accounts/${account}/orders?dryRun=true`, { key, body: { symbol: 'ES1!', side: 'buy', type: 'market', ...body } });
const brokerOrderCount = async () => ((await simState(s)).orders as unknown[]).length;

beforeAll(async () => {
  s = await startServe();
  account = s.accounts[0]!;
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
  const put = await http(s.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key: s.apiKey, body: { maxOrderQty: 2, maxPositionPerContract: 3 } });
  expect(put.status, put.text).toBe(200);
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

describe('dry runs ask the risk guards', () => {
  it('refuses as the real order would, against the live position, and sends nothing', async () => {
    const admitted = await dryRun({ qty: 2 });
    expect(admitted.status, admitted.text).toBe(200);
    expect(admitted.json).toMatchObject({ dryRun: true, qty: 2, guardsChecked: true });

    const tooBig = await dryRun({ qty: 3 });
    expect(tooBig.status).toBe(403);
    expect(tooBig.json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_order_qty', limit: 2, value: 3 });
    const real = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', type: 'market', qty: 3 } });
    expect(real.json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_order_qty' });

    // Long 2 now: one more fits the position limit of 3, two do not, and a sell is an exit.
    const bought = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', type: 'market', qty: 2 } });
    expect(bought.status, bought.text).toBe(201);
    const before = await brokerOrderCount();
    expect((await dryRun({ qty: 1 })).json.guardsChecked).toBe(true);
    expect((await dryRun({ qty: 2 })).json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_position', value: 4 });
    expect((await dryRun({ side: 'sell', qty: 2 })).status).toBe(200);
    expect(await brokerOrderCount()).toBe(before);
  });

  it("applies the key's narrowing too", async () => {
    const narrowed = await createKey(s, 'demo', 'read,trade', 'nq-only');
    const signed = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } });
    const cookie = /^(tg_session=[^;]+);/.exec(signed.headers.get('set-cookie') ?? '')![1]!;
    await http(s.url, 'PUT', `/api/v1/api-keys/${narrowed.id}/guards`, { headers: { cookie, 'x-csrf-token': signed.json.csrfToken as string }, body: { allowedProducts: ['NQ'] } });
    const refused = await dryRun({ qty: 1 }, narrowed.key);
    expect(refused.json).toMatchObject({ code: 'RISK_GUARD', guard: 'allowed_products' });
    expect((await dryRun({ qty: 1 })).status).toBe(200);
  });

  it('while the connection is not CONNECTED the plan is still answered, with guardsChecked: false', async () => {
    await control(s, 'POST', '/faults', { silent: true });
    await control(s, 'POST', '/connections/drop', {});
    try {
      await eventually(async () => ((await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data[0].status as string) !== 'CONNECTED', 'the connection to go down');
      const plan = await dryRun({ qty: 1 });
      expect(plan.status, plan.text).toBe(200);
      expect(plan.json).toMatchObject({ dryRun: true, guardsChecked: false });
    } finally {
      await control(s, 'DELETE', '/faults');
    }
  });
});
