/**
 * Maps and sets keyed by broker ids that never stall on growth.
 *
 * A JavaScript Map rehashes its whole table each time it doubles. The actor's mirror and the
 * paper broker file every order, command, version and report under its id in a dozen tables
 * that grow in step, so they all doubled in the same event: at 131,072 and 262,144 entries
 * that one event took 100–380 ms (bench orders, profiled at 1,000 orders/s), and every order
 * of the connection waited behind it (the p99.9 of the added latency was ~190 ms).
 *
 * These keep ids in chunks of CHUNK consecutive ids, each its own Map: a chunk's rehash is
 * bounded by its size, whatever the total. Broker ids grow, so the chunk last used is nearly
 * always the one asked for, and it is remembered. Iteration runs chunk by chunk in the order
 * the chunks were made, each in insertion order: for ids that only grow, that is insertion order.
 */

/** Consecutive ids per chunk: a rehash copies at most this many entries. */
const CHUNK = 4096;

const chunkOf = (id: number): number => Math.floor(id / CHUNK);

/** A Map from numeric ids to values (the subset of Map the callers use). */
export class IdMap<V> implements Iterable<[number, V]> {
  private readonly chunks = new Map<number, Map<number, V>>();
  private count = 0;
  private lastKey = NaN;
  private last: Map<number, V> | undefined;

  get size(): number {
    return this.count;
  }

  private chunk(id: number): Map<number, V> | undefined {
    const key = chunkOf(id);
    if (key === this.lastKey) return this.last;
    const chunk = this.chunks.get(key);
    if (chunk) {
      this.lastKey = key;
      this.last = chunk;
    }
    return chunk;
  }

  get(id: number): V | undefined {
    return this.chunk(id)?.get(id);
  }

  has(id: number): boolean {
    return this.chunk(id)?.has(id) ?? false;
  }

  set(id: number, value: V): this {
    let chunk = this.chunk(id);
    if (!chunk) {
      const key = chunkOf(id);
      this.chunks.set(key, (chunk = new Map()));
      this.lastKey = key;
      this.last = chunk;
    }
    const before = chunk.size;
    chunk.set(id, value);
    this.count += chunk.size - before;
    return this;
  }

  delete(id: number): boolean {
    const chunk = this.chunk(id);
    if (!chunk?.delete(id)) return false;
    this.count--;
    if (chunk.size === 0) {
      this.chunks.delete(chunkOf(id));
      this.lastKey = NaN;
      this.last = undefined;
    }
    return true;
  }

  clear(): void {
    this.chunks.clear();
    this.count = 0;
    this.lastKey = NaN;
    this.last = undefined;
  }

  /** Entries of each hash table it keeps (none holds more than CHUNK). */
  tableSizes(): number[] {
    return [...this.chunks.values()].map((chunk) => chunk.size);
  }

  *entries(): IterableIterator<[number, V]> {
    for (const chunk of this.chunks.values()) yield* chunk;
  }

  *keys(): IterableIterator<number> {
    for (const chunk of this.chunks.values()) yield* chunk.keys();
  }

  *values(): IterableIterator<V> {
    for (const chunk of this.chunks.values()) yield* chunk.values();
  }

  [Symbol.iterator](): IterableIterator<[number, V]> {
    return this.entries();
  }
}

/** A Set of numeric ids, chunked like IdMap. */
export class IdSet implements Iterable<number> {
  private readonly ids = new IdMap<true>();

  constructor(ids?: Iterable<number>) {
    if (ids) for (const id of ids) this.ids.set(id, true);
  }

  get size(): number {
    return this.ids.size;
  }

  has(id: number): boolean {
    return this.ids.has(id);
  }

  add(id: number): this {
    this.ids.set(id, true);
    return this;
  }

  delete(id: number): boolean {
    return this.ids.delete(id);
  }

  clear(): void {
    this.ids.clear();
  }

  values(): IterableIterator<number> {
    return this.ids.keys();
  }

  [Symbol.iterator](): IterableIterator<number> {
    return this.ids.keys();
  }
}
