/**
 * The paper broker: a Tradovate-protocol server (REST on `/v1`, WebSocket on `/v1/websocket`,
 * case-insensitive paths) over the matching engine, plus the loopback-only `/control` API.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { browserRefusal, control, isLoopback } from './control.js';
import { SimCore } from './core.js';
import type { SessionMode } from './sessions.js';
import type { AccountRules, IdReservation } from './state.js';
import { parseBodyText } from './wire.js';
import { normaliseEndpoint, WsSession } from './ws-session.js';

/** Options of `startSim`. */
export interface SimOptions {
  /** 0 = random free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  seed?: number;
  /** Server `h` cadence, default 2500. */
  heartbeatMs?: number;
  /** Drop clients silent this long, default 15000. */
  clientTimeoutMs?: number;
  /** Close sockets not authorized this long after connect, default 5000. */
  authorizeTimeoutMs?: number;
  /** Default 80 min. */
  tokenLifetimeMs?: number;
  /** User-level request limits; defaults are high because the bench drives thousands per second. */
  limits?: { requestsPerSecond?: number; requestsPerHour?: number };
  /** Concurrent sessions per user before the oldest is revoked, default 2 (Tradovate's rule). */
  maxSessionsPerUser?: number;
  /** Final orders kept with their entities before the oldest are archived, default 10,000 (bounds memory under the bench). */
  retainFinalOrders?: number;
  /** Price walk step interval, default 250; 0 = prices move only through the control API. */
  priceStepMs?: number;
  /** Trading sessions: `cme` (Globex hours, maintenance break, Day orders expire at the close) or `none` (default: always open). */
  sessions?: SessionMode;
  /** Evaluation rules every account created through the control API starts with. */
  accountRules?: AccountRules;
  /**
   * A file that keeps the ids handed out across restarts (`serve --paper` keeps it in its data
   * dir): a run starts past every id an earlier one may have given. Without it ids start over.
   */
  idFile?: string;
  logger?: Logger;
  clock?: () => number;
}

/** A running paper broker. */
export interface SimHandle {
  port: number;
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** url + '/v1' */
  restUrl: string;
  /** `ws://127.0.0.1:PORT/v1/websocket` */
  wsUrl: string;
  /** url + '/control' */
  controlUrl: string;
  close(): Promise<void>;
}

const MAX_BODY = 1 << 20;

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(undefined);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status, { 'content-length': 0 }).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
}

/**
 * Ids reserved in a file: the sequence starts at the number it holds, and each reservation
 * writes the next one (synchronously: a crash after ids were given leaves them reserved).
 * Clients' probe: a restarted `serve --paper` gave a new order the id of one placed before the
 * restart, and a cancel of that old id (kept by a bot, or replayed) cancelled the new order.
 */
