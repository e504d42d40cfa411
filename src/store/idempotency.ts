/**
 * Finished idempotent responses, keyed by sha256 of (scope, Idempotency-Key) so raw keys are
 * never stored. On one node in-flight markers are not kept here: the front thread owns those
 * in memory (DESIGN §3); the cluster store keeps them in KV (`claim`). Records live 24 h; LMDB has no TTL, so reads ignore expired records and a
 * sweeper deletes them through a createdAt index.
 */
import type { StoreContext } from './context.js';
import { IDEMPOTENCY_TTL_MS } from '../tuning.js';
import { sha256Hex } from './crypto.js';

/** Largest number of expired records one sweep deletes (keeps each write transaction short). */
const SWEEP_BATCH = 5000;

/** A stored response, replayed byte-for-byte for a retry with the same key and fingerprint. */
export interface IdempotencyRecord {
  /** sha256 of method, path and canonical body. */
  fingerprint: string;
  status: number;
  headers: Record<string, string>;
  body: string;
  /** ms since the epoch, by the store's clock. */
  createdAt: number;
}

/** The answer to store when a claimed request finished. */
export type IdempotentAnswer = Pick<IdempotencyRecord, 'status' | 'headers' | 'body'>;

/** Held by the one request (cluster-wide) allowed to run for a key; finish it exactly once. */
export interface IdempotencyClaim {
  /** Stores the answer in place of the marker; false when the marker was taken over meanwhile (nothing stored). */
  commit(answer: IdempotentAnswer): Promise<boolean>;
  /** Frees the key without storing anything. */
  release(): Promise<void>;
}

/** What `claim` found. The gate decides replay vs 422 by comparing fingerprints of a `done` record. */
export type ClaimOutcome = { kind: 'claimed'; claim: IdempotencyClaim } | { kind: 'done'; record: IdempotencyRecord } | { kind: 'in-flight' };

export interface IdempotencyStore {
  /**
   * The live record for (scope, key); expired records read as absent. LMDB answers
   * synchronously; the cluster store asks KV (records are not mirrored in memory).
   */
  get(scope: string, key: string): IdempotencyRecord | undefined | Promise<IdempotencyRecord | undefined>;
  /** Stores a finished response; resolves only once it is flushed to disk. */
  put(scope: string, key: string, rec: Omit<IdempotencyRecord, 'createdAt'> & { createdAt?: number }): Promise<void>;
  /** Schedules deletion of records expired at `now`; returns how many were found. */
  sweep(now?: number): number;
  /** Runs `sweep` every `intervalMs` (timer unref'd); returns the stop function. */
  startSweeper(intervalMs: number): () => void;
  /**
   * Claims (scope, key) for one request cluster-wide, or says what holds it. Only the cluster
   * store has it (its in-flight marker is a KV record); on one node the gate keeps the marker
   * in memory.
   */
  claim?(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome>;
}

/** The storage key: sha256 over an unambiguous encoding of (scope, key). */
export function idempotencyHash(scope: string, key: string): string {
  return sha256Hex(JSON.stringify([scope, key]));
}

interface QueuedPut {
  hash: string;
  stored: IdempotencyRecord;
  done(err?: unknown): void;
}

/** The idempotency store over a shared context. */
export function createIdempotencyStore(ctx: StoreContext): IdempotencyStore {
  const { idempotency, idempotencyByTime } = ctx.dbs;
  const expired = (rec: IdempotencyRecord, now: number): boolean => now - rec.createdAt > IDEMPOTENCY_TTL_MS;

  // Group commit. A durable transaction costs ~0.2–0.6 ms of CPU and an fsync whatever it
  // holds; one per request was most of an idempotent order's cost. Records wait while the
  // previous transaction is being committed and flushed, then all of them go in the next one
  // together; a lone record is written at once (no fixed delay). Each caller still resolves
  // only after its own record is committed and flushed: stored before the answer is sent.
  let queue: QueuedPut[] = [];
  let running = false;

  async function commitAll(): Promise<void> {
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      try {
        // Issued in one turn: lmdb-js puts them in one transaction.
        await ctx.durable(Promise.all(batch.flatMap((q) => [idempotencyByTime.put([q.stored.createdAt, q.hash], true), idempotency.put(q.hash, q.stored)])));
        for (const q of batch) q.done();
      } catch (err) {
        for (const q of batch) q.done(err);
      }
    }
    running = false;
  }

  function sweep(now = ctx.clock()): number {
    const found: [number, string][] = [];
    for (const key of idempotencyByTime.getKeys({ end: [now - IDEMPOTENCY_TTL_MS, ''], limit: SWEEP_BATCH })) {
      found.push(key as [number, string]);
    }
    if (found.length === 0) return 0;
    // Deletion re-reads each record inside the write transaction: a retry may have stored a
    // fresh record under the same hash since the scan, and that one must survive.
    idempotency
      .transaction(() => {
        for (const [createdAt, hash] of found) {
          idempotencyByTime.remove([createdAt, hash]);
          const rec = idempotency.get(hash) as IdempotencyRecord | undefined;
          if (rec && rec.createdAt === createdAt && expired(rec, now)) idempotency.remove(hash);
        }
      })
      .catch((err: unknown) => ctx.logger?.error({ err }, 'idempotency sweep failed'));
    return found.length;
  }

  return {
    get(scope, key) {
      const rec = idempotency.get(idempotencyHash(scope, key)) as IdempotencyRecord | undefined;
      return rec && !expired(rec, ctx.clock()) ? rec : undefined;
    },

    async put(scope, key, rec) {
      const hash = idempotencyHash(scope, key);
      const createdAt = rec.createdAt ?? ctx.clock();
      const stored: IdempotencyRecord = {
        fingerprint: rec.fingerprint,
        status: rec.status,
        headers: { ...rec.headers },
        body: rec.body,
        createdAt,
      };
      // The client sees this response only after the flush, so every response it has seen
      // can be replayed.
      await new Promise<void>((resolve, reject) => {
        queue.push({ hash, stored, done: (err) => (err === undefined ? resolve() : reject(err)) });
        if (!running) {
          running = true;
          // Records arriving in this turn join the first transaction.
          setImmediate(() => void commitAll());
        }
      });
    },

    sweep,

    startSweeper(intervalMs) {
      const timer = setInterval(() => {
        try {
          sweep(ctx.clock());
        } catch (err) {
          ctx.logger?.error({ err }, 'idempotency sweep failed');
        }
      }, intervalMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
