/**
 * Idempotency (DESIGN §3): key validation, request fingerprints over canonical JSON, and the
 * gate that decides between running the handler, replaying a stored answer, 409 (in flight)
 * and 422 (same key, another request).
 *
 * On one node the in-flight marker lives in memory: the front thread is the only owner of this
 * map, and `begin` sets the marker before its first `await`, so two concurrent requests with
 * one key can never both pass. In cluster mode the store's `claim` (a KV create) is the marker,
 * so exactly one node runs a key; the map then only spares a round trip. No durable write happens before the handler runs: the deterministic
 * broker clOrdId (derived by the route from user + key) covers a crash in that window.
 *
 * What is stored after the handler answers: every status in 200..499 except 400, 401, 403,
 * 404, 429 and 409 CONNECTION_FAILED (those are rejections before anything reached the broker, so a retry with the
 * same key, once the request is fixed, must run rather than replay). 5xx is never stored: 503 means nothing reached the broker, and 500/504 leave the outcome unknown,
 * so the retry with the same key must run again and reconcile by clOrdId instead of
 * replaying an unknown answer forever.
 */
import { hash } from 'node:crypto';
import { AppError } from '../domain/problems.js';
import type { ClaimOutcome, IdempotencyRecord, IdempotentAnswer } from '../store/idempotency.js';
import { IDEMPOTENCY_TTL_MS } from '../tuning.js';

export type { IdempotencyRecord } from '../store/idempotency.js';

/** The slice of the store the gate uses (`store.idempotency`). */
export interface IdempotencyStore {
  get(scope: string, key: string): IdempotencyRecord | undefined | Promise<IdempotencyRecord | undefined>;
  /** Durable: resolves once the record is committed and flushed. */
  put(scope: string, key: string, record: IdempotencyRecord): Promise<void>;
  /** The cluster-wide in-flight marker (cluster store only; see store/idempotency.ts). */
  claim?(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome>;
}

const MAX_KEY_LENGTH = 255;

/**
 * Validates an Idempotency-Key value: 1..255 visible ASCII characters. A Structured-Field
 * string (`"abc"`, as the IETF draft writes it) is accepted and unquoted.
 */
export function parseIdempotencyKey(raw: string): string {
  let key = raw;
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1);
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError(
      'INVALID_IDEMPOTENCY_KEY',
      `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters`,
    );
  }
  return key;
}

/**
 * Validates a key a route reads from the body (a webhook alert's `id`): 1..255 characters, no
 * control characters. Looser than the header's rule because nothing carries it in a header:
 * TradingView's {{strategy.order.id}} holds spaces ("Close entry(s) order Long") and the
 * trader's own names, and an alert refused for its id is a trade lost.
 */
export function parseBodyIdempotencyKey(raw: string): string {
  const length = [...raw].length;
  if (length === 0 || length > MAX_KEY_LENGTH || /[\u0000-\u001f\u007f-\u009f]/.test(raw)) {
    throw new AppError('INVALID_IDEMPOTENCY_KEY', `id must be 1 to ${MAX_KEY_LENGTH} characters, none of them control characters`);
  }
  return raw;
}

/** JSON with object keys sorted at every depth and no whitespace; `undefined` members dropped. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) return 'null';
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortKeys(v)));
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    // No prototype: a body's own "__proto__" key is a key like any other here, not a prototype.
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/**
 * SHA-256 (hex) of method, route template, path parameters, the validated query and the canonical validated body.
 * The API prefix is not part of it: `/api/v1/x` and `/v1/x` are the same request.
 */
export function requestFingerprint(
  method: string,
  routePath: string,
  params: Record<string, string>,
  body: unknown,
  query: unknown = {},
): string {
  // The query is part of the request: `?dryRun=true` under a key must never replay as the real order.
  return hash('sha256', canonicalJson({ method, path: routePath, params, query, body }), 'hex');
}

/**
 * Codes that are never stored whatever their status: the request did not reach the broker and
 * a retry under the same key must run once the cause is gone (a FAILED connection reconnected),
 * or the key's order at the broker is another request's (a retry after a 504 with another body):
 * stored, that 422 would answer the right retry too, and the key could never reconcile (re-probe).
 */
const NOT_STORED_CODES: ReadonlySet<string> = new Set(['CONNECTION_FAILED', 'IDEMPOTENCY_KEY_REUSED']);

