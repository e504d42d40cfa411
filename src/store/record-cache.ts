/**
 * Memory of the records every request reads (who an API key or webhook token is, a user's
 * connections and strategies), with LMDB as the source of truth.
 *
 * Invalidation crosses processes: every write to a cached kind, by this process or another
 * (the CLI revoking a key while the server runs), also writes a fresh random value under one
 * `meta` key in the same transaction. A cached read first compares that value with the one
 * the cache was filled under, one small LMDB read, and empties the whole cache when it moved;
 * so a revocation takes effect on the next request. The generation is read before the record,
 * from the same snapshot or an older one, so a cache entry is never newer than its generation
 * is old: the worst case is one needless refill, never a stale hit.
 *
 * The generation is read once per synchronous run (until the next microtask checkpoint): lmdb-js
 * keeps one read snapshot until a timer of its own resets it, so a second read in the same run
 * could only return the same value. A write through this process moves the generation and forgets
 * that read, so the next lookup reads again.
 *
 * The NATS store needs none of this: it serves these reads from its KV mirror in memory.
 */
import type { Database } from 'lmdb';

/** Where the generation lives in the `meta` database. */
export const GENERATION_KEY = 'recordsGeneration';

/** Database methods that write; wrapped so every write to a cached kind moves the generation. */
const WRITES = ['put', 'remove', 'putSync', 'removeSync'] as const;

/** The cache of one open store. */
export class RecordCache {
  private generation: unknown = Symbol('never read');
  private readonly values = new Map<string, unknown>();
  private readonly spaces = new Map<string, Map<string, unknown>>();
  /** The generation was read in this synchronous run. */
  private checked = false;
  private readonly forgetCheck = (): void => {
    this.checked = false;
  };

  constructor(private readonly meta: Database) {}

  /** `load()`'s value for `key`, from memory unless a write happened since it was stored. */
  get<T>(key: string, load: () => T): T {
    this.check();
    if (this.values.has(key)) return this.values.get(key) as T;
    const value = load();
    this.values.set(key, value);
    return value;
  }

  /** The remembered value for `key`, if still valid (nothing is loaded or stored). */
  peek<T>(key: string): T | undefined {
    this.check();
    return this.values.get(key) as T | undefined;
  }

  /** Remembers `value` for `key`; call right after a `peek` that missed (same generation). */
  set(key: string, value: unknown): void {
    this.values.set(key, value);
  }

  /**
   * `peek` in a named space of keys (e.g. verified secrets by their text): the key is looked up
   * as it is, without building a `space:key` string per request.
   */
  peekIn<T>(space: string, key: string): T | undefined {
    this.check();
    return this.spaces.get(space)?.get(key) as T | undefined;
  }

  /** `set` in a named space; call right after a `peekIn` that missed. */
  setIn(space: string, key: string, value: unknown): void {
    let values = this.spaces.get(space);
    if (!values) this.spaces.set(space, (values = new Map()));
    values.set(key, value);
  }

  /** Empties the cache when any process wrote cached records since it was filled. */
  private check(): void {
    if (this.checked) return;
    this.checked = true;
    queueMicrotask(this.forgetCheck);
    const now = this.meta.get(GENERATION_KEY);
    if (now !== this.generation) {
      this.values.clear();
      this.spaces.clear();
      this.generation = now;
    }
  }

  /** Moves the generation; part of the write (transaction or batch) that calls it. */
  bump(sync = false): void {
    this.checked = false;
    if (sync) this.meta.putSync(GENERATION_KEY, Math.random());
    else void this.meta.put(GENERATION_KEY, Math.random());
  }

  /**
   * Makes every write through `db` move the generation in the same transaction (inside
   * `transaction`/`ifNoExists` callbacks the extra put joins them; a lone put shares its
   * batch). Wrapping the database, not each store method, keeps writes added later covered.
   */
  watch(db: Database<any, any>): void {
    for (const name of WRITES) {
      const write = (db[name] as (...args: unknown[]) => unknown).bind(db);
      const sync = name.endsWith('Sync');
      (db as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
        this.bump(sync);
        return write(...args);
      };
    }
  }
}
