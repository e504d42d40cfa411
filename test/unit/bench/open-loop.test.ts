import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHistogram, percentiles, recordMs } from '../../../bench/hdr.js';
import { realClock, runOpenLoop } from '../../../bench/open-loop.js';

const SERVICE_MS = 1;

/**
 * A fake server that answers in 1 ms, except that it freezes between `stallFrom` and
 * `stallTo` (clock time): anything arriving in the window is answered when it ends.
 */
function stallingResponder(stallFrom: number, stallTo: number) {
  const arrivals: number[] = [];
  const respond = (): Promise<string> => {
    const now = performance.now();
    arrivals.push(now);
    const doneAt = now >= stallFrom && now < stallTo ? stallTo + SERVICE_MS : now + SERVICE_MS;
    return new Promise((resolve) => setTimeout(() => resolve('2xx'), doneAt - now));
  };
  return { respond, arrivals };
}

/** What a closed-loop driver measures: send, await, then send the next one at its pace. */
async function closedLoop(ratePerSec: number, durationMs: number, send: () => Promise<string>) {
  const h = createHistogram();
  const interval = 1000 / ratePerSec;
  const start = performance.now();
  let next = start;
  while (next < start + durationMs) {
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sentAt = performance.now();
    await send();
    recordMs(h, performance.now() - sentAt);
    next = Math.max(next + interval, performance.now());
  }
  return h;
}

describe('open-loop scheduler', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps sending on schedule through a 1 s stall and times each request from its intended send time', async () => {
    const t0 = performance.now();
    const server = stallingResponder(t0 + 500, t0 + 1500);
    const run = runOpenLoop({ ratePerSec: 100, durationMs: 2000, send: () => server.respond() });
    await vi.runAllTimersAsync();
    const result = await run;

    expect(result.sent).toBe(200);
    expect(result.completed).toBe(200);
    // On schedule even while nothing came back: 100 arrivals inside the stall window.
    const inStall = server.arrivals.filter((t) => t >= t0 + 500 && t < t0 + 1500);
    expect(inStall).toHaveLength(100);
    expect(percentiles(result.sendLag).max).toBe(0);

    const p = percentiles(result.histograms.get('2xx')!);
    // Half the requests waited for the stall to end: 1001 ms down to 11 ms, uniformly.
    expect(p.p90).toBeGreaterThan(790);
    expect(p.p90).toBeLessThan(820);
    expect(p.max).toBeGreaterThan(1000);
    expect(p.p50).toBeLessThanOrEqual(15);
  });

  it('proves a closed-loop measure of the same stall under-reports the tail', async () => {
    const t0 = performance.now();
    const openServer = stallingResponder(t0 + 500, t0 + 1500);
    const open = runOpenLoop({ ratePerSec: 100, durationMs: 2000, send: () => openServer.respond() });
    await vi.runAllTimersAsync();
    const openP = percentiles((await open).histograms.get('2xx')!);

    const t1 = performance.now();
    const closedServer = stallingResponder(t1 + 500, t1 + 1500);
    const closed = closedLoop(100, 2000, () => closedServer.respond());
    await vi.runAllTimersAsync();
    const closedP = percentiles(await closed);

    // The closed loop stopped sending during the stall: one slow sample among ~100 fast ones.
    expect(closedP.count).toBeLessThan(110);
    expect(closedP.p90).toBeLessThanOrEqual(SERVICE_MS + 0.01);
    expect(openP.p90).toBeGreaterThan(100 * closedP.p90);
    expect(openP.p99).toBeGreaterThan(900);
  });

  it('times late arrivals from their intended time and reports the generator lag', async () => {
    const now = performance.now();
    // The schedule started 100 ms ago: 11 arrivals (0, 10, …, 100 ms) are already due.
    const run = runOpenLoop({
      ratePerSec: 100,
      count: 11,
      startAt: now - 100,
      send: () => new Promise((r) => setTimeout(() => r('2xx'), 5)),
    });
    await vi.runAllTimersAsync();
    const result = await run;
    const lag = percentiles(result.sendLag);
    expect(lag.max).toBeCloseTo(100, 0);
    const p = percentiles(result.histograms.get('2xx')!);
    expect(p.max).toBeCloseTo(105, 0);
    expect(p.p50).toBeCloseTo(55, 0);
  });

  it('stops by itself at the count bound, labels outcomes, and records rejections as errors', async () => {
    let n = 0;
    const run = runOpenLoop({
      ratePerSec: 1000,
      count: 30,
      durationMs: 60_000,
      send: async () => {
        n++;
        if (n % 3 === 0) throw new Error('connection reset');
        return n % 3 === 1 ? '201' : '429';
      },
    });
    await vi.runAllTimersAsync();
    const result = await run;
    expect(result.sent).toBe(30);
    expect(result.histograms.get('201')!.totalCount).toBe(10);
    expect(result.histograms.get('429')!.totalCount).toBe(10);
    expect(result.histograms.get('error')!.totalCount).toBe(10);
  });

  it('stops at the duration bound and counts unanswered requests as timeouts after the drain deadline', async () => {
    const start = performance.now();
    const run = runOpenLoop({
      ratePerSec: 50,
      durationMs: 1000,
      drainTimeoutMs: 2000,
      send: () => new Promise<string>(() => {}),
    });
    await vi.runAllTimersAsync();
    const result = await run;
    expect(result.sent).toBe(50);
    expect(result.completed).toBe(0);
    expect(result.timedOut).toBe(50);
    const timeouts = percentiles(result.histograms.get('timeout')!);
    // Last arrival at 980 ms, deadline 2 s after it: the first one waited ~2980 ms.
    expect(timeouts.max).toBeGreaterThan(2970);
    expect(result.finishedAt - start).toBeCloseTo(2980, 0);
  });

  it('rejects a schedule that could never stop', async () => {
    await expect(runOpenLoop({ ratePerSec: 10, send: async () => 'x' })).rejects.toThrow(/count or durationMs/);
    await expect(runOpenLoop({ ratePerSec: 0, count: 1, send: async () => 'x' })).rejects.toThrow(/ratePerSec/);
    expect(typeof realClock.now()).toBe('number');
  });
});
