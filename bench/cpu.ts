/**
 * CPU per request per thread: the service's own threads report their CPU time on /metrics
 * (`tradegate_thread_cpu_seconds_total{thread}`: front, actor-<id>, paper-broker); a phase
 * reads it before and after and divides the growth by the requests it sent. The whole
 * process's CPU (/proc/<pid>/stat: every thread, GC and LMDB's writer included) comes along
 * as a cross-check. CPU time does not depend on how busy the machine is, latency does: this
 * is the number to compare across runs and machines.
 */
import { readFile } from 'node:fs/promises';
import { scrape, type Scrape } from './prometheus-text.js';

/** CPU seconds by thread at one moment, plus the whole process. */
export interface CpuSnapshot {
  byThread: Record<string, number>;
  /** Node thread id → thread name (from tradegate_thread_info), for naming --cpu-prof files. */
  threadIds: Record<string, string>;
  processSeconds: number;
  /** `proc` when every thread measured CPU; `elu` when event-loop time stood in. */
  source: 'proc' | 'elu';
}

/** µs of CPU per request, by thread group. */
export interface CpuPerRequest {
  requests: number;
  front: number;
  /** Every actor worker thread together. */
  actors: number;
  paperBroker: number;
  /** The whole service process (all threads, GC, LMDB writer, uWS). */
  process: number;
  /** `proc`: measured CPU time; `elu`: event-loop active time × wall stood in (no /proc). */
  source: 'proc' | 'elu';
}

const CLOCK_TICKS_PER_SECOND = 100;

/** CPU seconds of a whole process from /proc (0 where /proc is missing). */
export async function processCpuSeconds(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** Reads a scrape's per-thread CPU. */
export function cpuOf(m: Scrape, processSeconds: number): CpuSnapshot {
  const byThread: Record<string, number> = {};
  for (const s of m.select('tradegate_thread_cpu_seconds_total')) byThread[s.labels.thread!] = s.value;
  const threadIds: Record<string, string> = {};
  let source: 'proc' | 'elu' = 'proc';
  for (const s of m.select('tradegate_thread_info')) {
    threadIds[s.labels.thread_id!] = s.labels.thread!;
    if (s.labels.cpu_source === 'elu') source = 'elu';
  }
  return { byThread, threadIds, processSeconds, source };
}

/** Snapshot of the service's CPU (its /metrics plus /proc for the process). */
export async function cpuSnapshot(metricsUrl: string, pid: number): Promise<CpuSnapshot> {
  const [m, processSeconds] = await Promise.all([scrape(metricsUrl), processCpuSeconds(pid)]);
  return cpuOf(m, processSeconds);
}

const us = (seconds: number, requests: number): number => (requests > 0 ? Math.round((seconds * 1e6 * 10) / requests) / 10 : 0);

/** CPU per request between two snapshots. A thread that appeared meanwhile counts from 0. */
export function cpuPerRequest(before: CpuSnapshot, after: CpuSnapshot, requests: number): CpuPerRequest {
  const grew = (match: (thread: string) => boolean): number => {
    let total = 0;
    for (const [thread, v] of Object.entries(after.byThread)) if (match(thread)) total += Math.max(0, v - (before.byThread[thread] ?? 0));
    return total;
  };
  return {
    requests,
    front: us(grew((t) => t === 'front'), requests),
    actors: us(grew((t) => t.startsWith('actor-')), requests),
    paperBroker: us(grew((t) => t === 'paper-broker'), requests),
    process: us(Math.max(0, after.processSeconds - before.processSeconds), requests),
    source: before.source === 'elu' || after.source === 'elu' ? 'elu' : 'proc',
  };
}

/** Measures `run`'s CPU per request; `requests` counts what it sent (known after it ran). */
export async function measureCpu<T>(
  service: { metricsUrl: string; pid: number },
  run: () => Promise<T>,
  requests: (result: T) => number,
): Promise<{ result: T; cpu: CpuPerRequest }> {
  const before = await cpuSnapshot(service.metricsUrl, service.pid);
  const result = await run();
  const after = await cpuSnapshot(service.metricsUrl, service.pid);
  return { result, cpu: cpuPerRequest(before, after, requests(result)) };
}
