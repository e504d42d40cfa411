/**
 * The store: one LMDB environment (`<dataDir>/tradegate.lmdb`) with a named database per
 * record kind. LMDB is multi-process: the server keeps it open while CLI commands open it,
 * write and close; writers are serialized by LMDB's lock, readers take no locks.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database } from 'lmdb';
import type { Logger } from '../log.js';
import { createApiKeyStore, type ApiKeyStore } from './api-keys.js';
import { createConnectionStore, type ConnectionStore } from './connections.js';
import type { Dbs, StoreContext } from './context.js';
import { DATA_KEY_FILE, loadDataKey, type Sealer } from './crypto.js';
import { dumpStore, type StoreDump } from './dump.js';
import { makeDirs, makePrivate, sharedDirWarning, withPrivateUmask } from './file-modes.js';
import { checkDataKey, type KeyCheckSlot } from './key-check.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createJournalStore, type BatchedJournalStore, type JournalStore } from './journal.js';
import { createSessionStore, type SessionStore } from './sessions.js';
import { createStrategyStore, type StrategyStore } from './strategies.js';
import { createUserStore, type UserStore } from './users.js';
import { checkStoreFile } from './store-file.js';
import { createWebhookTokenStore, type WebhookTokenStore } from './webhook-tokens.js';
import { createGuardStore, type GuardStore } from './guards.js';
import { createBrokerHoldStore, type BrokerHoldStore } from './broker-holds.js';
import { createDeviceTokens, type DeviceTokens } from './device-tokens.js';
import { RecordCache } from './record-cache.js';

export type { User } from './users.js';
export type { ApiKeyView } from './api-keys.js';
export type { ConnectionRecord, NewConnection } from './connections.js';
export type { WebhookTokenRecord, WebhookTokenPatch } from './webhook-tokens.js';
export type { StrategyRecord, StrategyFields, StrategyPatch } from './strategies.js';
export type { IdempotencyRecord } from './idempotency.js';
export type { JournalEntry, PositionedEntry } from './journal.js';
export type { SessionRecord, SessionPolicy } from './sessions.js';
export type { GuardRecord } from './guards.js';

/** Name of the LMDB environment inside the data dir (a file plus its `-lock` file). */
export const LMDB_DIR = 'tradegate.lmdb';

/** Options of openStore. */
export interface StoreOptions {
  dataDir: string;
  /** 64 hex chars; without it the key file `<dataDir>/data.key` is used (created 0600). */
  dataKey?: string;
  /** ms since the epoch; injected by tests for the 24 h idempotency horizon. */
  clock?: () => number;
  logger?: Logger;
  /** Where a warning about the data dir goes when there is no logger (CLI: stderr). */
  warn?: (message: string) => void;
}

/** Every record kind of the service (LMDB on one node, NATS KV in a cluster). */
export interface Store {
  readonly dataDir: string;
  readonly users: UserStore;
  readonly apiKeys: ApiKeyStore;
  readonly connections: ConnectionStore;
  readonly webhookTokens: WebhookTokenStore;
  readonly strategies: StrategyStore;
  readonly idempotency: IdempotencyStore;
  readonly journal: JournalStore;
  readonly sessions: SessionStore;
  /** Risk guards and locks per account. */
  readonly guards: GuardStore;
  /** Sealed device tokens of browsers that signed a user in (sign-in throttling). */
  readonly devices: DeviceTokens;
  /** Resolves once every write issued so far (including un-awaited ones) is on disk. */
  flushed(): Promise<void>;
  /** Waits for pending writes, then closes the environment. */
  close(): Promise<void>;
}

/** The LMDB store, which can also hand over all its rows (`tradegate cluster import`). */
export interface LmdbStore extends Store {
  readonly journal: BatchedJournalStore;
  /** Broker rate-limit holds, kept across a restart (one node; a cluster's event feed keeps them). */
  readonly brokerHolds: BrokerHoldStore;
  /** Every record as stored (see dump.ts). */
  dump(): StoreDump;
  /**
   * The health stream's first event id for this run, kept durably: above every id an earlier run
   * could have handed out (each run has STREAM_ID_SPAN), and at least `now` (ms). Ids from the
   * start time alone let a clock stepped back across a restart make an old Last-Event-ID look
   * current, so a client resumed without the snapshots of what changed meanwhile.
   */
  claimStreamIdBase(now: number): Promise<number>;
}

