/**
 * An in-memory mirror of one JetStream KV bucket, kept fresh by a watch, so that reads stay
 * synchronous (the hot path verifies keys and tokens without a round trip). Writes go to KV
 * and are applied to the mirror as soon as KV acknowledges them (read-your-writes); writes
 * from other nodes arrive through the watch (tens of microseconds to milliseconds on a LAN).
 *
 * Ordering: every entry carries its KV revision (the stream sequence). The watch delivers in
 * stream order but may lag behind a local write, so an entry only replaces one with a lower
 * revision. A local delete knows the revision it replaced, not its own: it leaves a tombstone
 * at `replaced + 0.5`, above anything the watch may still deliver for the old value and below
 * the delete marker's real revision.
 *
 * Concurrency: read-modify-write goes through `mutate`, a revision-checked update retried
 * against a fresh read when another writer got there first. Nothing else writes records.
 */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';
import type { Logger } from '../../log.js';

interface Slot {
  /** undefined: deleted (a tombstone kept so an older value cannot reappear). */
  value: unknown;
  revision: number;
}

/** Called for every change the mirror applies, local or remote. */
export type ChangeListener = (key: string, value: unknown, previous: unknown) => void;

/** What a `mutate` step decides: write `next` (null deletes, undefined writes nothing) and return `result`. */
export interface Mutation<R> {
  next: unknown;
  result: R;
}

/** Whether an error is KV's "the key moved on" answer to a revision-checked write. */
export function isWrongRevision(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

const MUTATE_ATTEMPTS = 20;

/** See module comment. */
export class KvMirror {
  private readonly slots = new Map<string, Slot>();
  private readonly listeners: ChangeListener[] = [];
  private watcher: QueuedIterator<KvWatchEntry> | undefined;
  private closed = false;
  /** Highest revision the watch has delivered (where a restarted watch resumes). */
  private watched = 0;

  constructor(
    readonly kv: KV,
    readonly bucket: string,
    private readonly logger: Logger | undefined,
  ) {}

  /** Starts following KV; resolves once every value the bucket held at this moment is in memory. */
  start(): Promise<void> {
    return this.follow();
  }

  /** Registers a listener (e.g. a secondary index; register before `start`); it sees every later change. */
  onChange(listener: ChangeListener): void {
    this.listeners.push(listener);
  }

  /** The current value of `key`, or undefined. Throws once the mirror is closed: it no longer follows KV. */
  get<T>(key: string): T | undefined {
    if (this.closed) throw new Error('store is closed');
    return this.slots.get(key)?.value as T | undefined;
  }

  /** Every live value whose key starts with `prefix`. */
  values<T>(prefix: string): T[] {
    if (this.closed) throw new Error('store is closed');
    const out: T[] = [];
    for (const [key, slot] of this.slots) if (slot.value !== undefined && key.startsWith(prefix)) out.push(slot.value as T);
    return out;
  }

  /** Creates `key` if it has no live value; false when it has one. Atomic across nodes (KV create). */
  async create(key: string, value: unknown): Promise<boolean> {
    try {
      this.apply(key, value, await this.kv.create(key, JSON.stringify(value)));
      return true;
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
      await this.refresh(key);
      return false;
    }
  }

  /** Writes `key` unconditionally (last writer wins: only for informational values). */
  async put(key: string, value: unknown): Promise<void> {
    this.apply(key, value, await this.kv.put(key, JSON.stringify(value)));
  }

  /**
   * Read-modify-write of one key: `step` sees the current value and decides. Retried with a
   * fresh value when another writer changed the key in between; a key unknown here is looked up
   * in KV first, so a record created on another node a moment ago is not reported missing.
   */
  async mutate<R>(key: string, step: (current: unknown) => Mutation<R>): Promise<R> {
    if (this.slots.get(key) === undefined) await this.refresh(key);
    for (let attempt = 0; attempt < MUTATE_ATTEMPTS; attempt++) {
      const slot = this.slots.get(key);
      const { next, result } = step(slot?.value);
      if (next === undefined) return result;
      try {
        if (next === null) {
          if (!slot || slot.value === undefined) return result;
          await this.kv.delete(key, { previousSeq: slot.revision });
          this.apply(key, undefined, slot.revision + 0.5);
        } else if (!slot || slot.value === undefined) {
          this.apply(key, next, await this.kv.create(key, JSON.stringify(next)));
        } else {
          this.apply(key, next, await this.kv.update(key, JSON.stringify(next), slot.revision));
        }
        return result;
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
        await this.refresh(key);
      }
    }
    throw new Error(`KV key ${key} kept changing under ${MUTATE_ATTEMPTS} attempts to update it`);
  }

  /** Reads `key` from KV into the mirror (the watch may not have delivered it yet). */
  async refresh(key: string): Promise<void> {
    const entry = await this.kv.get(key);
    if (entry) this.applyEntry(entry);
  }

  /** Stops following KV; later reads throw. */
  close(): void {
    this.closed = true;
    this.watcher?.stop();
  }

  private applyEntry(e: KvEntry): void {
    let value: unknown;
    try {
      value = e.operation === 'PUT' ? e.json() : undefined;
    } catch (err) {
      // Not ours (every record is JSON): skip it rather than stop following the bucket.
      this.logger?.error({ err, bucket: this.bucket, key: e.key }, 'KV value is not JSON; ignored');
      return;
    }
    this.apply(e.key, value, e.revision);
  }

  private apply(key: string, value: unknown, revision: number): void {
    const slot = this.slots.get(key);
    if (slot && slot.revision >= revision) return;
    this.slots.set(key, { value, revision });
    if (slot?.value === undefined && value === undefined) return;
    for (const l of this.listeners) {
      try {
        l(key, value, slot?.value);
      } catch (err) {
        this.logger?.error({ err, key }, 'KV change listener threw');
      }
    }
  }

  /**
   * Starts (or, after the watch ended unexpectedly, resumes) the watch. The first call waits
   * until the mirror holds what the bucket held when it began: the watch delivers the last
   * value of every key in stream order, so having seen the stream's last sequence means done.
   */
  private async follow(): Promise<void> {
    const state = (await this.kv.status()).streamInfo.state;
    const resume = this.watched > 0 ? { resumeFromRevision: this.watched + 1 } : {};
    const watcher = await this.kv.watch(resume);
    this.watcher = watcher;
    let loaded!: () => void;
    const ready = new Promise<void>((resolve) => (loaded = resolve));
    if (state.messages === 0 || this.watched >= state.last_seq) loaded();
    void (async () => {
      try {
        for await (const e of watcher) {
          this.watched = Math.max(this.watched, e.revision);
          this.applyEntry(e);
          if (e.revision >= state.last_seq) loaded();
        }
      } catch (err) {
        this.logger?.error({ err, bucket: this.bucket }, 'KV watch failed');
      }
      if (this.closed) return;
      // The client ended the watch (e.g. its consumer could not be recreated): start another.
      this.logger?.warn({ bucket: this.bucket, revision: this.watched }, 'KV watch ended; resuming');
      setTimeout(() => void this.follow().catch((err) => this.logger?.error({ err, bucket: this.bucket }, 'KV watch resume failed')), 250).unref();
    })();
    await ready;
  }
}
