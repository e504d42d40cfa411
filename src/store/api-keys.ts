/**
 * API keys `tgk_<id>_<secret>`. Only sha256 of the whole key is stored; the key itself is
 * returned once, at creation. `verify` runs on every request, so it is synchronous: a format
 * check that never touches LMDB for garbage, one get by id, one constant-time compare.
 */
import { checkRecordName } from '../domain/plain-text.js';
import { AppError } from '../domain/problems.js';
import type { Scope } from '../domain/connections.js';
import type { GuardNarrowing } from '../domain/guards.js';
import { ownedIds, ownedReads, rowReader, type StoreContext } from './context.js';
import { newToken, parseToken, tokenPrefix, verifiedRow, wellFormedToken } from './secret-token.js';

/** An API key as stored (both stores). */
export interface ApiKeyRow {
  id: string;
  userId: string;
  name: string;
  scopes: Scope[];
  /** sha256 hex of the whole key. */
  digest: string;
  createdAt: string;
  revokedAt: string | null;
  /** Narrows the account guards for this key's orders (absent on rows written before guards existed). */
  guards?: GuardNarrowing | null;
}

/** An API key as it may be shown: never the key, never its digest. */
export interface ApiKeyView {
  id: string;
  userId: string;
  name: string;
  scopes: Scope[];
  /** `tgk_<id>`: identifies the key in lists without revealing it. */
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** Narrows the account guards for this key's orders (null: none). */
  guards: GuardNarrowing | null;
}

export const API_KEY_SCOPES: readonly Scope[] = ['read', 'trade'];

/** A `lastUsedAt` write at most this often per key: the hot path must not write per request. */
export const TOUCH_INTERVAL_MS = 60_000;

export interface ApiKeyStore {
  /** Creates a key; the returned `key` is the only time it exists in clear. */
  create(input: { userId: string; name: string; scopes: readonly Scope[] }): Promise<{ record: ApiKeyView; key: string }>;
  /** Strict format check without store access. */
  parseKey(raw: unknown): { id: string } | null;
  /**
   * The key's view when it is well-formed, known, matches and is not revoked; otherwise null.
   * The LMDB store remembers verified keys (a shared object: do not change it; its
   * `lastUsedAt` may lag); any write to keys, by any process, makes it check again.
   */
  verify(raw: unknown): ApiKeyView | null;
  /** A user's keys (revoked ones included), oldest first. */
  listByUser(userId: string): ApiKeyView[];
  /** The key when `userId` owns it; undefined otherwise (no cross-user lookups). */
  getForUser(userId: string, id: string): ApiKeyView | undefined;
  /** Any key by id (CLI and admin use only). */
  byId(id: string): ApiKeyView | undefined;
  /** Revokes a key the user owns; false when unknown, not theirs, or already revoked. */
  revoke(userId: string, id: string): Promise<boolean>;
  /** Revokes any key by id (CLI); false when unknown or already revoked. */
  revokeById(id: string): Promise<boolean>;
  /** Sets (null: removes) the key's narrowing of the account guards; undefined when not the user's key. */
  setGuards(userId: string, id: string, guards: GuardNarrowing | null): Promise<ApiKeyView | undefined>;
  /** Records use; writes at most once per TOUCH_INTERVAL_MS per key and is not awaited. */
  touch(id: string, now: number): void;
}

/** What may be shown of a stored key, with its last use (ms) if any. */
export function apiKeyView(r: ApiKeyRow, used: number | undefined): ApiKeyView {
  return {
    id: r.id,
    userId: r.userId,
    name: r.name,
    scopes: [...r.scopes],
    prefix: tokenPrefix('tgk', r.id),
    createdAt: r.createdAt,
    lastUsedAt: used === undefined ? null : new Date(used).toISOString(),
    revokedAt: r.revokedAt,
    guards: r.guards ?? null,
  };
}

/** Validates a new key and builds its row; `key` is the secret to show once. */
export function newApiKeyRow({ userId, name, scopes }: { userId: string; name: string; scopes: readonly Scope[] }, createdAt: string): { row: ApiKeyRow; key: string } {
  checkRecordName('key', name);
  const unique = [...new Set(scopes)];
  if (unique.length === 0 || unique.some((s) => !API_KEY_SCOPES.includes(s))) {
    throw new AppError('VALIDATION_FAILED', `scopes must be a non-empty subset of ${API_KEY_SCOPES.join(', ')}`);
  }
  const { id, token, digest } = newToken('tgk');
  return { row: { id, userId, name, scopes: unique, digest, createdAt, revokedAt: null }, key: token };
}

/**
 * Revoked keys a user keeps listed (the newest): a revocation deletes the oldest beyond these.
 * Nothing else bounded them: the key quota counts live keys only, and creating and revoking keys
 * in a loop grew the store by about 1.2 KB a key, without end (attack probe).
 */
export const REVOKED_KEYS_KEPT = 100;

/** The ids of `rows`' revoked keys beyond the newest REVOKED_KEYS_KEPT of them, oldest first. */
export function revokedBeyondKept(rows: Iterable<ApiKeyRow | undefined>): string[] {
  const revoked: ApiKeyRow[] = [];
  for (const r of rows) if (r?.revokedAt) revoked.push(r);
  if (revoked.length <= REVOKED_KEYS_KEPT) return [];
  revoked.sort((a, b) => (a.revokedAt! < b.revokedAt! ? -1 : a.revokedAt! > b.revokedAt! ? 1 : a.id < b.id ? -1 : 1));
  return revoked.slice(0, revoked.length - REVOKED_KEYS_KEPT).map((r) => r.id);
}