/** The first run's demo login, printed once and saved 0600 in the data dir (commands/demo.ts). */
export const DEMO_CREDENTIALS_FILE = 'demo-credentials.json';

/**
 * The demo user's password changed: the saved one is dropped from DEMO_CREDENTIALS_FILE (kept as
 * null, with when), not left there looking current (ops probe: the old password stayed in the
 * file, the one an operator is told to take it from).
 */
function forgetDemoPassword(dataDir: string, userName: string): void {
  const file = join(dataDir, DEMO_CREDENTIALS_FILE);
  let saved: { login?: { name?: string; password?: string | null } } & Record<string, unknown>;
  try {
    saved = JSON.parse(readFileSync(file, 'utf8')) as typeof saved;
  } catch {
    return; // no demo file (not a paper first run), or not ours to read
  }
  if (!saved.login || saved.login.password === null || saved.login.name !== userName) return;
  const changed = { ...saved, login: { ...saved.login, password: null, passwordChangedAt: new Date().toISOString() } };
  writeFileSync(file, `${JSON.stringify(changed, null, 2)}\n`, { mode: 0o600 });
}

/** Event ids one run may give one user's health stream before the next run's ids begin. */
export const STREAM_ID_SPAN = 2 ** 32;
const STREAM_ID_BASE = 'streamIdBase';

const KEY_CHECK = 'keyCheck';

/** The LMDB side of the key check: one record in the `meta` database. */
function keyCheckSlot(meta: Database): KeyCheckSlot {
  return {
    read: () => meta.get(KEY_CHECK) as Uint8Array | undefined,
    async writeOnce(sealed) {
      const wrote = await meta.ifNoExists(KEY_CHECK, () => {
        meta.put(KEY_CHECK, sealed);
      });
      await meta.flushed;
      return wrote;
    },
  };
}

