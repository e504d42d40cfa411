import { expect, test } from 'vitest';
import { startSimInWorker } from '../../../src/sim/worker.js';

test('a crash after ready is reported once, with the reason; close() after it returns at once', async () => {
  const sim = await startSimInWorker({ priceStepMs: 0 });
  const reasons: string[] = [];
  const heard = new Promise<string>((resolve) => sim.onCrash(resolve));
  sim.onCrash((r) => reasons.push(r));
  await sim.worker.terminate();
  expect(await heard).toMatch(/^paper broker worker exited \(code \d+\)$/);
  expect(reasons).toHaveLength(1);
  // A listener registered after the crash still hears of it.
  const late = await new Promise<string>((resolve) => sim.onCrash(resolve));
  expect(late).toBe(reasons[0]);
  await sim.close();
});

test('close() is not a crash', async () => {
  const sim = await startSimInWorker({ priceStepMs: 0 });
  let crashed = false;
  sim.onCrash(() => (crashed = true));
  await sim.close();
  await new Promise((r) => setImmediate(r));
  expect(crashed).toBe(false);
  await expect(fetch(`${sim.controlUrl}/state`)).rejects.toThrow();
});
