/** Sessions, expiry, renewal, session limit, p-tickets and request limits, on a fake clock. */
import { beforeEach, expect, it } from 'vitest';
import { Auth } from '../../../src/sim/auth.js';
import type { SimUser } from '../../../src/sim/state.js';

let now: number;
let auth: Auth;
const user: SimUser = { id: 7, name: 'ann', password: 'pw', accountIds: [] };

beforeEach(() => {
  now = 1_000_000;
  auth = new Auth({ clock: () => now, tokenLifetimeMs: 60_000, maxSessionsPerUser: 2, requestsPerSecond: 3, requestsPerHour: 5 });
});

const token = (r: Record<string, unknown>) => r.accessToken as string;

it('issues tokens valid until expirationTime; md token shares the session', () => {
  const r = auth.login(user);
  expect(r).toMatchObject({ userId: 7, name: 'ann', expirationTime: new Date(now + 60_000).toISOString() });
  expect(auth.check(token(r)).ok).toBe(true);
  expect(auth.check(r.mdAccessToken as string).ok).toBe(true);
  now += 60_000;
  expect(auth.check(token(r))).toEqual({ ok: false, reason: 'expired' });
  expect(auth.check('nope')).toEqual({ ok: false, reason: 'invalid' });
});

it('renewal extends the whole session, old token included', () => {
  const r = auth.login(user);
  now += 50_000;
  const check = auth.check(token(r));
  if (!check.ok) throw new Error('token should be valid');
  const renewed = auth.renew(check.session, user);
  now += 50_000;
  expect(auth.check(token(renewed)).ok).toBe(true);
  expect(auth.check(token(r)).ok).toBe(true);
});

it('revokes the oldest session when a third one starts', () => {
  const [a, b, c] = [auth.login(user), auth.login(user), auth.login(user)];
  expect(auth.check(token(a)).ok).toBe(false);
  expect(auth.check(token(b)).ok && auth.check(token(c)).ok).toBe(true);
});

it('expires sessions now, for one user or all', () => {
  const a = auth.login(user);
  const b = auth.login({ ...user, id: 8 });
  expect(auth.expire(7)).toBe(1);
  expect(auth.check(token(a)).ok).toBe(false);
  expect(auth.check(token(b)).ok).toBe(true);
  expect(auth.expire()).toBe(1);
});

it('accepts a p-ticket only after p-time, once; a captcha ticket never', () => {
  const t = auth.issueTicket(5, false);
  expect(t['p-time']).toBe(5);
  now += 4000;
  expect(auth.redeemTicket(t['p-ticket'] as string)).toMatchObject({ 'p-time': 1 });
  now += 1000;
  expect(auth.redeemTicket(t['p-ticket'] as string)).toBeUndefined();
  const captcha = auth.issueTicket(1, true);
  now += 3_600_000;
  expect(auth.redeemTicket(captcha['p-ticket'] as string)).toMatchObject({ 'p-captcha': true });
});

it('counts requests per user per second and per hour', () => {
  expect([1, 2, 3, 4].map(() => auth.allow(7))).toEqual([true, true, true, false]);
  expect(auth.allow(8)).toBe(true);
  now += 1000;
  expect(auth.allow(7)).toBe(true); // new second; 5th request of the hour
  expect(auth.allow(7)).toBe(false); // 6th of the hour
  now += 3_600_000;
  expect(auth.allow(7)).toBe(true);
});
