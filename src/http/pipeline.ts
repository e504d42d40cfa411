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
import { printable } from '../domain/plain-text.js';
import { AppError, RequestNotSentError } from '../domain/problems.js';
import { redactUrl, type AccessFields } from '../log.js';
import { ScopeRefused, type Authenticated, type Authenticator } from './auth.js';
import { ClientAbortedError, echoedName, hasBody, parseJsonBody, readBody, refuseBody, tooLarge, validate } from './body.js';
import { parseBodyIdempotencyKey, parseIdempotencyKey, requestFingerprint, type IdempotencyGate, type IdempotencyTicket } from './idempotency.js';
import type { ServiceMetrics } from './metrics.js';
import { rateLimitHeaders, type RateDecision, type RateLimiter } from './rate-limit.js';
import { repeatedHeaderError } from './request-head.js';
import { appErrorReply, problemReply, routeResponseReply, storedAnswer, type Reply, type ResponseHandle } from './respond.js';
import { GoesOnError, type AuthContext, type RouteContext, type RouteDef, type RouteRequest, type RouteResponse, type Timing } from './route-types.js';
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
  /** The request's fingerprint under that key (what a stored answer is matched with). */
  idempotencyFingerprint?: string;
  ticket?: IdempotencyTicket;
  /** The route's handler was called (its refusals are its own to report). */
  handlerRan?: boolean;
}

/** How a request ends early: its answer, whether to close the connection after it, what went wrong. */
export interface Stop {
  reply: Reply;
  /** A request that goes on (GoesOnError): the answer stored under its idempotency key instead of `reply`, once known (undefined: none). */
  repeat?: Promise<Reply | undefined>;
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
  /** True for a Host header that names another server (DNS rebinding; host-check.ts); absent: nothing checked. */
  foreignHost?(host: string | undefined): boolean;
  auth: Authenticator;
  limiters: { key: RateLimiter; webhook: RateLimiter };
  /**
   * Cluster mode: whether this node reaches NATS and its records are current (cluster/node.ts
   * `reach`). While not, every request that needs a credential is refused 503: a key revoked on
   * another node during an outage must not be accepted here.
   */
  reachable?: () => boolean;
  gate: IdempotencyGate;
  bodyLimitBytes: number;
  clock: () => number;
  logger: Logger;
  /**
   * Writes the access line (log.ts `accessLineWriter`: its fields are ids, a redacted path, status
   * and time, so no redaction pass). Falls back to `logger.info`.
   */
  accessLine?: (fields: AccessFields) => void;
  /** Request, replay and 429 counts for /metrics (absent in tests that do not measure). */
  metrics?: ServiceMetrics;
  /** Serves a streaming route (the health stream) itself; true when `ex` was one. */
  stream(ex: Exchange): boolean;
}

/** The anonymous caller of a public route. */
const ANONYMOUS: AuthContext = { userId: '', principalId: 'anonymous', scopes: [], kind: 'api-key' };

/**
 * Runs one exchange to its answer. A request with nothing to wait for (no body, an in-memory
 * limiter, a handler that answers from memory) runs to its answer synchronously, inside the uWS
 * callback, and returns undefined: no promise, no await. Otherwise a promise of the answer.
 * Synchronous up to the body read either way (see the file comment).
 */
export function runPipeline(deps: PipelineDeps, ex: Exchange): Promise<void> | undefined {
  try {
    const early = routeStage(deps, ex) ?? authStage(deps, ex);
    if (early) return replyStage(deps, ex, early);
    // An in-memory limiter decides here, synchronously (a 429 throws); a shared one (cluster)
    // answers later, and its round trip runs alongside the body read.
    const limited = limitStage(deps, ex);
    // Trading routes report where their time went (Server-Timing); reads only their total.
    if (ex.route!.idempotent === true) ex.stageMs = { auth: performance.now() - ex.startedAt };
    if (limited !== undefined || hasBody(ex.headers)) return readThenRun(deps, ex, limited);
    ex.rawBody = NO_BODY;
    return runAfterBody(deps, ex);
  } catch (err) {
    if (err instanceof ScopeRefused) countRefused(deps, ex, err.authd);
    return failedStage(deps, ex, err);
  }
}

