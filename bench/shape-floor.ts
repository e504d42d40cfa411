/**
 * Starts and reads the shape floor (bench/shape-floor-main.ts) in its own process: the least
 * the service's fixed shape (uWS front → actor worker → broker WebSocket → broker thread) costs
 * per request on this machine, measured with the same generator in the same run as the service.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { cpuPerRequest, processCpuSeconds, type CpuPerRequest, type CpuSnapshot } from './cpu.js';
import { createHistogram, mergeHistograms, percentiles, recordMs, type Percentiles } from './hdr.js';
import { epochNow, type HttpRequestSpec } from './http-load.js';
import { rssKB } from './service.js';
import type { LoadPool } from './pool.js';
import { measured, pick, r2, statusCounts } from './scenario.js';
import type { PlotSeries } from './summary.js';

/** Thread names as the service's /metrics names them, so cpuPerRequest reads both alike. */
const THREADS = { front: 'front', actor: 'actor-1', broker: 'paper-broker' } as const;

/** A running shape-floor process. */
export class ShapeFloor {
  private constructor(
    private readonly child: ChildProcess,
    readonly origin: string,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  /** Starts it on a free loopback port; resolves once it listens. */
  static async start(): Promise<ShapeFloor> {
    // The compiled file (`npm run build`), also when this module runs from source (vitest).
    const main = join(PACKAGE_ROOT, 'dist', 'bench', 'shape-floor-main.js');
    // The same V8 flags as the service (bin/tradegate.js).
    const child = spawn(process.execPath, ['--max-semi-space-size=2', main, '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error('shape floor did not start within 10 s')), 10_000);
      child.once('exit', (code) => reject(new Error(`shape floor exited (${code}) before listening`)));
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const m = /listening (\d+)/.exec(out);
        if (!m) return;
        clearTimeout(timer);
        resolve(Number(m[1]));
      });
    });
    return new ShapeFloor(child, `http://127.0.0.1:${port}`);
  }

  /** Each thread's CPU seconds (and the process's), in the service's snapshot shape. */
  async cpu(): Promise<CpuSnapshot> {
    const [res, processSeconds] = await Promise.all([fetch(`${this.origin}/cpu`), processCpuSeconds(this.child.pid!)]);
    const ms = (await res.json()) as { front: number; actor: number; broker: number };
    return {
      byThread: { [THREADS.front]: ms.front / 1000, [THREADS.actor]: ms.actor / 1000, [THREADS.broker]: ms.broker / 1000 },
      threadIds: {},
      processSeconds,
      source: 'proc',
    };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

/** The shape floor's answers to one kind of request at one rate. */
export interface ShapeFloorPhase {
  ratePerSec: number;
  sent: number;
  /** Every answer had the expected status (200 for GET, 201 for the order). */
  allOk: boolean;
  latencyMs: Percentiles;
  cpu: CpuPerRequest;
}

/** What the shape floor measured in one scenario. */
export interface ShapeFloorSummary {
  /** `GET /healthz`: a bare uWS answer (the front's floor for a read). */
  get?: ShapeFloorPhase;
  /** `POST /order` with the bench's bracket body through front → actor → broker and back. */
  order?: ShapeFloorPhase;
  /** The same order at the low-load rate. */
  orderLowLoad?: ShapeFloorPhase;
  /** GETs answering the service's read sizes in turn (`GET /bytes/<n>`), at the reads scenario's rate. */
  reads?: ShapeFloorPhase;
  /** GETs of the size of `GET /api/v1/accounts` alone, at the reads scenario's rate. */
  readsAccounts?: ShapeFloorPhase;
  /**
   * The same GETs, each busy-waiting `workUs` on the front before its answer: what that much work
   * costs the front thread in all (system calls, wake-ups and cache misses can grow with it).
   */
  readsAccountsWork?: ShapeFloorPhase & { workUs: number };
  /** The webhook burst's count of orders inside 1 s. */
  burst?: ShapeFloorPhase;
}

const LABELS: Record<keyof ShapeFloorSummary, string> = {
  get: 'GET', order: 'order', orderLowLoad: 'order', reads: 'reads', readsAccounts: 'accounts-size GET', readsAccountsWork: 'accounts-size GET with busy-wait', burst: 'order burst',
};

/** Runs `phases` (GET and/or order, at their rates) against a fresh shape floor process. */
export async function measureShapeFloor(
  pool: LoadPool,
  runId: string,
  phases: { kind: keyof ShapeFloorSummary; ratePerSec: number; durationMs: number; body?: string; readBytes?: number[]; workUs?: number }[],
): Promise<{ summary: ShapeFloorSummary; series: PlotSeries[] }> {
  const floor = await ShapeFloor.start();
  const summary: ShapeFloorSummary = {};
  const series: PlotSeries[] = [];
  try {
    for (const phase of phases) {
      const get = phase.kind === 'get' || phase.kind === 'reads' || phase.kind === 'readsAccounts' || phase.kind === 'readsAccountsWork';
      const work = phase.workUs ? `?work=${phase.workUs}` : '';
      const requests: HttpRequestSpec[] =
        phase.kind === 'get' ? [{ method: 'GET', path: '/healthz', tag: 'get' }]
        : get ? (phase.readBytes ?? [2]).map((n) => ({ method: 'GET', path: `/bytes/${n}${work}`, tag: `read ${n} B` }))
        : [{ method: 'POST', path: '/order', tag: 'order', headers: { 'content-type': 'application/json' }, body: phase.body ?? '{}' }];
      const before = await floor.cpu();
      const run = await pool.http({
        kind: 'http', origin: floor.origin, ratePerSec: phase.ratePerSec, durationMs: phase.durationMs, uniquePrefix: `${runId}-shape-${phase.kind}`, requests,
      });
      const cpu = cpuPerRequest(before, await floor.cpu(), run.sent);
      const expected = get ? '200' : '201';
      const ok = pick(run, (_, s) => s === expected);
      const label = `shape floor ${LABELS[phase.kind]} at ${phase.ratePerSec}/s`;
      const m = measured(label, mergeHistograms(ok));
      const others = Object.entries(statusCounts(run)).filter(([s]) => s !== expected);
      const result: ShapeFloorPhase = { ratePerSec: phase.ratePerSec, sent: run.sent, allOk: others.length === 0 && run.completed === run.sent, latencyMs: m.p, cpu };
      if (phase.kind === 'readsAccountsWork') summary.readsAccountsWork = { ...result, workUs: phase.workUs ?? 0 };
      else summary[phase.kind] = result;
      // The calibration's latency is not a floor of anything the service answers: not plotted.
      if (phase.kind !== 'readsAccountsWork') series.push(m.series);
    }
  } finally {
    await floor.stop();
  }
  return { summary, series };
}

/** The health stream's floor: memory per held stream and fan-out of one event, on a bare uWS front. */
export interface SseFloorSummary {
  subscribers: number;
  rssPerSubscriberKB: number;
  fanoutMs: Percentiles;
}

/** Opens `count` event streams on a fresh shape floor process, then broadcasts one event (as the sse scenario does). */
export async function measureSseFloor(pool: LoadPool, count: number): Promise<SseFloorSummary> {
  const floor = await ShapeFloor.start();
  try {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = await rssKB(floor.pid);
    let after = 0;
    let triggeredAt = Number.NaN;
    let trigger: Promise<unknown> = Promise.resolve();
    const results = await pool.sse({ kind: 'sse', origin: floor.origin, keys: ['floor'], waitTimeoutMs: 60_000 }, count, () => {
      trigger = (async () => {
        // As the sse scenario: RSS after the ramp has settled.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        after = await rssKB(floor.pid);
        triggeredAt = epochNow();
        await fetch(`${floor.origin}/broadcast`, { method: 'POST' });
      })();
    });
    await trigger;
    const open = results.reduce((n, r) => n + r.open, 0);
    const h = createHistogram();
    for (const r of results) for (const t of r.receivedAt) if (t >= triggeredAt) recordMs(h, t - triggeredAt);
    return { subscribers: open, rssPerSubscriberKB: open > 0 ? r2((after - before) / open) : 0, fanoutMs: percentiles(h) };
  } finally {
    await floor.stop();
  }
}
