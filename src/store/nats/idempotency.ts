/**
 * Idempotency on NATS KV (DESIGN §15): one bucket whose `ttl` (stream max_age) is 24 h, so
 * the server itself drops records a day after their last write. nats-server 2.9 has no
 * per-message TTL: a `Nats-TTL` header is accepted and silently ignored there, so no lifetime
 * may depend on one. Keys are sha256 of (scope, key), never the raw key.
 *
 * Across nodes the in-flight marker is the record itself: `claim` is a KV create, which
 * exactly one caller wins; `commit` turns the marker into the stored answer with a
 * revision-checked update, so an answer is only stored by the claim that still holds the key.
 * A marker carries an expiry: when its node dies mid-request the key is taken over (also
 * revision-checked) once the marker has expired, or `deadHolderHoldMs` after the node may have
 * stopped, and the retry reconciles by clOrdId.
 * Records are not mirrored in memory (a day of responses is too much for every node); each
 * `get` or `claim` is one KV round trip.
 */
import type { KV } from '@nats-io/kv';
import { AppError } from '../../domain/problems.js';
import { randomBase62 } from '../crypto.js';
import { IDEMPOTENCY_TTL_MS } from '../../tuning.js';
import {
  idempotencyHash,
  type ClaimOutcome,
  type IdempotencyRecord,
  type IdempotencyStore,
  type IdempotentAnswer,
} from '../idempotency.js';

export type { ClaimOutcome, IdempotencyClaim, IdempotentAnswer } from '../idempotency.js';
import type { Logger } from '../../log.js';
import { isWrongRevision } from './kv-mirror.js';

/**
 * How long an in-flight marker protects its key unless renewed: its node renews it while the
 * request runs (claimed), so this only bounds how long a dead node's keys stay taken.
 */
export const IN_FLIGHT_LEASE_MS = 30_000;

type Stored = ({ state: 'in-flight'; holder: string; expiresAt: number } | ({ state: 'done' } & Omit<IdempotencyRecord, 'fingerprint'>)) & {
  fingerprint: string;
};

