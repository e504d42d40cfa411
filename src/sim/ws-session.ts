/**
 * One Tradovate-protocol WebSocket session: `o` on open, 4-line requests, `authorize`,
 * client `[]` heartbeats, `a[…]` frames that batch every message produced in one tick,
 * `c[code,"reason"]` on close. Injected silence drops everything without closing TCP.
 */
import type { WebSocket } from 'ws';
import type { AuthSession } from './auth.js';
import type { EventSink, SimCore, WsClient } from './core.js';
import type { EntityType } from './state.js';
import { authorizeToken, parseBodyText, parseQueryText, type WireResult } from './wire.js';

/** Timing knobs of a session. */
export interface SessionTimers {
  authorizeTimeoutMs: number;
  clientTimeoutMs: number;
}

/**
 * Gap between a subscription's answer and its first data. A separate frame is enough for a
 * browser (each frame is its own task), but a Node `ws` client reads frames that arrive in one
 * TCP read synchronously, before an awaited answer resumes its caller: a short pause keeps the
 * data out of that read.
 */
export const FIRST_DATA_DELAY_MS = 10;

/** Splits a request into its four lines; missing lines are empty (as Tradovate reads them). */
export function parseRequest(text: string): { endpoint: string; id: string; query: string; body: string } {
  const a = text.indexOf('\n');
  if (a < 0) return { endpoint: text, id: '', query: '', body: '' };
  const b = text.indexOf('\n', a + 1);
  if (b < 0) return { endpoint: text.slice(0, a), id: text.slice(a + 1), query: '', body: '' };
  const c = text.indexOf('\n', b + 1);
  if (c < 0) return { endpoint: text.slice(0, a), id: text.slice(a + 1, b), query: text.slice(b + 1), body: '' };
  return { endpoint: text.slice(0, a), id: text.slice(a + 1, b), query: text.slice(b + 1, c), body: text.slice(c + 1) };
}

/** Normalises an endpoint: lower case, no leading slash, no `v1/` prefix. */
export function normaliseEndpoint(endpoint: string): string {
  return endpoint.trim().replace(/^\/+/, '').replace(/^v1\//i, '').toLowerCase();
}

let nextSessionId = 1;

/** A connected client. */
export class WsSession implements EventSink, WsClient {
  readonly id = nextSessionId++;
  userId = 0;
  types: ReadonlySet<EntityType> = new Set();
  accounts?: ReadonlySet<number>;
  auth?: AuthSession;
  private queue: string[] = [];
  private scheduled = false;
  private afterResponse: Array<() => void> = [];
  private lastHeard = Date.now();
  private authTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly core: SimCore,
    private readonly timers: SessionTimers,
    private readonly onGone: (s: WsSession) => void,
    private readonly onError: (err: unknown, endpoint: string) => void = () => {},
  ) {
    ws.on('message', (data, isBinary) => this.onMessage(isBinary ? '' : data.toString()));
    ws.on('close', () => this.gone());
    ws.on('error', () => this.gone());
    this.authTimer = setTimeout(() => this.close(3001, 'Authorization timeout'), timers.authorizeTimeoutMs);
    if (!core.faults.silent) ws.send('o');
  }

  /** Queues a message for the next `a[…]` frame (flushed once per tick). */
  push(message: string): void {
    if (this.closed || this.core.faults.silent) return;
    this.queue.push(message);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Runs `fn` after the frame now being built has gone out (first data of a subscription). */
  later(fn: () => void): void {
    this.afterResponse.push(fn);
  }

  /** Starts or replaces this socket's `props` subscription. */
  sync(types: ReadonlySet<EntityType>, accounts: ReadonlySet<number> | undefined): void {
    this.types = types;
    this.accounts = accounts;
    this.core.subscribe(this);
  }

  /** Server heartbeat tick: `h`, and drop the client when it has been silent too long. */
  heartbeat(now: number): void {
    if (this.closed) return;
    if (now - this.lastHeard > this.timers.clientTimeoutMs) {
      this.close(3000, 'Client heartbeat timeout');
      return;
    }
    if (!this.core.faults.silent) this.ws.send('h');
  }

  /** Sends a `shutdown` event, then closes. */
  shutdown(reasonCode: string, reason: string): void {
    this.push(JSON.stringify({ e: 'shutdown', d: { reasonCode, reason } }));
    setImmediate(() => setImmediate(() => this.close(1000, reason)));
  }

  /** Polite close: `c[code,"reason"]`, then the WebSocket close handshake. */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.flush();
    if (!this.core.faults.silent) this.ws.send(`c[${code},${JSON.stringify(reason)}]`);
    this.gone();
    this.ws.close(1000);
  }

  /** Abrupt drop: the TCP connection is destroyed, no close frame. */
  terminate(): void {
    this.gone();
    this.ws.terminate();
  }

  private gone(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.authTimer);
    this.queue = [];
    this.onGone(this);
  }

  private flush(): void {
    this.scheduled = false;
    if (this.closed) return;
    if (this.queue.length > 0) {
      const frame = `a[${this.queue.join(',')}]`;
      this.queue = [];
      if (!this.core.faults.silent) this.ws.send(frame);
    }
    if (this.afterResponse.length === 0) return;
    const due = this.afterResponse;
    this.afterResponse = [];
    setTimeout(() => {
      if (this.closed) return;
      for (const fn of due) fn();
    }, FIRST_DATA_DELAY_MS);
  }

  private onMessage(text: string): void {
    this.lastHeard = Date.now();
    if (this.closed || this.core.faults.silent || text === '[]') return;
    const latency = this.core.faults.latencyMs;
    // Equal delays fire in arrival order, so responses keep their order under latency too.
    if (latency > 0) setTimeout(() => this.handle(text), latency);
    else this.handle(text);
  }

  private handle(text: string): void {
    if (this.closed) return;
    const req = parseRequest(text);
    const id = Number(req.id.trim());
    if (req.id.trim() === '' || !Number.isInteger(id)) {
      this.push(JSON.stringify({ s: 400, d: 'Invalid request id' }));
      return;
    }
    const endpoint = normaliseEndpoint(req.endpoint);
    if (endpoint === 'authorize') return this.authorize(id, authorizeToken(req.body));
    if (!this.auth) return this.respond(id, { s: 401, d: 'Access is denied' });
    const parsed = parseBodyText(req.body);
    if ('error' in parsed) return this.respond(id, { s: 400, d: parsed.error });
    let result: WireResult;
    try {
      result = this.core.dispatch(endpoint, this.auth, parseQueryText(req.query), parsed.body, this);
    } catch (err) {
      // A defect in one handler must not take the whole broker (and every socket) down.
      this.onError(err, endpoint);
      result = { s: 500, d: 'Internal error' };
    }
    this.respond(id, result);
    this.core.flushEvents();
  }

  private authorize(id: number, token: string): void {
    const check = this.core.auth.check(token);
    if (!check.ok) return this.respond(id, { s: 401, d: 'Invalid access token' });
    if (this.auth && this.auth.userId !== check.session.userId) return this.respond(id, { s: 401, d: 'Access is denied' });
    clearTimeout(this.authTimer);
    this.auth = check.session;
    this.userId = check.session.userId;
    this.respond(id, { s: 200 });
  }

  private respond(i: number, r: WireResult): void {
    this.push(JSON.stringify(r.d === undefined ? { s: r.s, i } : { s: r.s, i, d: r.d }));
  }
}
