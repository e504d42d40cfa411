/**
 * An in-memory mirror of one JetStream KV bucket, kept fresh by a watch, so that reads stay
 * synchronous (the hot path verifies keys and tokens without a round trip). Writes go to KV
 * and are applied to the mirror as soon as KV acknowledges them (read-your-writes); writes
 * from other nodes arrive within milliseconds (two paths, below).
 *
 * Ordering: every entry carries its KV revision (the stream sequence). The watch delivers in
 * stream order but may lag behind a local write, so an entry only replaces one with a lower
 * revision. A local delete knows the revision it replaced, not its own: it leaves a tombstone
 * at `replaced + 0.5`, above anything the watch may still deliver for the old value and below
 * the delete marker's real revision.
 *
 * Concurrency: read-modify-write goes through `mutate`, a revision-checked update retried
 * against a fresh read when another writer got there first. Nothing else writes records.
 *
 * Two delivery paths, because after a NATS server dies a watch can stay silent for many
 * seconds (its consumer is recreated only after missed heartbeats, and creating it times out
 * while placement still picks the dead server): the bucket republishes every write on a core
 * NATS subject, which fails over with the connection at once; the watch, a JetStream
 * consumer, brings whatever a core subscription missed, and a periodic check restarts it when
 * it stops moving. Both apply by revision, so each write counts once whichever path brings it
 * first.
 */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { Msg, NatsConnection, QueuedIterator, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../../log.js';
import { whileStarting } from './startup.js';

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
/** How often `current` looks whether the watch has caught up. */
const CURRENT_POLL_MS = 20;

/** See module comment. */
export class KvMirror {
  private readonly slots = new Map<string, Slot>();
  private readonly listeners: ChangeListener[] = [];
  private watcher: QueuedIterator<KvWatchEntry> | undefined;
  private republished: Subscription | undefined;
  private closed = false;
  /**
   * The watch's position: every revision up to this one is applied (the watch delivers in
   * stream order). Republished writes cannot move it: their `Nats-Last-Sequence` is per key,
   * so a lost one would not show as a gap. A restarted watch resumes after it.
   */
  private watched = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    readonly kv: KV,
    readonly bucket: string,
    private readonly opts: {
      logger?: Logger;
      /** Where the bucket republishes its writes (`<subject>.<key>`), with the connection to subscribe on. */
      republish?: { nc: NatsConnection; subject: string };
      /** How often the mirror checks that it keeps up (see checkForStalls). */
      stallCheckMs?: number;
    } = {},
  ) {}

  private get logger(): Logger | undefined {
    return this.opts.logger;
  }

  /** Starts following KV; resolves once every value the bucket held at this moment is in memory. */
  start(): Promise<void> {
    const rp = this.opts.republish;
    if (rp) {
      this.republished = rp.nc.subscribe(`${rp.subject}.>`, {
        callback: (err, msg) => {
          if (!err) this.applyRepublished(rp.subject, msg);
        },
      });
    }
    return whileStarting(`following KV bucket ${this.bucket}`, () => this.follow(), { logger: this.logger }).catch((err: unknown) => {
      this.close();
      throw err;
    });
  }

  /**
   * Resolves once the mirror has applied every revision the bucket held when it was called: after
   * an outage, what was written meanwhile (a key revoked on another node) is in memory before
   * this node answers with it again. Asks the bucket again while NATS cannot answer.
   */
  async current(): Promise<void> {
    let last: number | undefined;
    while (last === undefined) {
      if (this.closed) return;
      try {
        last = (await this.kv.status()).streamInfo.state.last_seq;
      } catch {
        await new Promise((r) => setTimeout(r, CURRENT_POLL_MS));
      }
    }
    while (this.watched < last && !this.closed) await new Promise((r) => setTimeout(r, CURRENT_POLL_MS));
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
    clearInterval(this.stallTimer);
    this.republished?.unsubscribe();
    this.watcher?.stop();
  }

  private applyEntry(e: KvEntry): void {
    this.applyJson(e.key, e.operation === 'PUT' ? e.string() : undefined, e.revision);
  }

  /** A write the bucket republished; `Nats-Sequence` is its revision. */
  private applyRepublished(subject: string, msg: Msg): void {
    const h = msg.headers;
    const revision = Number(h?.get('Nats-Sequence'));
    if (!h || !Number.isSafeInteger(revision) || !msg.subject.startsWith(`${subject}.`)) return;
    const op = h.get('KV-Operation');
    this.applyJson(msg.subject.slice(subject.length + 1), op === 'DEL' || op === 'PURGE' ? undefined : msg.string(), revision);
  }

  private applyJson(key: string, json: string | undefined, revision: number): void {
    let value: unknown;
    try {
      value = json === undefined ? undefined : JSON.parse(json);
    } catch (err) {
      // Not ours (every record is JSON): skip it rather than stop following the bucket.
      this.logger?.error({ err, bucket: this.bucket, key }, 'KV value is not JSON; ignored');
      return;
    }
    this.apply(key, value, revision);
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
   * Starts (or resumes) the watch. The first call waits until the mirror holds what the bucket
   * held when it began: the watch delivers the last value of every key in stream order, so
   * having seen the stream's last sequence means done. A resumed watch starts after the last
   * revision this mirror saw, so nothing in between is missed.
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
          this.applyEntry(e);
          this.watched = Math.max(this.watched, e.revision);
          if (e.revision >= state.last_seq) loaded();
        }
      } catch (err) {
        this.logger?.error({ err, bucket: this.bucket }, 'KV watch failed');
      }
      if (this.closed) return;
      // The watch ended (its consumer could not be recreated, or the stall check stopped it).
      this.logger?.warn({ bucket: this.bucket, revision: this.watched }, 'KV watch ended; resuming');
      this.resume(250);
    })();
    if (this.stallTimer === undefined) this.checkForStalls();
    await ready;
  }

  /** Starts the watch again after `delayMs`, retrying (up to every 2 s) while NATS cannot serve it. */
  private resume(delayMs: number): void {
    setTimeout(() => {
      if (this.closed) return;
      this.follow().catch((err: unknown) => {
        this.logger?.warn({ err, bucket: this.bucket }, 'KV watch resume failed; retrying');
        this.resume(Math.min(2000, delayMs * 2));
      });
    }, delayMs).unref();
  }

  /**
   * The mirror checks that its watch keeps up: when the stream holds revisions the watch has
   * not delivered, and it delivered nothing since the last check, the watch is stopped and
   * resumed from its position. (While republishing works the mirror is current anyway; the
   * watch is what makes it complete.)
   */
  private checkForStalls(): void {
    let behindAt: number | undefined;
    this.stallTimer = setInterval(() => {
      if (this.closed || this.checking) return;
      this.checking = true;
      this.kv
        .status()
        .then(({ streamInfo }) => {
          if (streamInfo.state.last_seq <= this.watched) behindAt = undefined;
          else if (behindAt === undefined || this.watched > behindAt) behindAt = this.watched;
          else {
            this.logger?.warn({ bucket: this.bucket, revision: this.watched, last: streamInfo.state.last_seq }, 'KV watch stalled; restarting it');
            behindAt = undefined;
            this.watcher?.stop();
          }
        })
        .catch(() => undefined) // NATS busy (e.g. electing a leader): check again next time
        .finally(() => (this.checking = false));
    }, this.opts.stallCheckMs ?? 1000);
    this.stallTimer.unref();
  }
}
