/**
 * The request pipeline of the HTTP front, one small named stage per step, in the order a
 * request meets them (the way fastify's handle-request reads):
 *
 *   route → auth → limit → body → validate → idempotency → handler → reply
 *
 * A stage either fills in the Exchange and hands it on, or ends the request with a Stop (an
 * AppError thrown by a stage ends it with that error's problem answer).
 *
 * uWS discipline: the abort handler is registered (ResponseHandle) before the pipeline runs;
 * route, auth, limit and the body reader's registration run synchronously inside the uWS
 * callback, because `onData` cannot be registered after an await; every answer goes out
 * through ResponseHandle, corked and never after an abort.
 */
import { z } from 'zod';
import type { Logger } from '../log.js';
import { AppError, RequestNotSentError } from '../domain/problems.js';
import { redactUrl } from '../log.js';
import type { Authenticated, Authenticator } from './auth.js';
import { ClientAbortedError, hasBody, parseJsonBody, readBody, tooLarge, validate } from './body.js';
import { parseIdempotencyKey, requestFingerprint, type IdempotencyGate, type IdempotencyTicket } from './idempotency.js';
import type { ServiceMetrics } from './metrics.js';
import { rateLimitHeaders, type RateDecision, type RateLimiter } from './rate-limit.js';
import { repeatedHeaderError } from './request-head.js';
import { appErrorReply, problemReply, routeResponseReply, type Reply, type ResponseHandle } from './respond.js';
import type { AuthContext, RouteContext, RouteDef, RouteRequest } from './route-types.js';
import { stripApiPrefix, type Router } from './router.js';

/** One request as the pipeline sees it: copied out of uWS's short-lived `req`, filled in by the stages. */
export interface Exchange {
  handle: ResponseHandle;
  /** Upper-case; a HEAD request runs as GET (`handle.headOnly` drops the body). */
  method: string;
  /** Singleton headers (X-API-Key, Idempotency-Key, …) the client sent more than once. */
  repeatedHeaders?: string[];
  path: string;
  query: string;
  /** Lower-case header names. */
  headers: Record<string, string>;
  ip: string;
  requestId: string;
  startedAt: number;
  /** Server-Timing entries (`broker;dur=1.2`). */
  metrics: string[];
  /** Headers every answer to this request carries (request id, rate limit). */
  extra: Record<string, string>;
  /** API key id (or webhook/session principal) for the access log. */
  principal?: string;
  /** Server-Timing stages of a trading (idempotent) route, ms: reported before the handler's own entries. */
  stageMs?: { auth?: number; validate?: number; idem?: number };
  /** Which limiter answered 429 (for /metrics). */
  limitedBy?: string;
  /** The route label of /metrics: the route template, the fixed page's path, or `unmatched`. */
  routeLabel?: string;
  // Filled in by the stages, in order.
  route?: RouteDef<any, any>;
  params?: Record<string, string>;
  authd?: Authenticated;
  rawBody?: Buffer;
  request?: RouteRequest<unknown, unknown>;
  idempotencyKey?: string;
  ticket?: IdempotencyTicket;
}

/** How a request ends early: its answer, whether to close the connection after it, what went wrong. */
export interface Stop {
  reply: Reply;
  closeConnection?: boolean;
  error?: unknown;
}

/** What the stages run on; built once per server. */
export interface PipelineDeps {
  router: Router<RouteDef<any, any>>;
  /** Answers outside the API prefix (/healthz, /readyz, /api-docs, the web app), by path; undefined when none. */
  fixedRoute(method: string, path: string, headers: Readonly<Record<string, string>>): Reply | undefined;
  /** True once the server is shutting down. */
  closing(): boolean;
  auth: Authenticator;
  limiters: { key: RateLimiter; webhook: RateLimiter };
  gate: IdempotencyGate;
  bodyLimitBytes: number;
  clock: () => number;
  logger: Logger;
  /**
   * The access line's logger: built once without the redaction pass (its fields are ids,
   * a redacted path, status and time; redaction cost ~10× the line itself). Falls back to `logger`.
   */
  accessLog?: Logger;
  /** Request, replay and 429 counts for /metrics (absent in tests that do not measure). */
  metrics?: ServiceMetrics;
  /** Serves a streaming route (the health stream) itself; true when `ex` was one. */
  stream(ex: Exchange): boolean;
}

