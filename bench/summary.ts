/**
 * The machine-readable result of a bench run: the shape of `bench/results/latest.json`
 * (issue 6), plus each scenario's correctness checks. Latencies are milliseconds.
 */
import type { CpuPerRequest } from './cpu.js';
import type { DurableCommitSummary } from './durable-probe.js';
import type { FrontWorkCalibration, GoalResult } from './goals.js';
import type { Percentiles, SpectrumPoint } from './hdr.js';
import type { ProfileFile } from './service.js';
import type { SseFloorSummary, ShapeFloorSummary } from './shape-floor.js';

export type { CpuPerRequest } from './cpu.js';

/** Scenario names, as `tradegate bench <scenario>` takes them. */
export const SCENARIOS = ['orders', 'webhooks', 'sse', 'reads', 'actors', 'cluster'] as const;
/** One of SCENARIOS. */
export type ScenarioName = (typeof SCENARIOS)[number];

/** One correctness check a scenario made while it ran. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** How a scenario ended: `ok` (ran, all checks passed), `failed` (ran, a check failed), `error` (could not run). */
export interface ScenarioOutcome {
  status: 'ok' | 'failed' | 'error';
  durationMs: number;
  checks: Check[];
  /** Why it could not run, for `error`. */
  reason?: string;
  /** Measurement caveats the reader must know (e.g. the generator fell behind). */
  notes?: string[];
}

/** The machine a run measured. */
export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  node: string;
  platform: string;
  arch: string;
  memoryMB: number;
  /** `ulimit -n` of the bench process. */
  fileLimit: number;
}

/** `orders` section of latest.json. */
export interface OrdersSummary {
  keys: number;
  overLimitKeys: number;
  /** Offered rate of the in-limit keys (keys × 2/s). */
  ratePerSec: number;
  durationMs: number;
  sent: number;
  accepted: number;
  rejected429: number;
  /** Accepted (201) answers per second over the run, first arrival to last answer. */
  acceptedPerSec: number;
  /** Other outcomes by `status` (e.g. `503`, `error`, `timeout`). */
  otherOutcomes: Record<string, number>;
  /** Accepted requests without Idempotency-Key, from intended send time to response. */
  e2eMs: Percentiles;
  /** Every in-limit request whatever its outcome (a timeout counts as its deadline): no survivor bias. */
  allRequestsMs: Percentiles;
  brokerRttMs: Percentiles;
  /** `order/placeoso` with the same bracket, the broker call the service actually makes. */
  brokerOsoRttMs: Percentiles;
  /** e2e − raw placeoso round trip (the broker call a bracket order makes), percentile by percentile. */
  addedMs: Percentiles;
  idempotent: { e2eMs: Percentiles; addedMs: Percentiles };
  rejected429Ms: Percentiles;
  harnessFloorMs: Percentiles;
  /** e2e over the raw placeoso round trip, and the harness floor's share of e2e, at p50 and p99. */
  ratios: { e2eOverBrokerP50: number; e2eOverBrokerP99: number; floorShareP50: number; floorShareP99: number };
  /** The generator's own lateness (p99, ms): large values mean the driver, not the service, saturated. */
  sendLagP99Ms: number;
  accountedAtBroker: boolean;
  duplicates: number;
  /**
   * CPU µs per request per thread: `floor` (GET /healthz), `lowLoad`, `main` (in-limit and
   * over-limit keys together), `shapeFloorGet` and `shapeFloorOrder` (the shape floor's threads).
   */
  cpuUsPerRequest: Record<string, CpuPerRequest>;
  /** The shape floor (bench/shape-floor-main.ts) under the same generator at the same rates. */
  shapeFloor?: ShapeFloorSummary;
  /** One idempotency record's durable commit on this machine (bench/durable-probe.ts): what an idempotent order waits for at least. */
  durableCommit?: DurableCommitSummary;
  /** Full runs with K > 50: the same orders from 50 keys (100/s) first, a load the service can carry. */
  lowLoad?: {
    keys: number;
    ratePerSec: number;
    durationMs: number;
    outcomes: Record<string, number>;
    e2eMs: Percentiles;
    addedMs: Percentiles;
    idempotent: { e2eMs: Percentiles; addedMs: Percentiles };
  };
}

/** `webhooks` section of latest.json. */
export interface WebhooksSummary {
  alerts: number;
  tokens: number;
  acked: number;
  duplicates: number;
  lost: number;
  /** From the first alert's intended send time until every acknowledged order is at the broker. */
  allAtBrokerMs: number;
  /** The same, from the last alert's intended send time (the measure). */
  allAtBrokerAfterLastMs: number;
  /** CPU µs per alert per thread during the burst (`burst`), the second burst (`secondBurst`), and the shape floor's (`shapeFloorBurst`). */
  cpuUsPerRequest: Record<string, CpuPerRequest>;
  ackMs: Percentiles;
  /** Retried alerts (same `id`) answered from the dedupe record without a second order. */
  retriedDeduped: number;
  /** The shape floor answering the same count of orders inside 1 s (`burst`). */
  shapeFloor?: ShapeFloorSummary;
  /** The same burst again on the then warm process (fresh ids); its CPU is `cpuUsPerRequest.secondBurst`. The goals judge the first. */
  secondBurst?: { acked: number; ackMs: Percentiles };
}

