import { expect, test } from 'vitest';
import { backoffMs } from '../../../../src/broker/tradovate/connection.js';

test('backoff doubles per attempt up to the cap, with jitter between 50% and 100% of the step', () => {
  expect(backoffMs(0, 500, 30_000, () => 1)).toBe(500);
  expect(backoffMs(3, 500, 30_000, () => 1)).toBe(4000);
  expect(backoffMs(3, 500, 30_000, () => 0)).toBe(2000);
  expect(backoffMs(20, 500, 30_000, () => 1)).toBe(30_000);
  expect(backoffMs(1000, 500, 30_000, () => 0.5)).toBe(22_500);
});
