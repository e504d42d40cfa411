/**
 * The OpenAPI 3.1 document behind `/api-docs` and `/api-docs/openapi.json`, generated from
 * the route table and the very zod schemas the routes validate with, plus the error
 * catalogue, the SSE message formats, the symbol forms and the webhook guide (`x-guide`,
 * rendered by api-docs-page.ts).
 */
import { z } from 'zod';
import { basePathOf, type Config } from '../config.js';
import { PROBLEMS, problemType, type ProblemCode } from '../domain/problems.js';
import { GUARD_NAMES } from '../domain/guards.js';
import { MAX_ORDER_QTY, ORDER_QTY_CEILING } from '../domain/orders.js';
import { PLAIN_LINES } from '../domain/plain-text.js';
import { WWW_AUTHENTICATE } from './respond.js';
import { buildGuide, type GuideSection } from './openapi-guide.js';
import { isStoredStatus } from './idempotency.js';
import { TRADINGVIEW_TEMPLATE } from './webhook-payload.js';
import type { RouteDef } from './route-types.js';
import { SESSION_COOKIE } from './session-auth.js';

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  config: Pick<Config, 'rateLimitPerMin' | 'webhookRateLimitPerMin' | 'sseHeartbeatMs' | 'sseMaxStreamsPerKey' | 'bodyLimitBytes' | 'reconnectMinIntervalS'> & Partial<Pick<Config, 'orderQtyMax' | 'baseUrl'>>;
  version?: string;
}

/** The generated document (plain JSON). */
export interface OpenApiDocument extends Json {
  openapi: '3.1.0';
  paths: Record<string, Record<string, Json>>;
  'x-guide': GuideSection[];
}

/** JSON Schema of a zod schema for embedding (no `$schema`); `{}` when not representable. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Json {
  try {
    const out = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
    delete out['$schema'];
    return out;
  } catch {
    return {};
  }
}

const PROBLEM_REF = { $ref: '#/components/schemas/Problem' };
/** Every operation's `default`: the errors it does not list, 405 for the methods its path lacks among them. */
const DEFAULT_RESPONSE = { $ref: '#/components/responses/Problem' };
const RATE_HEADERS = ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

/**
 * Codes answered while authenticating, before the rate limiter counts the request: such answers
 * carry no rate-limit headers (there is no key yet, or it may not call the route). A webhook's 404
 * is its unknown token.
 */
const BEFORE_LIMIT = new Set<ProblemCode>(['UNAUTHENTICATED', 'INSUFFICIENT_SCOPE', 'SESSION_REQUIRED', 'CSRF_REJECTED']);
const WEBHOOK_BEFORE_LIMIT = new Set<ProblemCode>([...BEFORE_LIMIT, 'NOT_FOUND']);

