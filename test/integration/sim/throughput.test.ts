/**
 * The paper broker answers a burst of 6,000 placeorder requests on one socket without losing
 * or reordering responses. Counts, never times (DESIGN §13: performance lives in bench/).
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, userWithToken } from '../../support/sim.js';

let sim: SimHandle;

beforeEach(async () => {
  sim = await startSim({ priceStepMs: 0 });
});
afterEach(async () => {
  await sim.close();
});

it('answers every one of 6,000 pipelined placeorder requests exactly once, in order, while synced', async () => {
  const N = 6000;
  const u = await userWithToken(sim, 'ann');
  const c = await RawClient.authorized(sim.wsUrl, u.token);
  // Synced, so every order also produces its props events in the same frames as the responses.
  await c.request('user/syncrequest', '', { users: [u.userId], entityTypes: ['order', 'command', 'executionReport', 'fill', 'position'] });
  await ctl(sim, 'POST', '/prices', { symbol: 'MNQZ6', price: 18000 });
  const firstId = 1000;
  const done = c.next((m) => m.i === firstId + N - 1 && m.s !== undefined, 25_000);
  for (let k = 0; k < N; k++) {
    const body = { accountId: u.accountIds[0], action: k % 2 ? 'Sell' : 'Buy', symbol: 'MNQZ6', orderQty: 1, orderType: k % 3 ? 'Limit' : 'Market', price: k % 2 ? 18100 : 17900, isAutomated: true };
    c.send(`order/placeorder\n${firstId + k}\n\n${JSON.stringify(body)}`);
  }
  await done;
  const answers = c.messages.filter((m) => m.s !== undefined && m.i >= firstId);
  expect(answers.map((m) => m.i)).toEqual(Array.from({ length: N }, (_, k) => firstId + k));
  expect(answers.every((m) => m.s === 200 && typeof m.d.orderId === 'number')).toBe(true);
  expect(new Set(answers.map((m) => m.d.orderId)).size).toBe(N);
  const state = (await ctl(sim, 'GET', '/state?user=ann')).body;
  expect(state.orders).toHaveLength(N);
  expect(c.frames.filter((f) => f.startsWith('a')).length).toBeLessThan(N); // responses were batched
  c.close();
}, 40_000);