/** The anonymous caller of a public route. */
const ANONYMOUS: AuthContext = { userId: '', principalId: 'anonymous', scopes: [], kind: 'api-key' };

/** Runs one exchange to its answer. Synchronous up to the body read (see the file comment). */
export async function runPipeline(deps: PipelineDeps, ex: Exchange): Promise<void> {
  try {
    const t0 = performance.now();
    const early = routeStage(deps, ex) ?? authStage(deps, ex);
    if (early) return replyStage(deps, ex, early);
    // An in-memory limiter decides here, synchronously (a 429 throws); a shared one (cluster)
    // answers later, and its round trip runs alongside the body read.
    const limited = limitStage(deps, ex)?.then(
      () => undefined,
      (err: unknown) => ({ err }),
    );
    // Trading routes report where their time went (Server-Timing); reads only their total.
    const staged = ex.route!.idempotent === true;
    if (staged) ex.stageMs = { auth: performance.now() - t0 };
    // First await of the request: bodyStage registers onData before it suspends. A request
    // without a body (most reads) has nothing to wait for.
    let unread: Stop | undefined;
    if (hasBody(ex.headers)) unread = await bodyStage(deps, ex);
    else ex.rawBody = NO_BODY;
    const refused = limited && (await limited);
    if (refused) {
      // A body left half-read must still close the connection (its rest would be read as the next request).
      if (unread?.closeConnection && refused.err instanceof AppError) return replyStage(deps, ex, { reply: appErrorReply(refused.err), closeConnection: true });
      throw refused.err;
    }
    if (unread) return replyStage(deps, ex, unread);
    const t1 = performance.now();
    if (ex.authd) validateStage(ex);
    else validateAnonymous(deps, ex);
    if (deps.stream(ex)) return logLine(deps, ex, 200);
    ex.handle.holdInput();
    const t2 = performance.now();
    const replayed = ex.route!.idempotent === true ? await idempotencyStage(deps, ex) : undefined;
    if (ex.stageMs) {
      ex.stageMs.validate = t2 - t1;
      if (ex.idempotencyKey !== undefined) ex.stageMs.idem = performance.now() - t2;
    }
    if (replayed) return replyStage(deps, ex, replayed);
    return replyStage(deps, ex, await handlerStage(deps, ex));
  } catch (err) {
    ex.ticket?.release();
    ex.ticket = undefined;
    if (err instanceof AppError) return replyStage(deps, ex, { reply: appErrorReply(err) });
    return replyStage(deps, ex, { reply: internalReply(ex), error: err });
  }
}

/** Pages outside the API that /metrics names by their path. */
const FIXED_PAGES = new Set(['/healthz', '/readyz', '/api-docs', '/api-docs/openapi.json']);

/** route: shutdown, the fixed pages, then the API route table (404, 405 with Allow). */
export function routeStage(deps: PipelineDeps, ex: Exchange): Stop | undefined {
  if (deps.closing()) return { reply: problemReply('SHUTTING_DOWN', undefined, {}, { 'Retry-After': '1' }), closeConnection: true };
  const repeated = repeatedHeaderError(ex.repeatedHeaders ?? []);
  if (repeated) return { reply: appErrorReply(repeated) };
  const fixed = deps.fixedRoute(ex.method, ex.path, ex.headers);
  if (fixed) {
    const page = ex.path.length > 1 && ex.path.endsWith('/') ? ex.path.slice(0, -1) : ex.path;
    // The web app's files are many paths: one label for all of them keeps /metrics bounded.
    ex.routeLabel = FIXED_PAGES.has(page) ? page : 'web';
    return { reply: fixed };
  }
  const relative = stripApiPrefix(ex.path);
  const match = relative === undefined ? ({ kind: 'not-found' } as const) : deps.router.match(ex.method, relative);
  if (match.kind === 'not-found') return { reply: problemReply('NOT_FOUND') };
  if (match.kind === 'method-not-allowed') {
    // HEAD is served wherever GET is.
    const allow = match.allow.includes('GET') ? [...match.allow, 'HEAD'].sort() : match.allow;
    return { reply: problemReply('METHOD_NOT_ALLOWED', `Use ${allow.join(', ')}`, {}, { Allow: allow.join(', ') }) };
  }
  ex.route = match.route;
  ex.params = match.params;
  return undefined;
}

