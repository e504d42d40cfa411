/**
 * Start-up of the cluster store and the cluster parts: JetStream calls that NATS may only be
 * able to answer a little later (servers still starting, no quorum yet, a busy cluster) are
 * retried for a bounded time instead of ending the node's start on the first timeout.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Logger } from '../../log.js';
import { processStopSignal, StartupAbortedError, type StartupWaitOptions } from './startup-abort.js';

/** How long start-up keeps retrying JetStream calls NATS cannot answer yet (see whileStarting). */
export const STARTUP_WAIT_MS = 60_000;

/** JetStream's "no suitable peers for placement": too few servers up for the replicas asked. */
const JS_CLUSTER_NO_PEERS = 10005;

/**
 * A JetStream call NATS may answer later: a timeout, no responders (JetStream not reachable yet),
 * a 5xx from the JetStream API (a cluster electing its meta leader, a stream's Raft group
 * forming), or no peers for a replicated bucket (servers of the cluster still down; should the
 * replicas exceed the servers for good, the start fails with this error once the wait is over).
 * Anything else (a refused setting, a permission) is final.
 */
export function isTransientNatsError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'TimeoutError' || err.name === 'NoResponders') return true;
  if (err.name === 'RequestError') return err.cause === undefined || isTransientNatsError(err.cause);
  if (!(err instanceof JetStreamApiError)) return false;
  return err.status >= 500 || err.code === JS_CLUSTER_NO_PEERS;
}

/**
 * What start-up waits out: a transient NATS error, and a stream not found. Start-up opens streams
 * it, or another node, has just created; on a cluster such a stream can be "not found" for a
 * moment while its group forms (CI: a node exited with "stream not found" at start).
 */
function isStartupTransient(err: unknown): boolean {
  return isTransientNatsError(err) || (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound);
}

/**
 * Runs a start-up JetStream call (creating a bucket or a stream), again while it fails with a
 * transient error, for up to `waitMs`: a node started together with its NATS cluster, or while
 * the cluster is busy creating replicated streams for other nodes, waits for it instead of
 * exiting on the first 2 s timeout. Creating is idempotent (an existing bucket or stream with the
 * same settings is opened), so a retried call whose first attempt did land is harmless. An aborted
 * `signal` ends the wait at once with StartupAbortedError (the attempt in flight, at most one
 * call's deadline, is not cut short).
 */
export async function whileStarting<T>(
  what: string,
  fn: () => Promise<T>,
  opts: StartupWaitOptions & { waitMs?: number; logger?: Logger | undefined; transient?: (err: unknown) => boolean } = {},
): Promise<T> {
  const transient = opts.transient ?? isStartupTransient;
  const signal = opts.signal ?? processStopSignal();
  const deadline = performance.now() + (opts.waitMs ?? STARTUP_WAIT_MS);
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw new StartupAbortedError(what);
    try {
      return await fn();
    } catch (err) {
      if (!transient(err) || performance.now() >= deadline) throw err;
      if (signal?.aborted) throw new StartupAbortedError(what);
      opts.logger?.warn({ err: (err as Error).message, attempt }, `${what}: NATS not ready; retrying`);
      // An abort ends the pause early (rejecting, caught here); the loop's check then ends the wait.
      await sleep(Math.min(250 * attempt, 2000), undefined, signal && { signal }).catch(() => undefined);
    }
  }
}

/** Connecting to NATS at start-up: no server reachable yet (refused, timed out) is worth waiting for. */
export function isUnreachableNats(err: unknown): boolean {
  return err instanceof Error && (err.name === 'ConnectionError' || isTransientNatsError(err));
}

/**
 * Whether a nats-server version checks revisions atomically on replicated streams: before 2.9.21
 * the expected-last-subject-sequence check ran before the Raft proposal, so two concurrent
 * revision-checked writes of one key could both succeed (nats-io/nats-server#4320).
 */
export function serializesRevisionChecks(version: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (!m) return false;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return major > 2 || (major === 2 && (minor > 9 || (minor === 9 && patch >= 21)));
}
