/**
 * Web-app sessions. The session id is 256 random bits handed to the browser in an HttpOnly
 * cookie; only its SHA-256 is stored, so a copy of the LMDB file cannot be replayed as a
 * cookie. A session ends at whichever comes first: its idle timeout (no use for `idleMs`),
 * its absolute deadline, sign-out, or a password change (every session of the user).
 *
 * `lookup` runs on every request of the web app, so it is synchronous (one LMDB get) and
 * writes the last-seen time at most once a minute per session.
 */
import { randomBytes } from 'node:crypto';
import type { StoreContext } from './context.js';
import { randomBase62, sha256Hex } from './crypto.js';

/** A live session as the rest of the service sees it (never the secret id). */
export interface SessionRecord {
  /** Public handle `ses_<base62>`: safe for logs and the principal id. */
  id: string;
  userId: string;
  /** ms since the epoch. */
  createdAt: number;
  lastSeenAt: number;
  /** Absolute deadline (ms since the epoch). */
  expiresAt: number;
  idleMs: number;
}

/** How long sessions live. */
export interface SessionPolicy {
  idleMs: number;
  maxAgeMs: number;
}

export interface SessionStore {
  /** Starts a session; `secret` goes into the cookie and exists nowhere else. Durable before it resolves. */
  create(userId: string, policy: SessionPolicy): Promise<{ secret: string; record: SessionRecord }>;
  /**
   * The live session for a cookie value; undefined when unknown, malformed, idle too long or past
   * its deadline. A use restarts its idle clock, unless `idle` (a page refreshing itself: nobody acted).
   */
  lookup(secret: string, opts?: { idle?: boolean }): SessionRecord | undefined;
  /** Whether the session with this public id is still live (not idle too long, past its deadline, or ended). */
  live(userId: string, sessionId: string): boolean;
  /** Ends one session; false when it did not exist. */
  revoke(secret: string): Promise<boolean>;
  /**
   * Ends a user's sessions beyond the `keep` most recently used (live or not); resolves with the
   * public ids of those that ended, so their streams can end too.
   */
  keepNewest(userId: string, keep: number): Promise<string[]>;
  /** Ends every session of a user (password change); resolves with how many ended. */
  revokeAllForUser(userId: string): Promise<number>;
  /** Deletes sessions that have expired (run periodically). */
  sweep(): Promise<number>;
}

/** 32 random bytes as base64url (43 characters). */
const SECRET_SHAPE = /^[A-Za-z0-9_-]{43}$/;
/** Last-seen writes at most this often per session; the idle check is as coarse as this. */
export const SESSION_TOUCH_MS = 60_000;

/** A stored session: the record plus the digest of its secret (the key it is found by). */
export interface SessionRow extends SessionRecord {
  digest: string;
}

/** A new session for `userId` at `now`; `secret` is the cookie value. */
export function newSessionRow(userId: string, policy: SessionPolicy, now: number): { secret: string; row: SessionRow } {
  const secret = randomBytes(32).toString('base64url');
  return {
    secret,
    row: { id: `ses_${randomBase62(16)}`, userId, createdAt: now, lastSeenAt: now, expiresAt: now + policy.maxAgeMs, idleMs: policy.idleMs, digest: sha256Hex(secret) },
  };
}

/** The digest a cookie value is stored under; undefined for anything that is not a session id. */
export function sessionDigest(secret: string): string | undefined {
  return SECRET_SHAPE.test(secret) ? sha256Hex(secret) : undefined;
}

/** Whether a session is neither idle too long nor past its deadline at `now`. */
export function isLive(r: SessionRow, now: number): boolean {
  return now < r.expiresAt && now - r.lastSeenAt < r.idleMs;
}

/** What may be shown of a session (never its digest). */
export function sessionView(r: SessionRow): SessionRecord {
  return { id: r.id, userId: r.userId, createdAt: r.createdAt, lastSeenAt: r.lastSeenAt, expiresAt: r.expiresAt, idleMs: r.idleMs };
}

/** The rows beyond the `keep` most recently used (last seen, then created), which keepNewest ends. */
export function beyondNewest(rows: SessionRow[], keep: number): SessionRow[] {
  if (rows.length <= keep) return [];
  return [...rows].sort((a, b) => b.lastSeenAt - a.lastSeenAt || b.createdAt - a.createdAt).slice(keep);
}

/**
 * A session's use in this process: every use is remembered here at once (so the idle clock and
 * "least recently used" count from the last request, not from the last write), and written at
 * most once per SESSION_TOUCH_MS per session (what other processes and nodes see).
 */
export interface SessionTouches {
  /** The row with the last use this process saw, when that is later than the stored one. */
  current(r: SessionRow): SessionRow;
  /** Records a use at `now` of the row as stored; true when it is due to be written. */
  due(stored: SessionRow, now: number): boolean;
  forget(digest: string): void;
}

