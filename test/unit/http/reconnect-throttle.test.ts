import { describe, expect, it } from 'vitest';
import { ReconnectThrottle } from '../../../src/http/reconnect-throttle.js';

describe('ReconnectThrottle', () => {
  it('allows one manual restart per interval and connection, with the seconds left as Retry-After', () => {
    let now = 1_000_000;
    const t = new ReconnectThrottle(30_000, () => now);
    t.take('con_a');
    now += 10_400;
    expect(() => t.take('con_a')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED', status: 429, retryAfterSeconds: 20, extensions: { connectionId: 'con_a', limit: 'reconnect' } }));
    t.take('con_b');
    now += 19_599;
    expect(() => t.take('con_a')).toThrow(expect.objectContaining({ retryAfterSeconds: 1 }));
    now += 1;
    expect(() => t.take('con_a')).not.toThrow();
  });

  it('a refused attempt does not push the next turn back', () => {
    let now = 0;
    const t = new ReconnectThrottle(5_000, () => now);
    t.take('c');
    for (now = 1_000; now < 5_000; now += 1_000) expect(() => t.take('c')).toThrow();
    now = 5_000;
    expect(() => t.take('c')).not.toThrow();
  });

  it('a restart with new credentials starts the interval without being refused itself', () => {
    let now = 0;
    const t = new ReconnectThrottle(5_000, () => now);
    t.take('c');
    now = 1_000;
    t.note('c');
    now = 5_500;
    expect(() => t.take('c')).toThrow(expect.objectContaining({ retryAfterSeconds: 1 }));
    now = 6_000;
    expect(() => t.take('c')).not.toThrow();
  });

  it('an add given back after another add was taken is given back from the user\'s count as it stands (re-probe: it stayed counted)', () => {
    let now = 0;
    const t = new ReconnectThrottle(30_000, () => now);
    for (let i = 0; i < 8; i++) t.takeAdd('u', `login${i}`);
    now = 1;
    const giveBack = t.takeAdd('u', 'refused');
    now = 2;
    t.takeAdd('u', 'concurrent');
    giveBack();
    // 9 counted, not 10: one more add fits before the 10-per-window limit.
    expect(() => t.takeAdd('u', 'last')).not.toThrow();
    expect(() => t.takeAdd('u', 'over')).toThrow(expect.objectContaining({ extensions: { limit: 'connection-adds' } }));
  });

  it('forgets old entries once many connections were restarted', () => {
    let now = 0;
    const t = new ReconnectThrottle(1_000, () => now);
    for (let i = 0; i < 1025; i++) t.take(`c${i}`);
    now = 2_000;
    t.take('fresh');
    expect((t as unknown as { last: Map<string, number> }).last.size).toBe(1);
  });
});
