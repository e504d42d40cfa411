import { expect, test } from 'vitest';
import { BrokerBudget } from '../../../../src/broker/tradovate/budget.js';
import { AppError } from '../../../../src/domain/problems.js';

function budget(perMinute: number, perHour: number) {
  let now = 1_000_000;
  const b = new BrokerBudget({ perMinute, perHour }, () => now);
  return { b, advance: (ms: number) => (now += ms) };
}

function refusal(fn: () => void): AppError {
  try {
    fn();
  } catch (err) {
    return err as AppError;
  }
  throw new Error('expected a refusal');
}

test('reads stop at 80% of the minute window, leaving the rest for orders and cancels', () => {
  const { b } = budget(10, 1000);
  for (let i = 0; i < 8; i++) b.take('read');
  const err = refusal(() => b.take('read'));
  expect(err.code).toBe('BROKER_UNAVAILABLE');
  b.take('order');
  b.take('order');
  expect(refusal(() => b.take('order')).code).toBe('BROKER_UNAVAILABLE');
});

test('exhaustion says when to retry, and the window frees after 60 s', () => {
  const { b, advance } = budget(5, 1000);
  for (let i = 0; i < 5; i++) b.take('order');
  const err = refusal(() => b.take('order'));
  expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  expect(err.retryAfterSeconds).toBeLessThanOrEqual(60);
  advance(59_000);
  expect(() => b.take('order')).toThrow();
  advance(1_000);
  expect(() => b.take('order')).not.toThrow();
});

test('the hour window caps independently of the minute window', () => {
  const { b, advance } = budget(100, 10);
  for (let i = 0; i < 10; i++) {
    b.take('order');
    advance(61_000);
  }
  const err = refusal(() => b.take('order'));
  expect(err.message).toContain('per hour');
  expect(err.retryAfterSeconds).toBeGreaterThan(60);
  advance(3_600_000);
  expect(() => b.take('order')).not.toThrow();
});

test('usage counts what was taken', () => {
  const { b } = budget(100, 1000);
  b.take('read');
  b.take('order');
  expect(b.usage()).toEqual({ minute: 2, hour: 2 });
});
