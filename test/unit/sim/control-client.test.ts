import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPaperLogin, PaperRefusedError } from '../../../src/sim/control-client.js';
import { startSim, type SimHandle } from '../../../src/sim/index.js';

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ priceStepMs: 0 });
});
afterAll(() => sim.close());

test('opens a login with its named accounts, which then authenticates at the broker', async () => {
  const created = (await createPaperLogin(`${sim.controlUrl}/`, { name: 'cc1', password: 'pw-1', accounts: ['A', 'B'] })) as { accounts: { name: string }[] };
  expect(created.accounts.map((a) => a.name)).toEqual(['A', 'B']);
  const login = await fetch(`${sim.restUrl}/auth/accesstokenrequest`, { method: 'POST', body: JSON.stringify({ name: 'cc1', password: 'pw-1' }) });
  expect(((await login.json()) as { accessToken?: string }).accessToken).toBeTruthy();
});

test('a refused login throws with the broker’s status', async () => {
  await createPaperLogin(sim.controlUrl, { name: 'cc2', password: 'pw', accounts: ['C2'] });
  await expect(createPaperLogin(sim.controlUrl, { name: 'cc2', password: 'pw', accounts: ['C3'] })).rejects.toThrow(/refused login 'cc2': HTTP 4\d\d/);
});

test('a refusal carries the status and the broker’s own reason', async () => {
  await createPaperLogin(sim.controlUrl, { name: 'cc3', password: 'pw', accounts: ['C4'] });
  const err = await createPaperLogin(sim.controlUrl, { name: 'cc3', password: 'pw', accounts: ['C5'] }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PaperRefusedError);
  expect(err).toMatchObject({ status: 409, reason: 'user cc3 exists' });
});
