/**
 * Commands run in-process: what they print, and a data dir they open themselves (as the CLI
 * does while a server holds the same LMDB environment).
 */
import { afterEach, beforeEach, vi } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { tempStore, type TempStore } from './store.js';

/** stdout and stderr of the test, captured per test (read the arrays inside tests). */
export function useCommandOutput(): { out: string[]; err: string[] } {
  const captured = { out: [] as string[], err: [] as string[] };
  beforeEach(() => {
    captured.out.length = 0;
    captured.err.length = 0;
    vi.spyOn(process.stdout, 'write').mockImplementation((c) => (captured.out.push(String(c)), true));
    vi.spyOn(process.stderr, 'write').mockImplementation((c) => (captured.err.push(String(c)), true));
  });
  afterEach(() => vi.restoreAllMocks());
  return captured;
}

/** A fresh data dir per test, prepared by `setup` and then closed, so the command opens it itself. */
export function useDataDir(setup: (store: Store) => Promise<unknown> = async () => undefined): { dir: string } {
  const state = { dir: '' };
  let t: TempStore;
  beforeEach(async () => {
    t = await tempStore();
    await setup(t.store);
    await t.store.close();
    state.dir = t.dir;
  });
  afterEach(async () => {
    t.store = await openStore({ dataDir: t.dir });
    await t.cleanup();
  });
  return state;
}
