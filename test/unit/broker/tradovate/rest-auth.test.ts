import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { renewAccessToken, renewDelayMs, requestAccessToken } from '../../../../src/broker/tradovate/rest-auth.js';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

type Seen = { path: string; body: Record<string, unknown>; auth: string | undefined };

/** A fake broker REST API answering each request with the next scripted (status, body). */
async function fake(script: Array<[number, unknown]>): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req: IncomingMessage, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', body: raw ? JSON.parse(raw) : {}, auth: req.headers.authorization });
      const [status, body] = script.shift() ?? [500, { errorText: 'script exhausted' }];
      res.writeHead(status, { 'content-type': 'application/json' }).end(body === undefined ? '' : JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}/v1`, seen };
}

const creds = { name: 'jdoe', password: 'pw', appId: 'tg', cid: 3 };

test('a token answer is read with its expirationTime and userId', async () => {
  const { url, seen } = await fake([[200, { accessToken: 'T', expirationTime: '2030-01-01T00:00:00Z', userId: 9 }]]);
  const r = await requestAccessToken(url, creds);
  expect(r).toEqual({ kind: 'token', token: { accessToken: 'T', expiresAt: Date.parse('2030-01-01T00:00:00Z'), userId: 9 } });
  expect(seen[0]).toMatchObject({ path: '/v1/auth/accesstokenrequest', body: { name: 'jdoe', password: 'pw', appId: 'tg', cid: 3 } });
});

test('the market-data token is kept when the broker issues one', async () => {
  const { url } = await fake([[200, { accessToken: 'T', mdAccessToken: 'M', expirationTime: '2030-01-01T00:00:00Z', userId: 9 }]]);
  const r = await requestAccessToken(url, creds);
  expect(r).toMatchObject({ kind: 'token', token: { accessToken: 'T', mdAccessToken: 'M' } });
});

test('errorText in an HTTP 200 body is a rejection (bad credentials), not a retry', async () => {
  const { url } = await fake([[200, { errorText: 'Incorrect username or password.' }]]);
  expect(await requestAccessToken(url, creds)).toEqual({ kind: 'rejected', reason: 'Incorrect username or password.' });
});

test('a p-ticket: wait p-time, resend the same body plus the ticket', async () => {
  const { url, seen } = await fake([
    [200, { 'p-ticket': 'PT', 'p-time': 2, 'p-captcha': false }],
    [200, { accessToken: 'T2', expirationTime: '2030-01-01T00:00:00Z', userId: 1 }],
  ]);
  const waits: number[] = [];
  const r = await requestAccessToken(url, creds, { sleep: async (ms) => void waits.push(ms) });
  expect(r.kind).toBe('token');
  expect(waits).toEqual([2000]);
  expect(seen[1]!.body).toEqual({ ...creds, 'p-ticket': 'PT' });
});

test('a p-captcha is a rejection at once: an app cannot solve it', async () => {
  const { url, seen } = await fake([[200, { 'p-ticket': 'PT', 'p-time': 3600, 'p-captcha': true }]]);
  expect((await requestAccessToken(url, creds)).kind).toBe('rejected');
  expect(seen).toHaveLength(1);
});

test('5xx and network failures are retryable (unavailable)', async () => {
  const { url } = await fake([[503, undefined]]);
  expect((await requestAccessToken(url, creds)).kind).toBe('unavailable');
  expect((await requestAccessToken('http://127.0.0.1:1/v1', creds)).kind).toBe('unavailable');
});

test('renew sends the bearer token; 401 means the token is dead', async () => {
  const { url, seen } = await fake([
    [200, { accessToken: 'R', expirationTime: '2030-01-01T00:00:00Z', userId: 1 }],
    [401, undefined],
  ]);
  expect((await renewAccessToken(url, 'OLD')).kind).toBe('token');
  expect(seen[0]).toMatchObject({ path: '/v1/auth/renewaccesstoken', auth: 'Bearer OLD' });
  expect((await renewAccessToken(url, 'OLD')).kind).toBe('unauthorized');
});

test('renewal happens 10 min before a long expiry and at 80% of a short one', () => {
  const now = 0;
  expect(renewDelayMs({ accessToken: '', userId: 1, expiresAt: 80 * 60_000 }, now)).toBe(70 * 60_000);
  expect(renewDelayMs({ accessToken: '', userId: 1, expiresAt: 10_000 }, now)).toBe(8000);
  expect(renewDelayMs({ accessToken: '', userId: 1, expiresAt: -1 }, now)).toBe(0);
});

test('a p-ticket longer than the caller will wait is unavailable with the wait, and is not resent', async () => {
  const { url, seen } = await fake([[200, { 'p-ticket': 'PT', 'p-time': 600, 'p-captcha': false }]]);
  expect(await requestAccessToken(url, creds, { maxPenaltySeconds: 60 })).toEqual({ kind: 'unavailable', reason: 'p-ticket wait 600s', retryAfterMs: 600_000 });
  expect(seen).toHaveLength(1);
});

test('a 429, and the 423 Tradovate sends just before one, are the rate-limit hold, not a retry (protocol audit: retried from 0.5 s, the lockout follows)', async () => {
  const { url, seen } = await fake([
    [423, undefined],
    [429, undefined],
    [429, undefined],
  ]);
  expect(await requestAccessToken(url, creds)).toEqual({ kind: 'rate-limited', reason: 'HTTP 423' });
  expect(await requestAccessToken(url, creds)).toEqual({ kind: 'rate-limited', reason: 'HTTP 429' });
  expect(await renewAccessToken(url, 'OLD')).toEqual({ kind: 'rate-limited', reason: 'HTTP 429' });
  expect(seen).toHaveLength(3);
});

test('a p-ticket on renewal carries its p-time, so the next renewal waits it out (protocol audit: renewed every 15 s, each extending it)', async () => {
  const { url } = await fake([[200, { 'p-ticket': 'PT', 'p-time': 90, 'p-captcha': false }]]);
  expect(await renewAccessToken(url, 'OLD')).toEqual({ kind: 'unavailable', reason: 'p-ticket on renew (90 s)', retryAfterMs: 90_000 });
});
