import { afterEach, describe, expect, it, vi } from 'vitest';
import { startStreamGuard, streamRevocation, type GuardStore } from '../../../src/http/stream-guard.js';

const store = (keys: Record<string, { revokedAt: string | null }>, users: string[], sessions: string[] = []): GuardStore => ({
  apiKeys: { byId: (id) => keys[id] },
  users: { byId: (id) => (users.includes(id) ? { id } : undefined) },
  sessions: { live: (userId, id) => sessions.includes(`${userId}/${id}`) },
});

afterEach(() => vi.useRealTimers());

describe('streamRevocation', () => {
  it('names why a principal’s streams must end', () => {
    const s = store({ live: { revokedAt: null }, gone: { revokedAt: '2026-01-01T00:00:00Z' } }, ['u1'], ['u1/abc']);
    expect(streamRevocation(s, 'live', 'u1')).toBeUndefined();
    expect(streamRevocation(s, 'gone', 'u1')).toBe('key-revoked');
    expect(streamRevocation(s, 'missing', 'u1')).toBe('key-revoked');
    expect(streamRevocation(s, 'live', 'u-deleted')).toBe('user-deleted');
    expect(streamRevocation(s, 'session:abc', 'u1')).toBeUndefined();
    // A session that timed out (idle, or its deadline) or ended elsewhere: its streams end too.
    expect(streamRevocation(s, 'session:expired', 'u1')).toBe('session-ended');
    expect(streamRevocation(s, 'session:abc', 'u-deleted')).toBe('user-deleted');
  });
});

describe('startStreamGuard', () => {
  it('re-reads every open principal each period and ends those whose credential stopped holding', () => {
    vi.useFakeTimers();
    const keys: Record<string, { revokedAt: string | null }> = { k1: { revokedAt: null }, k2: { revokedAt: null } };
    const closed: unknown[] = [];
    const hub = { principals: () => [{ principalId: 'k1', userId: 'u1' }, { principalId: 'k2', userId: 'u1' }], closeStreams: (m: unknown, r: unknown) => (closed.push([m, r]), 1) };
    const stop = startStreamGuard(hub, store(keys, ['u1']), 1000);
    vi.advanceTimersByTime(1000);
    expect(closed).toEqual([]);
    keys.k2 = { revokedAt: 'now' };
    vi.advanceTimersByTime(999);
    expect(closed).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(closed).toEqual([[{ principalId: 'k2' }, 'key-revoked']]);
    stop();
    keys.k1 = { revokedAt: 'now' };
    vi.advanceTimersByTime(5000);
    expect(closed).toHaveLength(1);
  });
});