/** Opens (creating if needed) the data dir's LMDB environment. */
export async function openStore(opts: StoreOptions): Promise<LmdbStore> {
  const clock = opts.clock ?? Date.now;
  // 0700: the directory holds the data key file; nobody else needs to list or read it.
  makeDirs(opts.dataDir, 0o700);
  const shared = sharedDirWarning(opts.dataDir);
  if (shared) (opts.logger ? (m: string) => opts.logger!.warn(m) : (opts.warn ?? (() => undefined)))(shared);

  const lmdbPath = join(opts.dataDir, LMDB_DIR);
  // Missing or empty in a data dir that had one, or cut short: refused with a message (store-file.ts).
  checkStoreFile(opts.dataDir, LMDB_DIR);
  // LMDB creates its data and lock files with the process umask: create them private.
  const env = withPrivateUmask(() => open({
    path: lmdbPath,
    maxDbs: 32,
    // Durability, set explicitly rather than trusting defaults that lmdb-js documents
    // inconsistently (reference/reliability-anchors.md §7.6):
    // - noSync / noMetaSync / useWritemap stay off (mapAsync is off by default): every
    //   commit is fsynced and a crash cannot corrupt the file.
    // - overlappingSync on: a write promise resolves at commit (visible to every thread and
    //   process) and the fsync runs outside the writer lock, overlapping the next batch, so
    //   a burst of orders shares flushes instead of queueing behind each one. The price is
    //   that a resolved put is committed but not yet durable; writes that must survive a
    //   crash go through `durable()`, which also awaits `env.flushed`.
    // - safeRestore off: after a process crash (same boot) LMDB reopens at the last commit,
    //   which the page cache still holds; after a power loss it falls back to the last
    //   flushed one, and `durable()` writes are in it.
    overlappingSync: true,
    noSync: false,
    noMetaSync: false,
    useWritemap: false,
    // Unused parts of written pages are zeroed, so stray process memory (which may have held
    // a secret) never lands in the file.
    noMemInit: false,
  }));
  makePrivate(lmdbPath, `${lmdbPath}-lock`, join(opts.dataDir, DATA_KEY_FILE));

  const meta = env.openDB({ name: 'meta' });
  let sealer: Sealer;
  try {
    sealer = await checkDataKey(keyCheckSlot(meta), (create) => loadDataKey(opts.dataDir, opts.dataKey, { create }), opts.dataDir);
  } catch (err) {
    await env.close();
    throw err;
  }

  const named = <V = unknown, K extends import('lmdb').Key = import('lmdb').Key>(name: string): Database<V, K> =>
    env.openDB<V, K>({ name });
  const dbs: Dbs = {
    users: named('users'),
    userNames: named('userNames'),
    apiKeys: named('apiKeys'),
    connections: named('connections'),
    webhookTokens: named('webhookTokens'),
    strategies: named('strategies'),
    owners: named('owners'),
    lastUsed: named('lastUsed'),
    idempotency: named('idempotency'),
    idempotencyByTime: named('idempotencyByTime'),
    journal: named('journal'),
    journalByUser: named('journalByUser'),
    journalByRef: named('journalByRef'),
    sessions: named('sessions'),
    sessionsByUser: named('sessionsByUser'),
    guards: named('guards'),
    brokerHolds: named('brokerHolds'),
  };

  // Records every request reads are cached in memory; every write to them (any process)
  // moves the generation the cache checks (record-cache.ts).
  const cache = new RecordCache(meta);
  for (const db of [dbs.users, dbs.userNames, dbs.apiKeys, dbs.connections, dbs.webhookTokens, dbs.strategies, dbs.owners]) cache.watch(db);

  const ctx: StoreContext = {
    env,
    dbs,
    cache,
    sealer,
    clock,
    logger: opts.logger,
    async durable(write) {
      const result = await write;
      await env.flushed;
      cache.written();
      return result;
    },
    nowIso: () => new Date(clock()).toISOString(),
  };

  const sessions = createSessionStore(ctx);
  const journal = createJournalStore(ctx);
  const users: UserStore = createUserStore(ctx, {
    onPasswordChanged: async (userId) => {
      const name = users.byId(userId)?.name;
      if (name !== undefined) forgetDemoPassword(opts.dataDir, name);
      await sessions.revokeAllForUser(userId);
    },
  });
  let closing: Promise<void> | undefined;
  return {
    dataDir: opts.dataDir,
    // A new password ends every session of the user, whichever path changed it, and the first
    // run's saved demo password no longer stands in the data dir.
    users,
    apiKeys: createApiKeyStore(ctx),
    connections: createConnectionStore(ctx),
    webhookTokens: createWebhookTokenStore(ctx),
    strategies: createStrategyStore(ctx),
    idempotency: createIdempotencyStore(ctx),
    journal,
    sessions,
    guards: createGuardStore(ctx),
    brokerHolds: createBrokerHoldStore(ctx),
    devices: createDeviceTokens(sealer, clock),
    dump: () => dumpStore(ctx),
    async claimStreamIdBase(now) {
      const previous = meta.get(STREAM_ID_BASE) as number | undefined;
      const base = Math.max(Math.floor(now), previous === undefined ? 0 : previous + STREAM_ID_SPAN);
      await ctx.durable(meta.put(STREAM_ID_BASE, base));
      return base;
    },
    async flushed() {
      await journal.drain();
      await env.committed;
      await env.flushed;
    },
    close() {
      closing ??= (async () => {
        await journal.drain();
        await env.committed;
        await env.flushed;
        // A running server's cache vouches for a read of the generation for GENERATION_FRESH_MS: a
        // command (the CLI revoking a key) ends only once that cannot hide its writes.
        await cache.settled();
        await env.close();
      })();
      return closing;
    },
  };
}
