/**
 * Web-app sessions in cluster mode: rows under `session.<digest>` in the records bucket, so
 * a session made on one node is valid on every node (and a revocation anywhere ends it
 * everywhere, as soon as the mirrors see it). Same rows and rules as the LMDB store.
 */
import { AppError } from '../../domain/problems.js';
import { beyondNewest, isLive, newSessionRow, sessionDigest, sessionTouches, sessionView, type SessionRow, type SessionStore } from '../sessions.js';
import type { NatsStoreContext } from './tables.js';

const PREFIX = 'session.';

/** The session store over the records mirror. */
export function createNatsSessionStore(ctx: NatsStoreContext): SessionStore {
  const { mirror } = ctx;
  const byUser = new Map<string, Set<string>>();
  mirror.onChange((key, value, previous) => {
    if (!key.startsWith(PREFIX)) return;
    const digest = key.slice(PREFIX.length);
    const before = previous as SessionRow | undefined;
    const after = value as SessionRow | undefined;
    if (before && !after) byUser.get(before.userId)?.delete(digest);
    if (after) {
      let set = byUser.get(after.userId);
      if (!set) byUser.set(after.userId, (set = new Set()));
      set.add(digest);
    }
  });
  const touches = sessionTouches();
  const remove = (digest: string, when: (r: SessionRow) => boolean = () => true): Promise<boolean> =>
    mirror.mutate(PREFIX + digest, (current) => {
      const r = current as SessionRow | undefined;
      const gone = r !== undefined && when(r);
      if (gone) touches.forget(digest);
      return { next: gone ? null : undefined, result: gone };
    });

  return {
    async create(userId, policy) {
      const { secret, row } = newSessionRow(userId, policy, ctx.clock());
      if (!(await mirror.create(PREFIX + row.digest, row))) throw new AppError('CONFLICT', 'session id collision, retry');
      return { secret, record: sessionView(row) };
    },

    lookup(secret, opts) {
      const digest = sessionDigest(secret);
      const stored = digest === undefined ? undefined : mirror.get<SessionRow>(PREFIX + digest);
      const r = stored && touches.current(stored);
      const now = ctx.clock();
      if (!stored || !r || !isLive(r, now)) return undefined;
      if (!opts?.idle && touches.due(stored, now)) {
        const touch = mirror.mutate(PREFIX + r.digest, (current) => {
          const cur = current as SessionRow | undefined;
          return { next: cur && cur.lastSeenAt < now ? { ...cur, lastSeenAt: now } : undefined, result: undefined };
        });
        ctx.track(touch, 'recording session use');
      }
      return sessionView(r);
    },

    live(userId, sessionId) {
      const now = ctx.clock();
      for (const digest of byUser.get(userId) ?? []) {
        const r = mirror.get<SessionRow>(PREFIX + digest);
        if (r?.id === sessionId) return isLive(touches.current(r), now);
      }
      return false;
    },

    async revoke(secret) {
      const digest = sessionDigest(secret);
      return digest === undefined ? false : remove(digest);
    },

    async keepNewest(userId, keep) {
      const rows = [...(byUser.get(userId) ?? [])].flatMap((digest) => {
        const r = mirror.get<SessionRow>(PREFIX + digest);
        return r ? [touches.current(r)] : [];
      });
      const ended: string[] = [];
      for (const r of beyondNewest(rows, keep)) if (await remove(r.digest)) ended.push(r.id);
      return ended;
    },

    async revokeAllForUser(userId) {
      let n = 0;
      for (const digest of [...(byUser.get(userId) ?? [])]) if (await remove(digest)) n++;
      return n;
    },

    async sweep() {
      const now = ctx.clock();
      let n = 0;
      for (const r of mirror.values<SessionRow>(PREFIX)) {
        if (!isLive(touches.current(r), now) && (await remove(r.digest, (cur) => !isLive(touches.current(cur), now)))) n++;
      }
      return n;
    },
  };
}