/**
 * A valid credential refused for its scope still uses its rate limit, and the 403 carries the
 * headers like every keyed answer (DESIGN §3). A shared limiter (cluster) counts it too, but its
 * answer is not waited for: the 403 goes out without them.
 */
function countRefused(deps: PipelineDeps, ex: Exchange, authd: Authenticated): void {
  const limiter = authd.bucket === 'key' ? deps.limiters.key : deps.limiters.webhook;
  const decision = limiter.hit(authd.rateKey, deps.clock());
  if (decision instanceof Promise) {
    decision.catch(() => undefined);
    return;
  }
  Object.assign(ex.extra, rateLimitHeaders(authd.bucket, decision));
}

/** The body read (and a shared limiter's decision) awaited, then the rest. */
async function readThenRun(deps: PipelineDeps, ex: Exchange, limit: Promise<void> | undefined): Promise<void> {
  try {
    const limited = limit?.then(
      () => undefined,
      (err: unknown) => ({ err }),
    );
    // First await of the request: bodyStage registers onData before it suspends.
    let unread: Stop | undefined;
    if (hasBody(ex.headers)) unread = await bodyStage(deps, ex);
    else ex.rawBody = NO_BODY;
    const refused = limited && (await limited);
    if (refused) {
      // A body left half-read must still close the connection (its rest would be read as the next request).
      if (unread?.closeConnection && refused.err instanceof AppError) return replyStage(deps, ex, { reply: appErrorReply(refused.err), closeConnection: true });
      throw refused.err;
    }
    if (unread) return await replyStage(deps, ex, unread);
    return await runAfterBody(deps, ex);
  } catch (err) {
    return failedStage(deps, ex, err);
  }
}

/** validate → (idempotency) → handler → reply, once the body is in; synchronous while nothing is pending. */
function runAfterBody(deps: PipelineDeps, ex: Exchange): Promise<void> | undefined {
  const t1 = performance.now();
  if (ex.authd) validateStage(ex);
  else validateAnonymous(deps, ex);
  if (deps.stream(ex)) {
    logLine(deps, ex, 200);
    return undefined;
  }
  if (ex.route!.method !== 'GET') refuseFalsePrecondition(ex.headers);
  if (ex.route!.idempotent === true) return idempotentThenRun(deps, ex, t1);
  // A create that does not deduplicate, sent twice under one key, makes two: refused rather than
  // ignored (clients probe: two connections, two webhook URLs, an orphan API key).
  if (ex.route!.refusesIdempotencyKey === true && ex.headers['idempotency-key'] !== undefined) throw notDeduplicated();
  const stop = handlerStage(deps, ex);
  if (!(stop instanceof Promise)) return replyStage(deps, ex, stop);
  ex.handle.holdInput();
  return stop.then((s) => replyStage(deps, ex, s)).catch((err: unknown) => failedStage(deps, ex, err));
}

/**
 * A write whose precondition is false is not carried out (RFC 9110 §13.1): 412, nothing done.
 * No representation here carries an entity tag, so `If-Match` naming one is false (ignored, it
 * let a client's optimistic-concurrency write through: clients probe); `*` holds, the route's
 * resource exists (or the route answers 404 itself). `If-None-Match: *` ("only if there is none")
 * is false for the same reason (fuzz probe: a strategy renamed, guards replaced); naming tags,
 * it holds, as none matches.
 */
function refuseFalsePrecondition(headers: Readonly<Record<string, string>>): void {
  const ifMatch = headers['if-match'];
  if (ifMatch !== undefined && ifMatch.trim() !== '*') throw new AppError('PRECONDITION_FAILED', 'If-Match names an entity tag this service never issued (it issues none): nothing was done. Send the request without If-Match');
  const ifNoneMatch = headers['if-none-match'];
  if (ifNoneMatch !== undefined && ifNoneMatch.split(',').some((tag) => tag.trim() === '*')) {
    throw new AppError('PRECONDITION_FAILED', 'If-None-Match: * asks for the write only where the resource does not exist, and it does: nothing was done. Send the request without If-None-Match');
  }
}

