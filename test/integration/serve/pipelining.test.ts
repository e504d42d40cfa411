/**
 * Pipelining behind a slow answer (README "HTTP edge cases"), raw sockets against `serve --paper`.
 * uWS closes a keep-alive connection, unanswered, when a request is parsed while the previous
 * answer is still pending. The service never places an order whose client is gone that way,
 * and a request arriving later waits until the pending answer is out.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { control } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';
import { parseResponses, rawExchange, rawRequest } from '../../support/raw-http.js';

let s: Served;
let acc: string;
const ES = frontOf('ES').contract;
const workingAt = async (price: number) =>
  ((await http(s.url, 'GET', `/api/v1/accounts/${acc}/working-orders`, { key: s.apiKey })).json.data as { price: number }[]).filter((o) => o.price === price).length;
const order = (price: number, headers: [string, string][] = []) =>
  rawRequest('POST', `/api/v1/accounts/${acc}/orders`, [['X-API-Key', s.apiKey], ['Content-Type', 'application/json'], ...headers], JSON.stringify({ symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price }));
/** The access-log lines of requests to `path` so far. */
const accessLines = (method: string, path: string) =>
  s
    .output()
    .split('\n')
    .filter((l) => l.includes('"msg":"request"'))
    .map((l) => JSON.parse(l) as { method: string; path: string; status: number })
    .filter((l) => l.method === method && l.path === path);
const settle = () => new Promise((r) => setTimeout(r, 400));

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' }, { logLevel: 'info' });
  acc = s.accounts[0]!;
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
}, 60_000);
afterEach(async () => {
  await control(s, 'DELETE', '/faults');
});
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('a request pipelined in the same write as an order', () => {
  it('the connection is closed unanswered (uWS), and the order is not placed: a plain retry is safe', async () => {
    const ordersPath = `/api/v1/accounts/${acc}/orders`;
    const before = accessLines('POST', ordersPath).length;
    const r = await rawExchange(s.url, [order(4801) + rawRequest('GET', '/healthz')], { waitMs: 3000 });
    expect(r.text).toBe('');
    expect(r.closedAfterMs).not.toBeNull();
    await settle();
    expect(await workingAt(4801)).toBe(0);
    // The access log says the client went away (499).
    const lines = await eventually(async () => accessLines('POST', ordersPath).length > before && accessLines('POST', ordersPath).slice(before), 'the access line');
    expect(lines.map((l) => l.status)).toEqual([499]);
    // The retry places it, once.
    const retry = await http(s.url, 'POST', ordersPath, { key: s.apiKey, body: { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4801 } });
    expect(retry.status, retry.text).toBe(201);
    expect(await workingAt(4801)).toBe(1);
  });

  it('with an Idempotency-Key the key stays free: the retry places the order (no 409, no replay of a lost answer)', async () => {
    const headers: [string, string][] = [['Idempotency-Key', 'pipelined-1']];
    const r = await rawExchange(s.url, [order(4802, headers) + rawRequest('GET', '/healthz')], { waitMs: 3000 });
    expect(r.text).toBe('');
    await settle();
    expect(await workingAt(4802)).toBe(0);
    const retry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, {
      key: s.apiKey,
      headers: { 'Idempotency-Key': 'pipelined-1' },
      body: { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4802 },
    });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    const again = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, {
      key: s.apiKey,
      headers: { 'Idempotency-Key': 'pipelined-1' },
      body: { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4802 },
    });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await workingAt(4802)).toBe(1);
  });

  it('a cancel pipelined in the same write is not sent either', async () => {
    const placed = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4803 } });
    expect(placed.status, placed.text).toBe(201);
    const cancel = rawRequest('DELETE', `/api/v1/accounts/${acc}/orders/${placed.json.orderId}`, [['X-API-Key', s.apiKey]]);
    const r = await rawExchange(s.url, [cancel + rawRequest('GET', '/healthz')], { waitMs: 3000 });
    expect(r.text).toBe('');
    await settle();
    expect(await workingAt(4803)).toBe(1);
  });
});

