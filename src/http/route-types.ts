/**
 * The route table contract between the HTTP engine (server, auth, rate limit, idempotency,
 * validation, OpenAPI) and the route modules (src/http/routes/*). A route is data plus a
 * handler; the engine runs every cross-cutting step before the handler sees the request,
 * and `/api-docs` is generated from the same definitions.
 */
import type { z } from 'zod';
import type { Scope } from '../domain/connections.js';
import type { Logger } from '../log.js';
import type { GuardNarrowing } from '../domain/guards.js';
import { AppError, type ProblemCode } from '../domain/problems.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * `read` / `trade`: X-API-Key with that scope (or a web session). `none`: public.
 * `webhook`: the `{token}` path parameter authenticates (webhook receiver only).
 * `session`: a signed-in web session only (cookie + CSRF header on writes); an API key is
 * refused, so a leaked key can never mint or revoke keys.
 */
export type RouteScope = 'read' | 'trade' | 'none' | 'webhook' | 'session';

/** Who is calling, after authentication. */
export interface AuthContext {
  userId: string;
  /** API key id, or `webhook:<tokenId>` for webhook calls, or `session:<id>` for the web app. */
  principalId: string;
  scopes: readonly Scope[];
  kind: 'api-key' | 'webhook' | 'session';
  /** For `webhook` calls: the token that authenticated the request, as verified (its bound account and strategy). */
  webhook?: WebhookPrincipal;
  /** The API key's or webhook token's narrowing of the account guards, when it has one. */
  narrowing?: GuardNarrowing;
}

/** A verified webhook token: the alert goes to its account, with its strategy's defaults. */
export interface WebhookPrincipal {
  tokenId: string;
  accountId: string;
  strategyId: string | null;
  /** Why the token is inactive (its account went away), as verified; null or absent when active. */
  inactiveReason?: string | null;
}

/** Server-Timing collector: `broker;dur=…, total;dur=…`. */
export interface Timing {
  /** Adds a metric (ms). */
  add(name: string, durMs: number): void;
}

export interface RouteRequest<B = unknown, Q = unknown> {
  method: HttpMethod;
  /** Path as received, without query string. */
  path: string;
  params: Record<string, string>;
  query: Q;
  /** Lower-case header names. */
  headers: Readonly<Record<string, string>>;
  /** Validated body (the route's `body` schema output), or undefined when the route has none. */
  body: B;
  rawBody: Buffer;
  ip: string;
}

export interface RouteContext<B = unknown, Q = unknown> {
  req: RouteRequest<B, Q>;
  /** Present for every scope except `none`. */
  auth: AuthContext;
  requestId: string;
  timing: Timing;
  log: Logger;
  /** The idempotency key in force for this request (header, or `idempotencyKeyFrom`), if any. */
  idempotencyKey?: string;
  /** That key's request fingerprint (a stored answer replays only for the same one). */
  idempotencyFingerprint?: string;
  /** True once the HTTP client is gone (closed, or uWS closed it): the answer can no longer be sent. */
  clientGone?: () => boolean;
}

/**
 * A handler's error for a request that goes on after its answer: it is answered as `answer`, its
 * idempotency key stays taken (a repeat meets 409 IDEMPOTENCY_KEY_IN_USE), and once `outcome`
 * resolves, what it resolves to is stored under the key as for any answer (a 2xx or a coded
 * 4xx/409; a 5xx never), so that a later repeat is answered with it rather than acted on again;
 * undefined (not carried out, or not known), or an answer that is not stored, frees the key.
 * A 504 alone is never stored: a webhook exit answered 504 and delivered again closed the
 * position opened since (money probe), and a flatten's retry after its 504 would close one too.
 * Stored only once known: a process killed before that leaves the key free, and the repeat does
 * what the kill cut short (re-probe).
 */
export class GoesOnError extends AppError {
  constructor(
    answer: AppError,
    readonly outcome: Promise<AppError | RouteResponse | undefined>,
  ) {
    super(answer.code, answer.message, answer.extensions, answer.retryAfterSeconds);
  }
}

export interface RouteResponse {
  status: number;
  /** Serialized as JSON unless it is a string/Buffer with an explicit content-type header. */
  body?: unknown;
  headers?: Readonly<Record<string, string>>;
}

