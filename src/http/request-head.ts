/**
 * What the front copies out of uWS's short-lived request before anything else: the method
 * (HEAD is served as GET without a body, RFC 9110 §9.3.2) and the headers, noting the ones a
 * client sent more than once.
 *
 * A header that carries a credential or a request identity must come once: with two
 * `X-API-Key` lines "the last one wins" would make which key authenticates a request depend on
 * a proxy's header order, so such a request is refused instead. Other repeated headers are
 * joined with ", " as RFC 9110 §5.3 allows for list-valued fields.
 */
import type { HttpRequest } from 'uWebSockets.js';
import { AppError } from '../domain/problems.js';

/** Headers that must appear at most once (lower-case). */
export const SINGLETON_HEADERS: ReadonlySet<string> = new Set([
  'x-api-key',
  'idempotency-key',
  'content-type',
  'content-length',
  'host',
  'last-event-id',
  'x-request-id',
  'cookie',
  'x-csrf-token',
]);

/** The request head as the pipeline takes it. */
export interface RequestHead {
  /** Upper-case method; GET for a HEAD request. */
  method: string;
  /** True for HEAD: answer as GET, without the body. */
  head: boolean;
  /** Lower-case names; repeated list headers joined with ", ". */
  headers: Record<string, string>;
  /** Singleton headers that came more than once. */
  repeated: string[];
  /**
   * Two Content-Length lines that disagree: where the body ends, and so where the next request
   * starts, is unknown (RFC 9112 §6.3). The connection must close before anything more is read.
   */
  framingInDoubt?: true;
}

/** Copies method and headers out of a uWS request (valid only inside its callback). */
export function readRequestHead(req: Pick<HttpRequest, 'getMethod' | 'forEach'>): RequestHead {
  const method = req.getMethod().toUpperCase();
  const headers: Record<string, string> = {};
  const repeated: string[] = [];
  let framingInDoubt = false;
  req.forEach((name, value) => {
    const seen = headers[name];
    if (seen === undefined) headers[name] = value;
    else if (SINGLETON_HEADERS.has(name)) {
      if (!repeated.includes(name)) repeated.push(name);
      if (name === 'content-length' && value.trim() !== seen.trim()) framingInDoubt = true;
    } else headers[name] = `${seen}, ${value}`;
  });
  const head = method === 'HEAD';
  const out: RequestHead = { method: head ? 'GET' : method, head, headers, repeated };
  if (framingInDoubt) out.framingInDoubt = true;
  return out;
}

/** 400 VALIDATION_FAILED naming the singleton headers sent twice; undefined when none were. */
export function repeatedHeaderError(repeated: readonly string[]): AppError | undefined {
  if (repeated.length === 0) return undefined;
  const errors = repeated.map((name) => ({ path: `header.${name}`, message: 'sent more than once; send it once' }));
  return new AppError('VALIDATION_FAILED', `${repeated.join(', ')}: sent more than once`, { errors });
}
