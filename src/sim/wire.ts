/**
 * Wire helpers shared by the REST and WebSocket front of the paper broker: the response
 * shape `{s, d}`, Tradovate-style validation errors, and typed readers for request bodies.
 */

/** A handler's answer; REST sends `d` as the body with status `s`, WS wraps it in `{s,i,d}`. */
export interface WireResult {
  s: number;
  d?: unknown;
}

/** A request the broker refuses before doing anything (status + Tradovate-like text). */
export class WireError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** `{s:200, d}`. */
export const ok = (d?: unknown): WireResult => ({ s: 200, d });

/** Tradovate's HTTP-200 business failure for orders: `{failureReason, failureText}`. */
export const failure = (failureReason: string, failureText: string): WireResult => ({ s: 200, d: { failureReason, failureText } });

/** Tradovate answers an unknown symbol or a foreign/unknown account like this (ISS#45). */
export const accessDenied = (): WireResult => failure('UnknownReason', 'Access is denied');

type Body = Record<string, unknown>;

/**
 * Reads a request body text: JSON, or nothing. Clients that build frames with template
 * literals send the text `undefined` (or `null`) for requests without a body; that is no body.
 */
export function parseBodyText(text: string): { body: unknown } | { error: string } {
  const t = text.trim();
  if (t === '' || t === 'undefined' || t === 'null') return { body: undefined };
  try {
    return { body: JSON.parse(t) };
  } catch (err) {
    return { error: `Malformed JSON body: ${(err as Error).message}` };
  }
}

/** The query line; `undefined`/`null` (template-literal framing of a missing query) is empty. */
export function parseQueryText(text: string): URLSearchParams {
  const t = text.trim();
  return new URLSearchParams(t === 'undefined' || t === 'null' ? '' : t);
}

/**
 * The token of an `authorize` body: the raw token (Tradovate's samples), the JSON-quoted
 * token (`JSON.stringify(token)`) or an object `{token}` / `{accessToken}` (community clients).
 */
export function authorizeToken(text: string): string {
  const t = text.trim();
  if (!t.startsWith('"') && !t.startsWith('{')) return t;
  try {
    const v: unknown = JSON.parse(t);
    if (typeof v === 'string') return v.trim();
    if (v && typeof v === 'object') {
      const o = v as Body;
      const token = o.token ?? o.accessToken ?? o.mdAccessToken;
      if (typeof token === 'string') return token.trim();
    }
  } catch {
    // not JSON after all: the raw text is the token
  }
  return t;
}

/** The body as an object; anything else is a 400 like Tradovate's deserializer answers. */
export function asBody(body: unknown): Body {
  if (body && typeof body === 'object' && !Array.isArray(body)) return body as Body;
  throw new WireError(400, 'No usable value for body\nDid not find value which can be converted into an object');
}

function missing(field: string, kind: string): WireError {
  return new WireError(400, `No usable value for ${field}\nDid not find value which can be converted into ${kind}`);
}

/** Required string field. */
export function str(body: Body, field: string): string {
  const v = body[field];
  if (typeof v !== 'string' || v === '') throw missing(field, 'java.lang.String');
  return v;
}

/** Optional string field. */
export function optStr(body: Body, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw missing(field, 'java.lang.String');
  return v;
}

/** Required number field (numeric strings accepted, as a JSON deserializer would). */
export function num(body: Body, field: string): number {
  const v = optNum(body, field);
  if (v === undefined) throw missing(field, 'long');
  return v;
}

/** Optional number field. */
export function optNum(body: Body, field: string): number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw missing(field, 'double');
  return n;
}

/** Required enum field. */
export function oneOf<T extends string>(body: Body, field: string, values: readonly T[]): T {
  const v = str(body, field);
  if (!(values as readonly string[]).includes(v)) throw new WireError(400, `Invalid value for ${field}: ${v}`);
  return v as T;
}

/** Optional boolean field. */
export function optBool(body: Body, field: string): boolean | undefined {
  const v = body[field];
  return v === undefined || v === null ? undefined : v === true || v === 'true';
}