/** auth: the credential the route's scope asks for (none for public routes). Throws the 401/403/404. */
export function authStage(deps: PipelineDeps, ex: Exchange): Stop | undefined {
  const authd = deps.auth.authenticate(ex.route!.scope, ex.headers, ex.params!, ex.ip, ex.method);
  if (authd) {
    ex.authd = authd;
    ex.principal = authd.auth.principalId;
  }
  return undefined;
}

/**
 * limit: counts the request against its key's (or webhook token's) rolling window; 429 when
 * full. Synchronous with an in-memory limiter; a promise with a shared one.
 */
export function limitStage(deps: PipelineDeps, ex: Exchange): Promise<void> | undefined {
  const authd = ex.authd;
  if (!authd) return undefined;
  const limiter = authd.bucket === 'key' ? deps.limiters.key : deps.limiters.webhook;
  const decision = limiter.hit(authd.rateKey, deps.clock());
  if (decision instanceof Promise) return decision.then((d) => applyDecision(ex, authd.bucket, d));
  applyDecision(ex, authd.bucket, decision);
  return undefined;
}

/** The rate-limit headers of a decision; throws the 429 for a rejection. */
function applyDecision(ex: Exchange, bucket: string, decision: RateDecision): void {
  Object.assign(ex.extra, rateLimitHeaders(bucket, decision));
  if (!decision.allowed) {
    ex.limitedBy = bucket;
    throw new AppError('RATE_LIMITED', `Rate limit of ${decision.limit} requests per 60 s exceeded`, { limit: decision.limit }, decision.retryAfterSeconds);
  }
}

/**
 * body: reads at most bodyLimitBytes. Must be entered synchronously from the uWS callback. An
 * oversized body is refused without buffering the rest, and the connection is closed.
 */
export async function bodyStage(deps: PipelineDeps, ex: Exchange): Promise<Stop | undefined> {
  ex.rawBody = NO_BODY;
  if (!hasBody(ex.headers)) return undefined;
  const limit = deps.bodyLimitBytes;
  if (Number(ex.headers['content-length'] ?? 0) > limit) return { reply: appErrorReply(tooLarge(limit)), closeConnection: true };
  try {
    ex.rawBody = await readBody(ex.handle, limit);
    return undefined;
  } catch (err) {
    // Gone: nothing can be sent; the reply stage logs the 499.
    if (err instanceof ClientAbortedError) return { reply: internalReply(ex) };
    if (err instanceof AppError) return { reply: appErrorReply(err), closeConnection: true };
    throw err;
  }
}

/** validate: query and body against the route's zod schemas (400 VALIDATION_FAILED, 415). */
export function validateStage(ex: Exchange): void {
  const route = ex.route!;
  const rawQuery = queryParams(ex.query);
  const query = validate(route.query ?? NO_QUERY, rawQuery, 'query');
  const raw = ex.rawBody ?? NO_BODY;
  const body = route.body ? validate(route.body, parseJsonBody(raw, ex.headers['content-type'], !!route.lenientContentType), 'body') : undefined;
  ex.request = { method: route.method, path: ex.path, params: ex.params!, query, headers: ex.headers, body, rawBody: raw, ip: ex.ip };
}

/** validate, on a public route: a refused request counts against the address (Authenticator.noteRefusedBody). */
function validateAnonymous(deps: PipelineDeps, ex: Exchange): void {
  try {
    validateStage(ex);
  } catch (err) {
    deps.auth.noteRefusedBody(ex.ip);
    throw err;
  }
}

