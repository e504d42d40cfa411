/**
 * The uWebSockets.js front (DESIGN §2–§3): one catch-all uWS handler that copies the request
 * out of uWS and runs it through the pipeline (pipeline.ts), plus /healthz, /readyz,
 * /api-docs, the SSE health stream and graceful close.
 *
 * uWS rules kept here: the abort handler is registered (ResponseHandle) before anything
 * else; request/header data is copied out synchronously (uWS invalidates `req` after the
 * callback returns); every write after an await is corked; nothing is written after abort.
 */
import { randomBytes } from 'node:crypto';
import { brotliCompressSync, constants as zlibConstants, gzipSync } from 'node:zlib';
import uWS from 'uWebSockets.js';
import type { ActorGateway } from '../actors/protocol.js';
import type { Config } from '../config.js';
import { accessLineWriter, type Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { API_DOCS_STYLE_HASH, renderApiDocsPage } from './api-docs-page.js';
import { Authenticator, type SessionAuthenticator } from './auth.js';
import { TrustedProxies } from './client-address.js';
import { bridgeActorEvents, HEALTH_STREAM_ROUTE, openHealthStream, SSE_HEADERS, type HealthStreamDeps } from './health-stream.js';
import { recordGuardEvents } from './guard-events.js';
import { IdempotencyGate } from './idempotency.js';
import type { NamedThreadUsage, ServiceMetrics } from './metrics.js';
import { threadUsage } from '../thread-usage.js';
import { buildOpenApiDocument } from './openapi.js';
import { internalReply, replyStage, runPipeline, type Exchange, type PipelineDeps } from './pipeline.js';
import { SlidingLogLimiter, type RateLimiter } from './rate-limit.js';
import { readRequestHead } from './request-head.js';
import { appErrorReply, jsonReply, problemReply, ResponseHandle, uwsRequestCallback, type Reply } from './respond.js';
import { AppError } from '../domain/problems.js';
import type { RouteDef } from './route-types.js';
import { Router } from './router.js';
import { ReachNotices, type NodeReach } from './reach-notices.js';
import { foreignHostCheck } from './host-check.js';
import { HealthHub, type SseHub } from './sse-hub.js';
import { negotiateEncoding, securityHeaders, type Coding, type WebApp } from './static-files.js';
import { startStreamGuard } from './stream-guard.js';

export interface HttpServerDeps {
  config: Config;
  store: Store;
  gateway: ActorGateway;
  routes: RouteDef<any, any>[];
  logger: Logger;
  clock?: () => number;
  /** Web-app session auth (cookie + CSRF), tried when a request carries no X-API-Key. */
  sessionAuth?: SessionAuthenticator;
  /** The web app's pages and assets (served at `/`, outside the API prefixes). */
  web?: WebApp;
  /** How often open streams' credentials are re-read (default STREAM_GUARD.recheckMs). */
  streamRecheckMs?: number;
  /** Request metrics (/metrics); the server also feeds it SSE subscribers and connection statuses. */
  metrics?: ServiceMetrics;
  /** Every thread's usage for /metrics (serve passes its actor workers and paper broker); the front's own is added. */
  threads?: () => Promise<NamedThreadUsage[]>;
  /** Rate limiters; default the in-memory sliding logs (cluster mode passes its shared ones). */
  limiters?: { key: RateLimiter; webhook: RateLimiter };
  /** Cluster mode: health events carry the cluster's event ids (see HealthHub `externalIds`). */
  eventIds?: { position(): number };
  /** One node: the health stream's first event id (LmdbStore.claimStreamIdBase). */
  firstEventId?: number;
  /**
   * Cluster mode: the events of the actors this node runs (the gateway's come from every node).
   * Guard events are journaled and their locks stored from these, so once cluster-wide. Default: the gateway's.
   */
  ownEvents?: Pick<ActorGateway, 'onEvent'>;
  /** Cluster mode: whether this node reaches NATS (/readyz, and the health stream's notices). */
  reach?: NodeReach;
}

export interface HttpServer {
  port: number;
  url: string;
  /** Stops accepting, lets in-flight requests finish (bounded by graceMs), ends SSE streams. */
  close(opts?: { graceMs?: number }): Promise<void>;
  /**
   * So serve and the routes can publish health events, and end the streams of a credential
   * that stopped holding (`sse.closeStreams`: key revoked, password changed, user deleted).
   */
  sse: SseHub;
  /** The idempotency gate of the API's requests: a restart holds the keys of work it takes up (resumeLateOutcomes). */
  idempotencyGate: IdempotencyGate;
}

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;
/**
 * A client's request id that holds one of our secrets (an API key or a webhook token, whole or
 * with its secret part): not taken, since request ids are logged, echoed and journaled as they are
 * (fuzz probe: a key sent as X-Request-Id landed in the access log).
 */
const SECRET_IN_ID = /(tgk|whk)_[A-Za-z0-9]{12}_[A-Za-z0-9]{8}/;

/** A path of the API (both prefixes), not of the web app or the fixed routes. */
function isApiPath(path: string): boolean {
  return path.startsWith('/api/') || path.startsWith('/v1/');
}

/**
 * Request ids this process gives: a random prefix per start and a counter, unique across restarts
 * and nodes without a random draw per request (a UUID cost ~2 µs and a 36-character string).
 */
class RequestIds {
  private readonly prefix = `${randomBytes(6).toString('base64url')}-`;
  private seq = 0;

  next(): string {
    return this.prefix + (++this.seq).toString(36);
  }
}

/**
 * The API docs page: the web app's browser policy, but its one inline stylesheet allowed (it has
 * no script at all), and nothing it may load or frame.
 */
const DOCS_HEADERS: Readonly<Record<string, string>> = {
  ...securityHeaders(false),
  'Content-Security-Policy': `default-src 'none'; style-src ${API_DOCS_STYLE_HASH}; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
  'Content-Type': 'text/html; charset=utf-8',
};

/**
 * A document served as it is or compressed, as the client accepts (the API docs page and the
 * OpenAPI document are ~300 KB each, ~10× smaller compressed); compressed once, at start.
 */
class CompressedDocument {
  private readonly bodies: Record<Coding, Buffer>;

  constructor(
    text: string,
    private readonly headers: Readonly<Record<string, string>>,
  ) {
    const raw = Buffer.from(text);
    this.bodies = {
      identity: raw,
      gzip: gzipSync(raw, { level: 9 }),
      br: brotliCompressSync(raw, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 9 } }),
    };
  }

  reply(accept: string): Reply {
    const coding = negotiateEncoding(accept);
    const headers: Record<string, string> = { ...this.headers, Vary: 'Accept-Encoding' };
    if (coding !== 'identity') headers['Content-Encoding'] = coding;
    return { status: 200, headers, body: this.bodies[coding] };
  }
}

const SWEEP_MS = 60_000;

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT (its typings declare the enum, the addon does not export it). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/** uWS's listen with LIBUS_LISTEN_EXCLUSIVE_PORT (its typings name the option only without a host). */
function listenExclusive(app: uWS.TemplatedApp, host: string, port: number, cb: (socket: uWS.us_listen_socket | false) => void): void {
  const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void) => void;
  listen.call(app, host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, cb);
}

/** Starts the HTTP front on config.host:config.port (0 = a free port). */
export async function startHttpServer(deps: HttpServerDeps): Promise<HttpServer> {
  const engine = new Engine(deps);
  const app = uWS.App();
  app.any('/*', uwsRequestCallback((res, req) => engine.accept(res, req)));
  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    // The port to ourselves: uWS sets SO_REUSEPORT by default on Linux, and a second `serve` on a
    // port in use (another data dir, an old instance left running) started and took half the
    // connections at random (operator probe: a valid key answered 200 and 401 in turn, alerts 404).
    listenExclusive(app, deps.config.host, deps.config.port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${deps.config.host}:${deps.config.port} (PORT, --port): the port is in use, or the address (HOST, --host) is not one of this machine's`));
    });
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  const host = deps.config.host.includes(':') ? `[${deps.config.host}]` : deps.config.host;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${host}:${port}`,
    sse: engine.hub,
    idempotencyGate: engine.idempotencyGate,
    close(opts = {}) {
      closing ??= (async () => {
        engine.closing = true;
        uWS.us_listen_socket_close(listenSocket);
        engine.hub.shutdown();
        await engine.drained(opts.graceMs ?? 10_000);
        engine.answerUnfinished();
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
  private readonly auth: Authenticator;
  private readonly pipeline: PipelineDeps;
  private readonly docs: { html: CompressedDocument; openapi: CompressedDocument };
  private readonly unbridge: () => void;
  private readonly stopGuard: () => void;
  private readonly sweeper: NodeJS.Timeout;
  private readonly requestIds = new RequestIds();
  private readonly reach: NodeReach | undefined;
  /** TRUST_PROXY: whose X-Forwarded-For names the client; undefined when none is trusted. */
  private readonly proxies: TrustedProxies | undefined;
  /** Requests being answered after their uWS callback returned (waiting on the actor, the store). */
  private readonly inFlight = new Set<Exchange>();
  private idleWaiters: (() => void)[] = [];

  constructor(deps: HttpServerDeps) {
    const { config, store, logger } = deps;
    this.clock = deps.clock ?? Date.now;
    const routes = [...deps.routes, HEALTH_STREAM_ROUTE];
    this.auth = new Authenticator(store, this.clock, logger, deps.sessionAuth);
    this.hub = new HealthHub({ clock: this.clock, heartbeatMs: config.sseHeartbeatMs, log: logger, ...(deps.eventIds && { externalIds: deps.eventIds }), ...(deps.firstEventId !== undefined && { firstId: deps.firstEventId }) });
    const doc = buildOpenApiDocument(routes, { config });
    this.docs = {
      html: new CompressedDocument(renderApiDocsPage(doc), DOCS_HEADERS),
      openapi: new CompressedDocument(JSON.stringify(doc), { 'Content-Type': 'application/json' }),
    };
    this.reach = deps.reach;
    this.proxies = config.trustProxy.length > 0 ? new TrustedProxies(config.trustProxy) : undefined;
    const foreignHost = foreignHostCheck(config.host, config.baseUrl);
    const notices = deps.reach && new ReachNotices(deps.reach, store, deps.gateway, this.hub, this.clock);
    const stream: HealthStreamDeps = { hub: this.hub, store, gateway: notices ?? deps.gateway, maxStreamsPerKey: config.sseMaxStreamsPerKey, clock: this.clock };
    if (notices) stream.resumeNotices = (userId, ids) => notices.resumeNotices(userId, ids);
    this.pipeline = {
      router: new Router(routes),
      fixedRoute: (method, path, headers) => this.fixedRoute(method, path, headers) ?? deps.web?.serve(method, path, headers),
      closing: () => this.closing,
      ...(foreignHost && { foreignHost }),
      auth: this.auth,
      limiters: deps.limiters ?? { key: new SlidingLogLimiter(config.rateLimitPerMin), webhook: new SlidingLogLimiter(config.webhookRateLimitPerMin) },
      gate: new IdempotencyGate(store.idempotency, this.clock),
      ...(deps.reach && { reachable: () => deps.reach!.reachable() }),
      bodyLimitBytes: config.bodyLimitBytes,
      clock: this.clock,
      logger,
      accessLine: accessLineWriter(logger),
      ...(deps.metrics && { metrics: deps.metrics }),
      stream: (ex) => {
        if (ex.route !== HEALTH_STREAM_ROUTE || !ex.authd) return false;
        // Opened for one user under another's credential (a browser reopening a dropped stream with the
        // cookie of a user signed in since in another tab: web probe): refused, as X-Tradegate-User is.
        const user = (ex.request?.query as { user?: string } | undefined)?.user;
        if (user !== undefined && user !== ex.authd.auth.userId) {
          throw new AppError('UNAUTHENTICATED', 'This stream was opened for another user than the one this browser is signed in as now (from another tab or window)');
        }
        // HEAD: what a GET would start with, and no stream.
        // Its GET has no length (client probe: HEAD said Content-Length: 0).
        if (ex.handle.headOnly) ex.handle.send({ status: 200, headers: { ...ex.extra, ...SSE_HEADERS, 'Transfer-Encoding': 'chunked' }, openEnded: true });
        else openHealthStream(stream, ex.handle, ex.authd.auth, ex.headers, ex.extra, (ex.request?.query as { lastEventId?: string } | undefined)?.lastEventId);
        return true;
      },
    };
    const unbridge = bridgeActorEvents(deps.gateway, store, this.hub);
    const unrecord = recordGuardEvents(deps.ownEvents ?? deps.gateway, store, logger);
    this.unbridge = () => {
      unbridge();
      unrecord();
      notices?.close();
    };
    this.stopGuard = startStreamGuard(this.hub, store, deps.streamRecheckMs);
    deps.metrics?.attach({
      threads: async () => [{ thread: 'front', usage: threadUsage() }, ...((await deps.threads?.()) ?? [])],
      sseSubscribers: () => this.hub.subscriberCount(),
      connectionStatuses: () => {
        const counts: Record<string, number> = {};
        for (const c of store.connections.all()) {
          const status = deps.gateway.status(c.id)?.status ?? (c.disabled ? 'DISABLED' : 'CONNECTING');
          counts[status] = (counts[status] ?? 0) + 1;
        }
        return counts;
      },
    });
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The idempotency gate of the API's requests (a restart holds the keys of work it takes up: resumeLateOutcomes). */
  get idempotencyGate(): IdempotencyGate {
    return this.pipeline.gate;
  }

  /** The uWS callback: copy what is needed out of `req` (uWS invalidates it on return), then run the pipeline. */
  accept(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const { method, head, headers, repeated, framingInDoubt } = readRequestHead(req);
    // Closed unanswered, as uWS itself closes on a Content-Length beside Transfer-Encoding: this
    // uWS build frames by the first length and, even after an answer with `Connection: close`, goes
    // on parsing the rest as requests (API probe: a second length smuggled an order past a 400),
    // and an answered response cannot be closed at once.
    if (framingInDoubt) {
      res.close();
      return;
    }
    const handle = this.proxies ? new ResponseHandle(res, head, this.proxies, headers['x-forwarded-for']) : new ResponseHandle(res, head);
    const given = headers['x-request-id'];
    const requestId = given && REQUEST_ID.test(given) && !SECRET_IN_ID.test(given) ? given : this.requestIds.next();
    const path = req.getUrl();
    const ex: Exchange = {
      handle,
      method,
      repeatedHeaders: repeated,
      path,
      query: req.getQuery() ?? '',
      headers,
      requestId,
      startedAt: performance.now(),
      metrics: [],
      // API answers hold account data: no cache may keep them (a shared proxy keys by URL, and
      // X-API-Key is not a header caches know to vary on). No answer may be read by a browser as
      // a page or script (/healthz and the OpenAPI JSON too). Static files keep their own caching.
      extra: isApiPath(path) ? { 'X-Request-Id': requestId, 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } : { 'X-Request-Id': requestId, 'X-Content-Type-Options': 'nosniff' },
    };
    // Runs synchronously up to its first await, so onData is registered inside this callback;
    // a request with nothing to wait for is answered before it returns (undefined).
    let pending: Promise<void> | undefined;
    try {
      pending = runPipeline(this.pipeline, ex);
    } catch (err) {
      replyStage(this.pipeline, ex, { reply: internalReply(ex), error: err });
    }
    // uWS needs an abort handler for an answer still pending as this callback returns; one sent
    // already (a read from memory) needs none, and one still being written has its own (ResponseHandle.watchAbort).
    if (!handle.finished) handle.watchAbort();
    if (pending === undefined) return;
    this.inFlight.add(ex);
    pending
      .catch((err: unknown) => replyStage(this.pipeline, ex, { reply: internalReply(ex), error: err }))
      .finally(() => {
        this.inFlight.delete(ex);
        if (this.inFlight.size === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      });
  }

  /** /healthz, /readyz and the API docs, by path (built once). */
  private readonly fixed = new Map<string, (accept: string) => Reply>([
    ['/healthz', () => jsonReply(200, { status: 'ok' })],
    ['/readyz', () => this.readiness()],
    ['/api-docs', (accept) => this.docs.html.reply(accept)],
    ['/api-docs/openapi.json', (accept) => this.docs.openapi.reply(accept)],
    // Where API tools look for it first.
    ['/openapi.json', (accept) => this.docs.openapi.reply(accept)],
  ]);

  /** Ready unless shutting down or (cluster mode) cut off from NATS: a load balancer should then use another node. */
  private readiness(): Reply {
    if (this.closing) return problemReply('SHUTTING_DOWN');
    if (this.reach && !this.reach.reachable()) return problemReply('CLUSTER_UNAVAILABLE', 'This node cannot reach the cluster store (NATS); use another node', {}, { 'Retry-After': '1' });
    return jsonReply(200, { status: 'ready' });
  }

  /** /healthz, /readyz and the API docs (GET only; a trailing slash is tolerated). */
  private fixedRoute(method: string, rawPath: string, headers: Readonly<Record<string, string>>): Reply | undefined {
    const path = rawPath.length > 1 && rawPath.endsWith('/') ? rawPath.slice(0, -1) : rawPath;
    const make = this.fixed.get(path);
    if (!make) return undefined;
    if (method !== 'GET') return problemReply('METHOD_NOT_ALLOWED', 'Use GET, HEAD', {}, { Allow: 'GET, HEAD' });
    return make(headers['accept-encoding'] ?? '');
  }

  private sweep(): void {
    const now = this.clock();
    this.pipeline.limiters.key.sweep(now);
    this.pipeline.limiters.webhook.sweep(now);
    this.auth.sweep(now);
  }

  /** Resolves when no request is in flight, or after `graceMs`. */
  drained(graceMs: number): Promise<void> {
    if (this.inFlight.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, graceMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * Answers the requests still in flight when the shutdown's grace ran out, before their
   * connections close: a client whose request was carried out in part (a flatten's cancels sent,
   * its liquidation not) got a reset and nothing to go by (faults probe). One whose handler has
   * started may have reached the broker: 504 BROKER_TIMEOUT; one that has not: 503 SHUTTING_DOWN.
   * Their work goes on while the process stops; an idempotent one's record is still stored if it
   * ends in time, so a retry of its key after the restart replays it.
   */
  answerUnfinished(): void {
    for (const ex of this.inFlight) {
      const reply = ex.handlerRan && ex.method !== 'GET'
        ? appErrorReply(new AppError('BROKER_TIMEOUT', 'The service is stopping and this request had not finished: it may have reached the broker. Read the account’s orders and positions before sending it again'))
        : problemReply('SHUTTING_DOWN', undefined, {}, { 'Retry-After': '1' });
      ex.handle.send(reply, true, ex.extra);
    }
  }

  stop(): void {
    clearInterval(this.sweeper);
    this.stopGuard();
    this.unbridge();
  }
}
