/**
 * Append-only journal of trading actions (what was asked, what came of it), for audit and
 * support. Appends are fire-and-forget: the order path never waits on the journal.
 *
 * Appends are written in batches, one transaction per JOURNAL_BATCH_MS: a transaction costs
 * the front ~0.2–0.6 ms of CPU whatever it holds, so one per order was most of an order's cost.
 * Reads, `flushed()` and close drain the batch first; a crash may lose the last batch, as it
 * could lose an unflushed append before.
 */
import type { Database } from 'lmdb';
import type { StoreContext } from './context.js';
import { randomBase62 } from './crypto.js';
import { JOURNAL } from '../tuning.js';
import { AppError } from '../domain/problems.js';

/** Longest an appended entry waits to be written. */
export const JOURNAL_BATCH_MS = 50;

export interface JournalEntry {
  /** ms since the epoch. */
  ts: number;
  userId: string;
  accountId: string | null;
  /** e.g. `place-order`, `cancel-order`, `flatten`, `webhook`. */
  kind: string;
  /** The request as received (secrets must already be removed by the caller). */
  request: unknown;
  /** Result summary or error data. */
  outcome: unknown;
  /** The object the entry is about, when it is listed per object (e.g. `webhookToken:<id>`). */
  ref?: string;
}

export interface JournalStore {
  /** Queues an entry (not awaited); `ts` defaults to the store clock. */
  append(entry: Omit<JournalEntry, 'ts'> & { ts?: number }): void;
  /** Newest first, optionally only one user's entries (async: the cluster journal is a JetStream stream). */
  list(opts: { userId?: string; limit: number }): Promise<JournalEntry[]>;
  /**
   * Newest first, the entries appended with this `ref` that belong to `userId` (every user's
   * without one: the start-up's own reads, never a route's), each with its `position`; with
   * `before` (a position an earlier call returned), only the entries older than it. A `before`
   * that is no position of this store is a 400 VALIDATION_FAILED naming `cursor`. With `since`
   * (ms), only entries appended at or after it (the start-up's reads: the cluster's stream is
   * then read from that time, not whole).
   */
  listByRef(opts: { userId: string | undefined; ref: string; limit: number; before?: string; since?: number }): Promise<PositionedEntry[]>;
}

/** A journal entry with where it stands in the journal: an opaque, store-specific text. */
export type PositionedEntry = JournalEntry & { position: string };

/** A `before` that no list of this store returned: the route's cursor was not one of its own. */
export function invalidPosition(): AppError {
  return new AppError('VALIDATION_FAILED', 'query.cursor: not a cursor returned by this list', { errors: [{ path: 'query.cursor', message: 'not a cursor returned by this list' }] });
}

/** The LMDB journal also writes out its batch on demand (store flush and close). */
export interface BatchedJournalStore extends JournalStore {
  /** Writes the queued entries now; resolves once they are committed. */
  drain(): Promise<void>;
  /**
   * Deletes entries past the retention, then each user's oldest past the per-user cap (JOURNAL in
   * tuning.ts), at most `batch` in all; resolves with how many went.
   */
  sweep(opts?: { now?: number; retentionMs?: number; maxPerUser?: number; batch?: number }): Promise<number>;
}