/** The body of a request that sent none (shared: a zero-length Buffer cannot be written to). */
const NO_BODY = Buffer.alloc(0);

/** A route without query parameters takes none. */
const NO_QUERY = z.strictObject({});

/**
 * The query string as one value per name. A name given twice is refused rather than letting
 * the last one win: `?dryRun=true&dryRun=false` must never be read as either.
 */
export function queryParams(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw === '') return out;
  for (const [name, value] of new URLSearchParams(raw)) {
    if (Object.hasOwn(out, name)) {
      throw new AppError('VALIDATION_FAILED', `query.${name}: given more than once`, { errors: [{ path: `query.${name}`, message: 'given more than once' }] });
    }
    out[name] = value;
  }
  return out;
}

/**
 * idempotency: on an idempotent route with a key (the header, else the route's own source such
 * as a webhook's `id`): replay the stored answer, or 409 while the first is in flight, or 422
 * for another request under the same key; otherwise claim the key for this request.
 */
export async function idempotencyStage(deps: PipelineDeps, ex: Exchange): Promise<Stop | undefined> {
  const route = ex.route!;
  const request = ex.request!;
  if (!route.idempotent || !ex.authd) return undefined;
  const header = ex.headers['idempotency-key'];
  const rawKey = header ?? route.idempotencyKeyFrom?.(request);
  if (rawKey === undefined) return undefined;
  const key = parseIdempotencyKey(rawKey);
  ex.idempotencyKey = key;
  const fingerprint = requestFingerprint(route.method, route.path, request.params, request.body, request.query);
  const outcome = await deps.gate.begin(ex.authd.auth.userId, key, fingerprint);
  if (outcome.kind === 'in-flight') throw new AppError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight', {}, 1);
  if (outcome.kind === 'mismatch') throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for a different request');
  if (outcome.kind === 'replay') {
    deps.metrics?.replayed();
    const r = outcome.record;
    return { reply: { status: r.status, headers: Object.assign({}, r.headers, { 'Idempotent-Replayed': 'true' }), body: r.body } };
  }
  ex.ticket = outcome.ticket;
  return undefined;
}

/** handler: runs the route; its AppError becomes the problem answer, anything else a 500. */
export async function handlerStage(deps: PipelineDeps, ex: Exchange): Promise<Stop> {
  // A write whose client is gone is not started: its answer cannot be sent, and a retry would repeat it.
  if (ex.method !== 'GET' && ex.handle.aborted) return notStarted(ex);
  let log: Logger | undefined;
  const ctx: RouteContext<unknown, unknown> = {
    req: ex.request!,
    auth: ex.authd?.auth ?? ANONYMOUS,
    requestId: ex.requestId,
    clientGone: () => ex.handle.aborted,
    timing: { add: (name, dur) => ex.metrics.push(`${name.replace(/[^\w-]/g, '_')};dur=${dur.toFixed(1)}`) },
    // A child logger (with its redaction setup) costs tens of µs: built only for a route that logs.
    get log() {
      return (log ??= deps.logger.child({ reqId: ex.requestId }));
    },
  };
  if (ex.idempotencyKey !== undefined) ctx.idempotencyKey = ex.idempotencyKey;
  try {
    return { reply: routeResponseReply(await ex.route!.handler(ctx)) };
  } catch (err) {
    // Withdrawn before it reached the actor (callActor): the same as not started.
    if (err instanceof RequestNotSentError) return notStarted(ex);
    return { reply: err instanceof AppError ? appErrorReply(err) : internalReply(ex), error: err };
  }
}

/** A request not run because its client left: its idempotency key is free again; the line says 499. */
function notStarted(ex: Exchange): Stop {
  ex.ticket?.release();
  ex.ticket = undefined;
  return { reply: internalReply(ex) };
}

/**
 * reply: stores the answer under the claimed idempotency key first (durably: an answer the
 * client saw must replay), then sends it with the request's headers and Server-Timing, and
 * writes the request's one log line.
 */
