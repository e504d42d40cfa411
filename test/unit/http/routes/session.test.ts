import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cookieName, readCookie, SESSION_COOKIE as PLAIN_SESSION_COOKIE, SIGN_IN_FAILURES_PER_NAME, csrfTokenFor } from '../../../../src/http/session-auth.js';
import { MIN_PASSWORD_LENGTH, sessionSchema } from '../../../../src/http/routes/session.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
/** The world's base URL is https: its cookies are __Host- ones. */
const SESSION_COOKIE = cookieName(PLAIN_SESSION_COOKIE, true);
const PASSWORD = 'correct horse battery';
beforeEach(async () => {
  w = await world();
  await w.store.users.setPassword(w.a.userId, PASSWORD);
});
afterEach(() => w.close());

const cookieOf = (headers: Record<string, string> | undefined) => readCookie(headers?.['Set-Cookie']?.split(';')[0], SESSION_COOKIE);
const signIn = (body: unknown, headers: Record<string, string> = {}, ip = '10.0.0.1') => call(w, 'POST', '/session', { userId: '', body, headers, ip });
const asSession = (secret: string) => ({ userId: w.a.userId, kind: 'session' as const, principalId: 'session:x', headers: { cookie: `${SESSION_COOKIE}=${secret}` } });

describe('POST /session (sign-in)', () => {
  it('sets an HttpOnly SameSite=Strict cookie with a new session and returns the CSRF token for it', async () => {
    const res = await signIn({ name: 'alice', password: PASSWORD });
    expect(res.status).toBe(200);
    const body = sessionSchema.parse(res.body);
    const secret = cookieOf(res.headers)!;
    expect(res.headers?.['Set-Cookie']).toMatch(/; Path=\/; HttpOnly; SameSite=Strict; Secure; Max-Age=43200$/);
    expect(res.headers?.['Cache-Control']).toBe('no-store');
    expect(body).toMatchObject({ user: { id: w.a.userId, name: 'alice' }, csrfToken: csrfTokenFor(secret), idleTimeoutSeconds: 3600 });
    expect(w.store.sessions.lookup(secret)?.userId).toBe(w.a.userId);
    expect(JSON.stringify(res.body)).not.toContain(secret);
    await w.store.flushed();
    expect((await w.store.journal.list({ userId: w.a.userId, limit: 5 })).map((e) => e.kind)).toEqual(['sign-in']);
  });

  it('answers a wrong password and an unknown user alike', async () => {
    const wrong = await callError(w, 'POST', '/session', { userId: '', body: { name: 'alice', password: 'nope' } });
    const unknown = await callError(w, 'POST', '/session', { userId: '', body: { name: 'mallory', password: 'nope' } });
    expect([wrong.code, wrong.message]).toEqual(['UNAUTHENTICATED', 'Incorrect user name or password']);
    expect([unknown.code, unknown.message]).toEqual([wrong.code, wrong.message]);
    // A user without a password (CLI-made, web sign-in disabled) cannot sign in either.
    expect((await callError(w, 'POST', '/session', { userId: '', body: { name: 'bob', password: 'x' } })).code).toBe('UNAUTHENTICATED');
  });

  it('never adopts a session id the browser brought along (fixation): the old one is revoked, a new one issued', async () => {
    const planted = await w.store.sessions.create(w.a.userId, { idleMs: 3_600_000, maxAgeMs: 3_600_000 });
    const res = await signIn({ name: 'alice', password: PASSWORD }, { cookie: `${SESSION_COOKIE}=${planted.secret}` });
    const fresh = cookieOf(res.headers)!;
    expect(fresh).not.toBe(planted.secret);
    expect(w.store.sessions.lookup(planted.secret)).toBeUndefined();
    expect(w.store.sessions.lookup(fresh)).toBeDefined();
  });

  it('refuses a sign-in posted from another site', async () => {
    const err = await callError(w, 'POST', '/session', { userId: '', body: { name: 'alice', password: PASSWORD }, headers: { origin: 'https://evil.example', host: 'trade.example.com' } });
    expect(err.code).toBe('CSRF_REJECTED');
  });

  it(`throttles a user name after ${SIGN_IN_FAILURES_PER_NAME} failures, even for the right password`, async () => {
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) {
      expect((await callError(w, 'POST', '/session', { userId: '', body: { name: 'alice', password: `guess${i}` }, ip: `10.1.0.${i}` })).code).toBe('UNAUTHENTICATED');
    }
    const err = await callError(w, 'POST', '/session', { userId: '', body: { name: 'alice', password: PASSWORD }, ip: '10.2.0.1' });
    expect(err.code).toBe('RATE_LIMITED');
    expect(err.retryAfterSeconds).toBeGreaterThan(0);
  });
});