/** `/accounts/:id` → `/accounts/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][\w]*)/g, '{$1}');
}

/** Builds the document for a route table. */
export function buildOpenApiDocument(routes: readonly RouteDef<any, any>[], options: OpenApiOptions): OpenApiDocument {
  const guide = buildGuide(options.config);
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    (paths[path] as Record<string, Json>)[route.method.toLowerCase()] = operation(route);
  }
  // Behind a proxy serving tradegate under a path (TRADEGATE_BASE_URL), every URL carries it.
  const base = basePathOf(options.config);
  const root = { servers: [{ url: base === '' ? '/' : base }] };
  paths['/healthz'] = { get: { ...root, operationId: 'healthz', summary: 'Liveness', tags: ['service'], security: [], responses: { 200: statusResponse('The process is up', 'ok'), default: DEFAULT_RESPONSE } } };
  paths['/readyz'] = { get: { ...root, operationId: 'readyz', summary: 'Readiness', tags: ['service'], security: [], responses: { 200: statusResponse('Accepting requests', 'ready'), 503: { ...problemResponse('Shutting down (SHUTTING_DOWN), or in a cluster this node cannot reach NATS (CLUSTER_UNAVAILABLE): use another node'), headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } }, default: DEFAULT_RESPONSE } } };
  paths['/api-docs'] = { get: { ...root, operationId: 'apiDocs', summary: 'This documentation as a page', tags: ['service'], security: [], responses: { 200: { description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } }, default: DEFAULT_RESPONSE } } };
  paths['/api-docs/openapi.json'] = { get: { ...root, operationId: 'openApi', summary: 'This documentation as OpenAPI 3.1 JSON', tags: ['service'], security: [], responses: { 200: { description: 'OpenAPI document', content: { 'application/json': { schema: { type: 'object', required: ['openapi', 'paths'] } } } }, default: DEFAULT_RESPONSE } } };
  paths['/openapi.json'] = { get: { ...root, operationId: 'openApiAlias', summary: 'The same OpenAPI document, where tools look for it first', tags: ['service'], security: [], responses: { 200: { description: 'OpenAPI document', content: { 'application/json': { schema: { type: 'object', required: ['openapi', 'paths'] } } } }, default: DEFAULT_RESPONSE } } };
  for (const page of ['/healthz', '/readyz', '/api-docs', '/api-docs/openapi.json', '/openapi.json']) {
    const get = paths[page]!['get'] as { responses: Record<string, Json> };
    const { default: fallback, ...own } = get.responses;
    addPipelineAnswers(own, false);
    get.responses = { ...own, default: fallback! };
  }

  return portable({
    openapi: '3.1.0',
    info: {
      title: 'tradegate API',
      version: options.version ?? '1',
      description: guide.map((s) => `${s.title}: ${s.paragraphs.join(' ')}`).join('\n\n'),
    },
    servers: [
      { url: `${base}/api/v1`, description: `Every endpoint is served under ${base}/api/v1 …` },
      { url: `${base}/v1`, description: `… and under ${base}/v1` },
    ],
    security: [{ ApiKey: [] }, { SessionCookie: [] }],
    paths,
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'tgk_<id>_<secret>; scopes read and/or trade' },
        SessionCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description:
            'Web-app session from POST /api/v1/session (HttpOnly, SameSite=Strict; named __Host-tg_session, Secure, over https). Every write made with it also needs the ' +
            "session's CSRF token in X-CSRF-Token (403 CSRF_REJECTED otherwise). Session-only routes refuse API keys (403 SESSION_REQUIRED).",
        },
      },
      schemas: { Problem: problemSchema(), ...sseSchemas() },
      responses: {
        Problem: {
          description:
            'Any error this operation does not list, as a problem from the catalogue; among them 405 METHOD_NOT_ALLOWED, the answer to a ' +
            'method its path does not list, with Allow naming the methods the path has (HEAD wherever GET is)',
          headers: { Allow: { $ref: '#/components/headers/Allow' } },
          content: { 'application/problem+json': { schema: PROBLEM_REF } },
        },
      },
      headers: componentHeaders(options.config.rateLimitPerMin),
    },
    'x-problem-codes': Object.entries(PROBLEMS).map(([code, p]) => ({ code, status: p.status, title: p.title, type: problemType(code as keyof typeof PROBLEMS) })),
    'x-guide': guide,
  }, options.config.orderQtyMax ?? MAX_ORDER_QTY) as OpenApiDocument;
}

/** Quantity fields of orders and strategies: validated up to the ceiling, bounded by ORDER_QTY_MAX (guards' limits take up to the ceiling). */
const QTY_FIELDS = new Set(['qty']);

/**
 * The document as other tools can read it: quantity maxima say this service's ORDER_QTY_MAX (the
 * schemas take up to the ceiling; the configured limit is checked after them), and the plain-text
 * rule of names (a JavaScript `u`-mode pattern: `\p{…}`, `\u{…}`, which Python's re and ajv without
 * `unicodeRegExp` cannot compile: client probe) is said in words instead of as a `pattern`.
 */
