/**
 * The performance goals (issue 10) next to what this run measured and what the shape floor
 * measured in the same run (bench/shape-floor-main.ts: the service's fixed shape with none of
 * tradegate's work in it). A goal the shape floor itself misses is out of reach on this
 * machine whatever tradegate does; the table says so instead of lowering the bar. The floor of
 * the idempotent goals adds one durable commit (bench/durable-probe.ts), which DESIGN §3 puts
 * before every idempotent answer.
 */
import type { Percentiles } from './hdr.js';
import { r2 } from './scenario.js';
import type { BenchSummary } from './summary.js';

/**
 * `met`; `out-of-reach`: missed, and the shape floor alone misses it too on this machine;
 * `not-met`: missed although the floor is within it (the gap is tradegate's);
 * `not-measured`: the scenario did not run (or ran without the phase).
 */
export type GoalStatus = 'met' | 'out-of-reach' | 'not-met' | 'not-measured';

/** One goal of the issue against this run. */
export interface GoalResult {
  measure: string;
  /** `max`: the value must be at most `goal`; `min`: at least. */
  kind: 'max' | 'min';
  goal: number;
  unit: 'µs' | 'ms' | 'KB' | 'req/s';
  measured?: number;
  /** The shape floor's value of the same measure in this run, where the bench measures one. */
  floor?: number;
  /** What `floor` is when it is more than the shape floor (e.g. `shape floor + one durable commit`). */
  floorIs?: string;
  status: GoalStatus;
  /** measured ÷ goal (how far off; 1 or less is met for a `max` goal). */
  ofGoal?: number;
  /** measured ÷ floor (how much above what the shape alone costs). */
  ofFloor?: number;
}

/** Latency the shape floor adds over the raw broker round trip at one percentile (a lower bound: its broker thread does less than the paper broker). */
const addedOver = (floor: Percentiles | undefined, raw: Percentiles | undefined, at: 'p50' | 'p99'): number | undefined =>
  floor && raw && floor.count > 0 && raw.count > 0 ? Math.max(0, floor[at] - raw[at]) : undefined;

/**
 * The floor of an idempotent order's added latency: the shape floor's, plus the fastest durable
 * commit of the run. Its answer waits for its record's commit after the broker has answered
 * (DESIGN §3), so at every percentile it adds at least one whole commit to what a plain order adds.
 */
const plusCommit = (added: number | undefined, commitMinMs: number | undefined): number | undefined =>
  added === undefined ? undefined : added + (commitMinMs ?? 0);

/** Judges one goal. */
export function judge(measure: string, kind: 'max' | 'min', goal: number, unit: GoalResult['unit'], measured?: number, floor?: number, floorIs?: string): GoalResult {
  const out: GoalResult = { measure, kind, goal, unit, status: 'not-measured' };
  if (floor !== undefined && Number.isFinite(floor)) {
    out.floor = r2(floor);
    if (floorIs) out.floorIs = floorIs;
  }
  if (measured === undefined || !Number.isFinite(measured) || measured < 0) return out;
  out.measured = r2(measured);
  const within = (v: number) => (kind === 'max' ? v <= goal : v >= goal);
  out.ofGoal = r2(kind === 'max' ? measured / goal : goal / Math.max(measured, Number.MIN_VALUE));
  if (out.floor !== undefined && out.floor > 0) out.ofFloor = r2(measured / out.floor);
  out.status = within(measured) ? 'met' : out.floor !== undefined && !within(out.floor) ? 'out-of-reach' : 'not-met';
  return out;
}

/** The goal for the front's CPU per authenticated GET, µs. */
export const GET_FRONT_GOAL_US = 25;

/**
 * What one µs of work on the front costs the front thread in all, on this machine: the shape
 * floor's accounts-size GET with and without a busy-wait of `workUs` per request, same rate. The
 * difference over `workUs` is the factor (system calls, the client's wake-up and cache misses can
 * grow with the time a request holds the thread; 1.0–1.4 measured on the 2-core VM); the goal leaves `(goal − floor) ÷ factor` µs of work
 * per request, and tradegate's front does `(measured − floor) ÷ factor` by the same measure.
 */
export interface FrontWorkCalibration {
  workUs: number;
  /** Front CPU per GET, µs: the floor, and the floor with the busy-wait. */
  floorUs: number;
  withWorkUs: number;
  /** Front CPU per µs of work. */
  factor: number;
  /** µs of work per request the goal leaves on this machine. */
  budgetUs: number;
  /** tradegate's front, in µs of work by the same measure. */
  oursUs: number;
}

