/**
 * The uWebSockets.js front (DESIGN §2–§3): one catch-all uWS handler feeding the engine
 * pipeline — route match → body (bounded) → auth → rate limit → validation → idempotency →
 * handler — plus /healthz, /readyz, /api-docs and the SSE health stream.
 *
 * uWS rules kept here: the abort handler is registered (ResponseHandle) before anything
 * else; request/header data is copied out synchronously (uWS invalidates `req` after the
 * callback returns); every write after an await is corked; nothing is written after abort.
 */
import { randomUUID } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { ActorGateway } from '../actors/protocol.js';
import type { Config } from '../config.js';
import { AppError } from '../domain/problems.js';
import { redactUrl, type Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { renderApiDocsPage } from './api-docs-page.js';
import { Authenticator, type Authenticated, type SessionAuthenticator } from './auth.js';
import { ClientAbortedError, hasBody, parseJsonBody, readBody, tooLarge, validate } from './body.js';
import { HEALTH_STREAM_ROUTE, openHealthStream } from './health-stream.js';
import { IdempotencyGate, parseIdempotencyKey, requestFingerprint, type IdempotencyTicket } from './idempotency.js';
import { buildOpenApiDocument } from './openapi.js';
import { SlidingLogLimiter, rateLimitHeaders } from './rate-limit.js';
import { appErrorReply, jsonReply, problemReply, ResponseHandle, routeResponseReply, type Reply } from './respond.js';
import type { RouteContext, RouteDef, RouteRequest } from './route-types.js';
import { Router, stripApiPrefix } from './router.js';
import { HealthHub, type SseHub } from './sse-hub.js';

export interface HttpServerDeps {
  config: Config;
  store: Store;
  gateway: ActorGateway;
  routes: RouteDef<any, any>[];
  logger: Logger;
  clock?: () => number;
  /** Web-app session auth (cookie + CSRF), tried when a request carries no X-API-Key. */
  sessionAuth?: SessionAuthenticator;
}

export interface HttpServer {
  port: number;
  url: string;
  /** Stops accepting, lets in-flight requests finish (bounded by graceMs), ends SSE streams. */
  close(opts?: { graceMs?: number }): Promise<void>;
  /** So serve and the routes can publish health events. */
  sse: SseHub;
}

/** One request as the engine sees it, copied out of uWS's short-lived `req`. */
interface Exchange {
  handle: ResponseHandle;
  method: string;
  path: string;
  query: string;
  headers: Record<string, string>;
  ip: string;
  requestId: string;
  startedAt: number;
  metrics: string[];
  /** Headers every answer to this request carries (rate limit, request id). */
  extra: Record<string, string>;
  principal?: string;
}

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;
const SWEEP_MS = 60_000;

/** Starts the HTTP front on config.host:config.port (0 = a free port). */
export async function startHttpServer(deps: HttpServerDeps): Promise<HttpServer> {
  const engine = new Engine(deps);
  const app = uWS.App();
  app.any('/*', (res, req) => engine.accept(res, req));
  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(deps.config.host, deps.config.port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${deps.config.host}:${deps.config.port}`));
    });
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  const host = deps.config.host.includes(':') ? `[${deps.config.host}]` : deps.config.host;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${host}:${port}`,
    sse: engine.hub,
    close(opts = {}) {
      closing ??= (async () => {
        engine.closing = true;
        uWS.us_listen_socket_close(listenSocket);
        engine.hub.shutdown();
        await engine.drained(opts.graceMs ?? 10_000);
        engine.stop();
        // Ends idle keep-alive sockets too (present at runtime, missing from the typings).
        (app as unknown as { close?: () => void }).close?.();
      })();
      return closing;
    },
  };
}

class Engine {
  readonly hub: HealthHub;
  closing = false;
  private readonly clock: () => number;
  private readonly router: Router<RouteDef<any, any>>;
  private readonly auth: Authenticator;
  private readonly keyLimiter: SlidingLogLimiter;
  private readonly webhookLimiter: SlidingLogLimiter;
  private readonly gate: IdempotencyGate;
  private readonly openapiJson: string;
  private readonly docsHtml: string;
  private readonly owners = new Map<string, string>();
  private readonly unsubscribe: () => void;
  private readonly sweeper: NodeJS.Timeout;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly deps: HttpServerDeps) {
    const { config, store, logger } = deps;
    this.clock = deps.clock ?? Date.now;
    const routes = [...deps.routes, HEALTH_STREAM_ROUTE];
    this.router = new Router(routes);
    this.auth = new Authenticator(store, this.clock, logger, deps.sessionAuth);
    this.keyLimiter = new SlidingLogLimiter(config.rateLimitPerMin);
    this.webhookLimiter = new SlidingLogLimiter(config.webhookRateLimitPerMin);
    this.gate = new IdempotencyGate(store.idempotency, this.clock);
    this.hub = new HealthHub({ clock: this.clock, heartbeatMs: config.sseHeartbeatMs, log: logger });
    const doc = buildOpenApiDocument(routes, { config });
    this.openapiJson = JSON.stringify(doc);
    this.docsHtml = renderApiDocsPage(doc);
    this.unsubscribe = deps.gateway.onEvent((event) => {
      if (event.type !== 'status' && event.type !== 'bracket-alert') return;
      const userId = this.ownerOf(event.connectionId);
      if (userId) this.hub.publish(userId, event);
    });
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The uWS callback: copy what is needed out of `req`, then run the pipeline. */
  accept(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const handle = new ResponseHandle(res);
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = v;
    });
    const given = headers['x-request-id'];
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    const ex: Exchange = {
      handle,
      method: req.getMethod().toUpperCase(),
      path: req.getUrl(),
      query: req.getQuery() ?? '',
      headers,
      ip: Buffer.from(res.getRemoteAddressAsText()).toString(),
      requestId,
      startedAt: performance.now(),
      metrics: [],
      extra: { 'X-Request-Id': requestId },
    };
    this.inFlight++;
    // Runs synchronously up to its first await, so onData is registered inside this callback.
    this.run(ex)
      .catch((err: unknown) => this.finish(ex, this.internal(ex), err))
      .finally(() => {
        if (--this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      });
  }

  private async run(ex: Exchange): Promise<void> {
    if (this.closing) return this.finish(ex, problemReply('SHUTTING_DOWN', undefined, {}, { 'Retry-After': '1' }), undefined, true);
    const fixed = this.fixedRoute(ex);
    if (fixed) return this.finish(ex, fixed);
    const relative = stripApiPrefix(ex.path);
    const match = relative === undefined ? ({ kind: 'not-found' } as const) : this.router.match(ex.method, relative);
    if (match.kind === 'not-found') return this.finish(ex, problemReply('NOT_FOUND'));
    if (match.kind === 'method-not-allowed') {
      return this.finish(ex, problemReply('METHOD_NOT_ALLOWED', `Use ${match.allow.join(', ')}`, {}, { Allow: match.allow.join(', ') }));
    }
    const { route, params } = match;

    // Authentication and the rate limit run first, synchronously, still inside the uWS
    // callback, so the body reader below is registered before any await.
    let authd: Authenticated | undefined;
    try {
      authd = this.auth.authenticate(route.scope, ex.headers, params, ex.ip, ex.method);
      if (authd) this.limit(ex, authd);
    } catch (err) {
      if (err instanceof AppError) return this.finish(ex, appErrorReply(err));
      throw err;
    }

    let raw: Buffer = Buffer.alloc(0);
    if (hasBody(ex.headers)) {
      const limit = this.deps.config.bodyLimitBytes;
      if (Number(ex.headers['content-length'] ?? 0) > limit) return this.finish(ex, appErrorReply(tooLarge(limit)), undefined, true);
      try {
        raw = await readBody(ex.handle, limit);
      } catch (err) {
        if (err instanceof ClientAbortedError) return this.finish(ex, this.internal(ex));
        // Stop reading: the rest of an oversized body is never buffered; close the connection.
        if (err instanceof AppError) return this.finish(ex, appErrorReply(err), undefined, true);
        throw err;
      }
    }

    let ticket: IdempotencyTicket | undefined;
    try {
      const query = route.query ? validate(route.query, parseQuery(ex.query), 'query') : parseQuery(ex.query);
      if (route === HEALTH_STREAM_ROUTE && authd) {
        openHealthStream(
          { hub: this.hub, store: this.deps.store, gateway: this.deps.gateway, maxStreamsPerKey: this.deps.config.sseMaxStreamsPerKey, clock: this.clock },
          ex.handle,
          authd.auth,
          ex.headers,
          ex.extra,
        );
        return this.logLine(ex, 200);
      }
      const body = route.body ? validate(route.body, parseJsonBody(raw, ex.headers['content-type'], !!route.lenientContentType), 'body') : undefined;
      const request: RouteRequest<unknown, unknown> = { method: route.method, path: ex.path, params, query, headers: ex.headers, body, rawBody: raw, ip: ex.ip };

      let idempotencyKey: string | undefined;
      if (route.idempotent && authd) {
        const header = ex.headers['idempotency-key'];
        const fromBody = header === undefined ? route.idempotencyKeyFrom?.(request) : undefined;
        const rawKey = header ?? fromBody;
        if (rawKey !== undefined) {
          idempotencyKey = parseIdempotencyKey(rawKey);
          const fingerprint = requestFingerprint(route.method, route.path, params, body, query);
          const outcome = await this.gate.begin(authd.auth.userId, idempotencyKey, fingerprint);
          if (outcome.kind === 'in-flight') throw new AppError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight', {}, 1);
          if (outcome.kind === 'mismatch') throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for a different request');
          if (outcome.kind === 'replay') {
            const r = outcome.record;
            return this.finish(ex, { status: r.status, headers: { ...r.headers, 'Idempotent-Replayed': 'true' }, body: r.body });
          }
          ticket = outcome.ticket;
        }
      }

      const ctx: RouteContext<unknown, unknown> = {
        req: request,
        auth: authd?.auth ?? { userId: '', principalId: 'anonymous', scopes: [], kind: 'api-key' },
        requestId: ex.requestId,
        timing: { add: (name, dur) => ex.metrics.push(`${name.replace(/[^\w-]/g, '_')};dur=${dur.toFixed(1)}`) },
        log: this.deps.logger.child({ reqId: ex.requestId }),
      };
      if (idempotencyKey !== undefined) ctx.idempotencyKey = idempotencyKey;

      let reply: Reply;
      let failure: unknown;
      try {
        reply = routeResponseReply(await route.handler(ctx));
      } catch (err) {
        failure = err;
        reply = err instanceof AppError ? appErrorReply(err) : this.internal(ex);
      }
      if (ticket) {
        const t = ticket;
        ticket = undefined;
        const stored = await this.commit(ex, t, reply);
        if (!stored) return this.finish(ex, this.internal(ex));
      }
      return this.finish(ex, reply, failure);
    } catch (err) {
      ticket?.release();
      if (err instanceof AppError) return this.finish(ex, appErrorReply(err));
      throw err;
    }
  }

  /** Counts the request against its key's (or token's) window; 429 when full. */
  private limit(ex: Exchange, authd: Authenticated): void {
    ex.principal = authd.auth.principalId;
    const limiter = authd.bucket === 'key' ? this.keyLimiter : this.webhookLimiter;
    const decision = limiter.hit(authd.rateKey, this.clock());
    Object.assign(ex.extra, rateLimitHeaders(authd.bucket, decision));
    if (!decision.allowed) {
      throw new AppError('RATE_LIMITED', `Rate limit of ${decision.limit} requests per 60 s exceeded`, { limit: decision.limit }, decision.retryAfterSeconds);
    }
  }

  /** Stores the answer durably before it is sent; false when the store failed. */
  private async commit(ex: Exchange, ticket: IdempotencyTicket, reply: Reply): Promise<boolean> {
    const body = reply.body === undefined ? '' : reply.body.toString();
    try {
      await ticket.commit({ status: reply.status, headers: reply.headers, body });
      return true;
    } catch (err) {
      this.deps.logger.error({ err, reqId: ex.requestId }, 'idempotency record not stored');
      return false;
    }
  }

  private fixedRoute(ex: Exchange): Reply | undefined {
    const path = ex.path.length > 1 && ex.path.endsWith('/') ? ex.path.slice(0, -1) : ex.path;
    const fixed: Record<string, () => Reply> = {
      '/healthz': () => jsonReply(200, { status: 'ok' }),
      '/readyz': () => (this.closing ? problemReply('SHUTTING_DOWN') : jsonReply(200, { status: 'ready' })),
      '/api-docs': () => ({ status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' }, body: this.docsHtml }),
      '/api-docs/openapi.json': () => ({ status: 200, headers: { 'Content-Type': 'application/json' }, body: this.openapiJson }),
    };
    const make = fixed[path];
    if (!make) return undefined;
    if (ex.method !== 'GET') return problemReply('METHOD_NOT_ALLOWED', 'Use GET', {}, { Allow: 'GET' });
    return make();
  }

  /** The 500 answer; the error itself is logged once, on the request's line. */
  private internal(ex: Exchange): Reply {
    return problemReply('INTERNAL', 'Unexpected error; quote the requestId when reporting it', { requestId: ex.requestId });
  }

  /** Sends (when the client is still there) and writes the request's one log line. */
  private finish(ex: Exchange, reply: Reply, err?: unknown, closeConnection = false): void {
    const total = performance.now() - ex.startedAt;
    const timing = [...ex.metrics, `total;dur=${total.toFixed(1)}`].join(', ');
    const sent = ex.handle.send({ ...reply, headers: { ...reply.headers, ...ex.extra, 'Server-Timing': timing } }, closeConnection);
    // 499: the client went away before the answer (nginx's convention).
    this.logLine(ex, sent ? reply.status : 499, err);
  }

  private logLine(ex: Exchange, status: number, err?: unknown): void {
    const line = { reqId: ex.requestId, method: ex.method, path: redactUrl(ex.path), status, ms: Math.round(performance.now() - ex.startedAt), principal: ex.principal };
    if (status === 500) this.deps.logger.error(err instanceof Error ? { ...line, err } : line, 'request failed');
    else this.deps.logger.info(line, 'request');
  }

  private ownerOf(connectionId: string): string | undefined {
    let owner = this.owners.get(connectionId);
    if (!owner) {
      owner = this.deps.store.connections.byId(connectionId)?.userId;
      if (owner) this.owners.set(connectionId, owner);
    }
    return owner;
  }

  private sweep(): void {
    const now = this.clock();
    this.keyLimiter.sweep(now);
    this.webhookLimiter.sweep(now);
    this.auth.sweep(now);
  }

  /** Resolves when no request is in flight, or after `graceMs`. */
  drained(graceMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, graceMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  stop(): void {
    clearInterval(this.sweeper);
    this.unsubscribe();
  }
}

function parseQuery(query: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(query));
}