/** The store's idempotency interface plus the cluster-wide in-flight marker. */
export interface NatsIdempotencyStore extends IdempotencyStore {
  get(scope: string, key: string): Promise<IdempotencyRecord | undefined>;
  /** Claims (scope, key) for one request cluster-wide, or says what holds it. */
  claim(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome>;
}

const CLAIM_ATTEMPTS = 10;

/** A finished answer as the bucket stores it (also what `cluster import` writes). */
export function doneValue(fingerprint: string, answer: IdempotentAnswer, createdAt: number): string {
  return JSON.stringify({ state: 'done', fingerprint, status: answer.status, headers: { ...answer.headers }, body: answer.body, createdAt } satisfies Stored);
}

/** Idempotency over a KV bucket created with a 24 h `ttl`. */
export function createNatsIdempotencyStore(
  kv: KV,
  opts: {
    clock: () => number;
    logger: Logger | undefined;
    leaseMs?: number;
    /** Names this node in its markers. */
    holder?: string;
    /**
     * Whether the node named in a marker still runs (cluster mode: its node lease). The marker of
     * a node that stopped is taken over on `deadHolderHoldMs`' terms, not its expiry: the retry
     * then reconciles by clOrdId (an actor still placing that clOrdId makes the retry wait for that attempt).
     */
    holderAlive?: (holder: string) => boolean;
    /**
     * How long the marker of a node that stopped (its lease ended) still holds its key, counted
     * from the latest moment it may have stopped (its last renewal and a third of a lease): 0, at
     * once. A node that only hangs (SIGSTOP, a VM pause) has its request on its broker socket,
     * which a slow broker may still carry out: taken over at once, the retry found nothing at the
     * broker, placed the order again, and both filled (cluster re-probe). Cluster mode gives it
     * CLUSTER.ownerChangeHoldMs, as a request forwarded to such a node holds its key.
     */
    deadHolderHoldMs?: number;
  },
): NatsIdempotencyStore {
  const { clock, logger } = opts;
  const leaseMs = opts.leaseMs ?? IN_FLIGHT_LEASE_MS;
  /** Names the node in its markers (diagnostics only). */
  const holder = opts.holder ?? randomBase62(8);
  const expired = (rec: { createdAt: number }): boolean => clock() - rec.createdAt > IDEMPOTENCY_TTL_MS;
  const record = ({ fingerprint, status, headers, body, createdAt }: Stored & { state: 'done' }): IdempotencyRecord => ({
    fingerprint,
    status,
    headers,
    body,
    createdAt,
  });

  /**
   * The claim of a marker at `revision`. While it is held the marker is renewed every third of the
   * lease, so a request that runs past the lease keeps its key on every node: a flatten or a
   * webhook close answered 504 goes on, and holds the key until its outcome is stored (a retry
   * sent to another node after 30 s ran it a second time). Renewals, the commit and the release
   * run one after another, each with the revision the one before left.
   */
  function claimed(hash: string, revision: number, fingerprint: string): ClaimOutcome {
    let finished = false;
    let last: Promise<unknown> = Promise.resolve();
    const inTurn = <T>(op: () => Promise<T>): Promise<T> => {
      const run = last.then(op, op);
      last = run.catch(() => undefined);
      return run;
    };
    const renew = (): void => {
      void inTurn(async () => {
        if (finished) return;
        try {
          revision = await kv.update(hash, marker(fingerprint), revision);
        } catch (err) {
          // Taken over (this node was thought dead): the commit finds that out. KV unreachable: tried again.
          if (isWrongRevision(err) && !(await adoptOwn())) return;
          logger?.warn({ err, key: hash }, 'renewing an idempotency marker failed');
        }
        if (!finished) timer = setTimeout(renew, leaseMs / 3).unref();
      });
    };
    /**
     * After a wrong revision: true (and its revision taken) when the marker is still this claim's,
     * an update that timed out here having been applied after all (cluster probe: the renewals would
     * stop, and the commit would drop the answer as "taken over").
     */
    const adoptOwn = async (): Promise<boolean> => {
      const e = await kv.get(hash).catch(() => null);
      const v = e?.operation === 'PUT' ? e.json<Stored>() : undefined;
      if (v?.state !== 'in-flight' || v.holder !== holder || v.fingerprint !== fingerprint) return false;
      revision = e!.revision;
      return true;
    };
    let timer = setTimeout(renew, leaseMs / 3).unref();
    const finish = (): void => {
      if (finished) throw new Error('idempotency claim already finished');
      finished = true;
      clearTimeout(timer);
    };
    return {
      kind: 'claimed',
      claim: {
        async commit(answer) {
          finish();
          return inTurn(async () => {
            try {
              try {
                await kv.update(hash, doneValue(fingerprint, answer, clock()), revision);
              } catch (err) {
                if (!isWrongRevision(err) || !(await adoptOwn())) throw err;
                await kv.update(hash, doneValue(fingerprint, answer, clock()), revision);
              }
              return true;
            } catch (err) {
              if (!isWrongRevision(err)) {
                // Free the key if KV takes that much (a retry then reconciles by clOrdId at once);
                // otherwise the marker runs out by itself.
                await kv.delete(hash, { previousSeq: revision }).catch(() => undefined);
                throw unavailable(err);
              }
              logger?.warn({ key: hash }, 'idempotency marker was taken over before the answer was stored');
              return false;
            }
          });
        },
        async release() {
          finish();
          // Revision-checked: never deletes a marker or record that another claim wrote since.
          return inTurn(() =>
            kv.delete(hash, { previousSeq: revision }).then(
              () => undefined,
              (err: unknown) => {
                if (!isWrongRevision(err)) logger?.warn({ err, key: hash }, 'releasing an idempotency key failed');
              },
            ),
          );
        },
      },
    };
  }

  /** An in-flight marker of this node, in force for one lease from now. */
  function marker(fingerprint: string): string {
    return JSON.stringify({ state: 'in-flight', fingerprint, holder, expiresAt: clock() + leaseMs } satisfies Stored);
  }

  /**
   * Whether an in-flight marker still holds its key: until it expires while its node runs; once
   * its node stopped, until `deadHolderHoldMs` past the latest moment it may have stopped renewing.
   */
  function holds(v: { holder: string; expiresAt: number }): boolean {
    const now = clock();
    if (opts.holderAlive?.(v.holder) ?? true) return v.expiresAt >= now;
    const hold = opts.deadHolderHoldMs ?? 0;
    return hold > 0 && now <= v.expiresAt - leaseMs + leaseMs / 3 + hold;
  }

  return {
    async get(scope, key) {
      const e = await kv.get(idempotencyHash(scope, key)).catch((err: unknown) => Promise.reject(unavailable(err)));
      if (!e || e.operation !== 'PUT') return undefined;
      const v = e.json<Stored>();
      return v.state === 'done' && !expired(v) ? record(v) : undefined;
    },

    async put(scope, key, rec) {
      await kv.put(idempotencyHash(scope, key), doneValue(rec.fingerprint, rec, rec.createdAt ?? clock()));
    },

    claim: (scope, key, fingerprint) => claim(scope, key, fingerprint).catch((err: unknown) => Promise.reject(unavailable(err))),

    // The bucket's max_age expires records server-side; reads ignore older ones by the clock.
    sweep: () => 0,
    startSweeper: () => () => undefined,
  };

  async function claim(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome> {
    const hash = idempotencyHash(scope, key);
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      try {
        return claimed(hash, await kv.create(hash, marker(fingerprint)), fingerprint);
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
      }
      const e = await kv.get(hash);
      // Released or expired between our create and this read: create again.
      if (!e || e.operation !== 'PUT') continue;
      const v = e.json<Stored>();
      if (v.state === 'done' && !expired(v)) return { kind: 'done', record: record(v) };
      // Like the 24 h rule: expired only once strictly past its time.
      if (v.state === 'in-flight' && holds(v)) return { kind: 'in-flight' };
      // A marker whose node died, or a record older than 24 h by our clock: take it over,
      // unless another node does so first (then the next round sees its marker).
      try {
        return claimed(hash, await kv.update(hash, marker(fingerprint), e.revision), fingerprint);
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
      }
    }
    // Ten rounds of losing races: someone is working on this key right now.
    return { kind: 'in-flight' };
  }
}

/** A failed KV call, as the client sees it: 503 with Retry-After (never an unguarded request). */
function unavailable(err: unknown): unknown {
  if (err instanceof AppError) return err;
  return new AppError('CLUSTER_UNAVAILABLE', `idempotency store: ${err instanceof Error ? err.message : String(err)}`, {}, 1);
}
