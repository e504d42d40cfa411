/**
 * Piscina task entry for every load generator, so load never shares a thread with the
 * driver (or with the service, which runs in its own process). One task = one schedule.
 */
import { threadId } from 'node:worker_threads';
import { runBrokerProbe, type BrokerProbeResult, type BrokerProbeTask } from './broker-probe.js';
import { runHttpLoad, type HttpLoadResult, type HttpLoadTask } from './http-load.js';
import { runSseSubscribers, type SseResult, type SseTask } from './sse-subscribers.js';

/** Loads this module in a thread and holds it briefly, so warm-up tasks spread over all threads. */
export interface WarmupTask {
  kind: 'warmup';
  holdMs: number;
}

/** Every task a load worker accepts. */
export type LoadTask = HttpLoadTask | BrokerProbeTask | SseTask | WarmupTask;
/** What each task kind returns. */
export type LoadResult = HttpLoadResult | BrokerProbeResult | SseResult | { kind: 'warmup'; threadId: number };

/** Runs one load task to completion; the result is plain data (histograms encoded). */
export default async function runLoadTask(task: LoadTask): Promise<LoadResult> {
  switch (task.kind) {
    case 'http':
      return runHttpLoad(task);
    case 'broker-ws':
      return runBrokerProbe(task);
    case 'sse':
      return runSseSubscribers(task);
    case 'warmup':
      await new Promise((resolve) => setTimeout(resolve, task.holdMs));
      return { kind: 'warmup', threadId };
  }
}
