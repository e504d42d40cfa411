/**
 * Bounded waits: how long the service waits for work it does not control (a broker call, a
 * stream consumer, a worker's shutdown). The bound's timer is always cleared, so a settled wait
 * never holds the process open.
 */

/** Resolves once `work` settled or `ms` passed, whichever is first; never rejects. */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** `work`'s value, or undefined once `ms` passed first; rejects when `work` does first. */
export async function valueWithin<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