/** A trading route: its idempotency record first (replay, 409, 422, or a claim), then the handler. */
async function idempotentThenRun(deps: PipelineDeps, ex: Exchange, t1: number): Promise<void> {
  try {
    ex.handle.holdInput();
    const t2 = performance.now();
    const replayed = await idempotencyStage(deps, ex);
    if (ex.stageMs) {
      ex.stageMs.validate = t2 - t1;
      if (ex.idempotencyKey !== undefined) ex.stageMs.idem = performance.now() - t2;
    }
    if (replayed) return await replyStage(deps, ex, replayed);
    return await replyStage(deps, ex, await handlerStage(deps, ex));
  } catch (err) {
    return failedStage(deps, ex, err);
  }
}

/** Ends a request whose stage threw: the AppError's problem answer, anything else a 500 (logged with the error). */
function failedStage(deps: PipelineDeps, ex: Exchange, err: unknown): Promise<void> | undefined {
  ex.ticket?.release();
  ex.ticket = undefined;
  if (err instanceof AppError && ex.authd && !ex.handlerRan) ex.route?.refused?.({ auth: ex.authd.auth, body: ex.request?.body, requestId: ex.requestId }, err);
  if (err instanceof AppError) return replyStage(deps, ex, { reply: appErrorReply(keylessAdvice(ex, err)) });
  return replyStage(deps, ex, { reply: internalReply(ex), error: err });
}

const SAME_KEY_ADVICE = /retry with the same Idempotency-Key[^;.]*/;

/**
 * A 504 on a trading request sent without an Idempotency-Key: its advice to retry with the same
 * key cannot be followed, and a retry without one is a new order (money probe). Said what to do instead.
 */
export function keylessAdvice(ex: Pick<Exchange, 'idempotencyKey' | 'route'>, err: AppError): AppError {
  // A webhook alert's key is its `id`, and its answer says whether to send it again (do not).
  if (err.code !== 'BROKER_TIMEOUT' || ex.idempotencyKey !== undefined || ex.route?.idempotent !== true || ex.route.idempotencyKeyFrom || !SAME_KEY_ADVICE.test(err.message)) return err;
  const advice =
    'it was sent without an Idempotency-Key, so sending it again is a new request: look at the account first (GET /api/v1/accounts/{id}/orders or working-orders), and send an Idempotency-Key with trading requests';
  return new AppError(err.code, err.message.replace(SAME_KEY_ADVICE, advice), err.extensions, err.retryAfterSeconds);
}

/** Pages outside the API that /metrics names by their path. */
const FIXED_PAGES = new Set(['/healthz', '/readyz', '/api-docs', '/api-docs/openapi.json', '/openapi.json']);

