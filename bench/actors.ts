/**
 * What a connection actor costs: process RSS growth and time until every connection reports
 * CONNECTED, for N connections to the paper broker, one worker thread each (the default), and
 * optionally all in shared workers (`threadsMax` below N). Also the bare start time of one
 * actor worker (spawn → first RPC answer). Used by bench/scenarios/actors.ts; runnable alone:
 *
 *   node dist/bench/actors.js --counts 1,10,100 [--threads-max 4]
 */
import { Worker } from 'node:worker_threads';
import { MessageChannel } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import * as Comlink from 'comlink';
import { startSim, type SimHandle } from '../src/sim/index.js';
import { createLogger } from '../src/log.js';
import { distPath } from '../src/paths.js';
import { nodeEndpoint } from '../src/actors/comlink-node.js';
import { ACTOR_HOST_FILE, createSupervisor } from '../src/actors/supervisor.js';
import type { WorkerHostApi, WorkerHostData } from '../src/actors/protocol.js';
import type { ConnectionSpec } from '../src/domain/connections.js';

/** One measured connection count. */
export interface ActorMeasurement {
  connections: number;
  /** Worker threads used (connections when threadsMax ≥ connections). */
  workers: number;
  rssDeltaMB: number;
  /** From the first addConnection to the last CONNECTED. */
  startMs: number;
  connected: number;
}

const MB = 1024 * 1024;
const logger = createLogger('silent');
let userSeq = 0;

async function control(sim: SimHandle, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${sim.controlUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`control ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function specs(sim: SimHandle, n: number): Promise<ConnectionSpec[]> {
  const out: ConnectionSpec[] = [];
  for (let i = 0; i < n; i++) {
    const name = `bench-actor-${process.pid}-${++userSeq}`;
    await control(sim, '/users', { name, password: 'pw', accounts: [{ name: `${name}-A` }] });
    out.push({
      connectionId: `bench-${name}`, userId: 'bench', broker: 'paper', environment: 'paper', restUrl: sim.restUrl, wsUrl: sim.wsUrl,
      credentials: { name, password: 'pw' }, budget: { perMinute: 100_000, perHour: 1_000_000 },
    });
  }
  return out;
}

function settleGc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Measures N connections: RSS growth and time to all-CONNECTED. */
async function measureOne(sim: SimHandle, connections: number, threadsMax: number): Promise<ActorMeasurement> {
  const list = await specs(sim, connections);
  settleGc();
  const before = process.memoryUsage().rss;
  const sup = createSupervisor({ threadsMax, logger, callTimeoutMs: 60_000, workerLogLevel: 'silent' });
  const pending = new Set(list.map((s) => s.connectionId));
  const allConnected = new Promise<void>((resolve) => {
    const off = sup.onEvent((e) => {
      if (e.type === 'status' && e.status === 'CONNECTED' && pending.delete(e.connectionId) && pending.size === 0) {
        off();
        resolve();
      }
    });
  });
  const t0 = performance.now();
  await Promise.all(list.map((s) => sup.addConnection(s)));
  const timeout = new Promise<void>((r) => setTimeout(r, 60_000 + connections * 500).unref());
  await Promise.race([allConnected, timeout]);
  const startMs = performance.now() - t0;
  settleGc();
  const rssDeltaMB = (process.memoryUsage().rss - before) / MB;
  const m: ActorMeasurement = { connections, workers: sup.workerCount(), rssDeltaMB, startMs, connected: connections - pending.size };
  await sup.close();
  return m;
}

/** Spawn → first answered RPC of a bare actor worker, median of `samples`. */
export async function workerStartMs(samples = 5): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const { port2 } = new MessageChannel();
    const requests = new MessageChannel();
    const data: WorkerHostData = { eventPort: port2, requestPort: requests.port2, logLevel: 'silent' };
    const t0 = performance.now();
    const worker = new Worker(distPath(ACTOR_HOST_FILE), { workerData: data, transferList: [port2, requests.port2] });
    const remote = Comlink.wrap<WorkerHostApi>(nodeEndpoint(worker as unknown as Parameters<typeof nodeEndpoint>[0]));
    await remote.stats();
    times.push(performance.now() - t0);
    await worker.terminate();
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** Runs the measurement for each connection count (bench/scenarios/actors.ts calls this). */
export async function measureActors(opts: { counts: number[]; threadsMax?: number }): Promise<ActorMeasurement[]> {
  const sim = await startSim({ priceStepMs: 0, limits: { requestsPerSecond: 1_000_000 } });
  try {
    const out: ActorMeasurement[] = [];
    for (const n of opts.counts) out.push(await measureOne(sim, n, opts.threadsMax ?? n));
    return out;
  } finally {
    await sim.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const counts = (arg('--counts') ?? '1,10,50').split(',').map(Number).filter((n) => n > 0);
  const threadsMax = arg('--threads-max') ? Number(arg('--threads-max')) : undefined;
  console.log(`worker start (spawn → first RPC), median of 5: ${(await workerStartMs()).toFixed(1)} ms`);
  console.log('connections | workers | RSS Δ MB | MB/actor | all CONNECTED ms | ms/actor | connected');
  for (const m of await measureActors({ counts, ...(threadsMax ? { threadsMax } : {}) })) {
    console.log(
      [m.connections, m.workers, m.rssDeltaMB.toFixed(1), (m.rssDeltaMB / m.connections).toFixed(2), m.startMs.toFixed(0), (m.startMs / m.connections).toFixed(1), m.connected].join(' | '),
    );
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
