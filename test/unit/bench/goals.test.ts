/**
 * The goals table must never call a missed goal met, and may call it out of reach only when the
 * shape floor measured in the same run misses it too (issue 10: "do not lower the bar silently").
 */
import { describe, expect, it } from 'vitest';
import { frontWorkCalibration, goalsOf, judge } from '../../../bench/goals.js';
import type { Percentiles } from '../../../bench/hdr.js';
import { renderMarkdown } from '../../../bench/report.js';
import type { BenchSummary } from '../../../bench/summary.js';

const p = (p50: number, p99: number): Percentiles => ({ count: 100, p50, p90: p50, p99, p999: p99, max: p99, mean: p50 });
const cpu = (front: number, actors = 0, paperBroker = 0) => ({ requests: 1000, front, actors, paperBroker, process: front + actors + paperBroker, source: 'proc' as const });

describe('judge', () => {
  it('calls a value within a max goal met, at the goal included', () => {
    expect(judge('x', 'max', 25, 'µs', 25, 40).status).toBe('met');
    expect(judge('x', 'max', 25, 'µs', 24.9).status).toBe('met');
  });

  it('calls a miss out of reach only when the floor misses the goal too', () => {
    expect(judge('x', 'max', 25, 'µs', 80, 33)).toMatchObject({ status: 'out-of-reach', ofGoal: 3.2, ofFloor: 2.42 });
    expect(judge('x', 'max', 60, 'µs', 456, 50)).toMatchObject({ status: 'not-met', ofFloor: 9.12 });
    // No floor measured: a miss is a miss.
    expect(judge('x', 'max', 60, 'µs', 456).status).toBe('not-met');
  });

  it('reads min goals the other way round', () => {
    expect(judge('r', 'min', 5000, 'req/s', 5000).status).toBe('met');
    expect(judge('r', 'min', 5000, 'req/s', 4000, 4500)).toMatchObject({ status: 'out-of-reach', ofGoal: 1.25 });
    expect(judge('r', 'min', 5000, 'req/s', 4000, 6000).status).toBe('not-met');
  });

  it('says not measured for a scenario that did not run, or a value it could not measure', () => {
    expect(judge('x', 'max', 1, 'ms', undefined, 0.5).status).toBe('not-measured');
    expect(judge('x', 'max', 1, 'ms', -1).status).toBe('not-measured');
    expect(judge('x', 'max', 1, 'ms', Number.NaN).status).toBe('not-measured');
  });
});

describe('frontWorkCalibration', () => {
  it('prices a µs of front work from the floor with and without the busy-wait, and the goal’s budget with it', () => {
    // 20 µs of busy-wait took the floor from 17 to 45 µs: 1.4 µs per µs of work.
    expect(frontWorkCalibration(20, 17, 45, 52)).toEqual({ workUs: 20, floorUs: 17, withWorkUs: 45, factor: 1.4, budgetUs: 5.71, oursUs: 25 });
    // A floor already over the goal leaves no work at all.
    expect(frontWorkCalibration(20, 30, 58, 60)).toMatchObject({ budgetUs: 0 });
  });

  it('gives nothing when a phase is missing or the busy-wait did not show in the CPU', () => {
    expect(frontWorkCalibration(20, undefined, 45, 52)).toBeUndefined();
    expect(frontWorkCalibration(20, 17, 16, 52)).toBeUndefined();
    // 2 µs more for 20 µs of busy-wait: the work did not run as meant.
    expect(frontWorkCalibration(20, 17, 19, 52)).toBeUndefined();
    expect(frontWorkCalibration(0, 17, 45, 52)).toBeUndefined();
  });
});

