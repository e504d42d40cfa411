import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { Authenticator, FAILED_AUTH_PER_MIN, type ApiKeyView, type AuthStore } from '../../../src/http/auth.js';
import { createLogger } from '../../../src/log.js';

const KEYS: Record<string, ApiKeyView> = {
  tgk_aaa_rw: { id: 'k-rw', userId: 'u1', name: 'rw', scopes: ['read', 'trade'], revokedAt: null },
  tgk_aaa_ro: { id: 'k-ro', userId: 'u1', name: 'ro', scopes: ['read'], revokedAt: null },
  tgk_aaa_to: { id: 'k-to', userId: 'u1', name: 'to', scopes: ['trade'], revokedAt: null },
  tgk_aaa_gone: { id: 'k-gone', userId: 'u1', name: 'gone', scopes: ['read'], revokedAt: '2026-01-01T00:00:00Z' },
};

function setup(session?: ConstructorParameters<typeof Authenticator>[3]) {
  const touched: string[] = [];
  const verified: string[] = [];
  const store: AuthStore = {
    apiKeys: {
      verify: (raw) => {
        verified.push(raw);
        return KEYS[raw] ?? null;
      },
      touch: (id) => {
        touched.push(id);
      },
    },
    webhookTokens: { verify: (raw) => (raw === 'whk_t_ok' ? { id: 't1', userId: 'u1', accountId: '7' } : null) },
  };
  const now = { t: 0 };
  const auth = new Authenticator(store, () => now.t, createLogger('silent'), session);
  return { auth, now, touched, verified };
}

/** A client at `ip` (the authenticator asks for the address only when it needs it). */
const at = (ip: string) => ({ remoteAddress: () => ip });

const codeOf = (fn: () => unknown) => {
  try {
    fn();
    return 'ok';
  } catch (err) {
    return (err as AppError).code;
  }
};

