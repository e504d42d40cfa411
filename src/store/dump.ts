/**
 * Every record of a single-node store as it is stored (password hashes, key digests, session
 * digests, sealed secrets), read in one go: what `tradegate cluster import` moves into a cluster's NATS store
 * (store/nats/import.ts). The record interfaces deliberately never return these rows; only
 * this module and the importer see them.
 */
import type { ApiKeyRow } from './api-keys.js';
import type { ConnectionRow } from './connections.js';
import type { StoreContext } from './context.js';
import type { GuardRecord } from './guards.js';
import type { IdempotencyRecord } from './idempotency.js';
import type { JournalEntry } from './journal.js';
import { isLive, type SessionRow } from './sessions.js';
import type { StrategyRecord } from './strategies.js';
import type { UserRow } from './users.js';
import type { WebhookTokenRow } from './webhook-tokens.js';
import { IDEMPOTENCY_TTL_MS } from '../tuning.js';

/** The rows of a store, and the means to open its sealed secrets. */
export interface StoreDump {
  users: UserRow[];
  apiKeys: ApiKeyRow[];
  webhookTokens: WebhookTokenRow[];
  connections: ConnectionRow[];
  strategies: StrategyRecord[];
  /** Risk guards and locks per account. */
  guards: GuardRecord[];
  /** Web sessions still live (their digests: the browser keeps its cookie). */
  sessions: SessionRow[];
  /** Last-use times (ms) by record kind and id. */
  lastUsed: { kind: string; id: string; at: number }[];
  /** Stored answers younger than 24 h, under their storage hash (sha256 of scope and key). */
  idempotency: { hash: string; record: IdempotencyRecord }[];
  /** Oldest first. */
  journal: JournalEntry[];
  /** Opens a secret sealed by this store (AES-GCM with its data key and `aad`). */
  openSecret(sealed: Uint8Array, aad: string): string;
}

/** Reads every record of an LMDB store (one read transaction's worth of state per database). */
export function dumpStore(ctx: StoreContext): StoreDump {
  const { dbs } = ctx;
  const values = <T>(db: { getRange(): Iterable<{ value: unknown }> }): T[] => [...db.getRange()].map((e) => e.value as T);
  const now = ctx.clock();
  return {
    users: values<UserRow>(dbs.users),
    apiKeys: values<ApiKeyRow>(dbs.apiKeys),
    webhookTokens: values<WebhookTokenRow>(dbs.webhookTokens),
    connections: values<ConnectionRow>(dbs.connections),
    strategies: values<StrategyRecord>(dbs.strategies),
    guards: values<GuardRecord>(dbs.guards),
    sessions: values<SessionRow>(dbs.sessions).filter((r) => isLive(r, now)),
    lastUsed: [...dbs.lastUsed.getRange()].map(({ key, value }) => ({ kind: key[0], id: key[1], at: value })),
    idempotency: [...dbs.idempotency.getRange()]
      .map(({ key, value }) => ({ hash: key as string, record: value as IdempotencyRecord }))
      .filter(({ record }) => now - record.createdAt <= IDEMPOTENCY_TTL_MS),
    journal: values<JournalEntry>(dbs.journal),
    openSecret: (sealed, aad) => ctx.sealer.open(sealed, aad),
  };
}
