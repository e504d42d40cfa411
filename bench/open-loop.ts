/**
 * Open-loop load schedule. Arrival i is *intended* at `start + i / rate` whatever happened to
 * earlier requests, and its latency is measured from that intended time, not from when the
 * request actually left. A closed-loop driver (send, wait, send) stops sending while the
 * system under test stalls and so never samples the stall: that is coordinated omission, and
 * it makes p99 look orders of magnitude better than what a client at a fixed rate sees.
 *
 * The scheduler never awaits a send before issuing the next one. When the generator itself
 * falls behind (event loop busy), late arrivals are sent at once and still timed from their
 * intended time; `sendLag` reports how late the generator was, so its own saturation shows.
 */
import { createHistogram, recordMs, type Histogram } from './hdr.js';

/** Time source; injectable so tests can drive the schedule with fake timers. */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  setTimer(fn: () => void, ms: number): () => void;
}

/** performance.now() and setTimeout. */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimer: (fn, ms) => {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(resolve, ms));
}

/** Rate, bounds and the send function of one schedule. */
export interface OpenLoopOptions {
  /** Arrivals per second (> 0). */
  ratePerSec: number;
  /** Stop after this many arrivals. */
  count?: number;
  /** Stop scheduling arrivals at `start + durationMs`. At least one of count/duration is required. */
  durationMs?: number;
  /** Clock time of arrival 0 (default: now). Lets several workers share one schedule. */
  startAt?: number;
  /** After the last arrival, wait at most this long for outstanding responses (default 30 s). */
  drainTimeoutMs?: number;
  clock?: Clock;
  /**
   * Issues arrival `index`. Resolves to an outcome label (e.g. `2xx`, `429`, `error`); each
   * label gets its own histogram. A rejection is recorded under `error`.
   */
  send(index: number, intendedAt: number): Promise<string>;
}

/** Histograms and counts of a finished schedule. */
export interface OpenLoopResult {
  /** Latency from intended send time to completion, per outcome label. */
  histograms: Map<string, Histogram>;
  /** How late each send left relative to its intended time. */
  sendLag: Histogram;
  /** Arrivals issued. */
  sent: number;
  /** Arrivals that completed (resolved or rejected) before the drain deadline. */
  completed: number;
  /** Arrivals still outstanding at the drain deadline, recorded under `timeout`. */
  timedOut: number;
  /** Clock time of arrival 0 and of the last completion. */
  startedAt: number;
  finishedAt: number;
}

/** Runs one open-loop schedule to completion (bounded by count and/or duration). */
export async function runOpenLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { ratePerSec, count, durationMs, send } = options;
  if (!(ratePerSec > 0)) throw new RangeError('ratePerSec must be > 0');
  if (count === undefined && durationMs === undefined) throw new RangeError('count or durationMs is required');
  const clock = options.clock ?? realClock;
  const drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
  const interval = 1000 / ratePerSec;
  const startedAt = options.startAt ?? clock.now();
  const maxCount = Math.min(
    count ?? Number.POSITIVE_INFINITY,
    durationMs === undefined ? Number.POSITIVE_INFINITY : Math.ceil(durationMs / interval),
  );

  const histograms = new Map<string, Histogram>();
  const sendLag = createHistogram();
  const outstanding = new Map<number, number>();
  let completed = 0;
  let wakeDrain: (() => void) | undefined;

  const record = (label: string, latencyMs: number): void => {
    let h = histograms.get(label);
    if (!h) histograms.set(label, (h = createHistogram()));
    recordMs(h, latencyMs);
  };

  const issue = (index: number, intendedAt: number): void => {
    outstanding.set(index, intendedAt);
    let promise: Promise<string>;
    try {
      promise = send(index, intendedAt);
    } catch (err) {
      promise = Promise.reject(err);
    }
    promise.then(
      (label) => finish(index, intendedAt, label),
      () => finish(index, intendedAt, 'error'),
    );
  };

  const finish = (index: number, intendedAt: number, label: string): void => {
    // A response that arrives after the drain deadline was already recorded as a timeout.
    if (!outstanding.delete(index)) return;
    record(label, clock.now() - intendedAt);
    completed++;
    if (outstanding.size === 0) wakeDrain?.();
  };

  let sent = 0;
  while (sent < maxCount) {
    const intendedAt = startedAt + sent * interval;
    const now = clock.now();
    if (now < intendedAt) {
      await sleep(clock, intendedAt - now);
      continue;
    }
    // Everything due by now goes out in this turn, each stamped with its own intended time.
    while (sent < maxCount && startedAt + sent * interval <= now) {
      const due = startedAt + sent * interval;
      recordMs(sendLag, now - due);
      issue(sent, due);
      sent++;
    }
  }

  if (outstanding.size > 0) {
    let cancel = (): void => {};
    await new Promise<void>((resolve) => {
      wakeDrain = resolve;
      cancel = clock.setTimer(resolve, drainTimeoutMs);
    });
    cancel();
  }
  const timedOut = outstanding.size;
  const end = clock.now();
  for (const intendedAt of outstanding.values()) record('timeout', end - intendedAt);
  outstanding.clear();
  return { histograms, sendLag, sent, completed, timedOut, startedAt, finishedAt: end };
}