describe('Authenticator', () => {
  it('returns the auth context and the per-key rate bucket for a valid key with the scope', () => {
    const { auth, touched } = setup();
    expect(auth.authenticate('trade', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('1.1.1.1'))).toEqual({
      auth: { userId: 'u1', principalId: 'k-rw', scopes: ['read', 'trade'], kind: 'api-key' },
      rateKey: 'k-rw',
      bucket: 'key',
    });
    expect(touched).toEqual(['k-rw']);
  });

  it('401 for missing, malformed, unknown and revoked keys; over-long ones never reach the store (which checks the form itself before any read: test/unit/store/api-keys.test.ts)', () => {
    const { auth, verified } = setup();
    for (const key of [undefined, 'nope', 'tgk_bad key', `tgk_${'a'.repeat(300)}_b`, 'tgk_aaa_unknown', 'tgk_aaa_gone']) {
      expect(codeOf(() => auth.authenticate('read', key ? { 'x-api-key': key } : {}, {}, at('1.1.1.1')))).toBe('UNAUTHENTICATED');
    }
    expect(verified).toEqual(['nope', 'tgk_bad key', 'tgk_aaa_unknown', 'tgk_aaa_gone']);
  });

  it('403 INSUFFICIENT_SCOPE names the required scope', () => {
    const { auth } = setup();
    try {
      auth.authenticate('read', { 'x-api-key': 'tgk_aaa_to' }, {}, at('1.1.1.1'));
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({ code: 'INSUFFICIENT_SCOPE', extensions: { requiredScope: 'read' } });
    }
    expect(codeOf(() => auth.authenticate('trade', { 'x-api-key': 'tgk_aaa_ro' }, {}, at('1.1.1.1')))).toBe('INSUFFICIENT_SCOPE');
  });

  it('public routes need nothing; webhook routes authenticate by the token parameter (unknown → 404, not counted per IP)', () => {
    const { auth } = setup();
    for (let i = 0; i < 2 * FAILED_AUTH_PER_MIN; i++) auth.authenticate('webhook', {}, { token: 'whk_t_ok' }, at('1.1.1.1'));
    for (let i = 0; i < 2 * FAILED_AUTH_PER_MIN; i++) expect(codeOf(() => auth.authenticate('webhook', {}, { token: 'whk_x' }, at('1.1.1.1')))).toBe('NOT_FOUND');
    expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('1.1.1.1')))).toBe('ok');
    expect(auth.authenticate('none', {}, {}, at('1.1.1.1'))).toBeUndefined();
    expect(auth.authenticate('webhook', {}, { token: 'whk_t_ok' }, at('1.1.1.1'))).toMatchObject({
      auth: { userId: 'u1', principalId: 'webhook:t1', kind: 'webhook', webhook: { tokenId: 't1', accountId: '7', strategyId: null, inactiveReason: null } },
      rateKey: 'webhook:t1',
      bucket: 'webhook',
    });
    expect(codeOf(() => auth.authenticate('webhook', {}, { token: 'whk_t_no' }, at('1.1.1.1')))).toBe('NOT_FOUND');
  });

  it(`answers failures from an IP with 429 after ${FAILED_AUTH_PER_MIN} in a minute; valid keys and other IPs unaffected`, () => {
    const { auth, now } = setup();
    for (let i = 0; i < FAILED_AUTH_PER_MIN; i++) expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'bad' }, {}, at('6.6.6.6')))).toBe('UNAUTHENTICATED');
    // Someone else's failures behind the same address do not lock a valid key out.
    expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('6.6.6.6')))).toBe('ok');
    try {
      auth.authenticate('read', { 'x-api-key': 'bad' }, {}, at('6.6.6.6'));
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 60 });
    }
    expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('7.7.7.7')))).toBe('ok');
    // Webhooks share TradingView's few source addresses: never blocked, never counted.
    expect(codeOf(() => auth.authenticate('webhook', {}, { token: 'whk_t_ok' }, at('6.6.6.6')))).toBe('ok');
    // Nor is signing in (a public route; session-auth throttles passwords with its own counters):
    // bad keys from a shared address, or a stale tab, must not lock its people out of the web app.
    expect(codeOf(() => auth.authenticate('none', {}, {}, at('6.6.6.6')))).toBe('ok');
    now.t = 60_000;
    expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'bad' }, {}, at('6.6.6.6')))).toBe('UNAUTHENTICATED');
  });

  it(`public routes are refused with 429 after ${FAILED_AUTH_PER_MIN} bodies refused there in a minute (junk without a credential is bounded)`, () => {
    const { auth, now } = setup();
    for (let i = 0; i < FAILED_AUTH_PER_MIN; i++) auth.noteRefusedBody('6.6.6.6');
    expect(codeOf(() => auth.authenticate('none', {}, {}, at('6.6.6.6')))).toBe('RATE_LIMITED');
    expect(codeOf(() => auth.authenticate('none', {}, {}, at('7.7.7.7')))).toBe('ok');
    now.t = 60_000;
    expect(codeOf(() => auth.authenticate('none', {}, {}, at('6.6.6.6')))).toBe('ok');
  });

  it('records key use at most once a minute', () => {
    const { auth, now, touched } = setup();
    for (let i = 0; i < 5; i++) auth.authenticate('read', { 'x-api-key': 'tgk_aaa_ro' }, {}, at('1.1.1.1'));
    now.t = 60_000;
    auth.authenticate('read', { 'x-api-key': 'tgk_aaa_ro' }, {}, at('1.1.1.1'));
    expect(touched).toEqual(['k-ro', 'k-ro']);
  });

  it('uses the optional session check only when no X-API-Key is sent, with the same scope rule', () => {
    const seen: string[] = [];
    const { auth } = setup(({ method, headers }) => {
      seen.push(method);
      if (headers['cookie'] === 'sid=bad-csrf') throw new AppError('CSRF_REJECTED');
      return headers['cookie'] === 'sid=ok' ? { userId: 'u9', principalId: 'session:s1', scopes: ['read'], kind: 'session' } : undefined;
    });
    expect(auth.authenticate('read', { cookie: 'sid=ok' }, {}, at('1.1.1.1'), 'GET')).toMatchObject({ auth: { userId: 'u9', kind: 'session' }, rateKey: 'session:s1|reads' });
    expect(codeOf(() => auth.authenticate('trade', { cookie: 'sid=ok' }, {}, at('1.1.1.1'), 'POST'))).toBe('INSUFFICIENT_SCOPE');
    expect(codeOf(() => auth.authenticate('trade', { cookie: 'sid=bad-csrf' }, {}, at('1.1.1.1'), 'POST'))).toBe('CSRF_REJECTED');
    expect(codeOf(() => auth.authenticate('read', {}, {}, at('1.1.1.1')))).toBe('UNAUTHENTICATED');
    expect(auth.authenticate('read', { cookie: 'sid=ok', 'x-api-key': 'tgk_aaa_rw' }, {}, at('1.1.1.1'))).toMatchObject({ auth: { kind: 'api-key' } });
    expect(seen).toEqual(['GET', 'POST', 'POST', 'GET']);
  });

  it('serves session-only routes to a session alone: an API key gets SESSION_REQUIRED, nothing gets UNAUTHENTICATED (not counted per address)', () => {
    const { auth, verified } = setup(({ headers }) =>
      headers['cookie'] === 'sid=ok' ? { userId: 'u9', principalId: 'session:s1', scopes: ['read', 'trade'], kind: 'session' } : undefined,
    );
    expect(auth.authenticate('session', { cookie: 'sid=ok' }, {}, at('1.1.1.1'), 'POST')).toEqual({
      auth: { userId: 'u9', principalId: 'session:s1', scopes: ['read', 'trade'], kind: 'session' },
      rateKey: 'session:s1',
      bucket: 'key',
    });
    expect(codeOf(() => auth.authenticate('session', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('1.1.1.1'), 'GET'))).toBe('SESSION_REQUIRED');
    expect(codeOf(() => auth.authenticate('session', { 'x-api-key': 'tgk_aaa_rw', cookie: 'sid=ok' }, {}, at('1.1.1.1'), 'GET'))).toBe('SESSION_REQUIRED');
    expect(verified).toEqual([]);
    for (let i = 0; i < FAILED_AUTH_PER_MIN + 5; i++) expect(codeOf(() => auth.authenticate('session', {}, {}, at('1.1.1.1')))).toBe('UNAUTHENTICATED');
    expect(codeOf(() => auth.authenticate('read', { 'x-api-key': 'tgk_aaa_rw' }, {}, at('1.1.1.1')))).toBe('ok');
  });
});
