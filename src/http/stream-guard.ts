/**
 * Open SSE streams outlive the request that authenticated them, so their credentials are
 * checked again while they run. Revoking a key in this process ends its streams at once
 * (closeStreams, called by whoever revokes); a revocation written by another process — the
 * `tradegate keys revoke` CLI on the same LMDB data dir — is seen by this re-check, which runs
 * every STREAM_GUARD.recheckMs over each principal with an open stream (one LMDB read each).
 */
import type { HealthHub } from './sse-hub.js';
import type { StreamEndReason } from './sse.js';
import { STREAM_GUARD } from '../tuning.js';

/** What the re-check reads of the store. */
export interface GuardStore {
  apiKeys: { byId(id: string): { revokedAt: string | null } | undefined };
  users: { byId(id: string): unknown };
  sessions: { live(userId: string, sessionId: string): boolean };
}

const SESSION_PRINCIPAL = 'session:';

/**
 * Why a principal's streams must end now, or undefined while its credential holds: its user is
 * gone, (API keys) the key is gone or revoked, or (web sessions) the session timed out (idle or
 * its deadline) or ended in another process. Sign-out and password change end a session's
 * streams at once through closeStreams.
 */
export function streamRevocation(store: GuardStore, principalId: string, userId: string): StreamEndReason | undefined {
  if (store.users.byId(userId) === undefined) return 'user-deleted';
  if (principalId.startsWith(SESSION_PRINCIPAL)) return store.sessions.live(userId, principalId.slice(SESSION_PRINCIPAL.length)) ? undefined : 'session-ended';
  const key = store.apiKeys.byId(principalId);
  return !key || key.revokedAt ? 'key-revoked' : undefined;
}

/** Starts the periodic re-check; returns its stop function. */
export function startStreamGuard(hub: Pick<HealthHub, 'principals' | 'closeStreams'>, store: GuardStore, recheckMs: number = STREAM_GUARD.recheckMs): () => void {
  const timer = setInterval(() => {
    for (const { principalId, userId } of hub.principals()) {
      const reason = streamRevocation(store, principalId, userId);
      if (reason) hub.closeStreams({ principalId }, reason);
    }
  }, recheckMs);
  timer.unref();
  return () => clearInterval(timer);
}
