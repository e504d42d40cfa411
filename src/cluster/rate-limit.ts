/**
 * The exact per-key rate limit across every node (README "Running a cluster"): each key's
 * sliding log (its accepted timestamps, at most `limit` of them) lives in the KV bucket
 * `<prefix>_ratelimit`, whose 60 s TTL drops the log of an idle key by itself, and changes
 * only by revision-checked updates, so the cluster as a whole admits exactly `limit` per
 * rolling window whichever nodes the requests reach.
 *
 * Each node queues its own requests per key; one batch at a time reads the log (or reuses
 * the revision of this node's last write), admits what fits and writes the new log. A lost
 * race re-reads and retries. A log this node last saw full rejects without a round trip:
 * writers only ever drop expired entries, so unexpired entries seen here are still in the
 * current log. A KV failure rejects with 503 CLUSTER_UNAVAILABLE: the limit fails closed.
 * The window rule itself is domain/rate-window.ts, the same as on a single node.
 */
import type { KV } from '@nats-io/kv';
import { AppError } from '../domain/problems.js';
import { inWindow, rateDecision, type RateDecision } from '../domain/rate-window.js';
import type { Logger } from '../log.js';
import { isWrongRevision } from '../store/nats/kv-mirror.js';

interface Log {
  /** Accepted timestamps, oldest first. */
  times: number[];
  /** KV revision of `times` (0: no entry). */
  revision: number;
}

interface Pending {
  resolve(d: RateDecision): void;
  reject(err: unknown): void;
}

/** Attempts of one batch against concurrent writers before it gives up (503). */
const MAX_ATTEMPTS = 50;
/** KV keys allow only some characters; other rate keys are hex-encoded. */
const KEY_SAFE = /^[A-Za-z0-9_-]{1,200}$/;

/** A RateLimiter (http/rate-limit.ts) over a log shared through KV. */
export class SharedLogLimiter {
  private readonly queues = new Map<string, Pending[]>();
  private readonly logs = new Map<string, Log>();
  private readonly clock: () => number;
  /** Writes and lost races, for measurements. */
  readonly stats = { writes: 0, conflicts: 0 };

  constructor(
    private readonly kv: KV,
    /** Names this limiter's keys in the bucket (`key`, `webhook`). */
    private readonly scope: string,
    readonly limit: number,
    private readonly opts: { windowMs?: number; clock?: () => number; logger?: Logger } = {},
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
    this.clock = opts.clock ?? Date.now;
  }

  private get windowMs(): number {
    return this.opts.windowMs ?? 60_000;
  }

  /** Counts a request for `key` if the shared log has room (the time is taken when its batch runs). */
  hit(key: string, _nowMs?: number): Promise<RateDecision> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(key);
      if (q) {
        q.push({ resolve, reject });
        return;
      }
      this.queues.set(key, (q = [{ resolve, reject }]));
      void this.drain(key, q);
    });
  }

  /** Forgets cached logs whose entries have all expired. */
  sweep(nowMs: number): void {
    for (const [key, log] of this.logs) {
      if (!this.queues.has(key) && log.times.every((t) => !inWindow(t, nowMs, this.windowMs))) this.logs.delete(key);
    }
  }

  private kvKey(key: string): string {
    return `${this.scope}.${KEY_SAFE.test(key) ? key : `x${Buffer.from(key, 'utf8').toString('hex').slice(0, 200)}`}`;
  }

  /** Runs batches for one key until its queue is empty (one batch in flight per key per node). */
  private async drain(key: string, q: Pending[]): Promise<void> {
    while (q.length > 0) {
      const batch = q.splice(0);
      try {
        const decisions = await this.admit(key, batch.length);
        batch.forEach((p, i) => p.resolve(decisions[i]!));
      } catch (err) {
        this.logs.delete(key);
        const failure =
          err instanceof AppError ? err : new AppError('CLUSTER_UNAVAILABLE', `rate limit store: ${err instanceof Error ? err.message : String(err)}`, {}, 1);
        batch.forEach((p) => p.reject(failure));
      }
    }
    this.queues.delete(key);
  }

  /** Admits up to `count` requests in one revision-checked write; a decision per request, in order. */
  private async admit(key: string, count: number): Promise<RateDecision[]> {
    const kvKey = this.kvKey(key);
    let known = this.logs.get(key);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      known ??= await this.read(kvKey);
      const now = Math.max(this.clock(), known.times.at(-1) ?? -Infinity);
      const times = known.times.filter((t) => inWindow(t, now, this.windowMs));
      const admitted = Math.min(count, this.limit - times.length);
      if (admitted <= 0) {
        this.logs.set(key, known);
        const refused = rateDecision(this.limit, this.windowMs, times.length, times[0] ?? now, now, false);
        return Array<RateDecision>(count).fill(refused);
      }
      const next = [...times, ...Array<number>(admitted).fill(now)];
      try {
        this.stats.writes++;
        const data = JSON.stringify(next);
        const revision = known.revision === 0 ? await this.kv.create(kvKey, data) : await this.kv.update(kvKey, data, known.revision);
        this.logs.set(key, { times: next, revision });
        const oldest = next[0]!;
        const out: RateDecision[] = [];
        for (let i = 0; i < count; i++) {
          out.push(i < admitted ? rateDecision(this.limit, this.windowMs, times.length + i + 1, oldest, now, true) : rateDecision(this.limit, this.windowMs, next.length, oldest, now, false));
        }
        return out;
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
        this.stats.conflicts++;
        known = undefined;
      }
    }
    throw new AppError('CLUSTER_UNAVAILABLE', 'rate limit log kept changing; retry', {}, 1);
  }

  private async read(kvKey: string): Promise<Log> {
    const e = await this.kv.get(kvKey);
    if (!e || e.operation !== 'PUT') return { times: [], revision: e?.revision ?? 0 };
    return { times: e.json<number[]>(), revision: e.revision };
  }
}