/** The record cache's space of verified key texts (only keys that verified are in it). */
const VERIFIED = 'apiKey:verified';

/**
 * Records uses (keys and webhook tokens) at most once per TOUCH_INTERVAL_MS per id: the first use
 * at once, the last one of the interval when it ends (clients probe: uses in the minute after a
 * recorded one were never recorded once the key went quiet, so its last use read up to a minute early).
 */
export function touchThrottle(): { record(id: string, now: number, write: (at: number) => void): void; forget(id: string): void } {
  const lastTouch = new Map<string, number>();
  /** A use not written yet, written when its id's interval ends. */
  const pending = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  return {
    record(id, now, write) {
      const last = lastTouch.get(id);
      if (last === undefined || now - last >= TOUCH_INTERVAL_MS) {
        lastTouch.set(id, now);
        write(now);
        return;
      }
      const waiting = pending.get(id);
      if (waiting) {
        waiting.at = now;
        return;
      }
      const timer = setTimeout(() => {
        const use = pending.get(id);
        pending.delete(id);
        if (!use) return;
        lastTouch.set(id, use.at);
        try {
          write(use.at);
        } catch {
          // Best effort, as every last-use write: the store may have closed since (a stop).
        }
      }, last + TOUCH_INTERVAL_MS - now);
      timer.unref();
      pending.set(id, { at: now, timer });
    },
    forget(id) {
      lastTouch.delete(id);
      clearTimeout(pending.get(id)?.timer);
      pending.delete(id);
    },
  };
}

/** The API key store over a shared context. */
export function createApiKeyStore(ctx: StoreContext): ApiKeyStore {
  const { apiKeys, owners, lastUsed } = ctx.dbs;
  const touches = touchThrottle();

  const row = rowReader<ApiKeyRow>(apiKeys);
  const view = (r: ApiKeyRow): ApiKeyView => apiKeyView(r, lastUsed.get(['apiKey', r.id]));

  async function revokeWhere(id: string, owner: string | undefined): Promise<boolean> {
    const revokedAt = ctx.nowIso();
    // Read-modify-write inside one write transaction, so a concurrent writer in another
    // process (server vs CLI) cannot resurrect the key by rewriting an older copy.
    const done = await ctx.durable(
      apiKeys.transaction(() => {
        const r = row(id);
        if (!r || r.revokedAt || (owner !== undefined && r.userId !== owner)) return false;
        apiKeys.put(id, { ...r, revokedAt });
        const ids = ownedIds(ctx, 'apiKey', r.userId);
        for (const old of revokedBeyondKept(ids.map((k) => (k === id ? { ...r, revokedAt } : row(k))))) {
          apiKeys.remove(old);
          owners.remove(['apiKey', r.userId, old]);
          lastUsed.remove(['apiKey', old]);
        }
        return true;
      }),
    );
    if (done) touches.forget(id);
    return done;
  }

  return {
    async create(input) {
      const { row: rec, key: token } = newApiKeyRow(input, ctx.nowIso());
      const { id, userId } = rec;
      // A key that was shown to its owner must still exist after a crash: durable before returning.
      const ok = await ctx.durable(
        apiKeys.ifNoExists(id, () => {
          apiKeys.put(id, rec);
          owners.put(['apiKey', userId, id], true);
        }),
      );
      if (!ok) throw new AppError('CONFLICT', 'key id collision, retry');
      return { record: view(rec), key: token };
    },

    parseKey(raw) {
      return parseToken('tgk', raw);
    },

    verify(raw) {
      // Per request: a known key costs at most one generation read (once a millisecond), not a
      // record read, a SHA-256 and a view (only keys that verified are remembered, so garbage
      // cannot fill the cache). Malformed input reaches no store read at all.
      if (typeof raw !== 'string') return null;
      const seen = ctx.cache.knownIn<ApiKeyView>(VERIFIED, raw);
      if (seen) return seen;
      if (!wellFormedToken('tgk', raw)) return null;
      const known = ctx.cache.peekIn<ApiKeyView>(VERIFIED, raw);
      if (known) return known;
      const r = verifiedRow('tgk', raw, row);
      if (!r || r.revokedAt) return null;
      const v = view(r);
      ctx.cache.setIn(VERIFIED, raw, v);
      ctx.cache.set(`apiKey:view:${r.id}`, v);
      return v;
    },

    ...ownedReads(ctx, 'apiKey', row, view),

    revoke(userId, id) {
      return revokeWhere(id, userId);
    },

    revokeById(id) {
      return revokeWhere(id, undefined);
    },

    async setGuards(userId, id, guards) {
      const updated = await ctx.durable(
        apiKeys.transaction((): ApiKeyRow | undefined => {
          const r = row(id);
          if (!r || r.userId !== userId) return undefined;
          const next = { ...r, guards };
          apiKeys.put(id, next);
          return next;
        }),
      );
      return updated && view(updated);
    },

    touch(id, now) {
      touches.record(id, now, (at) => {
        // Best effort: last-use time is informational and may be lost in a crash.
        lastUsed.put(['apiKey', id], at).catch((err: unknown) => ctx.logger?.warn({ err, keyId: id }, 'recording key use failed'));
        // The remembered view follows (last use is not a record write: it moves no generation).
        const remembered = ctx.cache.peek<ApiKeyView>(`apiKey:view:${id}`);
        if (remembered) remembered.lastUsedAt = new Date(at).toISOString();
      });
    },
  };
}
