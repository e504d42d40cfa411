/**
 * Append-only journal of trading actions (what was asked, what came of it), for audit and
 * support. Appends are fire-and-forget: the order path never waits on the journal.
 */
import type { Database } from 'lmdb';
import type { StoreContext } from './context.js';
import { randomBase62 } from './crypto.js';

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
  /** Newest first, the entries appended with this `ref` that belong to `userId`. */
  listByRef(opts: { userId: string; ref: string; limit: number }): Promise<JournalEntry[]>;
}

/** The journal over a shared context. */
export function createJournalStore(ctx: StoreContext): JournalStore {
  const { journal, journalByUser, journalByRef } = ctx.dbs;
  // Key = [ts, writer, seq]: ordered by time, unique across processes (each opened store is
  // its own writer) without a shared counter, and increasing within one writer even if the
  // wall clock steps back.
  const writer = randomBase62(8);
  let seq = 0;
  let lastTs = 0;

  /** Newest first, through an index keyed [prefix, ts, writer, seq]. */
  function newest(index: Database<true, [string, number, string, number]>, prefix: string, limit: number, keep: (rec: JournalEntry) => boolean): JournalEntry[] {
    const out: JournalEntry[] = [];
    if (limit <= 0) return out;
    // Reverse range: start is the upper bound. Numbers sort before strings, so
    // [prefix, '\uffff'] is above every [prefix, ts, ...] key.
    for (const key of index.getKeys({ start: [prefix, '\uffff'] as never, end: [prefix] as never, reverse: true })) {
      const [p, ts, w, s] = key as [string, number, string, number];
      if (p !== prefix) continue;
      const rec = journal.get([ts, w, s]) as JournalEntry | undefined;
      if (rec && keep(rec)) out.push(rec);
      if (out.length >= limit) break;
    }
    return out;
  }

  return {
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
      const writes = [journal.put([ts, writer, seq], rec), journalByUser.put([entry.userId, ts, writer, seq], true)];
      if (entry.ref !== undefined) writes.push(journalByRef.put([entry.ref, ts, writer, seq], true));
      const done = Promise.all(writes);
      done.catch((err: unknown) => ctx.logger?.error({ err, kind: entry.kind }, 'journal append failed'));
    },

    async list({ userId, limit }) {
      const out: JournalEntry[] = [];
      if (limit <= 0) return out;
      if (userId === undefined) {
        for (const { value } of journal.getRange({ reverse: true, limit })) out.push(value as JournalEntry);
        return out;
      }
      return newest(journalByUser, userId, limit, () => true);
    },

    async listByRef({ userId, ref, limit }) {
      return newest(journalByRef, ref, limit, (rec) => rec.userId === userId);
    },
  };
}