export function replyStage(deps: PipelineDeps, ex: Exchange, stop: Stop): Promise<void> | undefined {
  const ticket = ex.ticket;
  ex.ticket = undefined;
  // Without a claimed key there is nothing to store first: answered in this turn, no promise.
  if (!ticket) return sendStage(deps, ex, stop);
  return (async () => {
    const t = performance.now();
    const unstored = await commit(deps, ex, ticket, stop.reply);
    if (ex.stageMs) ex.stageMs.idem = (ex.stageMs.idem ?? 0) + performance.now() - t;
    sendStage(deps, ex, unstored ? { reply: unstored } : stop);
  })();
}

/** Sends the answer with the request's headers and Server-Timing, and writes the request's log line. */
function sendStage(deps: PipelineDeps, ex: Exchange, stop: Stop): undefined {
  const total = performance.now() - ex.startedAt;
  const timing = serverTiming(ex, total);
  const sent = ex.handle.send(stop.reply, stop.closeConnection, ex.extra, timing);
  // 499: the client went away before the answer (nginx's convention).
  logLine(deps, ex, sent ? stop.reply.status : 499, stop.error);
  return undefined;
}

/** `auth;dur=0.02, validate;dur=0.05, idem;dur=0.40, actor;dur=1.9, broker;dur=1.1, settle;dur=0.3, total;dur=2.6` */
function serverTiming(ex: Exchange, totalMs: number): string {
  let out = '';
  const stages = ex.stageMs;
  if (stages) {
    if (stages.auth !== undefined) out += `auth;dur=${stages.auth.toFixed(2)}, `;
    if (stages.validate !== undefined) out += `validate;dur=${stages.validate.toFixed(2)}, `;
    if (stages.idem !== undefined) out += `idem;dur=${stages.idem.toFixed(2)}, `;
  }
  for (const m of ex.metrics) out += `${m}, `;
  return `${out}total;dur=${totalMs.toFixed(1)}`;
}

/**
 * Stores the answer before it is sent; the answer to send instead when the store failed: its
 * coded error (the cluster store unavailable: 503 with Retry-After, and the retry reconciles by
 * clOrdId), else a 500.
 */
async function commit(deps: PipelineDeps, ex: Exchange, ticket: IdempotencyTicket, reply: Reply): Promise<Reply | undefined> {
  const body = reply.body === undefined ? '' : reply.body.toString();
  try {
    await ticket.commit({ status: reply.status, headers: reply.headers, body, code: reply.code });
    return undefined;
  } catch (err) {
    deps.logger.error({ err, reqId: ex.requestId }, 'idempotency record not stored');
    return err instanceof AppError ? appErrorReply(err) : internalReply(ex);
  }
}

/** The 500 answer; the error itself is logged once, on the request's line. */
export function internalReply(ex: Exchange): Reply {
  return problemReply('INTERNAL', 'Unexpected error; quote the requestId when reporting it', { requestId: ex.requestId });
}

/** The request's one access-log line (errors for 500s). */
export function logLine(deps: PipelineDeps, ex: Exchange, status: number, err?: unknown): void {
  const ms = performance.now() - ex.startedAt;
  if (deps.metrics) {
    deps.metrics.request(ex.route?.path ?? ex.routeLabel ?? 'unmatched', ex.method, status, ms / 1000);
    if (status === 429) deps.metrics.limited(ex.limitedBy ?? (ex.authd ? 'streams' : 'failed-auth'));
  }
  if (status === 500) {
    const line = { reqId: ex.requestId, method: ex.handle.headOnly ? 'HEAD' : ex.method, path: redactUrl(ex.path), status, ms: Math.round(ms), principal: ex.principal };
    deps.logger.error(err instanceof Error ? { ...line, err } : line, 'request failed');
    return;
  }
  const access = deps.accessLog ?? deps.logger;
  if (!access.isLevelEnabled('info')) return;
  access.info({ reqId: ex.requestId, method: ex.handle.headOnly ? 'HEAD' : ex.method, path: redactUrl(ex.path), status, ms: Math.round(ms), principal: ex.principal }, 'request');
}