function portable(node: unknown, qtyMax: number, key?: string): unknown {
  if (Array.isArray(node)) return node.map((x) => portable(x, qtyMax, key));
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === 'properties' && v && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.entries(v as Json).map(([name, schema]) => [name, portable(schema, qtyMax, name)]));
    } else out[k] = portable(v, qtyMax, k === 'anyOf' || k === 'oneOf' || k === 'allOf' ? key : undefined);
  }
  if (typeof out['pattern'] === 'string' && /\\[pPu]\{/.test(out['pattern'])) {
    const lines = out['pattern'] === PLAIN_LINES.source;
    delete out['pattern'];
    // A description's rule (PLAIN_LINES) asks for nothing visible; a name's does (fuzz probe: the document promised it of descriptions).
    const rule = lines
      ? 'Plain text: line breaks and tabs allowed; no other control, invisible or bidirectional-override characters, no unpaired surrogates.'
      : 'Plain text: no control, invisible or bidirectional-override characters, no unpaired surrogates, and something to see.';
    out['description'] = typeof out['description'] === 'string' ? `${out['description']}. ${rule}` : rule;
  }
  if (key !== undefined && QTY_FIELDS.has(key) && out['maximum'] === ORDER_QTY_CEILING) out['maximum'] = qtyMax;
  return out;
}

