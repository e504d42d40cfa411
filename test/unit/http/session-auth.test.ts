import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import {
  assertSameOrigin,
  createWebSessions,
  csrfTokenFor,
  readCookie,
  SIGN_IN_ATTEMPTS_PER_ADDRESS,
  SIGN_IN_CONCURRENCY,
  SIGN_IN_FAILURES_PER_ADDRESS,
  SIGN_IN_FAILURES_PER_DEVICE,
  SIGN_IN_FAILURES_PER_NAME,
  SIGN_IN_PENDING_PER_ADDRESS,
  SIGN_IN_QUEUE,
  SIGN_IN_WINDOW_MS,
  SignInThrottle,
} from '../../../src/http/session-auth.js';
import type { SessionRecord } from '../../../src/store/index.js';

const SECRET = 'a'.repeat(43);
const record: SessionRecord = { id: 'ses_1', userId: 'usr_1', createdAt: 0, lastSeenAt: 0, expiresAt: 1e15, idleMs: 1e9 };
const store = { sessions: { lookup: (s: string) => (s === SECRET ? record : undefined) } };
const config = { baseUrl: undefined, sessionIdleMinutes: 60, sessionMaxHours: 12 };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err.code;
    throw err;
  }
  return undefined;
}

describe('readCookie', () => {
  it('finds one cookie among several and ignores look-alikes', () => {
    expect(readCookie('a=1; tg_session=abc; b=2', 'tg_session')).toBe('abc');
    expect(readCookie('xtg_session=evil; tg_session_x=evil', 'tg_session')).toBeUndefined();
    expect(readCookie(undefined, 'tg_session')).toBeUndefined();
    expect(readCookie('tg_session', 'tg_session')).toBeUndefined();
  });

  it('a cookie sent twice with two values is none: which one the browser meant cannot be told (attack probe: a planted tg_session came first)', () => {
    expect(readCookie('tg_session=planted; a=1; tg_session=mine', 'tg_session')).toBeUndefined();
    expect(readCookie('tg_session=mine; tg_session=mine', 'tg_session')).toBe('mine');
  });
});

describe('web sessions', () => {
  const web = createWebSessions(config, store);
  const cookie = `tg_session=${SECRET}`;

  it('a read the page makes on its own (X-Tradegate-Background: 1) looks the session up without restarting its idle clock; a write always does', () => {
    const asked: (boolean | undefined)[] = [];
    const watching = createWebSessions(config, { sessions: { lookup: (s: string, opts?: { idle?: boolean }) => (asked.push(opts?.idle), s === SECRET ? record : undefined) } });
    watching.authenticate({ method: 'GET', headers: { cookie, 'x-tradegate-background': '1' } });
    watching.authenticate({ method: 'GET', headers: { cookie } });
    watching.authenticate({ method: 'POST', headers: { cookie, 'x-tradegate-background': '1', 'x-csrf-token': csrfTokenFor(SECRET), origin: 'http://127.0.0.1', host: '127.0.0.1' } });
    expect(asked).toEqual([true, false, false]);
  });

  it('authenticates a read with the cookie alone, as the session principal with read and trade', () => {
    expect(web.authenticate({ method: 'GET', headers: { cookie } })).toEqual({ userId: 'usr_1', principalId: 'session:ses_1', scopes: ['read', 'trade'], kind: 'session' });
    expect(web.authenticate({ method: 'GET', headers: {} })).toBeUndefined();
    expect(web.authenticate({ method: 'GET', headers: { cookie: 'tg_session=unknown' } })).toBeUndefined();
  });

  it('refuses every write without the session’s CSRF token (missing, wrong, or another session’s)', () => {
    for (const method of ['POST', 'PATCH', 'DELETE', 'PUT']) {
      expect(codeOf(() => web.authenticate({ method, headers: { cookie } })), method).toBe('CSRF_REJECTED');
    }
    expect(codeOf(() => web.authenticate({ method: 'POST', headers: { cookie, 'x-csrf-token': 'x' } }))).toBe('CSRF_REJECTED');
    expect(codeOf(() => web.authenticate({ method: 'POST', headers: { cookie, 'x-csrf-token': csrfTokenFor('b'.repeat(43)) } }))).toBe('CSRF_REJECTED');
    expect(web.authenticate({ method: 'POST', headers: { cookie, 'x-csrf-token': csrfTokenFor(SECRET) } })?.userId).toBe('usr_1');
  });

  it('refuses a write from another origin even with the right token', () => {
    const good = { cookie, 'x-csrf-token': csrfTokenFor(SECRET), host: 'trade.local:8080' };
    expect(web.authenticate({ method: 'POST', headers: { ...good, origin: 'http://trade.local:8080', 'sec-fetch-site': 'same-origin' } })).toBeDefined();
    expect(codeOf(() => web.authenticate({ method: 'POST', headers: { ...good, origin: 'https://evil.example' } }))).toBe('CSRF_REJECTED');
    expect(codeOf(() => web.authenticate({ method: 'POST', headers: { ...good, 'sec-fetch-site': 'cross-site' } }))).toBe('CSRF_REJECTED');
    expect(codeOf(() => web.authenticate({ method: 'POST', headers: { ...good, origin: 'null' } }))).toBe('CSRF_REJECTED');
  });

  it('accepts the configured public origin behind a proxy that rewrites Host', () => {
    expect(() => assertSameOrigin({ host: '127.0.0.1:8080', origin: 'https://trade.example.com' }, 'https://trade.example.com/')).not.toThrow();
    expect(codeOf(() => assertSameOrigin({ host: '127.0.0.1:8080', origin: 'https://trade.example.com.evil.io' }, 'https://trade.example.com'))).toBe('CSRF_REJECTED');
  });

  it('sets an HttpOnly SameSite=Strict cookie for the whole site, Secure only over https', () => {
    expect(web.cookie(SECRET, {})).toBe(`tg_session=${SECRET}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200`);
    expect(web.cookie(SECRET, { 'x-forwarded-proto': 'https' })).toContain('; Secure');
    const https = createWebSessions({ ...config, baseUrl: 'https://trade.example.com' }, store);
    expect(https.cookie(SECRET, {})).toContain('; Secure');
    expect(https.clearCookie({})).toBe('__Host-tg_session=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0');
    expect(web.policy).toEqual({ idleMs: 3_600_000, maxAgeMs: 43_200_000 });
  });
});

