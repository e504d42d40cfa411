import { describe, expect, it } from 'vitest';
import {
  createHistogram,
  decodeHistogram,
  encodeHistogram,
  mergeHistograms,
  percentiles,
  recordMs,
  spectrum,
  subtractPercentiles,
} from '../../../bench/hdr.js';

/** 1..10,000 µs uniformly: percentile p is p% of 10 ms. */
function uniform(): ReturnType<typeof createHistogram> {
  const h = createHistogram();
  for (let us = 1; us <= 10_000; us++) recordMs(h, us / 1000);
  return h;
}

describe('bench histogram', () => {
  it('reports percentiles of a known uniform distribution in ms within HdrHistogram precision', () => {
    const p = percentiles(uniform());
    expect(p.count).toBe(10_000);
    // 3 significant digits: each value is exact to within 0.1 %.
    const near = (actual: number, expected: number): void =>
      expect(Math.abs(actual - expected) / expected).toBeLessThanOrEqual(0.001);
    near(p.p50, 5);
    near(p.p90, 9);
    near(p.p99, 9.9);
    near(p.p999, 9.99);
    near(p.max, 10);
    near(p.mean, 5);
  });

  it('keeps the tail of a skewed distribution: 1 % slow samples show at p99.9 but not p90', () => {
    const h = createHistogram();
    for (let i = 0; i < 990; i++) recordMs(h, 1);
    for (let i = 0; i < 10; i++) recordMs(h, 1000);
    const p = percentiles(h);
    expect(p.p90).toBeCloseTo(1, 2);
    expect(p.p999).toBeGreaterThan(999);
    expect(p.max).toBeGreaterThan(999);
  });

  it('returns zeros for an empty histogram instead of throwing', () => {
    expect(percentiles(createHistogram())).toEqual({ count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0 });
  });

  it('round-trips through the compressed encoding and merges worker parts exactly', () => {
    const a = createHistogram();
    const b = createHistogram();
    for (let i = 1; i <= 5000; i++) recordMs(a, i / 1000);
    for (let i = 5001; i <= 10_000; i++) recordMs(b, i / 1000);
    const decoded = decodeHistogram(encodeHistogram(a));
    expect(percentiles(decoded)).toEqual(percentiles(a));
    const merged = mergeHistograms([encodeHistogram(a), b]);
    expect(percentiles(merged)).toEqual(percentiles(uniform()));
  });

  it('clamps negative and out-of-range values instead of throwing mid-run', () => {
    const h = createHistogram();
    recordMs(h, -5);
    recordMs(h, 10 * 3_600_000);
    expect(h.totalCount).toBe(2);
    expect(Math.abs(percentiles(h).max - 3_600_000) / 3_600_000).toBeLessThan(0.001);
  });

  it('builds a percentile spectrum that rises monotonically and ends at the max', () => {
    const points = spectrum(uniform());
    expect(points[0]).toEqual({ percentile: 0, valueMs: expect.any(Number) });
    for (let i = 1; i < points.length; i++) {
      expect(points[i]!.percentile).toBeGreaterThan(points[i - 1]!.percentile);
      expect(points[i]!.valueMs).toBeGreaterThanOrEqual(points[i - 1]!.valueMs);
    }
    const last = points[points.length - 1]!;
    expect(last.percentile).toBe(100);
    expect(last.valueMs).toBeCloseTo(10, 1);
    // Reaches into the 99.9th percentile for 10,000 samples.
    expect(points.some((pt) => pt.percentile > 99.9 && pt.percentile < 100)).toBe(true);
    expect(spectrum(createHistogram())).toEqual([]);
  });

  it('subtracts percentile by percentile, never below zero', () => {
    const a = { count: 10, p50: 5, p90: 9, p99: 12, p999: 20, max: 30, mean: 6 };
    const b = { count: 10, p50: 2, p90: 10, p99: 3, p999: 4, max: 5, mean: 2 };
    expect(subtractPercentiles(a, b)).toEqual({ count: 10, p50: 3, p90: 0, p99: 9, p999: 16, max: 25, mean: 4 });
  });
});
