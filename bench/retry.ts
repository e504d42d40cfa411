/**
 * The client side of "retry with the same Idempotency-Key": what a careful client does after
 * a 504 (outcome unknown), a 409 IDEMPOTENCY_KEY_IN_USE, a 429 or a dropped connection.
 * Scenarios use it to resolve every unknown outcome before counting orders at the broker,
 * which is what turns "no duplicates" into an exactly-once check.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiAnswer, Service } from './service.js';

/** A request a careful client would resend unchanged. */
export interface RetryRequest {
  method: string;
  path: string;
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Statuses after which the same request may be sent again. */
export function isRetryable(status: number): boolean {
  return status === 0 || status === 409 || status === 429 || status >= 500;
}

/** Sends `req` until it gets a final answer or `attempts` run out; waits Retry-After (≥ 0.5 s) in between. */
export async function sendUntilFinal(service: Service, req: RetryRequest, attempts = 5): Promise<ApiAnswer> {
  let last: ApiAnswer = { status: 0, headers: new Headers(), body: null };
  for (let i = 0; i < attempts; i++) {
    try {
      last = await service.api(req.method, req.path, req.key, req.body, req.headers);
    } catch (err) {
      last = { status: 0, headers: new Headers(), body: { error: err instanceof Error ? err.message : String(err) } };
    }
    if (!isRetryable(last.status)) return last;
    const after = Number(last.headers.get('retry-after'));
    await sleep(Math.max(500, Number.isFinite(after) ? after * 1000 : 0));
  }
  return last;
}

/**
 * Resolves many requests with bounded concurrency; answers in input order. No request starts
 * after `budgetMs`: those get status -1 (not attempted), so an overloaded service cannot
 * stretch the run without bound.
 */
export async function resolveAll(service: Service, reqs: RetryRequest[], opts: { concurrency?: number; budgetMs?: number } = {}): Promise<ApiAnswer[]> {
  const deadline = Date.now() + (opts.budgetMs ?? 120_000);
  const out: ApiAnswer[] = reqs.map(() => ({ status: -1, headers: new Headers(), body: { error: 'not attempted: retry budget spent' } }));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(opts.concurrency ?? 8, reqs.length) }, async () => {
      while (next < reqs.length && Date.now() < deadline) {
        const i = next++;
        out[i] = await sendUntilFinal(service, reqs[i]!);
      }
    }),
  );
  return out;
}