/** The journal over a shared context. */
export function createJournalStore(ctx: StoreContext): BatchedJournalStore {
  const { journal, journalByUser, journalByRef } = ctx.dbs;
  // Key = [ts, writer, seq]: ordered by time, unique across processes (each opened store is
  // its own writer) without a shared counter, and increasing within one writer even if the
  // wall clock steps back.
  const writer = randomBase62(8);
  let seq = 0;
  let lastTs = 0;
  let queued: [number, number, JournalEntry][] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();

  function drain(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    const batch = queued;
    queued = [];
    if (batch.length > 0) {
      // Issued in one turn: lmdb-js commits them in one transaction.
      const puts = batch.flatMap(([ts, n, rec]) => {
        const writes = [journal.put([ts, writer, n], rec), journalByUser.put([rec.userId, ts, writer, n], true)];
        if (rec.ref !== undefined) writes.push(journalByRef.put([rec.ref, ts, writer, n], true));
        return writes;
      });
      writing = Promise.all(puts).then(
        () => undefined,
        (err: unknown) => ctx.logger?.error({ err, entries: batch.length }, 'journal append failed'),
      );
    }
    return writing;
  }

  /**
   * Newest first, through an index keyed [prefix, ts, writer, seq]; below `before` ([ts, writer,
   * seq], the position `ts.writer.seq` of an entry listed before) when given.
   */
  function newest(
    index: Database<true, [string, number, string, number]>,
    prefix: string,
    limit: number,
    keep: (rec: JournalEntry) => boolean,
    before?: [number, string, number],
    since?: number,
  ): PositionedEntry[] {
    const out: PositionedEntry[] = [];
    if (limit <= 0) return out;
    // Reverse range: start is the upper bound (inclusive), end the lower (exclusive: every
    // [prefix, since, …] key sorts above [prefix, since]). Numbers sort before strings, so
    // [prefix, '\uffff'] is above every [prefix, ts, ...] key.
    const start = before ? [prefix, ...before] : [prefix, '\uffff'];
    const end = since === undefined ? [prefix] : [prefix, since];
    for (const key of index.getKeys({ start: start as never, end: end as never, reverse: true })) {
      const [p, ts, w, s] = key as [string, number, string, number];
      if (p !== prefix || (before && ts === before[0] && w === before[1] && s === before[2])) continue;
      const rec = journal.get([ts, w, s]) as JournalEntry | undefined;
      if (rec && keep(rec)) out.push(Object.assign({}, rec, { position: `${ts}.${w}.${s}` }));
      if (out.length >= limit) break;
    }
    return out;
  }

  /** [ts, writer, seq] of a position `newest` gave out. */
  function positionKey(position: string): [number, string, number] {
    const m = /^(\d{1,15})\.([0-9A-Za-z]{1,16})\.(\d{1,15})$/.exec(position);
    if (!m) throw invalidPosition();
    return [Number(m[1]), m[2]!, Number(m[3])];
  }

  /** Users journaled for since the last sweep. */
  const grown = new Set<string>();
  let swept = false;

  async function sweep(opts: { now?: number; retentionMs?: number; maxPerUser?: number; batch?: number } = {}): Promise<number> {
    await drain();
    const now = opts.now ?? ctx.clock();
    const maxPerUser = opts.maxPerUser ?? JOURNAL.maxEntriesPerUser;
    let budget = opts.batch ?? JOURNAL.sweepBatch;
    const doomed: [number, string, number][] = [];
    // Keys start with the time: the oldest come first.
    for (const key of journal.getKeys({ end: [now - (opts.retentionMs ?? JOURNAL.retentionMs)] as never, limit: budget })) doomed.push(key as [number, string, number]);
    budget -= doomed.length;
    const seen = new Set(doomed.map(([ts, w, n]) => `${ts} ${w} ${n}`));
    // Every user on the first sweep; then those this process journaled for since (a count is a scan).
    const users: Iterable<string> = swept ? [...grown] : (ctx.dbs.users.getKeys({}) as Iterable<string>);
    swept = true;
    grown.clear();
    for (const userId of users) {
      if (budget <= 0) break;
      // A fresh range object each call: lmdb-js keeps state on the options it is given.
      const range = () => ({ start: [userId] as never, end: [userId, '\uffff'] as never });
      const over = journalByUser.getKeysCount(range()) - maxPerUser;
      if (over <= 0) continue;
      if (over > budget) grown.add(userId); // the rest next time
      for (const key of journalByUser.getKeys({ ...range(), limit: Math.min(over, budget) })) {
        const [, ts, w, n] = key as [string, number, string, number];
        if (seen.has(`${ts} ${w} ${n}`)) continue;
        doomed.push([ts, w, n]);
        budget -= 1;
      }
    }
    if (doomed.length === 0) return 0;
    await journal.transaction(() => {
      for (const key of doomed) {
        const rec = journal.get(key) as JournalEntry | undefined;
        journal.remove(key);
        if (!rec) continue;
        journalByUser.remove([rec.userId, ...key]);
        if (rec.ref !== undefined) journalByRef.remove([rec.ref, ...key]);
      }
    });
    return doomed.length;
  }

  return {
    drain,
    sweep,

    append(entry) {
      const ts = Math.max(entry.ts ?? ctx.clock(), lastTs);
      lastTs = ts;
      seq += 1;
      const rec: JournalEntry = {
        ts,
        userId: entry.userId,
        accountId: entry.accountId,
        kind: entry.kind,
        request: entry.request,
        outcome: entry.outcome,
        ...(entry.ref !== undefined ? { ref: entry.ref } : {}),
      };
      queued.push([ts, seq, rec]);
      grown.add(rec.userId);
      if (!timer) {
        timer = setTimeout(() => void drain(), JOURNAL_BATCH_MS);
        timer.unref();
      }
    },

    async list({ userId, limit }) {
      await drain();
      const out: JournalEntry[] = [];
      if (limit <= 0) return out;
      if (userId === undefined) {
        for (const { value } of journal.getRange({ reverse: true, limit })) out.push(value as JournalEntry);
        return out;
      }
      return newest(journalByUser, userId, limit, () => true);
    },

    async listByRef({ userId, ref, limit, before, since }) {
      const below = before === undefined ? undefined : positionKey(before);
      await drain();
      return newest(journalByRef, ref, limit, (rec) => userId === undefined || rec.userId === userId, below, since);
    },
  };
}
