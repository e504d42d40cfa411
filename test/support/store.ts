/** A real store in a fresh temp dir, with a controllable clock (or the one given). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';

export interface TempStore {
  store: Store;
  dir: string;
  /** Current fake time in ms. */
  now: { value: number };
  reopen(): Promise<Store>;
  cleanup(): Promise<void>;
}

export const T0 = Date.UTC(2026, 0, 5, 14, 30);

/** Opens a store in a new temp dir; `cleanup` closes it and removes the dir. */
export async function tempStore(opts: { dataKey?: string; clock?: () => number } = {}): Promise<TempStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tradegate-store-'));
  const now = { value: T0 };
  const { clock = () => now.value, ...rest } = opts;
  const open = (): Promise<Store> => openStore({ dataDir: dir, clock, ...rest });
  const t: TempStore = {
    store: await open(),
    dir,
    now,
    async reopen() {
      await t.store.close();
      t.store = await open();
      return t.store;
    },
    async cleanup() {
      await t.store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
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