/** Whether a handler answer with this status (and problem code) is committed for replay (see module comment). */
export function isStoredStatus(status: number, code?: string): boolean {
  if (code !== undefined && NOT_STORED_CODES.has(code)) return false;
  return status >= 200 && status < 500 && status !== 400 && status !== 401 && status !== 403 && status !== 404 && status !== 429;
}

export type GateOutcome =
  | { kind: 'proceed'; ticket: IdempotencyTicket }
  | { kind: 'replay'; record: IdempotencyRecord }
  | { kind: 'in-flight' }
  | { kind: 'mismatch' };

/** Held by the one request allowed to run for (scope, key); finish it exactly once. */
export interface IdempotencyTicket {
  /** Stores the answer when its status qualifies (awaited, durable), then frees the key. */
  commit(answer: { status: number; headers: Record<string, string>; body: string; code?: string | undefined }): Promise<boolean>;
  /** Frees the key without storing anything (handler crashed, client went away before execution). */
  release(): void;
}

/** The state machine in front of idempotent handlers. */
export class IdempotencyGate {
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly clock: () => number = Date.now,
    private readonly ttlMs = IDEMPOTENCY_TTL_MS,
  ) {}

  /** Claims (scope, key) for a request with `fingerprint`, or says why it cannot run. */
  async begin(scope: string, key: string, fingerprint: string): Promise<GateOutcome> {
    const slot = `${scope}\u0000${key}`;
    if (this.inFlight.has(slot)) return { kind: 'in-flight' };
    // Claimed synchronously, before the first await: the single-owner guarantee.
    this.inFlight.add(slot);
    if (this.store.claim) return this.beginClaimed(slot, scope, key, fingerprint);
    let existing: IdempotencyRecord | undefined;
    try {
      existing = await this.store.get(scope, key);
    } catch (err) {
      this.inFlight.delete(slot);
      throw err;
    }
    if (existing && this.clock() - existing.createdAt < this.ttlMs) {
      this.inFlight.delete(slot);
      return existing.fingerprint === fingerprint ? { kind: 'replay', record: existing } : { kind: 'mismatch' };
    }
    return {
      kind: 'proceed',
      ticket: this.ticket(slot, async (answer) => {
        if (!isStoredStatus(answer.status, answer.code)) return false;
        const { status, headers, body } = answer;
        await this.store.put(scope, key, { fingerprint, status, headers, body, createdAt: this.clock() });
        return true;
      }),
    };
  }

  /**
   * The ticket of the request holding `slot`: `store` runs at most once, and the key stays in
   * flight until it has finished (a retry meets 409, then the stored answer, never a gap);
   * `free` runs on a release instead.
   */
  private ticket(slot: string, store: (answer: IdempotentAnswer & { code?: string | undefined }) => Promise<boolean>, free: () => void = () => undefined): IdempotencyTicket {
    let done = false;
    const finish = (): void => {
      done = true;
      this.inFlight.delete(slot);
    };
    return {
      commit: async (answer) => {
        if (done) throw new Error('idempotency ticket already finished');
        try {
          return await store(answer);
        } finally {
          finish();
        }
      },
      release: () => {
        if (done) return;
        finish();
        free();
      },
    };
  }

  /**
   * Cluster mode: the marker set above only spares this node a round trip for a key it is
   * already running; the marker that counts is the store's claim, which exactly one request
   * cluster-wide wins (a KV create).
   */
  private async beginClaimed(slot: string, scope: string, key: string, fingerprint: string): Promise<GateOutcome> {
    let outcome: ClaimOutcome;
    try {
      outcome = await this.store.claim!(scope, key, fingerprint);
    } catch (err) {
      this.inFlight.delete(slot);
      throw err;
    }
    if (outcome.kind !== 'claimed') {
      this.inFlight.delete(slot);
      if (outcome.kind === 'in-flight') return outcome;
      return outcome.record.fingerprint === fingerprint ? { kind: 'replay', record: outcome.record } : { kind: 'mismatch' };
    }
    const { claim } = outcome;
    return {
      kind: 'proceed',
      ticket: this.ticket(
        slot,
        async (answer) => {
          if (isStoredStatus(answer.status, answer.code)) return claim.commit({ status: answer.status, headers: answer.headers, body: answer.body });
          await claim.release();
          return false;
        },
        () => void claim.release(),
      ),
    };
  }

  /** Number of keys currently in flight. */
  inFlightCount(): number {
    return this.inFlight.size;
  }
}
