/**
 * Record kinds inside the records bucket. Every row lives under `<kind>.<id>`; the mirror
 * holds them all, and each table keeps its own index of ids by owner (what LMDB's `owners`
 * database does on a single node) from the mirror's change feed.
 */
import { AppError } from '../../domain/problems.js';
import type { Sealer } from '../crypto.js';
import type { Logger } from '../../log.js';
import type { KvMirror } from './kv-mirror.js';

/** What every NATS record module shares. */
export interface NatsStoreContext {
  mirror: KvMirror;
  sealer: Sealer;
  clock: () => number;
  /** The clock as an ISO-8601 UTC string. */
  nowIso(): string;
  logger: Logger | undefined;
  /** Keeps an un-awaited write (last use, journal) for `flushed()`, logging its failure. */
  track(write: Promise<unknown>, what: string): void;
  /** How many tracked writes have failed so far. */
  failedWrites(): number;
}

/** Ids we generate are base62 with a kind prefix; anything else cannot name a KV key and reads as unknown. */
const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Whether `id` can be part of a KV key (`kind.id`). */
export function isKeyToken(id: string): boolean {
  return ID.test(id);
}

/** Sealed bytes as stored in JSON. */
export const toBase64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

/** Bytes of a base64 string from a stored row. */
export const fromBase64 = (text: string): Buffer => Buffer.from(text, 'base64');

/** One owned record kind: rows under `<kind>.<id>` with an in-memory index by owner. */
export class OwnedTable<R extends { id: string; userId: string }> {
  private readonly byOwner = new Map<string, Set<string>>();
  private readonly prefix: string;

  constructor(
    private readonly mirror: KvMirror,
    readonly kind: string,
  ) {
    this.prefix = `${kind}.`;
    mirror.onChange((key, value, previous) => {
      if (!key.startsWith(this.prefix)) return;
      const id = key.slice(this.prefix.length);
      const before = (previous as R | undefined)?.userId;
      const after = (value as R | undefined)?.userId;
      if (before !== undefined && before !== after) this.byOwner.get(before)?.delete(id);
      if (after !== undefined) {
        let ids = this.byOwner.get(after);
        if (!ids) this.byOwner.set(after, (ids = new Set()));
        ids.add(id);
      }
    });
  }

  /** The row with this id, if any. */
  row = (id: string): R | undefined => (isKeyToken(id) ? this.mirror.get<R>(this.prefix + id) : undefined);

  /** Ids of one user's rows (unordered). */
  idsOf = (userId: string): Iterable<string> => this.byOwner.get(userId) ?? [];

  /** Every row of this kind. */
  all(): R[] {
    return this.mirror.values<R>(this.prefix);
  }

  /** Stores a new row; CONFLICT when its id exists (a 72-bit collision: retry). */
  async create(row: R): Promise<void> {
    if (!(await this.mirror.create(this.prefix + row.id, row))) throw new AppError('CONFLICT', `${this.kind} id collision, retry`);
  }

  /**
   * Replaces a row through `change` (revision-checked, retried on a concurrent write). Only a
   * row `owner` owns is changed (any row when owner is undefined); `change` returning undefined
   * leaves it as it is. Resolves with the new row, or undefined when nothing was written.
   */
  update(id: string, owner: string | undefined, change: (r: R) => R | undefined): Promise<R | undefined> {
    if (!isKeyToken(id)) return Promise.resolve(undefined);
    return this.mirror.mutate(this.prefix + id, (current) => {
      const r = current as R | undefined;
      const next = r && (owner === undefined || r.userId === owner) ? change(r) : undefined;
      return { next, result: next };
    });
  }

  /** Deletes a row `userId` owns; false when unknown or not theirs. */
  remove(userId: string, id: string): Promise<boolean> {
    if (!isKeyToken(id)) return Promise.resolve(false);
    return this.mirror.mutate(this.prefix + id, (current) => {
      const mine = (current as R | undefined)?.userId === userId;
      return { next: mine ? null : undefined, result: mine };
    });
  }
}

/** Last-use times (`lastUsed.<kind>.<id>` → ms), kept apart so a touch never rewrites a record. */
export class LastUsed {
  constructor(
    private readonly ctx: NatsStoreContext,
    private readonly kind: string,
  ) {}

  /** The last recorded use of `id` (ms), if any. */
  of(id: string): number | undefined {
    return this.ctx.mirror.get<number>(`lastUsed.${this.kind}.${id}`);
  }

  /** Records a use (best effort, not awaited; see `touchThrottle` for how often). */
  record(id: string, now: number): void {
    if (isKeyToken(id)) this.ctx.track(this.ctx.mirror.put(`lastUsed.${this.kind}.${id}`, now), `recording ${this.kind} use`);
  }

  /** Forgets the use of a deleted record (best effort). */
  forget(id: string): void {
    if (!isKeyToken(id)) return;
    this.ctx.track(
      this.ctx.mirror.mutate(`lastUsed.${this.kind}.${id}`, () => ({ next: null, result: undefined })),
      `forgetting ${this.kind} use`,
    );
  }
}
