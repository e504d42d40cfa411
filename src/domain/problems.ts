/**
 * The error catalogue: every error a client can see has a stable code, one HTTP status and
 * a title. Bodies follow RFC 9457 (application/problem+json). `/api-docs` lists this table.
 */

export const PROBLEMS = {
  VALIDATION_FAILED: { status: 400, title: 'Request validation failed' },
  UNKNOWN_SYMBOL: { status: 400, title: 'Unknown symbol' },
  INVALID_IDEMPOTENCY_KEY: { status: 400, title: 'Invalid Idempotency-Key' },
  WEBHOOK_UNSUPPORTED: { status: 400, title: 'Webhook feature not supported' },
  PRICE_OUT_OF_RANGE: { status: 400, title: 'Price outside the allowed band of the contract' },
  UNAUTHENTICATED: { status: 401, title: 'Missing or invalid credentials' },
  INSUFFICIENT_SCOPE: { status: 403, title: 'API key lacks the required scope' },
  ACCOUNT_INACTIVE: { status: 403, title: 'Account is inactive' },
  CSRF_REJECTED: { status: 403, title: 'Missing or invalid CSRF token' },
  SESSION_REQUIRED: { status: 403, title: 'This route needs a signed-in web session' },
  RISK_GUARD: { status: 403, title: 'Refused by a risk guard' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  SYMBOL_MISMATCH: { status: 409, title: 'Symbol does not match the account position' },
  IDEMPOTENCY_KEY_IN_USE: { status: 409, title: 'Idempotency-Key is in use by a request in flight' },
  ORDER_NOT_WORKING: { status: 409, title: 'Order is not working' },
  CONFLICT: { status: 409, title: 'Conflict' },
  CONNECTION_FAILED: { status: 409, title: 'Broker connection failed; reconnect it or give it new credentials' },
  QUOTA_EXCEEDED: { status: 409, title: 'Per-user quota reached; delete one first' },
  PRECONDITION_FAILED: { status: 412, title: 'Precondition failed: this service issues no entity tags' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  MISDIRECTED_REQUEST: { status: 421, title: 'The Host header does not name this server' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'Idempotency-Key reused with a different request' },
  BROKER_REJECTED: { status: 422, title: 'Broker rejected the request' },
  RATE_LIMITED: { status: 429, title: 'Rate limit exceeded' },
  TOO_MANY_STREAMS: { status: 429, title: 'Too many concurrent streams for this key' },
  INTERNAL: { status: 500, title: 'Internal error' },
  BROKER_UNAVAILABLE: { status: 503, title: 'Broker connection unavailable' },
  SHUTTING_DOWN: { status: 503, title: 'Server is shutting down' },
  ACTOR_LIMIT_REACHED: { status: 503, title: 'The service runs as many broker connections as it is configured for' },
  CLUSTER_UNAVAILABLE: { status: 503, title: 'Cluster store unavailable' },
  BROKER_TIMEOUT: { status: 504, title: 'Broker did not answer in time' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** RFC 9457 body with our `code` and any extension members. */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  [extension: string]: unknown;
}

/** Where each code is documented; the `type` URI of the problem. */
export function problemType(code: ProblemCode): string {
  return `/api-docs#problem-${code.toLowerCase().replace(/_/g, '-')}`;
}

/** Builds a problem body for `code`; `detail` defaults to the title. */
export function problem(code: ProblemCode, detail?: string, extensions: Record<string, unknown> = {}): ProblemBody {
  const { status, title } = PROBLEMS[code];
  return { type: problemType(code), title, status, detail: detail ?? title, code, ...extensions };
}

/**
 * An error that carries a catalogue code; thrown inside handlers and turned into a problem
 * response at the edge. Also the shape errors take when they cross a thread boundary.
 */
/**
 * A request withdrawn before it left the front, because the HTTP client that asked for it is
 * gone (nobody could learn its outcome, and a retry would repeat it). Not an AppError: it is
 * never answered, and the access log shows 499.
 */
export class RequestNotSentError extends Error {
  override name = 'RequestNotSentError';
}

export class AppError extends Error {
  override name = 'AppError';
  readonly code: ProblemCode;
  readonly extensions: Record<string, unknown>;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ProblemCode, detail?: string, extensions: Record<string, unknown> = {}, retryAfterSeconds?: number) {
    super(detail ?? PROBLEMS[code].title);
    this.code = code;
    this.extensions = extensions;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  get status(): number {
    return PROBLEMS[this.code].status;
  }

  toProblem(): ProblemBody {
    return problem(this.code, this.message, this.extensions);
  }
}

/** Serializable form of an error for crossing threads (comlink, MessagePort). */
export interface ErrorData {
  code: ProblemCode;
  message: string;
  retryable: boolean;
  extensions?: Record<string, unknown>;
  retryAfterSeconds?: number;
}

const RETRYABLE = new Set<ProblemCode>(['BROKER_UNAVAILABLE', 'BROKER_TIMEOUT', 'RATE_LIMITED', 'IDEMPOTENCY_KEY_IN_USE', 'SHUTTING_DOWN', 'CLUSTER_UNAVAILABLE']);

/** Converts any thrown value into ErrorData; unknown errors become INTERNAL. */
export function toErrorData(err: unknown): ErrorData {
  if (err instanceof AppError) {
    const data: ErrorData = { code: err.code, message: err.message, retryable: RETRYABLE.has(err.code) };
    if (Object.keys(err.extensions).length) data.extensions = err.extensions;
    if (err.retryAfterSeconds !== undefined) data.retryAfterSeconds = err.retryAfterSeconds;
    return data;
  }
  return { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err), retryable: false };
}

/** Rebuilds an AppError from ErrorData on the receiving side of a thread boundary. */
export function fromErrorData(data: ErrorData): AppError {
  return new AppError(data.code in PROBLEMS ? data.code : 'INTERNAL', data.message, data.extensions ?? {}, data.retryAfterSeconds);
}
