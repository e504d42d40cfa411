/**
 * `tradegate bench [scenario] [--quick]`: runs the scenarios one after another (each on its
 * own service process), collects their summaries and checks, and writes the report. A
 * scenario that cannot run is reported as such, with its reason; the others still run.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { LoadPool } from './pool.js';
import { allPassed, writeReport, type WrittenReport } from './report.js';
import type { ScenarioContext, ScenarioRun } from './scenario.js';
import { runActors } from './scenarios/actors.js';
import { runCluster } from './scenarios/cluster.js';
import { runOrders } from './scenarios/orders.js';
import { runReads } from './scenarios/reads.js';
import { goalsOf } from './goals.js';
import { runSseWithFloor } from './scenarios/sse.js';
import { runWebhooks } from './scenarios/webhooks.js';
import { Service } from './service.js';
import type { BenchSummary, MachineInfo, PlotSeries, ScenarioName } from './summary.js';
import { SCENARIOS } from './summary.js';

type Runner = (ctx: ScenarioContext) => Promise<ScenarioRun<unknown>>;

const RUNNERS: Record<ScenarioName, Runner> = {
  actors: runActors,
  sse: runSseWithFloor,
  reads: runReads,
  webhooks: runWebhooks,
  orders: runOrders,
  cluster: runCluster,
};

/** Order of a full run: cheap and independent first, the long latency run last. */
export const RUN_ORDER: readonly ScenarioName[] = ['actors', 'sse', 'reads', 'webhooks', 'orders', 'cluster'];

/** The bench process's open-file limit (`ulimit -n`), or 1024 when it cannot be read. */
export function fileLimit(): number {
  const out = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' });
  const n = Number(out.stdout.trim());
  return Number.isFinite(n) && n > 0 ? n : out.stdout.trim() === 'unlimited' ? 1_048_576 : 1024;
}

/** What the report says about the machine. */
export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    cpus: list.length,
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    memoryMB: Math.round(totalmem() / 1024 / 1024),
    fileLimit: fileLimit(),
  };
}

/** What to run and where to write it. */
export interface BenchOptions {
  scenarios: readonly ScenarioName[];
  quick: boolean;
  /** Overrides the key count of `orders` and `reads` (default 500, quick 50). */
  keys?: number;
  /** Default: <package>/bench/results */
  outDir?: string;
  /** Writes a .cpuprofile per service thread into <outDir>/profiles/<stamp>/<scenario>/. */
  profile?: boolean;
  log?: (message: string) => void;
}

/** Runs the scenarios, writes the report; returns the summary, the files and whether all checks passed. */
export async function runBench(opts: BenchOptions): Promise<{ summary: BenchSummary; files: WrittenReport; passed: boolean }> {
  const started = Date.now();
  const write = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const log = (m: string): void => write(`[+${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s] ${m}`);
  const machine = machineInfo();
  const summary: BenchSummary = {
    machine,
    quick: opts.quick,
    startedAt: new Date(started).toISOString(),
    finishedAt: '',
    durationMs: 0,
    scenarios: {},
  };
  const series: PlotSeries[] = [];
  const pool = new LoadPool(Math.max(1, Math.min(2, machine.cpus)));
  const ctx: ScenarioContext = {
    quick: opts.quick,
    keys: opts.keys,
    pool,
    runId: randomBytes(4).toString('hex'),
    fileLimit: machine.fileLimit,
    log,
  };
  const outDir = opts.outDir ?? join(PACKAGE_ROOT, 'bench', 'results');
  const profileDir = join(outDir, 'profiles', summary.startedAt.replace(/[:.]/g, '-'));
  try {
    for (const name of RUN_ORDER.filter((n) => opts.scenarios.includes(n))) {
      const t0 = Date.now();
      log(`bench: ${name}${opts.quick ? ' (quick)' : ''}`);
      Service.profiling = opts.profile ? { dir: profileDir, scenario: name } : undefined;
      try {
        const run = await RUNNERS[name](ctx);
        (summary as unknown as Record<string, unknown>)[name] = run.summary;
        const failed = run.checks.some((c) => !c.ok);
        summary.scenarios[name] = { status: failed ? 'failed' : 'ok', durationMs: Date.now() - t0, checks: run.checks, notes: run.notes };
        series.push(...run.series.map((s) => ({ ...s, label: `${name}: ${s.label}` })));
        for (const c of run.checks) log(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        summary.scenarios[name] = { status: 'error', durationMs: Date.now() - t0, checks: [], reason };
        log(`  ERROR ${name}: ${reason}`);
      }
    }
  } finally {
    Service.profiling = undefined;
    await pool.close();
  }
  summary.cpuUsPerRequest = headlineCpu(summary);
  summary.goals = goalsOf(summary);
  if (opts.profile) summary.profiles = Service.profiles.splice(0);
  summary.finishedAt = new Date().toISOString();
  summary.durationMs = Date.now() - started;
  const complete = !opts.quick && SCENARIOS.every((n) => opts.scenarios.includes(n));
  const files = await writeReport(outDir, summary, series, { summaryFile: complete });
  return { summary, files, passed: allPassed(summary) };
}

/** The headline CPU figures: GET /api/v1/accounts alone, and bracket orders at full load. */
export function headlineCpu(summary: BenchSummary): BenchSummary['cpuUsPerRequest'] {
  const out: NonNullable<BenchSummary['cpuUsPerRequest']> = {};
  const accounts = summary.reads?.cpuUsPerRequest.accounts;
  if (accounts) out.readsAccounts = accounts;
  const orders = summary.orders?.cpuUsPerRequest.main;
  if (orders) out.orders = orders;
  return out;
}

/** Parses a scenario argument; undefined = all. */
export function parseScenario(arg: string | undefined): readonly ScenarioName[] {
  if (arg === undefined || arg === 'all') return SCENARIOS;
  if ((SCENARIOS as readonly string[]).includes(arg)) return [arg as ScenarioName];
  throw new Error(`unknown scenario '${arg}' (expected one of ${SCENARIOS.join(', ')})`);
}
