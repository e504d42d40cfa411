/**
 * The journal in cluster mode: a JetStream stream, one subject per user
 * (`<prefix>.journal.<user>`), so every node appends to one ordered, replicated log. Appends
 * are fire-and-forget like on LMDB (the order path never waits); `list` reads the stream,
 * which is an audit read, not a hot path: a user's entries are found by the server's subject
 * filter and read front to back (nats-server 2.9 cannot read a subject backwards).
 */
import { randomBytes } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { invalidPosition, type JournalEntry, type JournalStore, type PositionedEntry } from '../journal.js';
import { isKeyToken } from './tables.js';

/** How long one read of the stream may wait for the messages it was told exist. */
const READ_TIMEOUT_MS = 5000;
/**
 * How long an append is tried again while NATS cannot take it (a server restarting): within the
 * stream's duplicate window (2 min), so an append whose first try was stored after all is stored
 * once (its msgID). Before, one failed try lost the entry: an alert that traded had no entry of
 * its own after a NATS restart (cluster probe).
 */
const APPEND_RETRY_MS = 60_000;
const APPEND_RETRY_MAX_WAIT_MS = 5_000;

/** The journal over `stream`, whose subjects are `<subjectPrefix>.<user>`. */
export function createNatsJournal(
  js: JetStreamClient,
  jsm: JetStreamManager,
  opts: { stream: string; subjectPrefix: string; clock: () => number; track: (write: Promise<unknown>, what: string) => void },
): JournalStore & { stopRetries(): void } {
  // User ids are `usr_<base62>`; anything else is hex-encoded so it stays one subject token.
  const subjectOf = (userId: string): string =>
    `${opts.subjectPrefix}.${isKeyToken(userId) ? userId : `x${Buffer.from(userId, 'utf8').toString('hex')}`}`;
  let lastTs = 0;
  /** This writer's appends are `<writer>-<n>` (JetStream's Nats-Msg-Id: a try stored twice is stored once). */
  const writer = randomBytes(6).toString('hex');
  let appended = 0;
  let stopped = false;

  async function publish(subject: string, data: string, msgID: string): Promise<void> {
    const deadline = Date.now() + APPEND_RETRY_MS;
    for (let wait = 250; ; wait = Math.min(wait * 2, APPEND_RETRY_MAX_WAIT_MS)) {
      try {
        await js.publish(subject, data, { msgID });
        return;
      } catch (err) {
        if (stopped || Date.now() + wait > deadline) throw err;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /** Reads `count` messages (of `subject`, or of the stream from `startSeq`). */
  async function read(count: number, filter: { subject: string } | { startSeq: number }): Promise<PositionedEntry[]> {
    const consumer = await js.consumers.get(
      opts.stream,
      'subject' in filter ? { filter_subjects: filter.subject } : { opt_start_seq: filter.startSeq },
    );
    const out: PositionedEntry[] = [];
    while (out.length < count) {
      const batch = await consumer.fetch({ max_messages: count - out.length, expires: READ_TIMEOUT_MS });
      let got = 0;
      for await (const m of batch) {
        // The stream's sequence is the entry's position.
        out.push(Object.assign(m.json<JournalEntry>(), { position: String(m.seq) }));
        got++;
      }
      if (got === 0) break;
    }
    return out;
  }

  /** Newest first, `limit` of one user's entries (all of them when limit is Infinity). */
  async function ofUser(userId: string, limit: number): Promise<PositionedEntry[]> {
    const subject = subjectOf(userId);
    const { state } = await jsm.streams.info(opts.stream, { subjects_filter: subject });
    const count = state.subjects?.[subject] ?? 0;
    return count === 0 ? [] : (await read(count, { subject })).slice(-limit).reverse();
  }

  /** Every entry of the stream, newest first; with `since` (ms), those appended at or after it. */
  async function all(since?: number): Promise<PositionedEntry[]> {
    const { state } = await jsm.streams.info(opts.stream);
    if (state.messages === 0) return [];
    if (since === undefined) return (await read(state.messages, { startSeq: state.first_seq })).reverse();
    // The stream read from that time up to its last message as of now (how many is not known
    // beforehand: the read stops at that message rather than waiting out a fetch for more).
    const consumer = await js.consumers.get(opts.stream, { opt_start_time: new Date(since).toISOString() });
    const out: PositionedEntry[] = [];
    for (let last = 0; last < state.last_seq; ) {
      const batch = await consumer.fetch({ max_messages: 1000, expires: READ_TIMEOUT_MS });
      let got = 0;
      for await (const m of batch) {
        out.push(Object.assign(m.json<JournalEntry>(), { position: String(m.seq) }));
        got++;
        last = m.seq;
        if (last >= state.last_seq) break;
      }
      if (got === 0) break;
    }
    return out.reverse();
  }

  return {
    stopRetries() {
      stopped = true;
    },
    append(entry) {
      // Like the LMDB journal: a clock stepping back never reorders one writer's entries.
      const ts = Math.max(entry.ts ?? opts.clock(), lastTs);
      lastTs = ts;
      const rec: JournalEntry = { ts, userId: entry.userId, accountId: entry.accountId, kind: entry.kind, request: entry.request, outcome: entry.outcome };
      if (entry.ref !== undefined) rec.ref = entry.ref;
      opts.track(publish(subjectOf(entry.userId), JSON.stringify(rec), `${writer}-${++appended}`), `journal append (${entry.kind})`);
    },

    async list({ userId, limit }) {
      if (limit <= 0) return [];
      if (userId === undefined) {
        const { state } = await jsm.streams.info(opts.stream);
        const count = Math.min(limit, state.messages);
        return count === 0 ? [] : (await read(count, { startSeq: state.last_seq - count + 1 })).reverse();
      }
      return ofUser(userId, limit);
    },

    // The user's subject is read whole and filtered here: nats-server 2.9 filters a consumer
    // by one subject only, so a per-object subject could not also be read as the user's.
    async listByRef({ userId, ref, limit, before, since }) {
      if (before !== undefined && !/^\d{1,15}$/.test(before)) throw invalidPosition();
      if (limit <= 0) return [];
      const below = before === undefined ? Infinity : Number(before);
      const entries = userId === undefined ? await all(since) : await ofUser(userId, Infinity);
      return entries.filter((e) => e.ref === ref && Number(e.position) < below && (since === undefined || e.ts >= since)).slice(0, limit);
    },
  };
}