export function sessionTouches(): SessionTouches {
  const written = new Map<string, number>();
  const seen = new Map<string, number>();
  return {
    current(r) {
      const at = seen.get(r.digest);
      return at !== undefined && at > r.lastSeenAt ? { ...r, lastSeenAt: at } : r;
    },
    due(stored, now) {
      seen.set(stored.digest, now);
      if (now - (written.get(stored.digest) ?? stored.lastSeenAt) < SESSION_TOUCH_MS) return false;
      written.set(stored.digest, now);
      return true;
    },
    forget(digest) {
      written.delete(digest);
      seen.delete(digest);
    },
  };
}

/** The session store over a shared context. */
export function createSessionStore(ctx: StoreContext): SessionStore {
  const { sessions, sessionsByUser } = ctx.dbs;
  const touches = sessionTouches();
  /** The stored row with this process's last use of it. */
  const row = (digest: string): SessionRow | undefined => {
    const r = sessions.get(digest) as SessionRow | undefined;
    return r && touches.current(r);
  };
  const removeRow = (r: SessionRow): void => {
    touches.forget(r.digest);
    sessions.remove(r.digest);
    sessionsByUser.remove([r.userId, r.id]);
  };

  return {
    async create(userId, policy) {
      const { secret, row: rec } = newSessionRow(userId, policy, ctx.clock());
      // Durable: the browser holds the cookie once we answer; a crash must not forget it
      // (nor, on revoke below, bring a revoked one back).
      await ctx.durable(
        sessions.transaction(() => {
          sessions.put(rec.digest, rec);
          sessionsByUser.put([userId, rec.id], rec.digest);
        }),
      );
      return { secret, record: sessionView(rec) };
    },

    lookup(secret, opts) {
      const digest = sessionDigest(secret);
      const stored = digest === undefined ? undefined : (sessions.get(digest) as SessionRow | undefined);
      const r = stored && touches.current(stored);
      const now = ctx.clock();
      if (!stored || !r || !isLive(r, now)) return undefined;
      if (!opts?.idle && touches.due(stored, now)) {
        // Read-modify-write inside one transaction: a touch racing a sign-out can never
        // bring the revoked row back. Informational precision only, so not awaited.
        sessions
          .transaction(() => {
            const cur = sessions.get(r.digest) as SessionRow | undefined;
            if (cur && cur.lastSeenAt < now) sessions.put(r.digest, { ...cur, lastSeenAt: now });
          })
          .catch((err: unknown) => ctx.logger?.warn({ err, sessionId: r.id }, 'recording session use failed'));
      }
      return sessionView(r);
    },

    live(userId, sessionId) {
      const digest = sessionsByUser.get([userId, sessionId]) as string | undefined;
      const r = digest === undefined ? undefined : row(digest);
      return r !== undefined && isLive(r, ctx.clock());
    },

    async revoke(secret) {
      const digest = sessionDigest(secret);
      if (digest === undefined) return false;
      return ctx.durable(
        sessions.transaction(() => {
          const r = row(digest);
          if (!r) return false;
          removeRow(r);
          return true;
        }),
      );
    },

    async keepNewest(userId, keep) {
      return ctx.durable(
        sessions.transaction(() => {
          const rows: SessionRow[] = [];
          for (const { value } of sessionsByUser.getRange({ start: [userId] as never, end: [userId, '\uffff'] as never })) {
            const r = row(value as string);
            if (r && r.userId === userId) rows.push(r);
          }
          const ended = beyondNewest(rows, keep);
          for (const r of ended) removeRow(r);
          return ended.map((r) => r.id);
        }),
      );
    },

    async revokeAllForUser(userId) {
      return ctx.durable(
        sessions.transaction(() => {
          let n = 0;
          for (const { key, value } of sessionsByUser.getRange({ start: [userId] as never, end: [userId, '\uffff'] as never })) {
            const [u] = key as [string, string];
            if (u !== userId) continue;
            const r = row(value);
            if (r) removeRow(r);
            else sessionsByUser.remove(key as [string, string]);
            n++;
          }
          return n;
        }),
      );
    },

    async sweep() {
      const now = ctx.clock();
      const dead: SessionRow[] = [];
      for (const { value } of sessions.getRange()) {
        const r = touches.current(value as SessionRow);
        if (!isLive(r, now)) dead.push(r);
      }
      if (dead.length === 0) return 0;
      return sessions.transaction(() => {
        let n = 0;
        for (const r of dead) {
          const cur = row(r.digest);
          if (cur && !isLive(cur, now)) {
            removeRow(cur);
            n++;
          }
        }
        return n;
      });
    },
  };
}