describe('sign-in throttle', () => {
  const failing = () => Promise.resolve(null);
  const passing = () => Promise.resolve('user');

  it(`locks a user name after ${SIGN_IN_FAILURES_PER_NAME} failures from anywhere, until the window passes`, async () => {
    const now = { t: 0 };
    const th = new SignInThrottle(() => now.t);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) expect(await th.attempt(`10.0.0.${i}`, 'Demo', failing)).toBeNull();
    // Even the right password is not checked now (case of the name does not matter).
    await expect(th.attempt('10.0.1.1', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: SIGN_IN_WINDOW_MS / 1000 });
    expect(await th.attempt('10.0.1.1', 'other', passing)).toBe('user');
    now.t += SIGN_IN_WINDOW_MS;
    expect(await th.attempt('10.0.1.1', 'demo', passing)).toBe('user');
  });

  it(`a device cookie passes a locked name until ${SIGN_IN_FAILURES_PER_DEVICE} failures of its own, which count against it, not the name (attack probe: a kept cookie let every guess past the lock)`, async () => {
    const now = { t: 0 };
    const th = new SignInThrottle(() => now.t);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) await th.attempt(`10.0.0.${i}`, 'demo', failing);
    await expect(th.attempt('10.0.1.1', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('10.0.1.1', 'demo', passing, 'device-a')).toBe('user');
    for (let i = 0; i < SIGN_IN_FAILURES_PER_DEVICE; i++) expect(await th.attempt(`10.0.2.${i}`, 'demo', failing, 'device-a')).toBeNull();
    await expect(th.attempt('10.0.3.1', 'demo', passing, 'device-a')).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    // Another browser's cookie still passes; the owner is not locked out by the guesser's cookie.
    expect(await th.attempt('10.0.3.2', 'demo', passing, 'device-b')).toBe('user');
    now.t += SIGN_IN_WINDOW_MS;
    expect(await th.attempt('10.0.3.1', 'demo', passing, 'device-a')).toBe('user');
  });

  it('a device cookie passes its address’s locks too: a stranger behind the same NAT cannot lock its owner out (attack probe: 10 guesses locked the owner out, cookie and all)', async () => {
    const th = new SignInThrottle(() => 0);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_ADDRESS; i++) await th.attempt('10.0.0.9', `made-up-${i}`, failing);
    await expect(th.attempt('10.0.0.9', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('10.0.0.9', 'demo', passing, 'device-a')).toBe('user');
    // Every sign-in, whatever its outcome, from the address: the same.
    const busy = new SignInThrottle(() => 0);
    for (let i = 0; i < SIGN_IN_ATTEMPTS_PER_ADDRESS; i++) await busy.attempt('10.0.0.8', `user${i}`, passing);
    await expect(busy.attempt('10.0.0.8', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await busy.attempt('10.0.0.8', 'demo', passing, 'device-a')).toBe('user');
  });

  it('a burst under one device cookie is checked two at a time, and its trust ends after its failures; others still sign in meanwhile (re-probe: 299 of 300 simultaneous guesses checked, other users 429)', async () => {
    const th = new SignInThrottle(() => 0);
    let checked = 0;
    const slowFailing = () => new Promise<null>((resolve) => setTimeout(() => (checked++, resolve(null)), 5));
    const burst = Array.from({ length: 50 }, () => th.attempt('10.0.0.9', 'demo', slowFailing, 'device-a').then(() => 'checked', (err: AppError) => err.code));
    const other = th.attempt('10.9.9.9', 'bob', passing);
    expect(await other).toBe('user');
    const outcomes = await Promise.all(burst);
    expect(outcomes.filter((o) => o === 'checked')).toHaveLength(SIGN_IN_PENDING_PER_ADDRESS);
    expect(checked).toBe(SIGN_IN_PENDING_PER_ADDRESS);
    // Its trust ends after its own failures: then its guesses count against the name, which locks.
    for (let i = 0; i < SIGN_IN_FAILURES_PER_DEVICE - SIGN_IN_PENDING_PER_ADDRESS; i++) expect(await th.attempt(`10.0.1.${i}`, 'demo', failing, 'device-a')).toBeNull();
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) expect(await th.attempt(`10.0.2.${i}`, 'demo', failing, 'device-a')).toBeNull();
    await expect(th.attempt('10.0.3.1', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    await expect(th.attempt('10.0.3.1', 'demo', passing, 'device-a')).rejects.toMatchObject({ code: 'RATE_LIMITED' });
  });

  it(`locks an address after ${SIGN_IN_FAILURES_PER_ADDRESS} failures across names`, async () => {
    const th = new SignInThrottle(() => 0);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_ADDRESS; i++) await th.attempt('10.0.0.9', `name${i}`, failing);
    await expect(th.attempt('10.0.0.9', 'fresh', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('10.0.0.10', 'fresh', passing)).toBe('user');
  });

  it('an attempt that waited its turn is refused if failures locked its name meanwhile', async () => {
    const th = new SignInThrottle(() => 0);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME - 1; i++) await th.attempt(`10.9.${i}.1`, 'demo', failing);
    const gates: (() => void)[] = [];
    const slow = <T,>(v: T) => () => new Promise<T>((resolve) => gates.push(() => resolve(v)));
    const lastFailure = th.attempt('10.9.9.1', 'demo', slow(null));
    const other = th.attempt('10.9.9.2', 'someone', slow('user'));
    const queued = th.attempt('10.8.0.1', 'demo', passing);
    await new Promise((r) => setTimeout(r, 0));
    expect(gates).toHaveLength(SIGN_IN_CONCURRENCY);
    gates[0]!();
    await lastFailure;
    await expect(queued).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    gates[1]!();
    expect(await other).toBe('user');
  });

  it('successes do not count as failures', async () => {
    const th = new SignInThrottle(() => 0);
    for (let i = 0; i < 3 * SIGN_IN_FAILURES_PER_NAME; i++) expect(await th.attempt('10.0.0.1', 'demo', passing)).toBe('user');
  });

  it(`refuses an address after ${SIGN_IN_ATTEMPTS_PER_ADDRESS} sign-ins of any outcome: correct passwords are password checks too`, async () => {
    const now = { t: 0 };
    const th = new SignInThrottle(() => now.t);
    for (let i = 0; i < SIGN_IN_ATTEMPTS_PER_ADDRESS; i++) expect(await th.attempt('10.0.0.1', 'eve', passing)).toBe('user');
    await expect(th.attempt('10.0.0.1', 'eve', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('10.0.0.2', 'demo', passing)).toBe('user');
    now.t += SIGN_IN_WINDOW_MS;
    expect(await th.attempt('10.0.0.1', 'eve', passing)).toBe('user');
  });

  it(`lets one address hold at most ${SIGN_IN_PENDING_PER_ADDRESS} checks running or queued, so it cannot fill the queue for everyone`, async () => {
    const th = new SignInThrottle(() => 0);
    const gates: (() => void)[] = [];
    const slow = () => new Promise<string>((resolve) => gates.push(() => resolve('user')));
    const flood = Array.from({ length: SIGN_IN_PENDING_PER_ADDRESS }, () => th.attempt('10.6.6.6', 'eve', slow));
    await expect(th.attempt('10.6.6.6', 'eve', slow)).rejects.toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 1 });
    const owner = th.attempt('10.0.0.1', 'demo', passing);
    await new Promise((r) => setTimeout(r, 0));
    for (const open of gates.splice(0)) open();
    expect(await Promise.all(flood)).toEqual(flood.map(() => 'user'));
    expect(await owner).toBe('user');
    // Its turn is back once its checks are done.
    expect(await th.attempt('10.6.6.6', 'eve', passing)).toBe('user');
  });

  it('keeps signing a locked name in from an address it was signed in from, and only from there', async () => {
    const th = new SignInThrottle(() => 0);
    expect(await th.attempt('10.0.0.1', 'demo', passing)).toBe('user');
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) await th.attempt(`10.7.0.${i}`, 'demo', failing);
    await expect(th.attempt('10.7.1.1', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('10.0.0.1', 'Demo', passing)).toBe('user');
    // Known for that name only.
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME; i++) await th.attempt(`10.7.2.${i}`, 'eve', failing);
    await expect(th.attempt('10.0.0.1', 'eve', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('lets an address the name was signed in from ahead of a queue that a flood from many addresses keeps full', async () => {
    const th = new SignInThrottle(() => 0);
    expect(await th.attempt('10.0.0.1', 'demo', passing)).toBe('user');
    const gates: (() => void)[] = [];
    const slow = () => new Promise<null>((resolve) => gates.push(() => resolve(null)));
    // Many addresses, one or two each, fill every slot and the queue.
    const flood = Array.from({ length: SIGN_IN_CONCURRENCY + SIGN_IN_QUEUE }, (_, i) => th.attempt(`10.66.${i}.1`, `x${i}`, slow).catch(() => 'refused'));
    await expect(th.attempt('10.77.0.1', 'demo', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    const owner = th.attempt('10.0.0.1', 'demo', passing);
    await new Promise((r) => setTimeout(r, 0));
    // One check ends: the owner's runs next, before the 16 waiting.
    gates.shift()!();
    expect(await owner).toBe('user');
    while (gates.length > 0 || (await new Promise((r) => setTimeout(r, 0)), gates.length > 0)) gates.shift()?.();
    await Promise.all(flood);
  });

  it('limits an IPv6 client by its /64: it cannot step around the limits with the addresses it is given', async () => {
    const th = new SignInThrottle(() => 0);
    for (let i = 0; i < SIGN_IN_FAILURES_PER_ADDRESS; i++) await th.attempt(`2001:db8:1:2::${(i + 1).toString(16)}`, `name${i}`, failing);
    await expect(th.attempt('2001:db8:1:2:ffff::1', 'fresh', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(await th.attempt('2001:db8:1:3::1', 'fresh', passing)).toBe('user');
  });

  it(`runs at most ${SIGN_IN_CONCURRENCY} password checks at once, queues ${SIGN_IN_QUEUE} more in order, refuses beyond`, async () => {
    const th = new SignInThrottle(() => 0);
    const gates: (() => void)[] = [];
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const slow = (i: number) => () =>
      new Promise<string>((resolve) => {
        running++;
        peak = Math.max(peak, running);
        order.push(i);
        gates.push(() => {
          running--;
          resolve(`user${i}`);
        });
      });
    const all = Array.from({ length: SIGN_IN_CONCURRENCY + SIGN_IN_QUEUE }, (_, i) => th.attempt(`10.0.${i}.1`, `u${i}`, slow(i)));
    await expect(th.attempt('10.0.0.99', 'late', passing)).rejects.toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 1 });
    while (order.length < all.length || gates.length > 0) {
      await new Promise((r) => setTimeout(r, 0));
      gates.shift()?.();
    }
    expect(await Promise.all(all)).toEqual(all.map((_, i) => `user${i}`));
    expect(peak).toBe(SIGN_IN_CONCURRENCY);
    expect(order).toEqual(all.map((_, i) => i));
    expect(await th.attempt('10.0.0.99', 'late', passing)).toBe('user');
  });
});