describe('a request pipelined while an answer is pending', () => {
  it('waits for the order’s answer and is answered after it, on the same connection', async () => {
    // The broker answers in 400 ms: the second request surely arrives while the order is pending.
    await control(s, 'POST', '/faults', { latencyMs: 400 });
    const r = await rawExchange(s.url, [order(4804), rawRequest('GET', '/healthz')], { waitMs: 1500, gapMs: 150 });
    const [placed, health] = parseResponses(r.text, ['POST', 'GET']);
    expect(placed?.status, r.text).toBe(201);
    expect(JSON.parse(placed!.body)).toMatchObject({ price: 4804, status: 'working' });
    expect(health).toMatchObject({ status: 200, body: '{"status":"ok"}' });
    expect(r.closedAfterMs).toBeNull();
    expect(await workingAt(4804)).toBe(1);
  });

  it('the same with a slow read behind the order', async () => {
    await control(s, 'POST', '/faults', { latencyMs: 300 });
    const positions = rawRequest('GET', `/api/v1/accounts/${acc}/positions`, [['X-API-Key', s.apiKey]]);
    const r = await rawExchange(s.url, [rawRequest('GET', '/healthz'), order(4805), positions], { waitMs: 1500, gapMs: 100 });
    const answers = parseResponses(r.text, ['GET', 'POST', 'GET']);
    expect(answers.map((a) => a.status), r.text).toEqual([200, 201, 200]);
    expect(JSON.parse(answers[2]!.body)).toHaveProperty('data');
    expect(r.closedAfterMs).toBeNull();
  });

  it('requests queued together behind it are read together: the pending answer is sent, then uWS closes; a queued order is not placed', async () => {
    await control(s, 'POST', '/faults', { latencyMs: 400 });
    const r = await rawExchange(s.url, [order(4806), order(4807) + rawRequest('GET', '/healthz')], { waitMs: 4000, gapMs: 150 });
    const answers = parseResponses(r.text, ['POST', 'POST', 'GET']);
    expect(answers.map((a) => a.status), r.text).toEqual([201]);
    expect(r.closedAfterMs).not.toBeNull();
    await control(s, 'DELETE', '/faults');
    await settle();
    expect(await workingAt(4806)).toBe(1);
    expect(await workingAt(4807)).toBe(0);
  });
});

describe('a client that asks for large answers and does not read them', () => {
  /** The service's resident memory, from /proc (kB). */
  const rssKb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${s.proc.pid}/status`, 'utf8'))![1]);

  /**
   * Connects, writes each of `writes` 100 ms apart and reads nothing until `quietMs` after the
   * first; then reads what the service had sent until it closes (or 3 s pass): the bytes, and
   * whether it had closed.
   */
  const unread = (writes: string[], quietMs: number) =>
    new Promise<{ bytes: number; closed: boolean }>((resolve) => {
      const socket = connect(Number(new URL(s.url).port), '127.0.0.1', () => {
        socket.pause();
        writes.forEach((w, i) => setTimeout(() => socket.writable && socket.write(w), i * 100));
      });
      let bytes = 0;
      socket.on('error', () => undefined);
      socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
      setTimeout(() => {
        socket.resume();
        const done = setTimeout(() => (socket.destroy(), resolve({ bytes, closed: false })), 3000);
        socket.once('close', () => (clearTimeout(done), resolve({ bytes, closed: true })));
      }, quietMs);
    });
  const DOC_REQUEST = 'GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

  it('pipelined: the service holds one answer per connection, not one per request (3 connections × 300 requests for the 335 KB OpenAPI document; load probe: +292 MB until the idle timeout)', async () => {
    const doc = await http(s.url, 'GET', '/openapi.json');
    const size = Buffer.byteLength(doc.text);
    expect(size).toBeGreaterThan(200_000);
    const before = rssKb();
    const batch = DOC_REQUEST.repeat(300);
    const grew = new Promise<number>((resolve) => setTimeout(() => resolve((rssKb() - before) / 1024), 1500));
    const seen = await Promise.all([0, 1, 2].map(() => unread([batch], 2000)));
    expect(await grew).toBeLessThan(60);
    // Each got what the kernel's buffers took (a few answers), then uWS closed it: its next
    // request was read while an answer waited for the socket.
    for (const r of seen) {
      expect(r.closed).toBe(true);
      expect(r.bytes).toBeLessThan(30 * size);
    }
    // Others are served meanwhile.
    expect((await http(s.url, 'GET', '/openapi.json')).text).toBe(doc.text);
  }, 30_000);

  it('a client that reads gets a large answer whole, and its connection stays open for the next request', async () => {
    // latin1 keeps one character per byte, so Content-Length splits the answers.
    const res = await rawExchange(s.url, [rawRequest('GET', '/openapi.json'), rawRequest('GET', '/healthz')], { gapMs: 500, waitMs: 2000 });
    const parsed = parseResponses(res.text, ['GET', 'GET']);
    expect(parsed.map((r) => r.status)).toEqual([200, 200]);
    expect(JSON.parse(Buffer.from(parsed[0]!.body, 'latin1').toString()).openapi).toMatch(/^3\./);
    expect(res.closedAfterMs).toBeNull();
  });
});
