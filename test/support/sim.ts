/**
 * The paper broker from the outside: a plain `ws` client that speaks the Tradovate frame
 * format by hand (no tradegate client code), the control API (of an in-process sim, a sim
 * process or a served service alike: anything with a `controlUrl`) and REST wrappers.
 */
import { WebSocket } from 'ws';
import type { SimHandle } from '../../src/sim/index.js';

// Wire messages are untyped JSON; tests read fields freely.
export type Msg = any;

interface Waiter {
  pred: (m: Msg) => boolean;
  resolve: (m: Msg) => void;
}

/** A raw protocol client that records every frame and every message inside `a[…]` frames. */
export class RawClient {
  readonly frames: string[] = [];
  readonly messages: Msg[] = [];
  private waiters: Waiter[] = [];
  private frameWaiters: Array<{ pred: (f: string) => boolean; resolve: (f: string) => void }> = [];
  readonly closed: Promise<{ code: number }>;
  private nextId = 1;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const text = data.toString();
      this.frames.push(text);
      for (const w of [...this.frameWaiters]) if (w.pred(text)) {
        this.frameWaiters.splice(this.frameWaiters.indexOf(w), 1);
        w.resolve(text);
      }
      if (!text.startsWith('a')) return;
      for (const m of JSON.parse(text.slice(1)) as Msg[]) {
        this.messages.push(m);
        for (const w of [...this.waiters]) if (w.pred(m)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(m);
        }
      }
    });
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve({ code })));
  }

  /** Opens a socket and waits for the `o` frame. */
  static async connect(url: string): Promise<RawClient> {
    const ws = new WebSocket(url);
    const client = new RawClient(ws);
    const open = client.nextFrame((f) => f === 'o');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    await open;
    return client;
  }

  /** Connects and authorizes with `token`. */
  static async authorized(url: string, token: string): Promise<RawClient> {
    const c = await RawClient.connect(url);
    const r = await c.request('authorize', '', token);
    if (r.s !== 200) throw new Error(`authorize failed: ${JSON.stringify(r)}`);
    return c;
  }

  /** Sends raw text. */
  send(text: string): void {
    this.ws.send(text);
  }

  /** Sends a 4-line request and resolves with its `{s,i,d}` response. */
  request(endpoint: string, query: string, body: unknown): Promise<Msg> {
    const id = this.nextId++;
    const text = typeof body === 'string' ? body : body === undefined ? '' : JSON.stringify(body);
    const answer = this.next((m) => m.i === id && m.s !== undefined);
    this.send(`${endpoint}\n${id}\n${query}\n${text}`);
    return answer;
  }

  /** Resolves with the next message (already received ones included) matching `pred`. */
  next(pred: (m: Msg) => boolean, timeoutMs = 5000): Promise<Msg> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ pred, resolve: (m) => (clearTimeout(timer), resolve(m)) });
    });
  }

  /** Resolves with the next frame matching `pred`. */
  nextFrame(pred: (f: string) => boolean, timeoutMs = 5000): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching frame in ${timeoutMs} ms`)), timeoutMs);
      this.frameWaiters.push({ pred, resolve: (f) => (clearTimeout(timer), resolve(f)) });
    });
  }

  /** Waits for a props event of `entityType` whose entity satisfies `pred`. */
  event(entityType: string, pred: (entity: Msg, eventType: string) => boolean = () => true, timeoutMs = 5000): Promise<Msg> {
    const existing = this.messages.find((m) => m.e === 'props' && m.d.entityType === entityType && pred(m.d.entity, m.d.eventType));
    if (existing) return Promise.resolve(existing.d);
    return this.next((m) => m.e === 'props' && m.d.entityType === entityType && pred(m.d.entity, m.d.eventType), timeoutMs).then((m) => m.d);
  }

  /** Props events received so far for `entityType`. */
  events(entityType: string): Msg[] {
    return this.messages.filter((m) => m.e === 'props' && m.d.entityType === entityType).map((m) => m.d);
  }

  /** Closes the socket. */
  close(): void {
    this.ws.terminate();
  }
}

/** Every entity type the sim streams. */
export const ALL_TYPES = [
  'account', 'cashBalance', 'position', 'order', 'orderVersion', 'command', 'commandReport',
  'executionReport', 'fill', 'fillPair', 'orderStrategy', 'orderStrategyLink',
];

/** Where a paper broker's control API answers. */
export interface Controlled {
  controlUrl: string;
}

/** JSON call on the control API: status and parsed body. */
export async function ctl(target: Controlled, method: string, path: string, body?: unknown): Promise<{ status: number; body: Msg }> {
  const res = await fetch(`${target.controlUrl}${path}`, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A control API call that must succeed: its body, or an Error naming the call. */
export async function control(target: Controlled, method: string, path: string, body?: unknown): Promise<Msg> {
  const r = await ctl(target, method, path, body);
  if (r.status >= 300) throw new Error(`control ${method} ${path} → ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The paper broker's whole state (orders, positions, users …). */
export async function simState(target: Controlled): Promise<Msg> {
  return control(target, 'GET', '/state');
}

/** REST call on `/v1`. */
export async function rest(sim: SimHandle, method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: Msg }> {
  const res = await fetch(`${sim.restUrl}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Creates a user with accounts and logs in; returns ids and the token. */
export async function userWithToken(sim: SimHandle, name: string, accounts = ['A1']): Promise<{ userId: number; accountIds: number[]; token: string }> {
  const created = await ctl(sim, 'POST', '/users', { name, password: 'pw', accounts: accounts.map((n) => ({ name: `${name}-${n}` })) });
  if (created.status !== 201) throw new Error(`create user: ${JSON.stringify(created.body)}`);
  const login = await rest(sim, 'POST', '/auth/accesstokenrequest', { name, password: 'pw', appId: 'test', appVersion: '1', cid: 0, sec: '' });
  return { userId: created.body.userId, accountIds: created.body.accounts.map((a: Msg) => a.id), token: login.body.accessToken };
}

/** Authorized socket subscribed to every entity type; resolves with the snapshot too. */
export async function syncedClient(sim: SimHandle, token: string, userId: number): Promise<{ c: RawClient; snapshot: Msg }> {
  const c = await RawClient.authorized(sim.wsUrl, token);
  const r = await c.request('user/syncrequest', '', { users: [userId], entityTypes: ALL_TYPES, splitResponses: false });
  if (r.s !== 200) throw new Error(`sync failed: ${JSON.stringify(r)}`);
  return { c, snapshot: r.d };
}

/** Broker REST login + POST calls, as another client of the same user would make them. */
export async function restClient(sim: SimHandle, name: string, password: string): Promise<(path: string, body: unknown) => Promise<Msg>> {
  const login = await rest(sim, 'POST', '/auth/accesstokenrequest', { name, password });
  const token = login.body.accessToken as string;
  return async (path, body) => (await rest(sim, 'POST', `/${path}`, body, token)).body;
}