function operation(route: RouteDef<any, any>): Json {
  const op: Json = {
    operationId: route.operationId,
    summary: route.summary,
    tags: route.tags ?? [],
  };
  if (route.description) op['description'] = route.description;
  const params: Json[] = [...route.path.matchAll(/:([A-Za-z_][\w]*)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: m[1] === 'orderId' ? { type: 'string', pattern: '^[1-9][0-9]{0,15}$' } : { type: 'string' },
    ...(route.scope === 'webhook' && m[1] === 'token' ? { description: 'The webhook token (whk_<id>_<secret>): it is the credential' } : {}),
    ...(m[1] === 'orderId' ? { description: 'The broker’s order id exactly as listed (decimal digits, no leading zero); any other spelling is 404' } : {}),
  }));
  if (route.query) {
    const q = jsonSchemaOf(route.query, 'input');
    const props = (q['properties'] ?? {}) as Record<string, Json>;
    const required = new Set((q['required'] as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries(props)) params.push({ name, in: 'query', required: required.has(name), schema });
  }
  if (route.idempotent) {
    params.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: '1–255 visible ASCII characters; same key + same request within 24 h replays the first answer',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[!-~]+$' },
    });
  }
  if (route.path === '/connection-health/stream') {
    params.push({ name: 'Last-Event-ID', in: 'header', required: false, description: 'The last `id:` received: resumes after it (EventSource sends it on a reconnect)', schema: { type: 'string', pattern: '^[0-9]{1,16}$' } });
  }
  const sessionOnly = route.scope === 'session';
  if (sessionOnly && route.method !== 'GET') {
    params.push({ name: 'X-CSRF-Token', in: 'header', required: true, description: 'csrfToken from the session', schema: { type: 'string' } });
  }
  if (params.length) op['parameters'] = params;

  if (route.scope === 'none' || route.scope === 'webhook') op['security'] = [];
  else op['x-required-scope'] = route.scope;
  if (sessionOnly) op['security'] = [{ SessionCookie: [] }];

  if (route.body) {
    const schema = jsonSchemaOf(route.body, 'input');
    const content: Json = { 'application/json': { schema } };
    if (route.scope === 'webhook') (content['application/json'] as Json)['example'] = JSON.parse(TRADINGVIEW_TEMPLATE) as unknown;
    if (route.lenientContentType) content['text/plain'] = { schema: { type: 'string', description: 'The same JSON, sent as text/plain (TradingView)' } };
    // A schema that takes no body at all (`.optional()`: lock, flatten) makes the body optional.
    op['requestBody'] = { required: !route.body.safeParse(undefined).success, content };
  }

  const responses: Record<string, Json> = {};
  const keyed = route.scope === 'read' || route.scope === 'trade' || route.scope === 'session';
  const rateHeaders = keyed || route.scope === 'webhook' ? Object.fromEntries(RATE_HEADERS.map((h) => [h, { $ref: `#/components/headers/${h}` }])) : {};
  for (const r of route.responses) {
    const res: Json = { description: r.description };
    if (r.status >= 400) res['content'] = { 'application/problem+json': { schema: PROBLEM_REF } };
    else if (r.schema) res['content'] = { 'application/json': { schema: jsonSchemaOf(r.schema, 'output') } };
    if (route.path === '/connection-health/stream' && r.status === 200) res['content'] = { 'text/event-stream': { schema: { oneOf: SSE_REFS } } };
    // Every answer the key stores is replayed with it (a webhook close's 409 after its 504, a 422: clients probe).
    if (route.idempotent && isStoredStatus(r.status)) res['headers'] = { 'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' } };
    // Two entries of one status (a route's own and its shared errors): one response naming both.
    const same = responses[String(r.status)];
    if (same) same['description'] = `${same['description'] as string}; ${r.description}`;
    else responses[String(r.status)] = res;
  }
  const standard: [number, string, boolean][] = [
    // Every API route refuses unknown or repeated query parameters.
    [400, 'VALIDATION_FAILED (errors: [{path, message}]; also an unknown or repeated query parameter) or INVALID_IDEMPOTENCY_KEY', true],
    [401, 'UNAUTHENTICATED: missing, malformed, unknown or revoked key', keyed],
    [403, route.scope === 'session' ? 'SESSION_REQUIRED (an API key was sent) or CSRF_REJECTED' : 'INSUFFICIENT_SCOPE (requiredScope)', keyed],
    [404, route.scope === 'webhook' ? 'NOT_FOUND: unknown token' : 'NOT_FOUND', route.path.includes(':')],
    [409, 'IDEMPOTENCY_KEY_IN_USE (Retry-After: 1)', !!route.idempotent],
    [412, 'PRECONDITION_FAILED: an If-Match header other than `*`, or If-None-Match: `*` (no answer carries an ETag, and the resource exists)', route.method !== 'GET'],
    // A body is read up to the limit on every route, one that takes none too (then refused 400).
    [413, 'PAYLOAD_TOO_LARGE (limitBytes)', true],
    [415, 'UNSUPPORTED_MEDIA_TYPE', !!route.body],
    [422, 'IDEMPOTENCY_KEY_REUSED', !!route.idempotent],
    [429, 'RATE_LIMITED (Retry-After)', keyed || route.scope === 'webhook'],
    [500, 'INTERNAL (requestId)', true],
  ];
  for (const [status, description, applies] of standard) {
    if (applies && !responses[String(status)]) responses[String(status)] = problemResponse(description);
  }
  addPipelineAnswers(responses, keyed || route.scope === 'webhook');
  // A create that does not deduplicate refuses the header, also where its own 400 lists other codes (clients probe).
  const invalid = responses['400'];
  if (route.refusesIdempotencyKey === true && invalid && !(invalid['description'] as string).includes('INVALID_IDEMPOTENCY_KEY')) {
    invalid['description'] = `${invalid['description'] as string}; INVALID_IDEMPOTENCY_KEY (an Idempotency-Key was sent: this create does not deduplicate)`;
  }
  // An API route takes a web-app session too (no X-API-Key): its writes need the session's CSRF token.
  const forbidden = responses['403'];
  if (forbidden && (route.scope === 'read' || route.scope === 'trade') && route.method !== 'GET') {
    forbidden['description'] = `${forbidden['description'] as string}; CSRF_REJECTED (a web-app session's write without its X-CSRF-Token)`;
  }
  const uncounted = uncountedStatuses(route);
  for (const [status, res] of Object.entries(responses)) {
    if (Object.keys(rateHeaders).length && !uncounted.has(Number(status))) res['headers'] = { ...((res['headers'] as Json | undefined) ?? {}), ...rateHeaders };
    if (status === '429' || status === '503' || status === '409') res['headers'] = { ...((res['headers'] as Json | undefined) ?? {}), 'Retry-After': { $ref: '#/components/headers/Retry-After' } };
    if (status === '401') res['headers'] = { ...((res['headers'] as Json | undefined) ?? {}), 'WWW-Authenticate': { description: `${WWW_AUTHENTICATE} (RFC 9110)`, schema: { type: 'string' } } };
  }
  op['responses'] = { ...responses, default: DEFAULT_RESPONSE };
  return op;
}

