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

test('reads stop at 80% of the hour window too, while orders may use the reserve', () => {
  const { b, advance } = budget(1000, 10);
  for (let i = 0; i < 8; i++) {
    b.take('read');
    advance(61_000);
  }
  const err = refusal(() => b.take('read'));
  expect(err).toMatchObject({ code: 'BROKER_UNAVAILABLE', message: 'broker request budget exhausted (per hour)' });
  b.take('order');
  b.take('order');
  expect(refusal(() => b.take('order')).message).toContain('per hour');
});

test('a refusal names the minute window and counts nothing', () => {
  const { b } = budget(5, 1000);
  for (let i = 0; i < 4; i++) b.take('read');
  expect(refusal(() => b.take('read')).message).toBe('broker request budget exhausted (per minute)');
  expect(b.usage()).toEqual({ minute: 4, hour: 4 });
});

test('tiny budgets still allow one request of each kind', () => {
  const { b } = budget(1, 1);
  b.take('read');
  expect(refusal(() => b.take('order')).code).toBe('BROKER_UNAVAILABLE');
});

test('record() counts a request that must go out even past the cap, and later takes see it', () => {
  const { b } = budget(2, 1000);
  b.record();
  b.record();
  b.record();
  expect(b.usage()).toEqual({ minute: 3, hour: 3 });
  expect(refusal(() => b.take('order')).code).toBe('BROKER_UNAVAILABLE');
});

test('retry-after points at when the oldest minute bucket leaves the window', () => {
  const { b, advance } = budget(2, 1000);
  b.take('order');
  advance(20_000);
  b.take('order');
  expect(refusal(() => b.take('order')).retryAfterSeconds).toBe(40);
  advance(39_500);
  expect(refusal(() => b.take('order')).retryAfterSeconds).toBe(1);
});

test('buckets reused after a full lap count afresh (no stale counts from an hour ago)', () => {
  const { b, advance } = budget(3, 1000);
  b.take('order');
  b.take('order');
  advance(60_000);
  expect(b.usage().minute).toBe(0);
  b.take('order');
  b.take('order');
  b.take('order');
  expect(b.usage()).toEqual({ minute: 3, hour: 5 });
  advance(3_600_000);
  expect(b.usage()).toEqual({ minute: 0, hour: 0 });
});

test('retry-after counts from the oldest bucket, wherever it sits in the ring', () => {
  const { b, advance } = budget(2, 1000);
  b.take('order');
  advance(15_000);
  b.take('order');
  expect(refusal(() => b.take('order')).retryAfterSeconds).toBe(45);
});

test('a bucket that left the window no longer decides when to retry', () => {
  const { b, advance } = budget(2, 1000);
  b.take('order');
  advance(61_000);
  b.take('order');
  advance(10_000);
  b.take('order');
  expect(refusal(() => b.take('order')).retryAfterSeconds).toBe(50);
});

test('record() into a bucket last used a full lap ago replaces its old count', () => {
  const { b, advance } = budget(100, 1000);
  b.record();
  advance(60_000);
  b.record();
  expect(b.usage()).toEqual({ minute: 1, hour: 2 });
});