/** route: shutdown, the fixed pages, then the API route table (404, 405 with Allow). */
export function routeStage(deps: PipelineDeps, ex: Exchange): Stop | undefined {
  if (deps.closing()) return { reply: problemReply('SHUTTING_DOWN', undefined, {}, { 'Retry-After': '1' }), closeConnection: true };
  if (deps.foreignHost?.(ex.headers.host)) {
    return {
      reply: problemReply('MISDIRECTED_REQUEST', `Host '${printable(ex.headers.host ?? '', 100)}' is not a name of this server, which listens on loopback: use localhost, or set TRADEGATE_BASE_URL to the public URL a reverse proxy passes on`),
      closeConnection: true,
    };
  }
  const fixed = deps.fixedRoute(ex.method, ex.path, ex.headers);
  if (fixed) {
    const page = ex.path.length > 1 && ex.path.endsWith('/') ? ex.path.slice(0, -1) : ex.path;
    // The web app's files are many paths: one label for all of them keeps /metrics bounded.
    ex.routeLabel = FIXED_PAGES.has(page) ? page : 'web';
    return { reply: fixed };
  }
  // The API's credentials and request identity must come once (request-head.ts). The fixed pages
  // read none of them: a health check behind a proxy that repeats a header is still answered (fuzz probe: 400).
  const repeated = repeatedHeaderError(ex.repeatedHeaders ?? []);
  if (repeated) return { reply: appErrorReply(repeated) };
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
  const scope = ex.route!.scope;
  if (scope !== 'none' && deps.reachable && !deps.reachable()) {
    throw new AppError('CLUSTER_UNAVAILABLE', 'This node cannot reach the cluster store (NATS), or is catching up with it after an outage; use another node or retry', {}, 1);
  }
  // The client's address is read only where it is used (it costs ~10 µs): here for public and
  // session routes, whose handlers use it after awaits (sign-in throttling, the journal), and by
  // the authenticator when a credential fails, synchronously.
  if (scope === 'none' || scope === 'session') ex.handle.remoteAddress();
  const authd = deps.auth.authenticate(scope, ex.headers, ex.params!, ex.handle, ex.method);
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
  const query = ex.query === '' ? emptyQuery(route) : validate(route.query ?? NO_QUERY, queryParams(ex.query), 'query');
  const raw = ex.rawBody ?? NO_BODY;
  let body: unknown;
  if (route.body) body = validate(route.body, parseJsonBody(raw, ex.headers['content-type'], !!route.lenientContentType, ex.headers['content-encoding']), 'body');
  else refuseBody(raw, ex.headers['content-type'], ex.headers['content-encoding']);
  ex.request = new ValidatedRequest(route.method, ex.path, ex.params!, query, ex.headers, body, raw, ex.handle);
}

/** validate, on a public route: a refused request counts against the address (Authenticator.noteRefusedBody). */
function validateAnonymous(deps: PipelineDeps, ex: Exchange): void {
  try {
    validateStage(ex);
  } catch (err) {
    deps.auth.noteRefusedBody(ex.handle.remoteAddress());
    throw err;
  }
}

/** What a handler sees of its request; the client's address is read when first asked (ResponseHandle.remoteAddress). */
class ValidatedRequest implements RouteRequest<unknown, unknown> {
  /** Not an own enumerable property: a logged or copied request never drags the uWS response along. */
  readonly #handle: ResponseHandle;

  constructor(
    readonly method: RouteRequest['method'],
    readonly path: string,
    readonly params: Record<string, string>,
    readonly query: unknown,
    readonly headers: Readonly<Record<string, string>>,
    readonly body: unknown,
    readonly rawBody: Buffer,
    handle: ResponseHandle,
  ) {
    this.#handle = handle;
  }

  get ip(): string {
    return this.#handle.remoteAddress();
  }
}

/** The body of a request that sent none (shared: a zero-length Buffer cannot be written to). */
const NO_BODY = Buffer.alloc(0);

/**
 * What a route's query schema makes of no query at all, worked out once per route (most reads
 * send none) and frozen, since every such request shares it. A schema that refuses an empty
 * query is asked each time, so its error is built per request.
 */
function emptyQuery(route: RouteDef<any, any>): unknown {
  let kept = EMPTY_QUERIES.get(route);
  if (kept === undefined) {
    const parsed = (route.query ?? NO_QUERY).safeParse({});
    kept = parsed.success ? { value: Object.freeze(parsed.data) } : null;
    EMPTY_QUERIES.set(route, kept);
  }
  return kept ? kept.value : validate(route.query ?? NO_QUERY, {}, 'query');
}

const EMPTY_QUERIES = new WeakMap<RouteDef<any, any>, { value: unknown } | null>();

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
      const shown = echoedName(name);
      throw new AppError('VALIDATION_FAILED', `query.${shown}: given more than once`, { errors: [{ path: `query.${shown}`, message: 'given more than once' }] });
    }
    // `out.__proto__ = …` would set the prototype, hiding the name from every check after this.
    if (name === '__proto__') Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
    else out[name] = value;
  }
  return out;
}

