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
}

/**
 * Why a principal's streams must end now, or undefined while its credential holds: its user is
 * gone, or (API keys) the key is gone or revoked. Web sessions end through closeStreams, which
 * the session code calls on sign-out and password change.
 */
export function streamRevocation(store: GuardStore, principalId: string, userId: string): StreamEndReason | undefined {
  if (store.users.byId(userId) === undefined) return 'user-deleted';
  if (principalId.startsWith('session:')) return undefined;
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
