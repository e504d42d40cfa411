/**
 * Driver side of the load generators: a piscina pool over the compiled load-worker, one
 * schedule split across threads, and merging of what comes back.
 */
import { MessageChannel } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { distPath } from '../src/paths.js';
import { decodeHistogram, mergeHistograms, type Histogram } from './hdr.js';
import type { BrokerProbeResult, BrokerProbeTask } from './broker-probe.js';
import { epochNow, type CollectedResponse, type HttpLoadResult, type HttpLoadTask } from './http-load.js';
import type { LoadResult, LoadTask } from './load-worker.js';
import type { SseResult, SseTask } from './sse-subscribers.js';

/** Delay between scheduling and arrival 0, so every worker has its task before the schedule starts. */
export const START_MARGIN_MS = 300;

/** Several workers' HTTP results folded into one. */
export interface MergedHttpResult {
  histograms: Map<string, Histogram>;
  sendLag: Histogram;
  sent: number;
  completed: number;
  timedOut: number;
  errors: Record<string, number>;
  collected: CollectedResponse[];
  elapsedMs: number;
  sockets: number;
  /** Sum of the workers' peaks (an upper bound of the joint peak). */
  peakInFlight: number;
}

/** A worker's HTTP result, or one already merged (histograms encoded or decoded). */
export type HttpResultPart = Omit<HttpLoadResult, 'kind' | 'histograms' | 'sendLag'> & { histograms: Record<string, string | Histogram>; sendLag: string | Histogram };

/** Merges HTTP results (histograms added exactly, counts summed). */
export function mergeHttpResults(results: HttpResultPart[]): MergedHttpResult {
  const labels = new Set(results.flatMap((r) => Object.keys(r.histograms)));
  const histograms = new Map<string, Histogram>();
  for (const label of labels) {
    histograms.set(label, mergeHistograms(results.flatMap((r) => (r.histograms[label] ? [r.histograms[label]] : []))));
  }
  const errors: Record<string, number> = {};
  for (const r of results) for (const [k, n] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + n;
  return {
    histograms,
    sendLag: mergeHistograms(results.map((r) => r.sendLag)),
    sent: results.reduce((n, r) => n + r.sent, 0),
    completed: results.reduce((n, r) => n + r.completed, 0),
    timedOut: results.reduce((n, r) => n + r.timedOut, 0),
    errors,
    collected: results.flatMap((r) => r.collected),
    elapsedMs: Math.max(0, ...results.map((r) => r.elapsedMs)),
    sockets: results.reduce((n, r) => n + r.sockets, 0),
    peakInFlight: results.reduce((n, r) => n + r.peakInFlight, 0),
  };
}

/**
 * Splits one schedule of `task.ratePerSec` over `parts` workers: worker w takes global
 * arrivals w, w+parts, … (same intended times as the single schedule) and the request
 * templates j ≡ w (mod parts), so each template keeps its exact per-template rate.
 */
export function splitHttpTask(task: HttpLoadTask, parts: number): HttpLoadTask[] {
  const n = task.requests.length;
  // A lone template (a floor's GET, the shape floor's order) is shared by every worker: its
  // rate stays the schedule's, and the service under test sees the same generator threads as
  // in the phases it is compared with (one thread had the floors meet fewer wake-ups, below).
  const p = parts > 1 && (n === 1 || n % parts === 0) ? parts : 1;
  const startAt = task.startAtEpochMs ?? epochNow() + START_MARGIN_MS;
  const perWorkerCount = task.count === undefined ? undefined : Math.ceil(task.count / p);
  return Array.from({ length: p }, (_, w) => ({
    ...task,
    ratePerSec: task.ratePerSec / p,
    count: perWorkerCount,
    startAtEpochMs: startAt + (w * 1000) / task.ratePerSec,
    requests: n === 1 ? task.requests : task.requests.filter((_, j) => j % p === w),
    uniquePrefix: `${task.uniquePrefix}w${w}`,
  }));
}

/** Several merged results (e.g. one per node of a cluster) folded into one. */
export function mergeMerged(results: MergedHttpResult[]): MergedHttpResult {
  return mergeHttpResults(results.map((r) => ({ ...r, histograms: Object.fromEntries(r.histograms) })));
}

/** The piscina pool that runs every load generator of a bench run. */
export class LoadPool {
  private readonly pool: Piscina<LoadTask, LoadResult>;
  private warming: Promise<void> | undefined;

  constructor(readonly threads = 2) {
    this.pool = new Piscina({
      filename: pathToFileURL(distPath('bench/load-worker.js')).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60_000,
      // Several schedules (e.g. in-limit keys and over-limit keys) share a thread.
      concurrentTasksPerWorker: 4,
    });
  }

  /**
   * Loads the load-worker module in every thread. A cold thread takes over a second to load
   * it; a schedule handed to it meanwhile would start with a burst of overdue arrivals.
   */
  warm(): Promise<void> {
    this.warming ??= (async () => {
      const seen = new Set<number>();
      for (let attempt = 0; attempt < 5 && seen.size < this.threads; attempt++) {
        const runs = Array.from({ length: this.threads * 4 }, () => this.pool.run({ kind: 'warmup', holdMs: 50 }));
        for (const r of await Promise.all(runs)) if (r.kind === 'warmup') seen.add(r.threadId);
      }
    })();
    return this.warming;
  }

  /** Runs an HTTP schedule split over the pool's threads. */
  async http(task: HttpLoadTask, parts = this.threads): Promise<MergedHttpResult> {
    await this.warm();
    const results = await Promise.all(splitHttpTask(task, parts).map((t) => this.pool.run(t) as Promise<HttpLoadResult>));
    return mergeHttpResults(results);
  }

  /** Runs the raw broker probe in one worker. */
  async broker(task: BrokerProbeTask): Promise<BrokerProbeResult> {
    await this.warm();
    return (await this.pool.run(task)) as BrokerProbeResult;
  }

  /**
   * Opens SSE subscribers across the threads. `onReady` runs once every thread has its
   * streams open (with the totals); its completion is not awaited by the workers, which wait
   * for the status event on their own.
   */
  async sse(
    base: Omit<SseTask, 'port' | 'count'>,
    count: number,
    onReady: (open: number, failed: number) => void,
  ): Promise<SseResult[]> {
    await this.warm();
    const parts = Math.max(1, Math.min(this.threads, count));
    let readyParts = 0;
    let open = 0;
    let failed = 0;
    const runs = Array.from({ length: parts }, (_, w) => {
      const { port1, port2 } = new MessageChannel();
      port1.on('message', (m: { type: string; open: number; failed: number }) => {
        if (m.type !== 'ready') return;
        open += m.open;
        failed += m.failed;
        if (++readyParts === parts) onReady(open, failed);
        port1.close();
      });
      const share = Math.floor(count / parts) + (w < count % parts ? 1 : 0);
      const keys = base.keys.filter((_, j) => j % parts === w);
      const task: SseTask = { ...base, keys: keys.length > 0 ? keys : base.keys, count: share, port: port2 };
      return this.pool.run(task, { transferList: [port2] }) as Promise<SseResult>;
    });
    return Promise.all(runs);
  }

  /** Stops the worker threads. */
  close(): Promise<void> {
    return this.pool.close();
  }
}

/** Decodes a label → encoded histogram record. */
export function decodeAll(encoded: Record<string, string>): Map<string, Histogram> {
  return new Map(Object.entries(encoded).map(([k, v]) => [k, decodeHistogram(v)]));
}
