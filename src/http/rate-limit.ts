/**
 * Exact sliding-log rate limiter (DESIGN §3 "Rate limit"): at most `limit` accepted requests
 * per key in any rolling window. Pure arithmetic over an injected clock value; no timers.
 *
 * Policy decisions (documented in /api-docs):
 * - the window is half-open: an entry accepted at `t` stops counting at exactly `t + windowMs`,
 *   so a request exactly 60.000 s after the oldest accepted one is allowed;
 * - rejected requests are not logged into the window (a hammering client is not locked out
 *   forever);
 * - a clock that steps backwards is treated as standing still for that key, so the log stays
 *   ordered and the limit can never be exceeded by a clock jump.
 */
import { inWindow, rateDecision, type RateDecision } from '../domain/rate-window.js';

export type { RateDecision } from '../domain/rate-window.js';

/**
 * What the pipeline's limit stage counts requests with: this in-memory log on a single node,
 * a log shared through NATS KV in cluster mode (src/cluster/rate-limit.ts). A synchronous
 * answer keeps the single-node path free of any await.
 */
export interface RateLimiter {
  readonly limit: number;
  /** Counts a request for `key` at `nowMs` if a slot is free; rejected requests are not logged. */
  hit(key: string, nowMs: number): RateDecision | Promise<RateDecision>;
  /** Forgets keys whose whole log has expired (bounded memory for idle keys). */
  sweep(nowMs: number): void;
}

/** One key's log: a fixed ring of accepted timestamps, oldest at `head`. */
class Ring {
  readonly times: Float64Array;
  head = 0;
  size = 0;
  last = -Infinity;

  constructor(capacity: number) {
    this.times = new Float64Array(capacity);
  }

  oldest(): number {
    return this.times[this.head] as number;
  }

  /** Drops entries that left the half-open window (now − windowMs, now]. */
  expire(now: number, windowMs: number): void {
    while (this.size > 0 && !inWindow(this.oldest(), now, windowMs)) {
      this.head = (this.head + 1) % this.times.length;
      this.size--;
    }
  }

  push(t: number): void {
    this.times[(this.head + this.size) % this.times.length] = t;
    this.size++;
  }
}

/** Per-key exact limiter: `limit` requests in any rolling `windowMs`. */
export class SlidingLogLimiter implements RateLimiter {
  private readonly logs = new Map<string, Ring>();

  constructor(
    readonly limit: number,
    readonly windowMs = 60_000,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  }

  /** Counts a request for `key` at `nowMs` if a slot is free; rejected requests are not logged. */
  hit(key: string, nowMs: number): RateDecision {
    let ring = this.logs.get(key);
    if (!ring) {
      ring = new Ring(this.limit);
      this.logs.set(key, ring);
    }
    const now = Math.max(nowMs, ring.last);
    ring.last = now;
    ring.expire(now, this.windowMs);
    const allowed = ring.size < this.limit;
    if (allowed) ring.push(now);
    return this.describe(ring, now, allowed);
  }

  /** Whether the next `hit` for `key` would be rejected, without logging anything. */
  isExhausted(key: string, nowMs: number): RateDecision | undefined {
    const ring = this.logs.get(key);
    if (!ring) return undefined;
    const now = Math.max(nowMs, ring.last);
    ring.expire(now, this.windowMs);
    return ring.size >= this.limit ? this.describe(ring, now, false) : undefined;
  }

  /** Forgets keys whose whole log has expired (bounded memory for idle keys). */
  sweep(nowMs: number): void {
    for (const [key, ring] of this.logs) {
      ring.expire(Math.max(nowMs, ring.last), this.windowMs);
      if (ring.size === 0) this.logs.delete(key);
    }
  }

  /** Number of keys currently tracked. */
  keyCount(): number {
    return this.logs.size;
  }

  private describe(ring: Ring, now: number, allowed: boolean): RateDecision {
    return rateDecision(this.limit, this.windowMs, ring.size, ring.oldest(), now, allowed);
  }
}

/**
 * Response headers for a keyed decision (IETF RateLimit draft + the X-RateLimit-* trio).
 * `X-RateLimit-Reset` is the epoch second at which the next slot frees.
 */
export function rateLimitHeaders(policy: string, d: RateDecision, windowSeconds = 60): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Policy': `"${policy}";q=${d.limit};w=${windowSeconds}`,
    RateLimit: `"${policy}";r=${d.remaining};t=${d.allowed ? d.resetSeconds : d.retryAfterSeconds}`,
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(d.remaining),
    'X-RateLimit-Reset': String(Math.ceil(d.resetAtMs / 1000)),
  };
  if (!d.allowed) headers['Retry-After'] = String(d.retryAfterSeconds);
  return headers;
}