describe('goalsOf', () => {
  const summary = {
    machine: { cpus: 2, cpuModel: 'test', memoryMB: 1, node: '20', platform: 'linux', arch: 'x64', fileLimit: 1 },
    quick: false, startedAt: 't', finishedAt: 't', durationMs: 1, scenarios: {},
    orders: {
      ratePerSec: 1000, addedMs: p(4.8, 687), idempotent: { addedMs: p(10.7, 852) }, brokerOsoRttMs: p(0.9, 5), harnessFloorMs: p(0.84, 4),
      lowLoad: { ratePerSec: 100, addedMs: p(2.9, 9) },
      cpuUsPerRequest: { main: cpu(456, 318, 220), shapeFloorOrder: cpu(153, 203, 130) },
      shapeFloor: { order: { latencyMs: p(1.7, 13) }, orderLowLoad: { latencyMs: p(1.1, 3) }, get: { latencyMs: p(0.7, 3) } },
    },
    reads: { offeredPerSec: 5000, answeredShare: 1, reqPerSec: 4999.3, latencyMs: p(1.4, 15.4), cpuUsPerRequest: { accounts: cpu(80), shapeFloorAccounts: cpu(33) }, shapeFloor: { reads: { latencyMs: p(0.7, 6) } } },
    webhooks: { allAtBrokerAfterLastMs: 10, ackMs: p(95, 224), shapeFloor: { burst: { latencyMs: p(2, 20) } } },
    sse: { rssPerSubscriberKB: 3.13, shapeFloor: { rssPerSubscriberKB: 1.3 } },
  } as unknown as BenchSummary;

  it('judges each goal of the issue against the measured value and the same run’s floor', () => {
    const byMeasure = Object.fromEntries(goalsOf(summary).map((g) => [g.measure, g]));
    expect(byMeasure['front CPU per GET /api/v1/accounts']).toMatchObject({ measured: 80, floor: 33, status: 'out-of-reach' });
    expect(byMeasure['front CPU per bracket order']).toMatchObject({ measured: 456, floor: 153, status: 'out-of-reach' });
    expect(byMeasure['actor CPU per bracket order']).toMatchObject({ floor: 203, status: 'out-of-reach' });
    expect(byMeasure['paper broker CPU per bracket order']).toMatchObject({ floor: 130, status: 'out-of-reach' });
    // Floor of added latency = floor round trip − raw placeoso, percentile by percentile.
    expect(byMeasure['added latency at 1000/s, p50']).toMatchObject({ measured: 4.8, floor: 0.8, status: 'out-of-reach' });
    expect(byMeasure['added latency at 1000/s, p99']).toMatchObject({ floor: 8, status: 'out-of-reach' });
    expect(byMeasure['added latency at 1000/s with Idempotency-Key, p50']).toMatchObject({ floor: 0.8, status: 'not-met' });
    expect(byMeasure['added latency at 100/s, p50']).toMatchObject({ floor: 0.2, status: 'not-met' });
    expect(byMeasure['reads offered and answered 200']).toMatchObject({ measured: 5000, status: 'met' });
    expect(byMeasure['reads p99']).toMatchObject({ floor: 6, status: 'not-met' });
    expect(byMeasure['webhook burst: all at the broker after the last alert']).toMatchObject({ status: 'met' });
    expect(byMeasure['webhook burst: acknowledgement p99']).toMatchObject({ floor: 20, status: 'not-met' });
    expect(byMeasure['SSE RSS per subscriber']).toMatchObject({ floor: 1.3, status: 'not-met' });
    expect(byMeasure['harness floor p50 (GET /healthz)']).toMatchObject({ floor: 0.7, status: 'out-of-reach' });
  });

  it('counts reads not answered 200 against the rate carried', () => {
    const short = { ...summary, reads: { ...summary.reads!, answeredShare: 0.9 } } as BenchSummary;
    expect(goalsOf(short).find((g) => g.measure === 'reads offered and answered 200')).toMatchObject({ measured: 4500, status: 'not-met' });
  });

  it('adds the fastest durable commit of the run to the idempotent goals’ floor, and only to theirs', () => {
    const withCommit = { ...summary, orders: { ...summary.orders!, durableCommit: { ratePerSec: 100, records: 1000, latencyMs: p(1.4, 2.6), minMs: 1.1 } } } as BenchSummary;
    const byMeasure = Object.fromEntries(goalsOf(withCommit).map((g) => [g.measure, g]));
    // 0.8 ms (shape floor − raw placeoso) + 1.1 ms: over the 1 ms goal, so out of reach here.
    expect(byMeasure['added latency at 1000/s with Idempotency-Key, p50']).toMatchObject({ measured: 10.7, floor: 1.9, floorIs: 'shape floor + one durable commit', status: 'out-of-reach' });
    // 8 ms + 1.1 ms at p99.
    expect(byMeasure['added latency at 1000/s with Idempotency-Key, p99']).toMatchObject({ floor: 9.1, status: 'out-of-reach' });
    // A commit within the goal leaves a miss ours.
    const fast = { ...summary, orders: { ...summary.orders!, durableCommit: { ratePerSec: 100, records: 1000, latencyMs: p(0.2, 0.4), minMs: 0.1 } } } as BenchSummary;
    expect(goalsOf(fast).find((g) => g.measure === 'added latency at 1000/s with Idempotency-Key, p50')).toMatchObject({ floor: 0.9, status: 'not-met' });
    // Plain orders wait for no record.
    expect(byMeasure['added latency at 1000/s, p50']).toMatchObject({ floor: 0.8 });
    expect(byMeasure['added latency at 100/s, p50']).toMatchObject({ floor: 0.2 });
    expect(byMeasure['added latency at 1000/s, p50']!.floorIs).toBeUndefined();
    // The report names the floor that misses it.
    expect(renderMarkdown({ ...withCommit, goals: goalsOf(withCommit) })).toMatch(
      /\| added latency at 1000\/s with Idempotency-Key, p50 \| ≤ 1 ms \| 10\.7 ms \| 1\.9 ms \| 10\.7 \| 5\.63 \| ⛔ out of reach here: the shape floor \+ one durable commit misses it too \|/,
    );
  });

  it('renders the table in the report', () => {
    const md = renderMarkdown({ ...summary, goals: goalsOf(summary) });
    expect(md).toContain('## Goals against the shape floor');
    expect(md).toMatch(/\| front CPU per bracket order \| ≤ 60 µs \| 456 µs \| 153 µs \| 7\.6 \| 2\.98 \| ⛔ out of reach/);
    expect(md).toMatch(/\| reads p99 \| ≤ 10 ms \| 15\.4 ms \| 6 ms \| 1\.54 \| 2\.57 \| ❌ not met \|/);
  });

  it('states the front-work calibration in the reads section', () => {
    const reads = { ...summary.reads!, keys: 2500, ratePerSec: 5000, durationMs: 30_000, byEndpoint: {}, non2xx: {}, frontWork: frontWorkCalibration(20, 17, 45, 52) };
    const md = renderMarkdown({ ...summary, reads: reads as BenchSummary['reads'], scenarios: { reads: { status: 'ok', checks: [] } } } as unknown as BenchSummary);
    expect(md).toContain('each µs of work costs 1.4 µs of front CPU (system calls and the client’s wake-up cost more');
    // A factor of about 1 names no extra cost.
    const flat = { ...reads, frontWork: frontWorkCalibration(20, 17.6, 37.6, 48.8) };
    const flatMd = renderMarkdown({ ...summary, reads: flat as BenchSummary['reads'], scenarios: { reads: { status: 'ok', checks: [] } } } as unknown as BenchSummary);
    expect(flatMd).toContain('so each µs of work costs 1 µs of front CPU. The goal of 25 µs leaves 7.4 µs');
    expect(md).toContain('The goal of 25 µs leaves 5.71 µs of work per request on this machine; tradegate\'s front does 25 µs by the same measure.');
  });
});
