/**
 * Memory of the records every request reads (who an API key or webhook token is, a user's
 * connections and strategies), with LMDB as the source of truth.
 *
 * Invalidation crosses processes: every write to a cached kind, by this process or another
 * (the CLI revoking a key while the server runs), also writes a fresh random value under one
 * `meta` key in the same transaction. A cached read first compares that value with the one
 * the cache was filled under, one small LMDB read, and empties the whole cache when it moved.
 * The generation is read before the record, from the same snapshot or an older one, so a cache
 * entry is never newer than its generation is old: the worst case is one needless refill, never
 * a stale hit.
 *
 * One read of the generation vouches for the cache for GENERATION_FRESH_MS (50 ms), from a fresh
 * LMDB snapshot: read per request, it was a fifth of the front's JavaScript time on a cached GET
 * (its read transaction renewed, and a timer of lmdb-js's armed, every time; README
 * "Performance"); read once a millisecond, still ~3 µs of a GET's 27 at 5,000 reads/s. Code this
 * rare never leaves V8's baseline tier: `perf` put one read at ~50 µs, so at 10 ms it was still
 * ~1 µs of every GET at 5,000 reads/s (0.2 µs at 50 ms). What that changes, and why no write is
 * missed:
 * - A write through this process (the API revoking a key) makes the next lookup read again, and
 *   so does its commit: every write to a cached kind is awaited through the store's `durable`,
 *   which forgets the last read once it has committed, before the write's caller goes on.
 *   Revoked through the API, a key is refused by the first request after the answer.
 * - Another process (the CLI) waits twice that time after its last commit before it ends
 *   (`settled`, the store's close): a request sent after the command returned finds the cache
 *   checked since the commit, or checks it itself. Revoked from the CLI, a key is refused by the
 *   next request sent after the command ends (test/integration/serve/revocation.test.ts).
 *
 * The NATS store needs none of this: it serves these reads from its KV mirror in memory.
 */
import type { Database } from 'lmdb';

/** Where the generation lives in the `meta` database. */
export const GENERATION_KEY = 'recordsGeneration';

/** Database methods that write; wrapped so every write to a cached kind moves the generation. */
const WRITES = ['put', 'remove', 'putSync', 'removeSync'] as const;

/** How long (ms) one read of the generation vouches for the cache. */
export const GENERATION_FRESH_MS = 50;

/** The cache of one open store. */
export class RecordCache {
  private generation: unknown = Symbol('never read');
  private readonly values = new Map<string, unknown>();
  private readonly spaces = new Map<string, Map<string, unknown>>();
  /** When the generation was last read (the clock's ms). */
  private checkedAt = -Infinity;
  /** This process has written cached records (settled() waits). */
  private wrote = false;

  constructor(
    private readonly meta: Database,
    private readonly clock: () => number = () => performance.now(),
  ) {}

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

  /**
   * `peekIn` that reads the generation only for a key the space holds: a lookup that will miss
   * (input never verified, garbage) touches no database. Its miss says nothing: follow it with
   * `peekIn` before loading what to `setIn`.
   */
  knownIn<T>(space: string, key: string): T | undefined {
    const values = this.spaces.get(space);
    const value = values?.get(key);
    if (value === undefined) return undefined;
    this.check();
    // Emptied by the check (another write moved the generation): its spaces are new maps.
    return this.spaces.get(space) === values ? (value as T) : undefined;
  }

  /** `get` in a named space: `load()`'s value for `key`, without building a `space:key` string per lookup. */
  getIn<T>(space: string, key: string, load: () => T): T {
    this.check();
    const values = this.space(space);
    if (values.has(key)) return values.get(key) as T;
    const value = load();
    values.set(key, value);
    return value;
  }

  /** `set` in a named space; call right after a `peekIn` that missed. */
  setIn(space: string, key: string, value: unknown): void {
    this.space(space).set(key, value);
  }

  private space(name: string): Map<string, unknown> {
    let values = this.spaces.get(name);
    if (values === undefined) this.spaces.set(name, (values = new Map()));
    return values;
  }

  /** Empties the cache when any process wrote cached records since it was filled. */
  private check(): void {
    const at = this.clock();
    if (at - this.checkedAt < GENERATION_FRESH_MS) return;
    this.checkedAt = at;
    // lmdb-js keeps one read snapshot until a timer of its own: a read that vouches for the next
    // GENERATION_FRESH_MS must see every commit made before it, so it starts from a new one.
    this.meta.resetReadTxn();
    const now = this.meta.get(GENERATION_KEY);
    if (now !== this.generation) {
      this.values.clear();
      this.spaces.clear();
      this.generation = now;
    }
  }

  /** Moves the generation; part of the write (transaction or batch) that calls it. */
  bump(sync = false): void {
    this.checkedAt = -Infinity;
    this.wrote = true;
    if (sync) this.meta.putSync(GENERATION_KEY, Math.random());
    else void this.meta.put(GENERATION_KEY, Math.random());
  }

  /** A write of this process has committed (the store's `durable`): the next lookup reads the generation again. */
  readonly written = (): void => {
    this.checkedAt = -Infinity;
  };

  /**
   * Resolves once every other process's cache has read the generation since this process's last
   * write, or will at its next lookup: twice GENERATION_FRESH_MS after it (call once its writes
   * have committed). Immediately when this process wrote nothing.
   */
  async settled(): Promise<void> {
    if (this.wrote) await new Promise((resolve) => setTimeout(resolve, 2 * GENERATION_FRESH_MS + 1));
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
        const result = write(...args);
        // Outside a transaction an async write answers a promise of its commit: read again after it.
        if (result instanceof Promise) void result.then(this.written, this.written);
        return result;
      };
    }
  }
}
