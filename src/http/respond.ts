/**
 * Writing answers to a uWS response under the handler discipline: the abort handler is
 * registered at construction (before any await), nothing touches `res` after an abort or
 * after the answer went out, and every write is corked (writes after an await are outside
 * uWS's own cork; an answer written before uWS's request callback returns is inside it).
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { AppError, problem, type ProblemBody, type ProblemCode } from '../domain/problems.js';
import type { TrustedProxies } from './client-address.js';

/** The response whose uWS request callback is running: uWS has corked it for the callback. */
let inCallback: HttpResponse | undefined;

/**
 * uWS's request callback `handler`, noting whose callback runs: an answer to that response
 * written before the callback returns is written as it is, not through a `cork` of its own
 * (uWS corked it already): one call into uWS and one back into JavaScript less per synchronous
 * answer (a cached read).
 */
export function uwsRequestCallback(handler: (res: HttpResponse, req: HttpRequest) => void): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    inCallback = res;
    try {
      handler(res, req);
    } finally {
      inCallback = undefined;
    }
  };
}

/** A complete answer before it is written. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  /** Already serialized; undefined for an empty body. */
  body?: string | Buffer;
  /** The problem code of an error answer (not sent as such; the idempotency gate reads it). */
  code?: ProblemCode;
  /** A HEAD of a body with no length (the health stream): no Content-Length is sent. */
  openEnded?: true;
}

/** A reply as an idempotency record stores it (its body as text), with its problem code for the gate. */
export function storedAnswer(reply: Reply): { status: number; headers: Record<string, string>; body: string; code: ProblemCode | undefined } {
  return { status: reply.status, headers: reply.headers, body: reply.body === undefined ? '' : reply.body.toString(), code: reply.code };
}

export const JSON_TYPE = 'application/json';
/**
 * Bodies from this size on are written as the client reads them (ResponseHandle.endStreamed):
 * the OpenAPI document and the docs page (~340–390 KB, no key needed), working-order pages of
 * more than ~230 orders. Not smaller ones: at 16 KiB the reads bench's 41 KB working-order page
 * cost the front 118 µs instead of 67 µs per read (tryEnd with its drain bookkeeping); the web
 * app's largest file is 28 KB before compression.
 */
const STREAMED_BODY_BYTES = 64 * 1024;
/** A streamed body the client has not taken any of for this long is dropped with its connection. */
const STREAM_STALL_MS = 10_000;
/** The headers of a route answer that is JSON text already (shared: answers copy their headers). */
export const JSON_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'Content-Type': JSON_TYPE });
const SERVER_TIMING = 'Server-Timing';
export const PROBLEM_TYPE = 'application/problem+json';

const REASONS: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  421: 'Misdirected Request',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

const STATUS_LINES = new Map(Object.keys(REASONS).map((code) => [Number(code), `${code} ${REASONS[Number(code)]}`]));

/**
 * One header of an answer's head, preceded by the line break that ends the line before it.
 *
 * An answer's status line and headers go to uWS in one `writeStatus` call: uWS writes
 * `HTTP/1.1 <status>\r\n` around the string as given, and `writeHeader` is that same write of
 * `name: value\r\n`, so the bytes on the wire are the same. Each call into uWS costs more than
 * building the line in JavaScript (a GET answer has ten headers: ~4 µs of front CPU per answer
 * here, README "Performance"). uWS checks neither form, so a line break in a value would end
 * the header there and start another: none reaches the wire (each becomes a space; every header
 * is the service's own, so one is a defect, but never a split answer).
 */
export function headerLine(name: string, value: string): string {
  if (hasLineBreak(value) || hasLineBreak(name)) return `\r\n${name.replace(LINE_BREAKS, ' ')}: ${value.replace(LINE_BREAKS, ' ')}`;
  return `\r\n${name}: ${value}`;
}
/** Two string searches: cheaper than a regular expression for a header's few dozen characters. */
function hasLineBreak(text: string): boolean {
  return text.indexOf('\n') !== -1 || text.indexOf('\r') !== -1;
}
const LINE_BREAKS = /[\r\n]/g;

/** `201 Created`-style status line for uWS `writeStatus` (the known ones built once). */
export function statusLine(status: number): string {
  return STATUS_LINES.get(status) ?? `${status} Status`;
}

/** A JSON answer. */
export function jsonReply(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return { status, headers: { 'Content-Type': JSON_TYPE, ...headers }, body: JSON.stringify(value) };
}