/**
 * The statuses a route answers only while authenticating: 401, 403 (and a webhook's 404) unless
 * the route documents a code of its own there, answered once the request was counted (RISK_GUARD).
 */
function uncountedStatuses(route: RouteDef<any, any>): Set<number> {
  const before = route.scope === 'webhook' ? WEBHOOK_BEFORE_LIMIT : BEFORE_LIMIT;
  const out = new Set<number>(route.scope === 'webhook' ? [401, 403, 404] : [401, 403]);
  for (const r of route.responses) {
    // A status documented without its codes may be anything the handler answers.
    if (r.codes === undefined || r.codes.some((c) => !before.has(c))) out.delete(r.status);
  }
  // The pipeline's own (addPipelineAnswers): a foreign Host, and a 503 of a route that has none of its own.
  out.add(421);
  if (!route.responses.some((r) => r.status === 503)) out.add(503);
  return out;
}

/**
 * What the pipeline answers before any route's own work, whatever the path (fuzz probe: a 421
 * and a 503 SHUTTING_DOWN no operation listed), added to a route's own entry of the same status
 * (`credentialed`: a route that takes a key, session or token, refused while a cluster node is cut off).
 */
function addPipelineAnswers(responses: Record<string, Json>, credentialed: boolean): void {
  const answers: [number, string][] = [
    [421, 'MISDIRECTED_REQUEST: the Host header names another server (a listener on loopback; DNS rebinding)'],
    [503, `SHUTTING_DOWN (Retry-After: 1; the connection closes)${credentialed ? '; CLUSTER_UNAVAILABLE (cluster mode: this node cannot reach NATS; Retry-After)' : ''}`],
  ];
  for (const [status, description] of answers) {
    const same = responses[String(status)];
    if (same === undefined) responses[String(status)] = problemResponse(description);
    else if (!(same['description'] as string).includes(description.split(' ')[0]!.replace(':', ''))) same['description'] = `${same['description'] as string}; ${description}`;
  }
}

/** `{"status": <value>}`, what /healthz and /readyz answer. */
function statusResponse(description: string, value: string): Json {
  const schema = { type: 'object', required: ['status'], properties: { status: { const: value } }, additionalProperties: false };
  return { description, content: { 'application/json': { schema } } };
}

function problemResponse(description: string): Json {
  return { description, content: { 'application/problem+json': { schema: PROBLEM_REF } } };
}

function problemSchema(): Json {
  return {
    type: 'object',
    description: 'RFC 9457 problem details; `code` is stable, see the error catalogue',
    required: ['type', 'title', 'status', 'detail', 'code'],
    properties: {
      type: { type: 'string', description: 'URI reference to the code’s documentation' },
      title: { type: 'string' },
      status: { type: 'integer' },
      detail: { type: 'string' },
      code: { type: 'string', enum: Object.keys(PROBLEMS) },
      errors: {
        type: 'array',
        description: 'VALIDATION_FAILED: the invalid fields, at most 20',
        items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
      },
      errorsOmitted: { type: 'integer', description: 'VALIDATION_FAILED: further problems not listed in errors' },
      requiredScope: { type: 'string', enum: ['read', 'trade'] },
      requestId: { type: 'string', description: 'INTERNAL: quote it when reporting' },
    },
    additionalProperties: true,
  };
}

const SSE_REFS = ['SnapshotMessage', 'StatusMessage', 'HeartbeatMessage', 'BracketAlertMessage', 'GuardMessage', 'GapMessage', 'RevokedMessage', 'ClosingMessage'].map((n) => ({ $ref: `#/components/schemas/${n}` }));