/** `sse` section of latest.json. */
export interface SseSummary {
  subscribers: number;
  requested: number;
  /** Why `subscribers` is below the default (file limit, quick mode). */
  cap: string;
  fanoutMs: Percentiles;
  missing: number;
  rssPerSubscriberKB: number;
  serverRssMB: { before: number; after: number };
  /** The same streams held by the shape floor (a bare uWS front): its RSS per stream and fan-out. */
  shapeFloor?: SseFloorSummary;
}

/** `reads` section of latest.json. */
export interface ReadsSummary {
  keys: number;
  ratePerSec: number;
  /** = ratePerSec (the name for it). */
  offeredPerSec: number;
  /**
   * CPU µs per read per thread: `accounts` (GET /api/v1/accounts alone), `workingOrders` (alone),
   * `mixed` (the measured run), `shapeFloorReads` (the shape floor answering the same sizes),
   * `shapeFloorAccounts` (its accounts-size answer alone) and `shapeFloorAccountsWork` (the same
   * with a busy-wait of `frontWork.workUs` per request).
   */
  cpuUsPerRequest: Record<string, CpuPerRequest>;
  /** The shape floor (bench/shape-floor-main.ts) answering reads of the same sizes at the same rate. */
  shapeFloor?: ShapeFloorSummary;
  durationMs: number;
  /** Answered 200 per second, first arrival to last answer (the tail of the last answers counts in the time). */
  reqPerSec: number;
  /** Share of the offered requests answered 200 (1 = every request of the schedule). */
  answeredShare?: number;
  latencyMs: Percentiles;
  byEndpoint: Record<string, Percentiles>;
  non2xx: Record<string, number>;
  /** What a µs of work costs the front, from the shape floor with and without a busy-wait (bench/goals.ts frontWorkCalibration). */
  frontWork?: FrontWorkCalibration;
}

/** `actors` section of latest.json. */
export interface ActorsSummary {
  /** RSS growth per actor in the largest run. */
  rssPerActorMB: number;
  /** One actor alone: addConnection → CONNECTED (worker start, broker auth, sync). */
  startMs: number;
  /** Bare actor worker: spawn → first answered RPC (median). */
  workerStartMs: number;
  /** Per connection count: total RSS growth and start time. */
  runs: { connections: number; rssDeltaMB: number; rssPerActorMB: number; startMs: number; startPerActorMs: number }[];
}

/** One deployment's run in the `cluster` scenario. */
export interface ClusterRun {
  nodes: number;
  ordersPerSec: number;
  readsPerSec: number;
  orderMs: Percentiles;
  idempotentOrderMs: Percentiles;
  readMs: Percentiles;
  outcomes: { orders: Record<string, number>; reads: Record<string, number> };
}

/** `cluster` section of latest.json: single node vs one and three cluster nodes at the same load. */
export interface ClusterSummary {
  keys: number;
  ratePerSec: number;
  durationMs: number;
  /** Cores of the machine: every process of the run shared them. */
  cores: number;
  single: ClusterRun;
  oneNode: ClusterRun;
  threeNodes: ClusterRun;
  /** Completed per second, 3 nodes over 1. */
  ratios: { ordersPerSec3to1: number; readsPerSec3to1: number };
  /** Cluster (one node) minus single node, and three nodes minus one (the hop), in ms. */
  addedMs: { orderP50: number; orderP99: number; idempotentOrderP50: number; readP50: number; readP99: number; hopOrderP50: number; hopReadP50: number };
}

/** The whole of latest.json. */
export interface BenchSummary {
  machine: MachineInfo;
  quick: boolean;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  scenarios: Partial<Record<ScenarioName, ScenarioOutcome>>;
  /** The headline: CPU µs per request per thread (see cpu.ts). */
  cpuUsPerRequest?: {
    readsAccounts?: Pick<CpuPerRequest, 'front'> & Partial<CpuPerRequest>;
    orders?: Pick<CpuPerRequest, 'front' | 'actors' | 'paperBroker'> & Partial<CpuPerRequest>;
  };
  /** The goals against this run and the shape floor measured in it (goals.ts). */
  goals?: GoalResult[];
  /** `bench --profile`: the .cpuprofile of every service thread, per scenario. */
  profiles?: ProfileFile[];
  orders?: OrdersSummary;
  webhooks?: WebhooksSummary;
  sse?: SseSummary;
  reads?: ReadsSummary;
  actors?: ActorsSummary;
  cluster?: ClusterSummary;
}

/** One curve of the latency-distribution plot. */
export interface PlotSeries {
  label: string;
  points: SpectrumPoint[];
}
