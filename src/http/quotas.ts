/**
 * Per-user quotas on what a user can create (DESIGN leaves them open; README "Limits and
 * quotas"): broker connections (each one an actor: memory and a share of a thread), webhook
 * tokens, strategies, API keys not revoked. Past a quota the answer is 409 QUOTA_EXCEEDED:
 * a count, not a rate, so waiting does not help; deleting one does. The service-wide actor
 * ceiling (ACTORS_MAX, 503 ACTOR_LIMIT_REACHED) is admitted the same way.
 *
 * Counting and creating are separated by awaits (a paper login, a durable write), so a
 * create takes its slot synchronously, before its first await: two concurrent creates at the
 * last slot cannot both pass (the front thread is the only creator of these records over HTTP).
 * A create's record becomes visible to reads when it commits, before its durable write
 * resolves, so the stored count may already include creates still running: while the stored
 * count plus the running creates reaches the limit, a create waits for the running ones to
 * finish and counts again instead of refusing. N concurrent creates under a limit Q from an
 * empty start therefore create exactly min(N, Q), never fewer.
 */
import type { Config } from '../config.js';
import { AppError } from '../domain/problems.js';

/** What a quota counts. */
export type QuotaKind = 'connections' | 'webhookTokens' | 'strategies' | 'apiKeys';

/** The slice of the store quotas count in. */
export interface QuotaStore {
  connections: { listByUser(userId: string): readonly unknown[]; all(): readonly { disabled: boolean }[] };
  webhookTokens: { listByUser(userId: string): readonly unknown[] };
  strategies: { listByUser(userId: string): readonly unknown[] };
  apiKeys: { listByUser(userId: string): readonly { revokedAt: string | null }[] };
}

/** The settings quotas read. */
export type QuotaConfig = Pick<Config, 'quotaConnections' | 'quotaWebhookTokens' | 'quotaStrategies' | 'quotaApiKeys' | 'actorsMax'>;

const SETTING: Record<QuotaKind, { field: 'quotaConnections' | 'quotaWebhookTokens' | 'quotaStrategies' | 'quotaApiKeys'; env: string; noun: string }> = {
  connections: { field: 'quotaConnections', env: 'QUOTA_CONNECTIONS', noun: 'broker connections' },
  webhookTokens: { field: 'quotaWebhookTokens', env: 'QUOTA_WEBHOOK_TOKENS', noun: 'webhook tokens' },
  strategies: { field: 'quotaStrategies', env: 'QUOTA_STRATEGIES', noun: 'strategies' },
  apiKeys: { field: 'quotaApiKeys', env: 'QUOTA_API_KEYS', noun: 'API keys (not revoked)' },
};

/** Retry-After of ACTOR_LIMIT_REACHED: a slot frees only when a connection is deleted somewhere. */
export const ACTOR_LIMIT_RETRY_S = 60;

/** The configured quota of `kind`. */
export function quotaLimit(config: Omit<QuotaConfig, 'actorsMax'>, kind: QuotaKind): number {
  return config[SETTING[kind].field];
}

/** How many records of `kind` the user has now. */
export function quotaUsed(store: QuotaStore, userId: string, kind: QuotaKind): number {
  if (kind === 'apiKeys') return store.apiKeys.listByUser(userId).filter((k) => !k.revokedAt).length;
  return store[kind].listByUser(userId).length;
}

/** Connections that run an actor (enabled ones, of every user): what ACTORS_MAX counts. */
export function actorsUsed(store: Pick<QuotaStore, 'connections'>): number {
  return store.connections.all().filter((c) => !c.disabled).length;
}

/** 409 QUOTA_EXCEEDED for `kind`, naming the quota and its setting. */
export function quotaExceeded(kind: QuotaKind, limit: number): AppError {
  const { env, noun } = SETTING[kind];
  return new AppError('QUOTA_EXCEEDED', `At most ${limit} ${noun} per user (${env}); ${kind === 'apiKeys' ? 'revoke' : 'delete'} one first`, { quota: kind, limit });
}

/** 503 ACTOR_LIMIT_REACHED with Retry-After. */
export function actorLimitReached(limit: number): AppError {
  return new AppError('ACTOR_LIMIT_REACHED', `The service runs its maximum of ${limit} broker connections (ACTORS_MAX)`, { limit }, ACTOR_LIMIT_RETRY_S);
}

/** Throws QUOTA_EXCEEDED when the user has no slot left (used by the CLI, which creates one at a time). */
export function checkQuota(store: QuotaStore, config: Omit<QuotaConfig, 'actorsMax'>, userId: string, kind: QuotaKind): void {
  const limit = quotaLimit(config, kind);
  if (quotaUsed(store, userId, kind) >= limit) throw quotaExceeded(kind, limit);
}

/** Runs creates under the user's quotas and the actor ceiling, each admitted exactly (see module comment). */
export class QuotaGate {
  /** Creates running per slot key; each settles after its create finished (its record visible, or none). */
  private readonly running = new Map<string, Set<Promise<void>>>();

  constructor(
    private readonly store: QuotaStore,
    private readonly config: QuotaConfig,
  ) {}

  /** Runs `create` if the user has a slot of `kind` left; else QUOTA_EXCEEDED. */
  create<T>(userId: string, kind: QuotaKind, create: () => Promise<T>): Promise<T> {
    const limit = quotaLimit(this.config, kind);
    return this.admit(`${kind}\u0000${userId}`, limit, () => quotaUsed(this.store, userId, kind), () => quotaExceeded(kind, limit), create);
  }

  /** Runs `create` (which starts one more actor) if the service runs fewer than ACTORS_MAX; else ACTOR_LIMIT_REACHED. */
  actor<T>(create: () => Promise<T>): Promise<T> {
    const limit = this.config.actorsMax;
    return this.admit('actors', limit, () => actorsUsed(this.store), () => actorLimitReached(limit), create);
  }

  private async admit<T>(key: string, limit: number, used: () => number, full: () => AppError, create: () => Promise<T>): Promise<T> {
    for (;;) {
      const running = this.running.get(key);
      const n = running?.size ?? 0;
      if (used() + n < limit) break;
      // Nothing running: the stored count is exact, and the limit is reached.
      if (!running || n === 0) throw full();
      // Some running creates may be counted twice (stored already, still running): count again once they are done.
      await Promise.allSettled([...running]);
    }
    // Taken synchronously after the count: no other create can pass between them.
    let settle!: () => void;
    const slot = new Promise<void>((resolve) => (settle = resolve));
    const set = this.running.get(key) ?? new Set<Promise<void>>();
    this.running.set(key, set);
    set.add(slot);
    try {
      return await create();
    } finally {
      set.delete(slot);
      if (set.size === 0 && this.running.get(key) === set) this.running.delete(key);
      settle();
    }
  }
}