export interface ResponseDoc {
  status: number;
  description: string;
  schema?: z.ZodType;
  /** The problem codes answered with this status (errors() fills it; the document reads which stage answers them). */
  codes?: readonly ProblemCode[];
}

export interface RouteDef<B = unknown, Q = unknown> {
  method: HttpMethod;
  /** Relative to the API prefix, e.g. `/accounts/:id/orders`; served under `/api/v1` and `/v1`. */
  path: string;
  scope: RouteScope;
  /** Operation id and summary for the OpenAPI document. */
  operationId: string;
  summary: string;
  description?: string;
  tags?: string[];
  /** Strict object schema for JSON bodies: unknown fields → 400 VALIDATION_FAILED. */
  body?: z.ZodType<B>;
  query?: z.ZodType<Q>;
  /** Accept text/plain bodies as JSON too (TradingView webhooks). */
  lenientContentType?: boolean;
  /** Idempotency-Key honoured (DESIGN §3): replay, in-flight 409, fingerprint 422. */
  idempotent?: boolean;
  /**
   * Where the idempotency key comes from when not the `Idempotency-Key` header (the webhook
   * payload's `id`). Runs after body validation.
   */
  idempotencyKeyFrom?: (req: RouteRequest<B, Q>) => string | undefined;
  /**
   * A route's own rule for an `Idempotency-Key` header, beyond the general one (throws a coded
   * error), checked before the key is looked up: a request that may carry no key is refused as
   * such (400), never as a reused key (422).
   */
  checkIdempotencyKey?: (key: string, req: RouteRequest<B, Q>) => void;
  /**
   * The namespace this route's idempotency keys live in, inside the user's (DESIGN §3 scopes
   * keys per user). The webhook receiver answers its token's: one alert sent to two tokens
   * (one strategy copied to two accounts) is two alerts, not a reused key.
   */
  idempotencyScope?: (auth: AuthContext) => string;
  /**
   * false: the path's parameters are not part of a request's fingerprint. The webhook receiver's
   * only one is its token, a credential its scope already names by id: a rotated URL must
   * replay the alerts the old one took, not answer IDEMPOTENCY_KEY_REUSED.
   */
  fingerprintParams?: false;
  /**
   * true: a POST that makes something anew each time (a create, a rotation) without deduplicating:
   * an Idempotency-Key on it is refused (400), since sent twice under one key it would act twice
   * (clients probe). Other POSTs that do not deduplicate set a state (lock, reconnect, sign-in)
   * and take the header as they are: a kill switch is never refused over it.
   */
  refusesIdempotencyKey?: true;
  /**
   * The request as its fingerprint names it: one spelled with a documented default or an explicit
   * null (what a generated client sends) is the request without it, so a retry under the same key
   * replays rather than 422 (clients probe). Must keep apart requests that mean different things.
   */
  fingerprintOf?: (req: RouteRequest<B, Q>) => { body: unknown; query: unknown };
  /**
   * true: a key taken from the body (`idempotencyKeyFrom`) names the request together with its
   * fingerprint, so the same key with another body is another request, never 422. The webhook
   * receiver's: TradingView never resends an alert, a repeat delivery is byte-identical, and a
   * template's id can repeat within its one-second clock (TV probe: a reversal and the entry back
   * in one second, the second answered 422 and not traded).
   */
  bodyKeyNamesBody?: true;
  responses: ResponseDoc[];
  /**
   * Told of a request refused after it was authenticated but before its handler ran (its body not
   * JSON or not valid, its Idempotency-Key in use or reused): the webhook receiver journals those
   * alerts too, where a broken template shows.
   */
  refused?(request: { auth: AuthContext; body: unknown; requestId: string }, err: AppError): void;
  /** Async as a rule; a handler that answers from memory may answer synchronously (no promise, no await). */
  handler(ctx: RouteContext<B, Q>): Promise<RouteResponse> | RouteResponse;
}

/** Helper that keeps the generic types of one route together. */
export function defineRoute<B = undefined, Q = undefined>(def: RouteDef<B, Q>): RouteDef<B, Q> {
  return def;
}
