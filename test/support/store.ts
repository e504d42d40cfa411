/**
 * Test helper: a real store in a fresh temp dir, with a controllable clock. The same store
 * tests run twice: in the default project over LMDB, and in the `store-on-nats` project over
 * NATS KV (one nats-server for the run, a fresh bucket prefix per store).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterEach, beforeEach, inject } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { openNatsStore } from '../../src/store/nats/index.js';
import { randomBase62 } from '../../src/store/crypto.js';

/** The store these tests run against in this project. */
export const backend = inject('storeBackend') ?? 'lmdb';

export interface TempStore {
  store: Store;
  dir: string;
  /** Where the store's bytes end up on disk (the LMDB dir, or the nats-server's JetStream dir). */
  storageDir: string;
  /** Current fake time in ms. */
  now: { value: number };
  reopen(): Promise<Store>;
  cleanup(): Promise<void>;
}

export const T0 = Date.UTC(2026, 0, 5, 14, 30);

/** The data key of NATS test stores (a cluster store always gets its key from configuration). */
export const TEST_DATA_KEY = 'ef'.repeat(32);

/** Opens a store in a new temp dir; `cleanup` closes it and removes the dir (and, on NATS, its buckets). */
export async function tempStore(opts: { dataKey?: string; clock?: () => number } = {}): Promise<TempStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tradegate-store-'));
  const now = { value: T0 };
  const clock = opts.clock ?? ((): number => now.value);
  let nc: NatsConnection | undefined;
  let open = (): Promise<Store> => openStore({ dataDir: dir, clock, ...(opts.dataKey ? { dataKey: opts.dataKey } : {}) });
  let dropNats = async (): Promise<void> => undefined;
  if (backend === 'nats') {
    const conn = await connect({ servers: inject('natsUrl') });
    nc = conn;
    const prefix = `t${randomBase62(12)}`;
    open = () => openNatsStore({ nc: conn, prefix, dataDir: dir, clock, dataKey: opts.dataKey ?? TEST_DATA_KEY });
    dropNats = async () => {
      const jsm = await jetstreamManager(conn);
      for (const stream of [`KV_${prefix}_records`, `KV_${prefix}_idempotency`, `${prefix}_journal`]) await jsm.streams.delete(stream).catch(() => false);
      await conn.close();
    };
  }
  const t: TempStore = {
    store: await open(),
    dir,
    storageDir: nc ? inject('natsStoreDir') : dir,
    now,
    async reopen() {
      await t.store.close();
      t.store = await open();
      return t.store;
    },
    async cleanup() {
      await t.store.close();
      await dropNats();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}

/**
 * Every file under dir, recursively, as bytes (tests look for plaintext secrets in them). A file
 * or folder that disappears during the walk is skipped: on the NATS store the directory is the
 * shared server's, and other tests' streams are deleted while this one reads.
 */
export function allFiles(dir: string): { path: string; bytes: Buffer }[] {
  const out: { path: string; bytes: Buffer }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    try {
      if (statSync(path).isDirectory()) out.push(...allFiles(path));
      else out.push({ path, bytes: readFileSync(path) });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return out;
}

/** The users most store tests need: alice owns things, bob must never see them. */
export interface TwoUsers {
  t: TempStore;
  alice: string;
  bob: string;
}

/**
 * Registers a fresh store with users alice and bob before each test (and its cleanup after);
 * read the fields inside tests, they change per test.
 */
export function useTwoUsers(): TwoUsers {
  const world = {} as TwoUsers;
  beforeEach(async () => {
    world.t = await tempStore();
    world.alice = (await world.t.store.users.create({ name: 'alice' })).id;
    world.bob = (await world.t.store.users.create({ name: 'bob' })).id;
  });
  afterEach(() => world.t.cleanup());
  return world;
}
