import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { runBrokerProbe } from '../../../bench/broker-probe.js';
import { decodeHistogram } from '../../../bench/hdr.js';
import { runHttpLoad } from '../../../bench/http-load.js';
import { LoadPool } from '../../../bench/pool.js';
import { runSseSubscribers } from '../../../bench/sse-subscribers.js';
import { startSim, type SimHandle } from '../../../src/sim/index.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
  socket: unknown;
}

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A server that records requests; /limited answers 429, everything else 201 echoing the body. */
async function recordingServer() {
  const seen: Seen[] = [];
  const { server, origin } = await listen((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body, at: performance.now(), socket: req.socket });
      if (req.url === '/limited') res.writeHead(429, { 'content-type': 'application/json' }).end('{"code":"RATE_LIMITED"}');
      else res.writeHead(201, { 'content-type': 'application/json' }).end(body || '{}');
    });
  });
  return { server, origin, seen };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('bench load generators', () => {
  it('runs an open-loop HTTP schedule over keep-alive sockets with unique {{seq}} values and labelled histograms', async () => {
    const { server, origin, seen } = await recordingServer();
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const result = await runHttpLoad({
      kind: 'http', origin, ratePerSec: 200, count: 100, uniquePrefix: 'run1',
      requests: [
        { method: 'POST', path: '/orders', tag: 'order', collect: true, meta: 'k0', headers: { 'content-type': 'application/json', 'idempotency-key': 'idem-{{seq}}' }, body: '{"id":"{{seq}}"}' },
        { method: 'GET', path: '/limited', tag: 'lim' },
      ],
    });
    expect(result.sent).toBe(100);
    expect(result.completed).toBe(100);
    expect(decodeHistogram(result.histograms['order:201']!).totalCount).toBe(50);
    expect(decodeHistogram(result.histograms['lim:429']!).totalCount).toBe(50);
    const posts = seen.filter((s) => s.method === 'POST');
    const ids = posts.map((s) => (JSON.parse(s.body) as { id: string }).id);
    expect(new Set(ids).size).toBe(50);
    for (const s of posts) expect(s.headers['idempotency-key']).toBe(`idem-${(JSON.parse(s.body) as { id: string }).id}`);
    expect(result.collected).toHaveLength(50);
    expect(result.collected.every((c) => c.meta === 'k0' && c.status === 201 && (c.body as { id: string }).id === c.seq)).toBe(true);
  });

  it('reuses keep-alive sockets: a new one opens only while every open one is busy', async () => {
    const { server, origin, seen } = await recordingServer();
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const result = await runHttpLoad({
      kind: 'http', origin, ratePerSec: 20, count: 20, uniquePrefix: 'ka',
      requests: [{ method: 'GET', path: '/ka', tag: 'ka' }],
    });
    expect(result.completed).toBe(20);
    // Whatever the machine's load (a slow answer overlaps the next arrival), sockets never
    // outnumber the requests that were in flight at once, and the server saw exactly those.
    expect(new Set(seen.map((s) => s.socket)).size).toBe(result.sockets);
    expect(result.sockets).toBeLessThanOrEqual(result.peakInFlight);
    expect(result.sockets).toBeLessThan(20);
  });

  it('records transport failures as errors with status 0 in the collected answers', async () => {
    const { server, origin } = await listen((req) => req.socket.destroy());
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const result = await runHttpLoad({
      kind: 'http', origin, ratePerSec: 100, count: 5, uniquePrefix: 'x',
      requests: [{ method: 'GET', path: '/', tag: 'dead', collect: true }],
    });
    expect(decodeHistogram(result.histograms['dead:error']!).totalCount).toBe(5);
    expect(result.collected.map((c) => c.status)).toEqual([0, 0, 0, 0, 0]);
    expect(Object.values(result.errors).reduce((a, b) => a + b, 0)).toBe(5);
  });

  it('splits one schedule over piscina workers keeping each template at its own exact rate', async () => {
    const { server, origin, seen } = await recordingServer();
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const pool = new LoadPool(2);
    cleanups.push(() => pool.close());
    const keys = ['k0', 'k1', 'k2', 'k3'];
    const merged = await pool.http({
      kind: 'http', origin, ratePerSec: 100, durationMs: 1000, uniquePrefix: 'split',
      requests: keys.map((k) => ({ method: 'GET' as const, path: `/r/${k}`, tag: k })),
    });
    expect(merged.sent).toBe(100);
    expect(merged.completed).toBe(100);
    for (const k of keys) {
      const times = seen.filter((s) => s.url === `/r/${k}`).map((s) => s.at);
      expect(times).toHaveLength(25);
      // 25/s per template → 40 ms apart on average, whichever worker sent it.
      const meanGap = (times[times.length - 1]! - times[0]!) / (times.length - 1);
      expect(meanGap).toBeGreaterThan(30);
      expect(meanGap).toBeLessThan(50);
      expect(merged.histograms.get(`${k}:201`)!.totalCount).toBe(25);
    }
  });

  it('places orders straight at the paper broker over its WebSocket and returns their ids', async () => {
    const sim: SimHandle = await startSim({ priceStepMs: 0 });
    cleanups.push(() => sim.close());
    await fetch(`${sim.controlUrl}/users`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'probe', password: 'pw', accounts: [{ name: 'PROBE1' }] }),
    });
    const result = await runBrokerProbe({
      kind: 'broker-ws', restUrl: sim.restUrl, wsUrl: sim.wsUrl, credentials: { name: 'probe', password: 'pw' },
      endpoint: 'order/placeorder', body: { action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Limit', price: 1000, timeInForce: 'GTC' },
      ratePerSec: 100, count: 20, clOrdIdPrefix: 'probe',
    });
    expect(result.failures).toEqual({});
    expect(result.orderIds).toHaveLength(20);
    expect(decodeHistogram(result.histograms.ok!).totalCount).toBe(20);
    const state = (await (await fetch(`${sim.controlUrl}/state`)).json()) as { orders: { id: number; clOrdId: string | null }[] };
    const atBroker = new Set(state.orders.filter((o) => o.clOrdId?.startsWith('probe-')).map((o) => o.id));
    expect(result.orderIds.every((id) => atBroker.has(id))).toBe(true);
  });

  it('opens SSE subscribers, reports ready after their snapshots and times the first status event', async () => {
    const streams = new Set<http.ServerResponse>();
    const { server, origin } = await listen((req, res) => {
      if (req.headers['x-api-key'] !== 'good') return void res.writeHead(401).end();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('retry: 3000\n\nid: 1\ndata: {"type":"snapshot","connectionId":"c1","status":"CONNECTED","ts":1}\n\n');
      streams.add(res);
      res.on('close', () => streams.delete(res));
    });
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const { port1, port2 } = new MessageChannel();
    const ready = new Promise<{ open: number; failed: number }>((resolve) => port1.once('message', resolve));
    const run = runSseSubscribers({ kind: 'sse', origin, keys: ['good'], count: 30, port: port2, waitTimeoutMs: 5000 });
    expect(await ready).toEqual({ type: 'ready', open: 30, failed: 0 });
    const sentAt = performance.timeOrigin + performance.now();
    for (const s of streams) s.write('id: 2\ndata: {"type":"status","connectionId":"c1",\ndata: "status":"RECONNECTING","ts":2}\n\n');
    const result = await run;
    port1.close();
    expect(result.open).toBe(30);
    expect(result.missing).toBe(0);
    expect(result.receivedAt).toHaveLength(30);
    expect(result.receivedAt.every((t) => t >= sentAt)).toBe(true);
  });
});
