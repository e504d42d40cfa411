/**
 * Ending start-up waits early (whileStarting, startup.ts): the error they end with and the
 * process's stop signal. Kept apart from startup.ts so the single-node serve can recognise the
 * error without loading the NATS client.
 */

/** What a start-up wait may take: `signal` ends the waiting (default: the process's, see stopStartupWaitsOn). */
export interface StartupWaitOptions {
  signal?: AbortSignal | undefined;
}

let processStop: AbortSignal | undefined;

/** The signal set by stopStartupWaitsOn, if any. */
export function processStopSignal(): AbortSignal | undefined {
  return processStop;
}

/**
 * Makes every start-up wait of this process end when `signal` aborts: a cluster node told to stop
 * (SIGTERM) while NATS is not reachable yet stops now, not after the 60 s wait. Process-wide, as a
 * process runs one node and its waits sit deep in the store's and the node's start.
 */
export function stopStartupWaitsOn(signal: AbortSignal): void {
  processStop = signal;
}

/** A start-up wait given up because the node was told to stop (its `signal` aborted). */
export class StartupAbortedError extends Error {
  constructor(what: string) {
    super(`${what}: stopped while waiting for NATS`);
    this.name = 'StartupAbortedError';
  }
}