/**
 * The calibration from the reads scenario's CPU phases; undefined when one is missing or the
 * busy-wait did not show (less than half of it in the CPU: the phase did not run as meant, and a
 * tiny factor would promise a budget no machine has).
 */
export function frontWorkCalibration(workUs: number, floorUs?: number, withWorkUs?: number, measuredUs?: number): FrontWorkCalibration | undefined {
  if (floorUs === undefined || withWorkUs === undefined || measuredUs === undefined || !(workUs > 0)) return undefined;
  const factor = (withWorkUs - floorUs) / workUs;
  if (!(factor >= 0.5)) return undefined;
  return {
    workUs, floorUs: r2(floorUs), withWorkUs: r2(withWorkUs), factor: r2(factor),
    budgetUs: r2(Math.max(0, GET_FRONT_GOAL_US - floorUs) / factor), oursUs: r2(Math.max(0, measuredUs - floorUs) / factor),
  };
}

/** Every goal of the issue, judged against a run (full size: the quick sizes are not the goals' loads). */
export function goalsOf(s: BenchSummary): GoalResult[] {
  const o = s.orders;
  const oc = o?.cpuUsPerRequest;
  const rc = s.reads?.cpuUsPerRequest;
  const sf = o?.shapeFloor;
  const raw = o?.brokerOsoRttMs;
  const commit = o?.durableCommit?.minMs;
  const idemFloorIs = commit === undefined ? undefined : 'shape floor + one durable commit';
  const rate = o ? `${o.ratePerSec}/s` : '1,000/s';
  const low = o?.lowLoad ? `${o.lowLoad.ratePerSec}/s` : '100/s';
  return [
    judge('front CPU per GET /api/v1/accounts', 'max', GET_FRONT_GOAL_US, 'µs', rc?.accounts?.front, rc?.shapeFloorAccounts?.front),
    judge('front CPU per bracket order', 'max', 60, 'µs', oc?.main?.front, oc?.shapeFloorOrder?.front),
    judge('actor CPU per bracket order', 'max', 80, 'µs', oc?.main?.actors, oc?.shapeFloorOrder?.actors),
    judge('paper broker CPU per bracket order', 'max', 100, 'µs', oc?.main?.paperBroker, oc?.shapeFloorOrder?.paperBroker),
    judge(`added latency at ${rate}, p50`, 'max', 0.3, 'ms', o?.addedMs.p50, addedOver(sf?.order?.latencyMs, raw, 'p50')),
    judge(`added latency at ${rate}, p99`, 'max', 2, 'ms', o?.addedMs.p99, addedOver(sf?.order?.latencyMs, raw, 'p99')),
    judge(`added latency at ${rate} with Idempotency-Key, p50`, 'max', 1, 'ms', o?.idempotent.addedMs.p50, plusCommit(addedOver(sf?.order?.latencyMs, raw, 'p50'), commit), idemFloorIs),
    judge(`added latency at ${rate} with Idempotency-Key, p99`, 'max', 4, 'ms', o?.idempotent.addedMs.p99, plusCommit(addedOver(sf?.order?.latencyMs, raw, 'p99'), commit), idemFloorIs),
    judge(`added latency at ${low}, p50`, 'max', 0.3, 'ms', o?.lowLoad?.addedMs.p50, addedOver(sf?.orderLowLoad?.latencyMs, raw, 'p50')),
    // Offered at the rate, and answered 200: the rate carried (p99 below says how fast).
    judge('reads offered and answered 200', 'min', 5000, 'req/s', s.reads && s.reads.answeredShare !== undefined ? s.reads.offeredPerSec * s.reads.answeredShare : undefined),
    judge('reads p99', 'max', 10, 'ms', s.reads?.latencyMs.p99, s.reads?.shapeFloor?.reads?.latencyMs.p99),
    judge('webhook burst: all at the broker after the last alert', 'max', 300, 'ms', s.webhooks?.allAtBrokerAfterLastMs),
    judge('webhook burst: acknowledgement p99', 'max', 50, 'ms', s.webhooks?.ackMs.p99, s.webhooks?.shapeFloor?.burst?.latencyMs.p99),
    judge('SSE RSS per subscriber', 'max', 2, 'KB', s.sse?.rssPerSubscriberKB, s.sse?.shapeFloor?.rssPerSubscriberKB),
    judge('harness floor p50 (GET /healthz)', 'max', 0.25, 'ms', o?.harnessFloorMs.p50, sf?.get?.latencyMs.p50),
  ];
}