function sseSchemas(): Record<string, Json> {
  const statuses = ['CONNECTING', 'CONNECTED', 'RECONNECTING', 'AUTH_EXPIRED', 'FAILED', 'DISABLED'];
  const reasons = ['connect', 'disconnect', 'reconnect', 'auth-expired', 'fatal-error', 'disabled'];
  const connection = (type: string): Json => ({
    type: 'object',
    required: ['type', 'connectionId', 'status', 'ts'],
    properties: {
      type: { const: type },
      connectionId: { type: 'string' },
      status: { type: 'string', enum: statuses },
      ts: { type: 'integer', description: 'ms since the Unix epoch' },
      reason: { type: 'string', enum: reasons },
      detail: { type: 'string' },
    },
  });
  return {
    SnapshotMessage: connection('snapshot'),
    StatusMessage: connection('status'),
    HeartbeatMessage: { type: 'object', required: ['type', 'ts'], properties: { type: { const: 'heartbeat' }, ts: { type: 'integer' } } },
    RevokedMessage: {
      type: 'object',
      required: ['type', 'reason', 'ts', 'detail'],
      description: 'The last message of a stream whose credential stopped holding; the server then ends the stream and a reconnect gets 401',
      properties: {
        type: { const: 'revoked' },
        reason: { type: 'string', enum: ['key-revoked', 'user-deleted', 'password-changed', 'session-ended'] },
        ts: { type: 'integer' },
        detail: { type: 'string' },
      },
    },
    ClosingMessage: {
      type: 'object',
      required: ['type', 'ts', 'detail'],
      description: 'The last message of every stream when the service shuts down (SIGTERM): reconnect with Last-Event-ID once it is back (a dropped network sends nothing)',
      properties: {
        type: { const: 'closing' },
        ts: { type: 'integer' },
        detail: { type: 'string' },
      },
    },
    GuardMessage: {
      type: 'object',
      required: ['type', 'accountId', 'guard', 'action', 'ts', 'detail'],
      description: 'A risk guard acted on an account',
      properties: {
        type: { const: 'guard' },
        accountId: { type: 'string' },
        guard: { type: 'string', enum: [...GUARD_NAMES] },
        action: { type: 'string', enum: ['refused', 'locked', 'unlocked', 'flattened', 'flatten-failed'] },
        ts: { type: 'integer' },
        detail: { type: 'string' },
      },
    },
    GapMessage: {
      type: 'object',
      required: ['type', 'lastEventId', 'ts', 'detail'],
      description: 'A resume that cannot be exact: the Last-Event-ID is older than the messages kept (or from before a restart). Bracket alerts of the last 15 minutes and fresh snapshots follow; guard messages in between are not repeated',
      properties: {
        type: { const: 'gap' },
        lastEventId: { type: 'string' },
        ts: { type: 'integer' },
        detail: { type: 'string' },
      },
    },
    BracketAlertMessage: {
      type: 'object',
      required: ['type', 'connectionId', 'accountId', 'orderId', 'ts', 'detail'],
      description: 'A position may be unprotected or a protective leg changed: legs not placed, a leg cancel not confirmed, a leg re-placed or owed, a position with no protective order',
      properties: {
        type: { const: 'bracket-alert' },
        connectionId: { type: 'string' },
        accountId: { type: 'string' },
        orderId: { type: 'string' },
        ts: { type: 'integer' },
        detail: { type: 'string' },
        replayed: { const: true, description: 'Sent again to a stream opened without a resume (the last 15 minutes\' alerts, before its snapshots): it may have been seen on an earlier stream' },
      },
    },
  };
}

function componentHeaders(limit: number): Record<string, Json> {
  const h = (description: string, type = 'string'): Json => ({ description, schema: { type } });
  return {
    'RateLimit-Policy': h(`"key";q=${limit};w=60 (IETF RateLimit draft); "webhook" for webhook tokens`),
    RateLimit: h('"key";r=<remaining>;t=<seconds until a slot frees>'),
    'X-RateLimit-Limit': h('Requests allowed in any rolling 60 s', 'integer'),
    'X-RateLimit-Remaining': h('Requests left in the current window', 'integer'),
    'X-RateLimit-Reset': h('Epoch second at which the next slot frees', 'integer'),
    'Retry-After': h('Seconds to wait before retrying', 'integer'),
    'Idempotent-Replayed': h('true when this answer is a replay of the first request with this Idempotency-Key'),
    Allow: h('405: the methods this path has, e.g. "PATCH, DELETE" or "GET, HEAD"'),
  };
}
