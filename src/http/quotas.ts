/**
 * Per-user quotas on what a user can create (DESIGN leaves them open; README "Limits and
 * quotas"): broker connections (each one an actor: memory and a share of a thread), webhook
 * tokens, strategies, API keys not revoked. Past a quota the answer is 409 QUOTA_EXCEEDED:
 * a count, not a rate, so waiting does not help; deleting one does.
 *
 * Counting and creating are separated by awaits (a paper login, a durable write), so a
 * create reserves its slot synchronously first: two concurrent creates at the last slot
 * cannot both pass (the front thread is the only creator of these records over HTTP).
 */
import type { Config } from '../config.js';
import { AppError } from '../domain/problems.js';

/** What a quota counts. */
export type QuotaKind = 'connections' | 'webhookTokens' | 'strategies' | 'apiKeys';

/** The slice of the store quotas count in. */
export interface QuotaStore {
  connections: { listByUser(userId: string): readonly unknown[] };
  webhookTokens: { listByUser(userId: string): readonly unknown[] };
  strategies: { listByUser(userId: string): readonly unknown[] };
  apiKeys: { listByUser(userId: string): readonly { revokedAt: string | null }[] };
}

const SETTING: Record<QuotaKind, { field: 'quotaConnections' | 'quotaWebhookTokens' | 'quotaStrategies' | 'quotaApiKeys'; env: string; noun: string }> = {
  connections: { field: 'quotaConnections', env: 'QUOTA_CONNECTIONS', noun: 'broker connections' },
  webhookTokens: { field: 'quotaWebhookTokens', env: 'QUOTA_WEBHOOK_TOKENS', noun: 'webhook tokens' },
  strategies: { field: 'quotaStrategies', env: 'QUOTA_STRATEGIES', noun: 'strategies' },
  apiKeys: { field: 'quotaApiKeys', env: 'QUOTA_API_KEYS', noun: 'API keys (not revoked)' },
};

/** The configured quota of `kind`. */
export function quotaLimit(config: Pick<Config, 'quotaConnections' | 'quotaWebhookTokens' | 'quotaStrategies' | 'quotaApiKeys'>, kind: QuotaKind): number {
  return config[SETTING[kind].field];
}

/** How many records of `kind` the user has now. */
export function quotaUsed(store: QuotaStore, userId: string, kind: QuotaKind): number {
  if (kind === 'apiKeys') return store.apiKeys.listByUser(userId).filter((k) => !k.revokedAt).length;
  return store[kind].listByUser(userId).length;
}

/** 409 QUOTA_EXCEEDED for `kind`, naming the quota and its setting. */
export function quotaExceeded(kind: QuotaKind, limit: number): AppError {
  const { env, noun } = SETTING[kind];
  return new AppError('QUOTA_EXCEEDED', `At most ${limit} ${noun} per user (${env}); delete one first`, { quota: kind, limit });
}

/** Throws QUOTA_EXCEEDED when the user has no slot left (used by the CLI, which creates one at a time). */
export function checkQuota(store: QuotaStore, config: Parameters<typeof quotaLimit>[0], userId: string, kind: QuotaKind): void {
  const limit = quotaLimit(config, kind);
  if (quotaUsed(store, userId, kind) >= limit) throw quotaExceeded(kind, limit);
}

/** Runs creates under the user's quotas, reserving the slot before the first await. */
export class QuotaGate {
  private readonly pending = new Map<string, number>();

  constructor(
    private readonly store: QuotaStore,
    private readonly config: Parameters<typeof quotaLimit>[0],
  ) {}

  /** Runs `create` if the user has a slot of `kind` left (counting creates still running); else QUOTA_EXCEEDED. */
  async create<T>(userId: string, kind: QuotaKind, create: () => Promise<T>): Promise<T> {
    const slot = `${kind}\u0000${userId}`;
    const running = this.pending.get(slot) ?? 0;
    const limit = quotaLimit(this.config, kind);
    if (quotaUsed(this.store, userId, kind) + running >= limit) throw quotaExceeded(kind, limit);
    this.pending.set(slot, running + 1);
    try {
      return await create();
    } finally {
      const left = (this.pending.get(slot) ?? 1) - 1;
      if (left > 0) this.pending.set(slot, left);
      else this.pending.delete(slot);
    }
  }
}
