/**
 * What a scenario receives and returns. A scenario starts its own service, drives load
 * through the shared pool, verifies correctness as it goes, and hands back its summary
 * section, its checks and the latency curves to plot.
 */
import { percentiles, spectrum, type Histogram, type Percentiles } from './hdr.js';
import type { LoadPool, MergedHttpResult } from './pool.js';
import type { Check, PlotSeries } from './summary.js';

/** Shared by every scenario of one run. */
export interface ScenarioContext {
  quick: boolean;
  /** Key count override for `orders` and `reads`. */
  keys?: number;
  pool: LoadPool;
  /** Unique per run; prefixes idempotency keys, clOrdIds and alert ids. */
  runId: string;
  /** Machine's open-file limit (caps SSE subscribers). */
  fileLimit: number;
  log(message: string): void;
}

/** A scenario's result: its summary section, checks, caveats and curves. */
export interface ScenarioRun<S> {
  summary: S;
  checks: Check[];
  notes: string[];
  series: PlotSeries[];
}

/** Latency histograms whose label (`tag:status`) matches. */
export function pick(result: MergedHttpResult, match: (tag: string, status: string) => boolean): Histogram[] {
  const out: Histogram[] = [];
  for (const [label, h] of result.histograms) {
    const i = label.lastIndexOf(':');
    if (match(label.slice(0, i), label.slice(i + 1))) out.push(h);
  }
  return out;
}

/** Outcome counts by status for the tags matching. */
export function statusCounts(result: MergedHttpResult, tagMatch: (tag: string) => boolean = () => true): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [label, h] of result.histograms) {
    const i = label.lastIndexOf(':');
    if (!tagMatch(label.slice(0, i))) continue;
    const status = label.slice(i + 1);
    out[status] = (out[status] ?? 0) + h.totalCount;
  }
  return out;
}

/** Percentiles and the plot curve of one histogram. */
export function measured(label: string, h: Histogram): { p: Percentiles; series: PlotSeries } {
  return { p: percentiles(h), series: { label, points: spectrum(h) } };
}

/** A note when the load generator itself fell behind its schedule (its numbers include that lag). */
export function lagNote(what: string, sendLag: Histogram): string[] {
  const p99 = percentiles(sendLag).p99;
  return p99 > 5 ? [`${what}: the load generator sent late (send lag p99 ${p99.toFixed(1)} ms); latencies include it, as an open-loop client would see.`] : [];
}

/** Round to 2 decimals for summaries. */
export function r2(n: number): number {
  return Math.round(n * 100) / 100;
}
