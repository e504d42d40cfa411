/**
 * The SSE health stream over real sockets: snapshot per owned connection, status events
 * from the gateway, heartbeats, Last-Event-ID resume, the per-key cap and slow-consumer cut.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectionRecord } from '../../../src/store/index.js';
import { startEngine, type EngineHarness } from '../../support/engine.js';

interface Frame {
  id?: string;
  retry?: string;
  data?: Record<string, unknown>;
}

/** A minimal SSE client over node:http that records parsed frames. */
class SseClient {
  readonly frames: Frame[] = [];
  status = 0;
  headers: IncomingMessage['headers'] = {};
  body = '';
  ended = false;
  res?: IncomingMessage;
  private buf = '';
  private waiters: (() => void)[] = [];
  private req!: ClientRequest;
  readonly ready: Promise<void>;

  constructor(url: string, headers: Record<string, string>, opts: { paused?: boolean } = {}) {
    this.ready = new Promise((resolve, reject) => {
      this.req = httpRequest(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
        this.res = res;
        this.status = res.statusCode ?? 0;
        this.headers = res.headers;
        if (opts.paused) {
          res.pause();
          res.on('close', () => this.finish());
          res.on('error', () => this.finish());
          resolve();
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => this.feed(chunk));
        res.on('end', () => this.finish());
        res.on('close', () => this.finish());
        res.on('error', () => this.finish());
        resolve();
      });
      this.req.on('error', (err) => (this.status ? this.finish() : reject(err)));
      this.req.end();
    });
  }

  private feed(chunk: string): void {
    this.body += chunk;
    this.buf += chunk;
    let at: number;
    while ((at = this.buf.indexOf('\n\n')) >= 0) {
      const block = this.buf.slice(0, at);
      this.buf = this.buf.slice(at + 2);
      const frame: Frame = {};
      const data: string[] = [];
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(': ');
        const value = rest.join(': ');
        if (field === 'id') frame.id = value;
        else if (field === 'retry') frame.retry = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length) frame.data = JSON.parse(data.join('\n')) as Record<string, unknown>;
      this.frames.push(frame);
    }
    this.wake();
  }

  private finish(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves with the first recorded frame (from index `from`) matching `pred`. */
  async next(pred: (f: Frame) => boolean, from = 0): Promise<Frame> {
    for (;;) {
      const found = this.frames.slice(from).find(pred);
      if (found) return found;
      if (this.ended) throw new Error(`stream ended; frames: ${JSON.stringify(this.frames)}; body: ${this.body}`);
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  close(): void {
    this.req.destroy();
  }
}

let h: EngineHarness;
let conns: ConnectionRecord[];

const connection = (userId: string, name: string) =>
  h.store.connections.create({
    userId, name, broker: 'paper', environment: 'paper',
    restUrl: 'http://127.0.0.1:1/v1', wsUrl: 'ws://127.0.0.1:1/v1/websocket',
    credentials: { name: 'u', password: 'p' },
  });

/** Waits until `cond` holds (the server sees a disconnect a few loop turns after the client). */
async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
  expect(cond()).toBe(true);
}

beforeAll(async () => {
  h = await startEngine({ sseHeartbeatMs: 100, sseMaxStreamsPerKey: 2, rateLimitPerMin: 1000 });
  conns = [await connection(h.userId, 'one'), await connection(h.userId, 'two')];
  await connection(h.otherUserId, 'theirs');
  h.gateway.emit({ type: 'status', connectionId: conns[0]!.id, status: 'CONNECTED', reason: 'connect', ts: 1000 });
});
afterAll(async () => {
  await h.stop();
});

const clients: SseClient[] = [];
const stream = (key: string, extra: Record<string, string> = {}, opts: { paused?: boolean } = {}) => {
  const c = new SseClient(h.url('/api/v1/connection-health/stream'), { 'X-API-Key': key, ...extra }, opts);
  clients.push(c);
  return c;
};

afterEach(async () => {
  for (const c of clients.splice(0)) {
    c.res?.resume();
    c.close();
  }
  await until(() => h.server.sse.subscriberCount() === 0);
});

describe('health stream', () => {
  it('opens with retry, one snapshot per owned connection, then status events and heartbeats', async () => {
    const c = stream(h.keys.read);
    await c.ready;
    expect(c.status).toBe(200);
    expect(c.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(c.headers['cache-control']).toBe('no-cache');
    expect(c.headers['x-accel-buffering']).toBe('no');
    expect(c.headers['ratelimit-policy']).toBe('"key";q=1000;w=60');
    await c.next((f) => f.retry === '3000');
    const s1 = await c.next((f) => f.data?.['type'] === 'snapshot' && f.data['connectionId'] === conns[0]!.id);
    expect(s1.data).toEqual({ type: 'snapshot', connectionId: conns[0]!.id, status: 'CONNECTED', ts: 1000, reason: 'connect' });
    const s2 = await c.next((f) => f.data?.['type'] === 'snapshot' && f.data['connectionId'] === conns[1]!.id);
    expect(s2.data).toMatchObject({ status: 'CONNECTING' });
    expect(c.frames.filter((f) => f.data?.['type'] === 'snapshot')).toHaveLength(2);

    h.gateway.emit({ type: 'status', connectionId: conns[0]!.id, status: 'RECONNECTING', reason: 'disconnect', ts: 2000, detail: 'socket closed' });
    const st = await c.next((f) => f.data?.['type'] === 'status');
    expect(st.data).toEqual({ type: 'status', connectionId: conns[0]!.id, status: 'RECONNECTING', ts: 2000, reason: 'disconnect', detail: 'socket closed' });
    expect(Number(st.id)).toBe(Number(s1.id) + 1);

    h.gateway.emit({ type: 'bracket-alert', connectionId: conns[1]!.id, accountId: '7', orderId: '42', ts: 3000, detail: 'stop loss not placed' });
    const alert = await c.next((f) => f.data?.['type'] === 'bracket-alert');
    expect(alert.data).toEqual({ type: 'bracket-alert', connectionId: conns[1]!.id, accountId: '7', orderId: '42', ts: 3000, detail: 'stop loss not placed' });

    const hb = await c.next((f) => f.data?.['type'] === 'heartbeat', c.frames.indexOf(alert) + 1);
    expect(Object.keys(hb.data!).sort()).toEqual(['ts', 'type']);
    expect(hb.id).toBe(alert.id);
    c.close();
  });

  it('shows a user only their own connections and events', async () => {
    const c = stream(h.keys.other);
    await c.next((f) => f.data?.['type'] === 'snapshot');
    h.gateway.emit({ type: 'status', connectionId: conns[1]!.id, status: 'FAILED', reason: 'fatal-error', ts: 4000 });
    await c.next((f) => f.data?.['type'] === 'heartbeat');
    const seen = c.frames.filter((f) => f.data && 'connectionId' in f.data).map((f) => f.data!['connectionId']);
    expect(seen.length).toBe(1);
    expect(seen).not.toContain(conns[0]!.id);
    expect(seen).not.toContain(conns[1]!.id);
    c.close();
  });

  it('resumes from Last-Event-ID without snapshots, and falls back to snapshots for an unknown id', async () => {
    const a = stream(h.keys.read);
    await a.next((f) => f.data?.['type'] === 'snapshot');
    h.gateway.emit({ type: 'status', connectionId: conns[0]!.id, status: 'CONNECTED', reason: 'reconnect', ts: 5000 });
    const seen = await a.next((f) => f.data?.['ts'] === 5000);
    a.close();
    h.gateway.emit({ type: 'status', connectionId: conns[1]!.id, status: 'CONNECTED', reason: 'connect', ts: 6000 });
    h.gateway.emit({ type: 'status', connectionId: conns[1]!.id, status: 'AUTH_EXPIRED', reason: 'auth-expired', ts: 7000 });

    const b = stream(h.keys.read, { 'Last-Event-ID': seen.id! });
    await b.next((f) => f.data?.['ts'] === 7000);
    const events = b.frames.filter((f) => f.data && f.data['type'] !== 'heartbeat');
    expect(events.map((f) => f.data!['ts'])).toEqual([6000, 7000]);
    expect(Number(events[0]!.id)).toBe(Number(seen.id) + 1);
    b.close();

    const c = stream(h.keys.read, { 'Last-Event-ID': '5' });
    await c.next((f) => f.data?.['type'] === 'snapshot' && f.data['connectionId'] === conns[1]!.id);
    expect(c.frames.find((f) => f.data?.['type'] === 'snapshot' && f.data['connectionId'] === conns[1]!.id)!.data).toMatchObject({ status: 'AUTH_EXPIRED' });
    c.close();
  });

  it('caps concurrent streams per key with 429 TOO_MANY_STREAMS and frees the slot on disconnect', async () => {
    const a = stream(h.keys.rw);
    const b = stream(h.keys.rw);
    await a.next((f) => f.retry !== undefined);
    await b.next((f) => f.retry !== undefined);
    const c = stream(h.keys.rw);
    await c.ready;
    expect(c.status).toBe(429);
    await until(() => c.ended);
    expect(JSON.parse(c.body)).toMatchObject({ code: 'TOO_MANY_STREAMS' });
    const otherKey = stream(h.keys.read);
    await otherKey.ready;
    expect(otherKey.status).toBe(200);
    a.close();
    await until(() => h.server.sse.subscriberCount() === 2);
    const d = stream(h.keys.rw);
    await d.ready;
    expect(d.status).toBe(200);
    for (const s of [b, d, otherKey]) s.close();
  });

  it('cuts a client that stops reading once its buffer passes the bound, and keeps a reading client', async () => {
    const slow = stream(h.keys.read, {}, { paused: true });
    await slow.ready;
    const fast = stream(h.keys.rw);
    await fast.next((f) => f.retry !== undefined);
    await until(() => h.server.sse.subscriberCount() === 2);
    const detail = 'x'.repeat(32 * 1024);
    let sent = 0;
    while (h.server.sse.subscriberCount() === 2 && sent < 4000) {
      h.server.sse.publish(h.userId, { type: 'status', connectionId: conns[0]!.id, status: 'CONNECTED', ts: 10_000 + sent, detail });
      sent++;
      await new Promise((r) => setImmediate(r));
    }
    expect(h.server.sse.subscriberCount()).toBe(1);
    const last = 10_000 + sent - 1;
    await fast.next((f) => f.data?.['ts'] === last);
    expect(fast.ended).toBe(false);
    slow.res?.resume();
    await until(() => slow.ended);
    fast.close();
  });

  it('rejects the stream without a key with 401', async () => {
    const anon = stream('');
    await anon.ready;
    expect(anon.status).toBe(401);
  });
});
