/**
 * What every record module of the store shares: the LMDB environment, its named
 * databases, the sealer for secrets at rest, the injected clock and the durable-write rule.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Logger } from '../log.js';
import type { Sealer } from './crypto.js';
import type { RecordCache } from './record-cache.js';

/** The named databases inside the one LMDB environment. */
export interface Dbs {
  users: Database;
  /** user name → user id (uniqueness). */
  userNames: Database<string, string>;
  apiKeys: Database;
  connections: Database;
  webhookTokens: Database;
  strategies: Database;
  /** [kind, userId, id] → true: per-user listings of every owned record kind. */
  owners: Database<true, [string, string, string]>;
  /** [kind, id] → ms: last-use times, kept apart so a touch never rewrites (and races) the record. */
  lastUsed: Database<number, [string, string]>;
  /** sha256(scope, key) → idempotency record. */
  idempotency: Database;
  /** [createdAt, hash] → true: lets the sweeper find expired records without a full scan. */
  idempotencyByTime: Database<true, [number, string]>;
  /** [ts, writer, seq] → journal entry. */
  journal: Database;
  /** [userId, ts, writer, seq] → true. */
  journalByUser: Database<true, [string, number, string, number]>;
  /** [ref, ts, writer, seq] → true: entries about one object (e.g. `webhookToken:<id>`). */
  journalByRef: Database<true, [string, number, string, number]>;
  /** sha256(session id) → session row. */
  sessions: Database;
  /** [userId, sessionId] → sha256(session id): a user's sessions (revoked together). */
  sessionsByUser: Database<string, [string, string]>;
  /** [userId, accountId] → risk guards and lock of the account. */
  guards: Database<unknown, [string, string]>;
  /** connection id → until when its broker's rate limit holds it (ms since the epoch). */
  brokerHolds: Database<number, string>;
}

export type OwnedKind = 'apiKey' | 'connection' | 'webhookToken' | 'strategy';

export interface StoreContext {
  env: RootDatabase;
  dbs: Dbs;
  /** Memory of the records requests read; filled by reads outside write transactions only. */
  cache: RecordCache;
  sealer: Sealer;
  clock: () => number;
  logger: Logger | undefined;
  /**
   * Awaits a write's commit and then the flush to disk (see openStore on overlappingSync). Every
   * write to a cached kind goes through it: the cache reads the generation again after it, so
   * the write's caller, and every request after its answer, sees it (record-cache.ts).
   */
  durable<T>(write: Promise<T>): Promise<T>;
  /** The clock as an ISO-8601 UTC string. */
  nowIso(): string;
}

/** Ids of one user's records of `kind` (index order, not creation order). */
export function ownedIds(ctx: StoreContext, kind: OwnedKind, userId: string): string[] {
  const ids: string[] = [];
  // Ids are ASCII, so '\uffff' bounds them all; a prefix array sorts before its extensions.
  for (const key of ctx.dbs.owners.getKeys({ start: [kind, userId] as never, end: [kind, userId, '\uffff'] })) {
    const [k, u, id] = key as [string, string, string];
    if (k === kind && u === userId) ids.push(id);
  }
  return ids;
}

/** Sorts records oldest first by their ISO `createdAt` (ties by id, so order is stable). */
export function byCreation<T extends { createdAt: string; id: string }>(records: T[]): T[] {
  return records.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The reads every user-scoped record kind offers. */
export interface OwnedReads<V> {
  listByUser(userId: string): V[];
  getForUser(userId: string, id: string): V | undefined;
  byId(id: string): V | undefined;
}

/** Reads by owner that every user-scoped record kind shares: another user's record never comes back. */
export function ownedReads<R extends { userId: string }, V extends { createdAt: string; id: string }>(
  ctx: StoreContext,
  kind: OwnedKind,
  row: (id: string) => R | undefined,
  view: (r: R) => V,
): OwnedReads<V> {
  return ownedReadsOver((userId) => ownedIds(ctx, kind, userId), row, view);
}

/**
 * ownedReads answered from the record cache (for kinds whose views are pure functions of the
 * record: connections, strategies). Callers get shared objects and must not change them.
 */
export function cachedOwnedReads<R extends { userId: string }, V extends { createdAt: string; id: string }>(
  ctx: StoreContext,
  kind: OwnedKind,
  row: (id: string) => R | undefined,
  view: (r: R) => V,
): OwnedReads<V> {
  const direct = ownedReads(ctx, kind, row, view);
  const lists = `${kind}:list`;
  // Only records found are remembered: ids a client makes up cannot fill the cache.
  const byId = (id: string): V | undefined => {
    const key = `${kind}:id:${id}`;
    const known = ctx.cache.peek<V>(key);
    if (known) return known;
    const found = direct.byId(id);
    if (found) ctx.cache.set(key, found);
    return found;
  };
  return {
    listByUser: (userId) => ctx.cache.getIn(lists, userId, () => direct.listByUser(userId)),
    getForUser: (userId, id) => {
      const v = byId(id);
      return v && (v as unknown as { userId: string }).userId === userId ? v : undefined;
    },
    byId,
  };
}

/**
 * Longest id a record can have (ours are `xxx_` + 12 base62 characters). A longer one names no
 * record and is not looked up: an LMDB key holds at most ~1,900 bytes, and past that a read throws
 * (a 4 KB `strategyId` in a body was a 500).
 */
export const MAX_RECORD_ID_LENGTH = 128;

/** Reads records of `db` by id; an id no record can have reads as absent. */
export function rowReader<R>(db: Database<any, any>): (id: string) => R | undefined {
  return (id) => (id.length <= MAX_RECORD_ID_LENGTH ? (db.get(id) as R | undefined) : undefined);
}

/** ownedReads over any index of ids by owner (the NATS store keeps its own in memory). */
export function ownedReadsOver<R extends { userId: string }, V extends { createdAt: string; id: string }>(
  idsOf: (userId: string) => Iterable<string>,
  row: (id: string) => R | undefined,
  view: (r: R) => V,
): OwnedReads<V> {
  return {
    listByUser(userId) {
      const rows = [...idsOf(userId)].map(row).filter((r): r is R => r !== undefined && r.userId === userId);
      return byCreation(rows.map(view));
    },
    getForUser(userId, id) {
      const r = row(id);
      return r && r.userId === userId ? view(r) : undefined;
    },
    byId(id) {
      const r = row(id);
      return r && view(r);
    },
  };
}