/** 400 for an Idempotency-Key on a POST that does not deduplicate. */
function notDeduplicated(): AppError {
  return new AppError(
    'INVALID_IDEMPOTENCY_KEY',
    'Idempotency-Key is honoured on orders, flatten and webhook alerts only: this request does not deduplicate, so sent twice it makes two. Send it without the header (a retry after a lost answer: list what exists first)',
  );
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
  const fromBody = header === undefined ? route.idempotencyKeyFrom?.(request) : undefined;
  if (header === undefined && fromBody === undefined) return undefined;
  if (header !== undefined) route.checkIdempotencyKey?.(header, request);
  const parsed = header !== undefined ? parseIdempotencyKey(header) : parseBodyIdempotencyKey(fromBody!);
  const scope = route.idempotencyScope?.(ex.authd.auth);
  // Scopes hold no space, so the first space ends the scope: no key of one scope can spell another's.
  const named = route.fingerprintOf ? route.fingerprintOf(request) : request;
  const fingerprint = requestFingerprint(route.method, route.path, route.fingerprintParams === false ? {} : request.params, named.body, named.query);
  const scoped = scope === undefined ? parsed : `${scope} ${parsed}`;
  // An alert's `id` names it with its body: a repeat delivery is byte for byte the same, and the
  // same id on another alert (two fills of a strategy in one second) is another alert, traded.
  const key = header === undefined && route.bodyKeyNamesBody === true ? `${scoped} ${fingerprint.slice(0, 32)}` : scoped;
  ex.idempotencyKey = key;
  ex.idempotencyFingerprint = fingerprint;
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

/**
 * handler: runs the route; its AppError becomes the problem answer, anything else a 500. A
 * handler that answers synchronously (from memory) is answered in the same turn.
 */
export function handlerStage(deps: PipelineDeps, ex: Exchange): Stop | Promise<Stop> {
  // A write whose client is gone is not started: its answer cannot be sent, and a retry would repeat
  // it. Nor one already answered (a shutdown's 503 "not started" to a request still waiting).
  if (ex.method !== 'GET' && (ex.handle.aborted || ex.handle.finished)) return notStarted(ex);
  ex.handlerRan = true;
  let out: RouteResponse | Promise<RouteResponse>;
  try {
    out = ex.route!.handler(new HandlerContext(deps, ex));
  } catch (err) {
    return handlerFailed(ex, err);
  }
  if (out instanceof Promise) return out.then(answered, (err: unknown) => handlerFailed(ex, err));
  return answered(out);
}

function answered(r: RouteResponse): Stop {
  return { reply: routeResponseReply(r) };
}

function handlerFailed(ex: Exchange, err: unknown): Stop {
  // Withdrawn before it reached the actor (callActor): the same as not started.
  if (err instanceof RequestNotSentError) return notStarted(ex);
  if (err instanceof GoesOnError) {
    const repeat = err.outcome.then((o) => (o === undefined ? undefined : o instanceof AppError ? appErrorReply(o) : routeResponseReply(o)));
    return { reply: appErrorReply(keylessAdvice(ex, err)), repeat, error: err };
  }
  return { reply: err instanceof AppError ? appErrorReply(keylessAdvice(ex, err)) : internalReply(ex), error: err };
}

/** What a handler is given; a class, so a request costs one object, not a literal with closures. */
class HandlerContext implements RouteContext<unknown, unknown> {
  readonly req: RouteRequest<unknown, unknown>;
  readonly auth: AuthContext;
  readonly requestId: string;
  readonly idempotencyKey?: string;
  readonly idempotencyFingerprint?: string;
  private logger: Logger | undefined;

  constructor(
    private readonly deps: PipelineDeps,
    private readonly ex: Exchange,
  ) {
    this.req = ex.request!;
    this.auth = ex.authd?.auth ?? ANONYMOUS;
    this.requestId = ex.requestId;
    if (ex.idempotencyKey !== undefined) this.idempotencyKey = ex.idempotencyKey;
    if (ex.idempotencyFingerprint !== undefined) this.idempotencyFingerprint = ex.idempotencyFingerprint;
  }

  /** Server-Timing entries of the handler (`broker;dur=1.2`). */
  get timing(): Timing {
    return new TimingEntries(this.ex.metrics);
  }

  /** A function: callers keep it (an order's cancellation check). */
  get clientGone(): () => boolean {
    const handle = this.ex.handle;
    return () => handle.aborted;
  }

  /** A child logger (with its redaction setup) costs tens of µs: built only for a route that logs. */
  get log(): Logger {
    return (this.logger ??= this.deps.logger.child({ reqId: this.ex.requestId }));
  }
}

class TimingEntries implements Timing {
  constructor(private readonly metrics: string[]) {}

  add(name: string, dur: number): void {
    this.metrics.push(`${name.replace(/[^\w-]/g, '_')};dur=${dur.toFixed(1)}`);
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
  const repeat = stop.repeat;
  if (repeat) {
    // It goes on: answered now, the key held until it is known done (GoesOnError).
    sendStage(deps, ex, stop);
    void repeat.then(
      async (reply) => {
        if (reply) await commit(deps, ex, ticket, reply);
        else ticket.release();
      },
      () => ticket.release(),
    );
    return undefined;
  }
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
  logLine(deps, ex, sent ? stop.reply.status : 499, stop.error, total);
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
 * Stores the answer before it is sent; the answer to send instead when the store failed. When the
 * request was carried out (a 2xx: an order placed, an account flattened) that is 504, its outcome
 * as after a broker timeout: never a 503 or 500 a client could read as "nothing happened" and
 * resend under a new key; the retry with the same key finds what was done (by clOrdId). Otherwise
 * the store's coded error (the cluster store unavailable: 503 with Retry-After), else a 500.
 */
async function commit(deps: PipelineDeps, ex: Exchange, ticket: IdempotencyTicket, reply: Reply): Promise<Reply | undefined> {
  try {
    await ticket.commit(storedAnswer(reply));
    return undefined;
  } catch (err) {
    deps.logger.error({ err, reqId: ex.requestId }, 'idempotency record not stored');
    if (reply.status < 300) {
      const why = err instanceof AppError ? err.message : 'store error';
      return appErrorReply(
        new AppError('BROKER_TIMEOUT', `the request was carried out, but its answer could not be stored (${why}): retry with the same Idempotency-Key, which answers with what was done`),
      );
    }
    return err instanceof AppError ? appErrorReply(err) : internalReply(ex);
  }
}

/** The 500 answer; the error itself is logged once, on the request's line. */
export function internalReply(ex: Exchange): Reply {
  return problemReply('INTERNAL', 'Unexpected error; quote the requestId when reporting it', { requestId: ex.requestId });
}

/** The request's one access-log line (errors for 500s); `ms`: its time so far, where the caller measured it already. */
export function logLine(deps: PipelineDeps, ex: Exchange, status: number, err?: unknown, ms = performance.now() - ex.startedAt): void {
  if (deps.metrics) {
    deps.metrics.request(ex.route?.path ?? ex.routeLabel ?? 'unmatched', ex.method, status, ms / 1000);
    if (status === 429) deps.metrics.limited(ex.limitedBy ?? (ex.authd ? 'streams' : 'failed-auth'));
  }
  if (status === 500) {
    const line = { reqId: ex.requestId, method: ex.handle.headOnly ? 'HEAD' : ex.method, path: redactUrl(ex.path), status, ms: Math.round(ms), principal: ex.principal };
    deps.logger.error(err instanceof Error ? { ...line, err } : line, 'request failed');
    return;
  }
  if (!deps.logger.isLevelEnabled('info')) return;
  const fields: AccessFields = { reqId: ex.requestId, method: ex.handle.headOnly ? 'HEAD' : ex.method, path: redactUrl(ex.path), status, ms: Math.round(ms), principal: ex.principal };
  if (deps.accessLine) deps.accessLine(fields);
  else deps.logger.info(fields, 'request');
}