export function idFileReservation(path: string): IdReservation {
  let floor = 0;
  try {
    const text = readFileSync(path, 'utf8').trim();
    // Digits only: an empty file reads as Number('') = 0, and ids given before would be given again (re-probe).
    floor = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (!Number.isSafeInteger(floor) || floor < 0) throw new Error(`${path} does not hold an id: remove it to start the paper broker's ids over`);
  return {
    floor,
    reserve(upTo) {
      // On disk before an id of the block is given (fsync, rename, then the directory's fsync): a
      // power loss must not leave an empty file. Private like every file of the data dir (store/file-modes.ts).
      const tmp = `${path}.tmp`;
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeSync(fd, `${upTo}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, path);
      const dir = openSync(dirname(path), 'r');
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    },
  };
}

/** Starts the paper broker and resolves once it listens. */
export async function startSim(opts: SimOptions = {}): Promise<SimHandle> {
  const clock = opts.clock ?? Date.now;
  const core = new SimCore({
    seed: opts.seed ?? 1,
    clock,
    tokenLifetimeMs: opts.tokenLifetimeMs ?? 80 * 60_000,
    maxSessionsPerUser: opts.maxSessionsPerUser ?? 2,
    requestsPerSecond: opts.limits?.requestsPerSecond ?? 1_000_000,
    requestsPerHour: opts.limits?.requestsPerHour ?? 1_000_000_000,
    retainFinalOrders: opts.retainFinalOrders,
    sessions: opts.sessions,
    accountRules: opts.accountRules,
    priceStepMs: opts.priceStepMs,
    ids: opts.idFile === undefined ? undefined : idFileReservation(opts.idFile),
  });
  const timers = { authorizeTimeoutMs: opts.authorizeTimeoutMs ?? 5000, clientTimeoutMs: opts.clientTimeoutMs ?? 15_000 };
  const sessions = new Set<WsSession>();
  const log = opts.logger;

  async function rest(req: IncomingMessage, res: ServerResponse, endpoint: string, query: URLSearchParams): Promise<void> {
    const text = await readBody(req);
    if (text === undefined) return send(res, 413, 'Request body too large');
    const parsed = parseBodyText(text);
    if ('error' in parsed) return send(res, 400, parsed.error);
    const body = parsed.body;
    const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
    const check = bearer ? core.auth.check(bearer) : undefined;
    const latency = core.faults.latencyMs;
    if (latency > 0) await new Promise((r) => setTimeout(r, latency));
    const result = core.dispatch(endpoint, check?.ok ? check.session : undefined, query, body);
    core.flushEvents();
    send(res, result.s, result.s === 429 ? undefined : (result.d ?? null));
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.toLowerCase();
    if (path.startsWith('/v1/')) return rest(req, res, normaliseEndpoint(url.pathname), url.searchParams);
    if (path === '/control' || path.startsWith('/control/')) {
      if (!isLoopback(req.socket.remoteAddress)) return send(res, 403, { error: 'control API is loopback only' });
      const refused = browserRefusal(req.headers);
      if (refused) return send(res, 403, { error: refused });
      const text = await readBody(req);
      let body: Record<string, unknown> = {};
      try {
        const parsed: unknown = text && text.trim() ? JSON.parse(text) : {};
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
      } catch {
        return send(res, 400, { error: 'body must be a JSON object' });
      }
      const r = control({ core, sessions: () => sessions }, req.method ?? 'GET', path.slice('/control'.length), url.searchParams, body);
      // Bodies are not logged: user creation carries passwords.
      log?.info({ method: req.method, path, status: r.status }, 'paper broker control');
      return send(res, r.status, r.body);
    }
    send(res, 404, 'Not found');
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch((err: unknown) => {
      log?.error({ err }, 'paper broker request failed');
      if (!res.headersSent) send(res, 500, 'Internal error');
    });
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY });
  server.on('upgrade', (req, socket, head) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname.toLowerCase();
    if (path !== '/v1/websocket') {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new WsSession(ws, core, timers, (s) => {
        sessions.delete(s);
        core.unsubscribe(s);
        log?.debug({ session: s.id, userId: s.userId }, 'paper broker socket closed');
      }, (err, endpoint) => log?.error({ err, endpoint }, 'paper broker request failed'));
      sessions.add(session);
      log?.debug({ session: session.id }, 'paper broker socket opened');
    });
  });

  // Timers start only once listening: a taken port must not leave intervals keeping the process alive.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const heartbeat = setInterval(() => {
    const now = Date.now();
    for (const s of sessions) s.heartbeat(now);
  }, opts.heartbeatMs ?? 2500);
  const stepMs = opts.priceStepMs ?? 250;
  const step = () => {
    try {
      core.tickPrices();
    } catch (err) {
      log?.error({ err }, 'paper broker price step failed');
    }
  };
  const walk = stepMs > 0 ? setInterval(step, stepMs) : undefined;
  // Session closes and trade-date rolls happen on the clock, also when nothing else is going on.
  const sessionTimer = setInterval(() => {
    try {
      core.advance();
      core.flushEvents();
    } catch (err) {
      log?.error({ err }, 'paper broker session step failed');
    }
  }, 1000);
  const port = (server.address() as AddressInfo).port;
  const host = opts.host && opts.host !== '0.0.0.0' && opts.host !== '::' ? opts.host : '127.0.0.1';
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  log?.info({ port }, 'paper broker listening');
  return {
    port,
    url,
    restUrl: `${url}/v1`,
    wsUrl: `${url.replace(/^http/, 'ws')}/v1/websocket`,
    controlUrl: `${url}/control`,
    async close() {
      clearInterval(heartbeat);
      if (walk) clearInterval(walk);
      clearInterval(sessionTimer);
      for (const s of [...sessions]) s.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
