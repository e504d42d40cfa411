/**
 * What the calling thread has cost so far: its own CPU time and its event loop's active and
 * idle time. Every thread of the service (front, actor workers, paper broker) reads its own,
 * and the workers report theirs to the front, which exposes them on /metrics; the bench
 * divides their growth by the requests of a phase (CPU per request per thread).
 *
 * CPU comes from /proc/thread-self/stat (Linux: utime + stime of this thread only, in clock
 * ticks of 10 ms). Where /proc is missing, event-loop active time stands in for it (the time
 * the thread spent running callbacks, which includes blocking system calls).
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { threadId } from 'node:worker_threads';

/** Linux USER_HZ: the unit of utime/stime in /proc (100 on every mainstream kernel). */
const CLOCK_TICKS_PER_SECOND = 100;

/** One thread's cumulative usage (milliseconds since the thread started). */
export interface ThreadUsage {
  /** Node's thread id (0 = main thread), as in `--cpu-prof` file names. */
  threadId: number;
  /** The kernel's thread id (/proc/<pid>/task/<tid>), 0 where unknown. */
  tid: number;
  cpuMs: number;
  /** `proc`: measured CPU time; `elu`: event-loop active time stands in for it. */
  cpuSource: 'proc' | 'elu';
  loopActiveMs: number;
  loopIdleMs: number;
}

let procReadable = true;

/** CPU ms and kernel thread id of the calling thread from /proc, or undefined where it cannot be read. */
export function procThreadCpu(): { cpuMs: number; tid: number } | undefined {
  if (!procReadable) return undefined;
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    // Field 2 (comm) is parenthesised and may hold spaces: count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After comm: state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? { cpuMs: (ticks * 1000) / CLOCK_TICKS_PER_SECOND, tid: Number.parseInt(stat, 10) } : undefined;
  } catch {
    procReadable = false;
    return undefined;
  }
}

/** The calling thread's usage so far. */
export function threadUsage(): ThreadUsage {
  const elu = performance.eventLoopUtilization();
  const cpu = procThreadCpu();
  return {
    threadId,
    tid: cpu?.tid ?? 0,
    cpuMs: cpu?.cpuMs ?? elu.active,
    cpuSource: cpu === undefined ? 'elu' : 'proc',
    loopActiveMs: elu.active,
    loopIdleMs: elu.idle,
  };
}