/** An RFC 9457 answer for a catalogue code. */
export function problemReply(
  code: ProblemCode,
  detail?: string,
  extensions: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Reply {
  return problemBodyReply(problem(code, detail, extensions), headers);
}

/** An RFC 9457 answer from a ready problem body. */
export function problemBodyReply(body: ProblemBody, headers: Record<string, string> = {}): Reply {
  return { status: body.status, headers: { 'Content-Type': PROBLEM_TYPE, ...headers }, body: JSON.stringify(body), code: body.code };
}

/** The challenge of every 401: an API key in X-API-Key (the web app's session cookie is got by signing in). */
export const WWW_AUTHENTICATE = 'ApiKey realm="tradegate", header="X-API-Key"';

/** Seconds to wait when a 503 does not say: DESIGN §3 promises `Retry-After` on every 503. */
export const DEFAULT_UNAVAILABLE_RETRY_AFTER_S = 1;

/** An RFC 9457 answer for a thrown AppError, with `Retry-After` when it carries one (and always on a 503). */
export function appErrorReply(err: AppError, headers: Record<string, string> = {}): Reply {
  const extra: Record<string, string> = {};
  const retryAfter = err.retryAfterSeconds ?? (err.status === 503 ? DEFAULT_UNAVAILABLE_RETRY_AFTER_S : undefined);
  if (retryAfter !== undefined) extra['Retry-After'] = String(retryAfter);
  // RFC 9110 §11.6.1: a 401 names how to authenticate.
  if (err.status === 401) extra['WWW-Authenticate'] = WWW_AUTHENTICATE;
  return problemBodyReply(err.toProblem(), Object.assign(extra, headers));
}

/**
 * Owns one uWS response: tracks abort and completion so the rest of the code can call
 * `send` from anywhere without breaking the uWS rules.
 */
export class ResponseHandle {
  aborted = false;
  finished = false;
  /** What to run if the client goes away (most requests register nothing; memory per open SSE stream counts). */
  private abortHook: (() => void) | undefined;
  /** Reading from the connection is paused until the answer (holdInput). */
  private held = false;
  /** The client's address, read on first use (uWS copies it into a new ArrayBuffer on every read: ~10 µs). */
  private address: string | undefined;
  /** uWS's abort handler is registered (watchAbort). */
  private watching = false;

  /**
   * `headOnly`: a HEAD request; answers carry their headers and Content-Length, never a body.
   * `proxies` and `forwardedFor` (TRUST_PROXY): the client's address is read through them.
   */
  constructor(
    readonly res: HttpResponse,
    readonly headOnly = false,
    private readonly proxies?: TrustedProxies,
    private readonly forwardedFor?: string,
  ) {}

  /**
   * Registers uWS's abort handler, once. uWS asks for one only of an answer still pending when its
   * request callback returns (a body to read, a broker call, a stream, a large body written as the
   * socket drains); the front calls this then (server.ts accept), and so does every onAbort. An
   * answer sent inside the callback, as every read from memory is, registers nothing: the closure
   * and the handle it pins cost ~1 µs of front CPU per request (README "Performance"). Never call
   * it once uWS has ended the response.
   */
  watchAbort(): void {
    if (this.watching) return;
    this.watching = true;
    this.res.onAborted(() => {
      this.aborted = true;
      const hook = this.abortHook;
      this.abortHook = undefined;
      hook?.();
    });
  }

  /**
   * The client's address as text. Read from uWS on the first call, which must come while the
   * response is open (the pipeline asks synchronously where it needs it: authentication
   * failures, public and session routes); '' once the response is gone without it. Behind a
   * trusted proxy, the client it forwarded for (TrustedProxies.clientOf).
   */
  remoteAddress(): string {
    if (this.address === undefined) {
      const peer = this.open ? Buffer.from(this.res.getRemoteAddressAsText()).toString() : '';
      this.address = this.proxies && peer !== '' ? this.proxies.clientOf(peer, this.forwardedFor) : peer;
    }
    return this.address;
  }

  /** Whether the response can still be written. */
  get open(): boolean {
    return !this.aborted && !this.finished;
  }

  /**
   * Ends an answer that has no body (204, 304, any answer to HEAD). This uWS build mishandles
   * its own length argument: `endWithoutBody(undefined)` writes a bogus Content-Length of
   * 2^63 and `endWithoutBody(n)` leaves the connection waiting for n bytes, so the next request
   * on a keep-alive connection hangs. So the length (HEAD only: what GET would send) goes out as
   * a plain header and endWithoutBody is called without one; closing needs the argument form,
   * with 0.
   */
  private endWithoutBody(length: number | undefined, closeConnection: boolean): void {
    if (closeConnection) {
      this.res.endWithoutBody(0, true);
      return;
    }
    if (length !== undefined) this.res.writeHeader('Content-Length', String(length));
    this.res.endWithoutBody();
  }

  /** Runs `hook` if the client goes away before the answer is sent. */
  onAbort(hook: () => void): void {
    this.watchAbort();
    if (this.aborted) hook();
    else if (!this.abortHook) this.abortHook = hook;
    else {
      // Rare (a body reader and a stream): chained, so the common single hook needs no array.
      const first = this.abortHook;
      this.abortHook = () => {
        first();
        hook();
      };
    }
  }

  /**
   * Stops reading the connection until this answer is sent, if it is still pending at the end of
   * this event-loop turn. uWS closes a keep-alive connection, unanswered, when the next request
   * is parsed while an answer is pending ("async pipelining is not supported"); held, the next
   * request waits in the kernel and is read after this answer. Bytes read in the same turn as
   * this request (sent in the same packet) are parsed anyway: that close cannot be avoided.
   * Call it only once the body has been read (a paused body never arrives). An answer sent within
   * the turn costs one setImmediate and no syscall; a client that leaves while reading is paused
   * is noticed when its answer is written.
   */
  holdInput(): void {
    setImmediate(() => {
      if (!this.open) return;
      this.res.pause();
      this.held = true;
    });
  }

  /**
   * Writes the whole answer; false when the client is gone or it was already answered. `extra`
   * headers (the request's own: id, rate limit) replace the answer's of the same name, and
   * `serverTiming` replaces any Server-Timing: the headers of `{ ...reply.headers, ...extra,
   * 'Server-Timing': serverTiming }`, written without building that object (a spread-merge
   * cost ~10 µs per request on Node 20).
   */
  send(reply: Reply, closeConnection = false, extra?: Readonly<Record<string, string>>, serverTiming?: string): boolean {
    if (!this.open) return false;
    this.finished = true;
    if (this.res === inCallback) this.write(reply, closeConnection, extra, serverTiming);
    else this.res.cork(() => this.write(reply, closeConnection, extra, serverTiming));
    return true;
  }

  private write(reply: Reply, closeConnection: boolean, extra: Readonly<Record<string, string>> | undefined, serverTiming: string | undefined): void {
    const res = this.res;
    if (this.held) res.resume();
    let head = statusLine(reply.status);
    const own = reply.headers;
    for (const name in own) {
      const value = name === SERVER_TIMING && serverTiming !== undefined ? serverTiming : extra !== undefined && Object.hasOwn(extra, name) ? extra[name]! : own[name]!;
      head += headerLine(name, value);
    }
    if (extra !== undefined) {
      for (const name in extra) {
        if (Object.hasOwn(own, name)) continue;
        head += headerLine(name, name === SERVER_TIMING && serverTiming !== undefined ? serverTiming : extra[name]!);
      }
    }
    if (serverTiming !== undefined && !Object.hasOwn(own, SERVER_TIMING) && !(extra !== undefined && Object.hasOwn(extra, SERVER_TIMING))) head += headerLine(SERVER_TIMING, serverTiming);
    res.writeStatus(head);
    const noBody = reply.status === 204 || reply.status === 304;
    if (noBody || this.headOnly) this.endWithoutBody(noBody || reply.openEnded ? undefined : Buffer.byteLength(reply.body ?? ''), closeConnection);
    else if (reply.body === undefined || reply.body.length === 0) this.res.end(undefined, closeConnection);
    else if (closeConnection || reply.body.length < STREAMED_BODY_BYTES) this.res.end(reply.body, closeConnection);
    else this.endStreamed(reply.body);
  }

  /**
   * Ends with a large body no faster than the client reads it. `end` queues whatever the socket
   * cannot take, and uWS answers every request of a pipelined batch in the same turn: a client
   * that sent 300 requests for the 335 KB OpenAPI document and never read made the server hold
   * ~100 MB per connection until its idle timeout (load probe). Here uWS takes what the socket
   * takes and the rest waits in this one buffer, written as the socket drains. The answer stays
   * pending meanwhile, and uWS closes a connection whose next request arrives while one is
   * pending, so a connection holds at most one such body. A client that stops reading is closed
   * by uWS's idle timeout (aborted: the buffer goes with the response).
   */
  private endStreamed(body: string | Buffer): void {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const res = this.res;
    const [, done] = res.tryEnd(bytes, bytes.length);
    if (done) return;
    // uWS applies no idle timeout to an answer waiting for the socket to drain (a probe's
    // connections stayed open past 60 s): one that makes no progress for this long is closed.
    let stalled = setTimeout(() => res.close(), STREAM_STALL_MS);
    this.onAbort(() => clearTimeout(stalled));
    res.onWritable((offset) => {
      const [ok, finished] = res.tryEnd(bytes.subarray(offset), bytes.length);
      clearTimeout(stalled);
      if (!finished) stalled = setTimeout(() => res.close(), STREAM_STALL_MS);
      return ok;
    });
  }
}

/**
 * Turns a handler's RouteResponse into a Reply: strings/Buffers with an explicit
 * Content-Type go out as they are; anything else is JSON (problem+json for problem bodies).
 */
export function routeResponseReply(r: { status: number; body?: unknown; headers?: Record<string, string> }): Reply {
  const headers: Record<string, string> = Object.assign({}, r.headers);
  let hasType = false;
  for (const h in headers) if (h.length === 12 && h.toLowerCase() === 'content-type') hasType = true;
  if (r.body === undefined || r.status === 204) return { status: r.status, headers };
  if ((typeof r.body === 'string' || Buffer.isBuffer(r.body)) && hasType) return { status: r.status, headers, body: r.body };
  if (!hasType) headers['Content-Type'] = isProblemBody(r.body) ? PROBLEM_TYPE : JSON_TYPE;
  return { status: r.status, headers, body: JSON.stringify(r.body) };
}

function isProblemBody(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'code' in body && 'status' in body && 'title' in body;
}
