/**
 * Bodies built to cost the server or to be read two ways (README "Limits and quotas"), over real
 * HTTP against `serve --paper`: thousands of unknown fields cost a bounded amount of work and a
 * small answer, a client without credentials cannot repeat them without limit, and a key written
 * twice is refused rather than the last one winning.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, httpFrom } from '../../support/http.js';
import { simState } from '../../support/sim.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let acc: string;

/** `{"f0000":1,…}`: 6,000 unknown fields, 59 KB (the audit's body). */
const manyFields = (n: number) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${String(i).padStart(4, '0')}`, 1])));
const signIn = (from: string, raw: string) => httpFrom(from, s.url, 'POST', '/api/v1/session', { raw, headers: { 'content-type': 'application/json' } });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  acc = s.accounts[0]!;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('many fields', () => {
  it('a sign-in body of 6,000 unknown fields (59 KB) is refused before it is parsed, with a small answer', async () => {
    const raw = manyFields(6000);
    expect(raw.length).toBeGreaterThan(59_000);
    const r = await signIn('127.0.3.1', raw);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: '', message: 'more than 256 fields (6000)' }] });
    expect(r.text.length).toBeLessThan(1000);
  });

  it('the same on an authenticated route (an order)', async () => {
    const r = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, raw: manyFields(6000), headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('VALIDATION_FAILED');
    expect(r.text.length).toBeLessThan(1000);
  });

  it('under the field limit, an answer lists at most 20 problems and counts the rest', async () => {
    const r = await signIn('127.0.3.2', manyFields(200));
    expect(r.status).toBe(400);
    expect(r.json.errors).toHaveLength(20);
    // 200 unknown fields, and name and password missing.
    expect(r.json.errors.length + r.json.errorsOmitted).toBe(202);
    expect(r.text.length).toBeLessThan(3000);
  });
});

describe('refused bodies without credentials count against the address', () => {
  it('past 30 a minute the address gets 429 with Retry-After before its body is read; its valid keys and other addresses are unaffected', async () => {
    const from = '127.0.3.3';
    const junk = manyFields(300);
    for (let i = 0; i < 30; i++) expect((await signIn(from, junk)).status).toBe(400);
    const refused = await signIn(from, junk);
    expect(refused.status).toBe(429);
    expect(refused.json.code).toBe('RATE_LIMITED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // A well-formed sign-in from there waits too (the sign-in throttle's own choice for guessers).
    const valid = await httpFrom(from, s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: 'wrong-but-well-formed' } });
    expect(valid.status).toBe(429);
    expect((await httpFrom(from, s.url, 'GET', '/api/v1/me', { key: s.apiKey })).status).toBe(200);
    expect((await signIn('127.0.3.4', junk)).status).toBe(400);
  });

  it('a refused body with a valid key is not counted against the address', async () => {
    const from = '127.0.3.5';
    for (let i = 0; i < 35; i++) {
      const r = await httpFrom(from, s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, raw: '{"qty":', headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
    }
    expect((await signIn(from, '{}')).status).toBe(400);
  });
});

describe('a key written twice', () => {
  const place = (raw: string) => http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, raw, headers: { 'content-type': 'application/json' } });
  const ordersAtBroker = async () => ((await simState(s)).orders as unknown[]).length;

  it('{"qty":1,"qty":5} is refused naming qty, and nothing reaches the broker (it used to place 5)', async () => {
    const before = await ordersAtBroker();
    for (const [raw, path] of [
      ['{"symbol":"ES","side":"buy","qty":1,"type":"market","qty":5}', 'qty'],
      [String.raw`{"symbol":"ES","side":"buy","qty":1,"type":"market","q\u0074y":5}`, 'qty'],
      ['{"symbol":"ES","side":"buy","qty":1,"type":"market","takeProfit":{"ticks":40,"ticks":4}}', 'takeProfit.ticks'],
    ] as const) {
      const r = await place(raw);
      expect(r.status, raw).toBe(400);
      expect(r.json, raw).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path, message: 'given more than once' }] });
    }
    expect(await ordersAtBroker()).toBe(before);
  });

  it('webhook alerts too', async () => {
    const url = (await http(s.url, 'POST', '/api/v1/webhook-tokens', { key: s.apiKey, body: { accountId: acc, name: 'dupes' } })).json.url as string;
    const r = await http(s.url, 'POST', new URL(url).pathname, { raw: '{"action":"buy","symbol":"ES","qty":"1","qty":"5"}', headers: { 'content-type': 'text/plain' } });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'qty' }] });
  });
});