describe('GET and DELETE /session', () => {
  it('tells the page who is signed in, with the CSRF token; sign-out ends the session and clears the cookie', async () => {
    const secret = cookieOf((await signIn({ name: 'alice', password: PASSWORD })).headers)!;
    const got = await call(w, 'GET', '/session', asSession(secret));
    expect(sessionSchema.parse(got.body)).toMatchObject({ user: { name: 'alice' }, csrfToken: csrfTokenFor(secret) });
    const out = await call(w, 'DELETE', '/session', asSession(secret));
    expect(out.status).toBe(204);
    expect(out.headers?.['Set-Cookie']).toMatch(/^__Host-tg_session=; .*Max-Age=0$/);
    expect(w.store.sessions.lookup(secret)).toBeUndefined();
    expect((await callError(w, 'GET', '/session', asSession(secret))).code).toBe('UNAUTHENTICATED');
  });
});

describe('POST /me/password', () => {
  it('needs the current password (a wrong one counts as a failed sign-in) and a different new one', async () => {
    const secret = cookieOf((await signIn({ name: 'alice', password: PASSWORD })).headers)!;
    const wrong = await callError(w, 'POST', '/me/password', { ...asSession(secret), body: { currentPassword: 'nope', newPassword: 'a long new password' } });
    expect(wrong.code).toBe('VALIDATION_FAILED');
    expect(wrong.extensions.errors).toEqual([{ path: 'currentPassword', message: 'is not your current password' }]);
    const same = await callError(w, 'POST', '/me/password', { ...asSession(secret), body: { currentPassword: PASSWORD, newPassword: PASSWORD } });
    expect(same.extensions.errors).toEqual([{ path: 'newPassword', message: 'must differ from the current password' }]);
    expect(route(w, 'POST', '/me/password').body!.safeParse({ currentPassword: PASSWORD, newPassword: 'x'.repeat(MIN_PASSWORD_LENGTH - 1) }).success).toBe(false);
    expect(route(w, 'POST', '/me/password').body!.safeParse({ currentPassword: PASSWORD, newPassword: '\0'.repeat(MIN_PASSWORD_LENGTH) }).success).toBe(false);
  });

  it('ends every session of the user, signs this browser into a new one, and the new password works', async () => {
    const mine = cookieOf((await signIn({ name: 'alice', password: PASSWORD })).headers)!;
    const elsewhere = cookieOf((await signIn({ name: 'alice', password: PASSWORD }, {}, '10.0.0.2')).headers)!;
    const bobs = await w.store.sessions.create(w.b.userId, { idleMs: 3_600_000, maxAgeMs: 3_600_000 });
    const res = await call(w, 'POST', '/me/password', { ...asSession(mine), body: { currentPassword: PASSWORD, newPassword: 'a long new password' } });
    const fresh = cookieOf(res.headers)!;
    expect(sessionSchema.parse(res.body).csrfToken).toBe(csrfTokenFor(fresh));
    expect(w.store.sessions.lookup(mine)).toBeUndefined();
    expect(w.store.sessions.lookup(elsewhere)).toBeUndefined();
    expect(w.store.sessions.lookup(fresh)?.userId).toBe(w.a.userId);
    expect(w.store.sessions.lookup(bobs.secret)).toBeDefined();
    expect(await w.store.users.verifyPassword('alice', 'a long new password')).not.toBeNull();
    expect(await w.store.users.verifyPassword('alice', PASSWORD)).toBeNull();
  });
});

describe('sessions and open health streams', () => {
  it('sign-out ends the streams of that session; a password change ends every session stream of the user', async () => {
    const ended: unknown[] = [];
    w.deps.streams = { closeStreams: (match, reason) => (ended.push([match, reason]), 1) };
    const secret = cookieOf((await signIn({ name: 'alice', password: PASSWORD })).headers)!;
    await call(w, 'POST', '/me/password', { ...asSession(secret), body: { currentPassword: PASSWORD, newPassword: 'a long new password' } });
    const fresh = cookieOf((await signIn({ name: 'alice', password: 'a long new password' })).headers)!;
    await call(w, 'DELETE', '/session', asSession(fresh));
    expect(ended).toEqual([
      [{ userId: w.a.userId, sessionsOnly: true }, 'password-changed'],
      [{ principalId: 'session:x' }, 'session-ended'],
    ]);
  });
});
