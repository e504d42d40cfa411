/**
 * HdrHistogram wrapper for the bench. Values are recorded in microseconds (integer, 3
 * significant digits, 1 µs .. 1 h) and reported in milliseconds. Histograms cross thread
 * boundaries as HdrHistogram's compressed base64 encoding, so workers and the driver merge
 * exact distributions instead of averaging percentiles (which would be meaningless).
 */
import * as hdr from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';

/** The HdrHistogram type the bench records into. */
export type { Histogram } from 'hdr-histogram-js';

/** Highest value a bench histogram tracks: one hour in µs. Larger values are clamped. */
export const MAX_TRACKABLE_US = 3_600_000_000;

/** Percentiles reported everywhere in the bench, in milliseconds. */
export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

/** One point of a percentile spectrum (HdrHistogram's "percentile distribution"). */
export interface SpectrumPoint {
  /** 0..100 */
  percentile: number;
  valueMs: number;
}

/** A new empty histogram for microsecond values. */
export function createHistogram(): Histogram {
  return hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: MAX_TRACKABLE_US,
    numberOfSignificantValueDigits: 3,
    autoResize: false,
  });
}

/** Records a duration given in milliseconds (fractions kept to the microsecond). */
export function recordMs(histogram: Histogram, ms: number): void {
  const us = Math.round(ms * 1000);
  histogram.recordValue(Math.min(MAX_TRACKABLE_US, Math.max(0, us)));
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** p50/p90/p99/p99.9/max (and count, mean) in milliseconds; zeros for an empty histogram. */
export function percentiles(histogram: Histogram): Percentiles {
  const count = histogram.totalCount;
  if (count === 0) return { count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0 };
  const at = (p: number): number => round3(histogram.getValueAtPercentile(p) / 1000);
  return {
    count,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    p999: at(99.9),
    // Bucket-equivalent max, so a histogram and its decoded copy report the same value.
    max: at(100),
    mean: round3(histogram.mean / 1000),
  };
}

/** Compressed base64 form, safe to post between threads or store in JSON. */
export function encodeHistogram(histogram: Histogram): string {
  return hdr.encodeIntoCompressedBase64(histogram);
}

/** Rebuilds a histogram from `encodeHistogram` output. */
export function decodeHistogram(encoded: string): Histogram {
  const decoded = hdr.decodeFromCompressedBase64(encoded);
  const histogram = createHistogram();
  histogram.add(decoded);
  return histogram;
}

/** Sum of several histograms (e.g. one per load worker). */
export function mergeHistograms(parts: Iterable<Histogram | string>): Histogram {
  const merged = createHistogram();
  for (const part of parts) merged.add(typeof part === 'string' ? decodeHistogram(part) : part);
  return merged;
}

/**
 * Percentile spectrum for plotting: points at percentiles that approach 100 geometrically
 * (0, 50, 75, 87.5, …), `ticksPerHalf` points per halving of the remaining distance, up to
 * the percentile of the single largest sample, then the max itself.
 */
export function spectrum(histogram: Histogram, ticksPerHalf = 4): SpectrumPoint[] {
  const count = histogram.totalCount;
  if (count === 0) return [];
  const points: SpectrumPoint[] = [];
  // The last percentile that still separates samples: 1 - 1/count.
  const last = 100 * (1 - 1 / count);
  for (let half = 0; ; half++) {
    let done = false;
    for (let t = 0; t < ticksPerHalf; t++) {
      const remaining = Math.pow(0.5, half + t / ticksPerHalf);
      const p = 100 * (1 - remaining);
      if (p > last) {
        done = true;
        break;
      }
      points.push({ percentile: p, valueMs: histogram.getValueAtPercentile(p) / 1000 });
    }
    if (done || half > 40) break;
  }
  points.push({ percentile: 100, valueMs: histogram.getValueAtPercentile(100) / 1000 });
  return points;
}

/** Subtracts percentile by percentile (a − b, floored at 0): the service's added latency. */
export function subtractPercentiles(a: Percentiles, b: Percentiles): Percentiles {
  const d = (x: number, y: number): number => round3(Math.max(0, x - y));
  return {
    count: a.count,
    p50: d(a.p50, b.p50),
    p90: d(a.p90, b.p90),
    p99: d(a.p99, b.p99),
    p999: d(a.p999, b.p999),
    max: d(a.max, b.max),
    mean: d(a.mean, b.mean),
  };
}
