/**
 * The rule of the exact per-key rate limit (DESIGN §3 "Rate limit"), shared by the in-memory
 * sliding log of a single node and the cluster's log in NATS KV: at most `limit` accepted
 * requests in any rolling window, the window half-open (an entry accepted at `t` stops
 * counting at exactly `t + windowMs`). Pure arithmetic over clock values.
 */

/** Outcome of one hit, with everything the response headers need. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Slots left in the current window after this request. */
  remaining: number;
  /** Whole seconds until the oldest logged request leaves the window (0 when the log is empty). */
  resetSeconds: number;
  /** Epoch milliseconds at which the next slot frees (now when the log is empty). */
  resetAtMs: number;
  /** For rejections: whole seconds to wait, at least 1. */
  retryAfterSeconds: number;
}

/** Whether an entry accepted at `t` still counts at `now`. */
export function inWindow(t: number, now: number, windowMs: number): boolean {
  return now - t < windowMs;
}

/** The decision for a log holding `size` entries, the oldest at `oldest`, seen at `now`. */
export function rateDecision(limit: number, windowMs: number, size: number, oldest: number, now: number, allowed: boolean): RateDecision {
  const resetAtMs = size > 0 ? oldest + windowMs : now;
  const resetSeconds = Math.max(0, Math.ceil((resetAtMs - now) / 1000));
  return { allowed, limit, remaining: limit - size, resetSeconds, resetAtMs, retryAfterSeconds: Math.max(1, resetSeconds) };
}
