import { describe, expect, it } from 'vitest';
import { createHistogram, encodeHistogram, recordMs } from '../../../bench/hdr.js';
import type { HttpLoadResult, HttpLoadTask } from '../../../bench/http-load.js';
import { mergeHttpResults, splitHttpTask } from '../../../bench/pool.js';

const task = (n: number): HttpLoadTask => ({
  kind: 'http', origin: 'http://127.0.0.1:1', ratePerSec: 100, durationMs: 1000, startAtEpochMs: 1_000_000, uniquePrefix: 'p',
  requests: Array.from({ length: n }, (_, i) => ({ method: 'GET' as const, path: `/${i}`, tag: `k${i}` })),
});

describe('splitting a schedule over workers', () => {
  it('gives worker w the templates j ≡ w (mod parts), half the rate and a phase of one global interval', () => {
    const [a, b] = splitHttpTask(task(4), 2);
    expect(a!.requests.map((r) => r.path)).toEqual(['/0', '/2']);
    expect(b!.requests.map((r) => r.path)).toEqual(['/1', '/3']);
    expect(a!.ratePerSec).toBe(50);
    expect(b!.startAtEpochMs! - a!.startAtEpochMs!).toBeCloseTo(10);
    expect(a!.uniquePrefix).not.toBe(b!.uniquePrefix);
  });

  it('shares a lone template between the workers, each at its share of the rate', () => {
    // The floors (GET /healthz, the shape floor's phases) are one template; the runs they are
    // compared with are hundreds of keys over every worker. On one worker the floor's service
    // was woken by one generator thread where the real one was woken by two.
    const parts = splitHttpTask(task(1), 2);
    expect(parts).toHaveLength(2);
    expect(parts.map((t) => t.requests.map((r) => r.path))).toEqual([['/0'], ['/0']]);
    expect(parts.map((t) => t.ratePerSec)).toEqual([50, 50]);
    expect(parts[0]!.uniquePrefix).not.toBe(parts[1]!.uniquePrefix);
  });

  it('keeps one worker when the templates do not divide evenly (a template would change rate)', () => {
    const parts = splitHttpTask(task(3), 2);
    expect(parts).toHaveLength(1);
    expect(parts[0]!.ratePerSec).toBe(100);
    expect(parts[0]!.requests).toHaveLength(3);
  });
});

describe('merging worker results', () => {
  it('adds histograms per label exactly and sums counts and errors', () => {
    const h = (values: number[]): string => {
      const x = createHistogram();
      for (const v of values) recordMs(x, v);
      return encodeHistogram(x);
    };
    const part = (values: number[], errors: Record<string, number>): HttpLoadResult => ({
      kind: 'http', histograms: { 'k:200': h(values) }, sendLag: h([0]), sent: values.length, completed: values.length,
      timedOut: 0, errors, collected: [], elapsedMs: 10, sockets: 1, peakInFlight: 1,
    });
    const merged = mergeHttpResults([part([1, 2], { reset: 1 }), part([3], { reset: 2, refused: 1 })]);
    expect(merged.histograms.get('k:200')!.totalCount).toBe(3);
    expect(merged.sent).toBe(3);
    expect(merged.errors).toEqual({ reset: 3, refused: 1 });
  });
});
