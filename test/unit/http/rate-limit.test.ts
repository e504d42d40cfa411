import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SlidingLogLimiter, rateLimitHeaders } from '../../../src/http/rate-limit.js';

/** Accepted timestamps in the half-open window (t − w, t]. */
const inWindow = (accepted: number[], t: number, w: number) => accepted.filter((a) => a > t - w && a <= t).length;

describe('SlidingLogLimiter', () => {
  it('accepts exactly N at one instant and rejects the N+1st with Retry-After = window', () => {
    const lim = new SlidingLogLimiter(120);
    const decisions = Array.from({ length: 150 }, () => lim.hit('k', 1_000_000));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(120);
    expect(decisions[119]).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 60 });
    expect(decisions[120]).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 60 });
  });

  it('uses a half-open window: exactly 60.000 s after the oldest is allowed, 1 ms earlier is not', () => {
    const lim = new SlidingLogLimiter(2);
    lim.hit('k', 0);
    lim.hit('k', 10_000);
    expect(lim.hit('k', 59_999)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    expect(lim.hit('k', 60_000)).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 10 });
    expect(lim.hit('k', 60_000).allowed).toBe(false);
  });

  it('does not log rejected requests, so a hammering client is not locked out', () => {
    const lim = new SlidingLogLimiter(1);
    lim.hit('k', 0);
    for (let t = 1; t < 60_000; t += 1000) expect(lim.hit('k', t).allowed).toBe(false);
    expect(lim.hit('k', 60_000).allowed).toBe(true);
  });

  it('keeps keys independent', () => {
    const lim = new SlidingLogLimiter(1);
    expect(lim.hit('a', 0).allowed).toBe(true);
    expect(lim.hit('b', 0).allowed).toBe(true);
    expect(lim.hit('a', 1).allowed).toBe(false);
  });

  it('treats a clock stepping backwards as standing still (the limit still holds)', () => {
    const lim = new SlidingLogLimiter(2);
    lim.hit('k', 100_000);
    lim.hit('k', 100_000);
    expect(lim.hit('k', 0).allowed).toBe(false);
    expect(lim.hit('k', 159_999).allowed).toBe(false);
    expect(lim.hit('k', 160_000).allowed).toBe(true);
  });

  it('isExhausted peeks without logging; sweep forgets idle keys', () => {
    const lim = new SlidingLogLimiter(1);
    expect(lim.isExhausted('k', 0)).toBeUndefined();
    lim.hit('k', 0);
    expect(lim.isExhausted('k', 1)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
    expect(lim.keyCount()).toBe(1);
    lim.sweep(60_000);
    expect(lim.keyCount()).toBe(0);
  });

  it('property: never more than N accepted in any window, never a rejection with fewer than N in the window', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 1500 })), { maxLength: 300 }),
        (limit, windowMs, steps) => {
          const lim = new SlidingLogLimiter(limit, windowMs);
          const accepted: number[][] = [[], [], []];
          let t = 0;
          for (const [key, dt] of steps) {
            t += dt;
            const log = accepted[key]!;
            const before = inWindow(log, t, windowMs);
            const d = lim.hit(`k${key}`, t);
            if (d.allowed) {
              expect(before).toBeLessThan(limit);
              log.push(t);
              expect(inWindow(log, t, windowMs)).toBeLessThanOrEqual(limit);
              expect(d.remaining).toBe(limit - before - 1);
            } else {
              expect(before).toBe(limit);
              // Retry-After is never early: after it, a slot is really free.
              expect(inWindow(log, t + d.retryAfterSeconds * 1000, windowMs)).toBeLessThan(limit);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('rateLimitHeaders', () => {
  it('emits the IETF pair and the X-RateLimit trio, plus Retry-After only on rejection', () => {
    const lim = new SlidingLogLimiter(2);
    const ok = rateLimitHeaders('key', lim.hit('k', 1_500));
    expect(ok).toEqual({
      'RateLimit-Policy': '"key";q=2;w=60',
      RateLimit: '"key";r=1;t=60',
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '1',
      'X-RateLimit-Reset': '62',
    });
    lim.hit('k', 2_000);
    const no = rateLimitHeaders('key', lim.hit('k', 31_500));
    expect(no['Retry-After']).toBe('30');
    expect(no.RateLimit).toBe('"key";r=0;t=30');
  });
});

describe('sweep keeps keys with live entries', () => {
  it('forgets only keys whose whole log left the window, and a swept key starts afresh', () => {
    const lim = new SlidingLogLimiter(2);
    lim.hit('idle', 0);
    lim.hit('live', 0);
    lim.hit('live', 30_000);
    lim.sweep(59_999);
    expect(lim.keyCount()).toBe(2);
    lim.sweep(60_000);
    expect(lim.keyCount()).toBe(1);
    // The live key kept its 30 s entry: one slot left, not two.
    expect(lim.hit('live', 60_000)).toMatchObject({ allowed: true, remaining: 0 });
    expect(lim.hit('live', 60_001).allowed).toBe(false);
    expect(lim.hit('idle', 60_000)).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('a sweep with a clock behind a key’s last request does not expire that key early', () => {
    const lim = new SlidingLogLimiter(1);
    lim.hit('k', 100_000);
    lim.sweep(0);
    expect(lim.keyCount()).toBe(1);
    expect(lim.hit('k', 100_001).allowed).toBe(false);
  });
});

describe('SlidingLogLimiter edges', () => {
  it('refuses a limit that is not a positive integer', () => {
    for (const limit of [0, -1, 1.5, Number.NaN]) expect(() => new SlidingLogLimiter(limit), String(limit)).toThrow(new RangeError('limit must be a positive integer'));
    expect(new SlidingLogLimiter(1).limit).toBe(1);
  });

  it('isExhausted: undefined while a slot is free, and a clock behind the last request does not free one', () => {
    const lim = new SlidingLogLimiter(2);
    lim.hit('k', 100_000);
    expect(lim.isExhausted('k', 100_000)).toBeUndefined();
    lim.hit('k', 100_000);
    expect(lim.isExhausted('k', 0)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
    expect(lim.isExhausted('k', 160_000)).toBeUndefined();
  });
});
