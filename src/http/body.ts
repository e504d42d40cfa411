/**
 * Request bodies: bounded reading from uWS, media-type rules, JSON parsing and zod
 * validation turned into 400 VALIDATION_FAILED with `errors: [{path, message}]`.
 */
import { isUtf8 } from 'node:buffer';
import type { z } from 'zod';
import { AppError } from '../domain/problems.js';
import { printable } from '../domain/plain-text.js';
import type { ResponseHandle } from './respond.js';

/** Thrown when the client went away while its body was being read. */
export class ClientAbortedError extends Error {
  override name = 'ClientAbortedError';
}

/** Whether the request announces a body (Content-Length > 0 or chunked). */
export function hasBody(headers: Readonly<Record<string, string>>): boolean {
  const length = headers['content-length'];
  if (length !== undefined && length !== '' && Number(length) > 0) return true;
  return /chunked/i.test(headers['transfer-encoding'] ?? '');
}

/**
 * Reads the body, at most `limit` bytes. Must be called synchronously inside the uWS
 * callback (onData cannot be registered later). Rejects with PAYLOAD_TOO_LARGE as soon as
 * the limit is crossed (remaining chunks are dropped, not buffered) and with
 * ClientAbortedError when the client disconnects.
 */
export function readBody(handle: ResponseHandle, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    handle.onAbort(() => {
      if (!settled) {
        settled = true;
        reject(new ClientAbortedError('client aborted while sending the body'));
      }
    });
    handle.res.onData((chunk, isLast) => {
      if (settled) return;
      size += chunk.byteLength;
      if (size > limit) {
        settled = true;
        reject(tooLarge(limit));
        return;
      }
      // uWS neuters the ArrayBuffer when this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) {
        settled = true;
        resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
      }
    });
  });
}

/** The 413 error for a body over `limit` bytes. */
export function tooLarge(limit: number): AppError {
  return new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`, { limitBytes: limit });
}

function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Charsets that are UTF-8 (US-ASCII is a subset). */
const UTF8_CHARSETS = new Set(['utf-8', 'utf8', 'us-ascii']);

/** The `charset` parameter of a Content-Type, lower case and unquoted; undefined without one. */
function charsetOf(contentType: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*("?)([^";\s]*)\1/i.exec(contentType ?? '');
  return m ? m[2]!.toLowerCase() : undefined;
}

/** Whether a Content-Type names JSON (`application/json` or `application/*+json`). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  const type = mediaType(contentType);
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/**
 * Deepest nesting of arrays/objects a body may have. Far above any request shape we accept,
 * far below what recursive code after parsing (validation, fingerprints, logging) survives:
 * a 64 KiB body can nest ~32,000 levels, which overflowed the stack (500) before this check.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * Most object members (fields, counted over every level) a JSON body may have. Far above any
 * request shape we accept (an order with both legs has about 15; a webhook alert about 20), far
 * below what costs: JSON.parse of 6,000 distinct keys (59 KB) took ~8 ms of CPU, and listing each
 * unknown one made a 257 KB answer (~30 ms per request together).
 */
export const MAX_JSON_FIELDS = 256;

/**
 * One linear pass over JSON text, no recursion: the number of object members (colons outside
 * strings), or -1 as soon as arrays/objects nest deeper than `maxDepth`.
 */
export function jsonMemberCount(text: string, maxDepth: number): number {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x3a) members++;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return -1;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return members;
}

/** Whether JSON text nests arrays/objects deeper than `max` (a linear scan, no recursion). */
export function jsonNestsDeeperThan(text: string, max: number): boolean {
  return jsonMemberCount(text, max) < 0;
}

/**
 * Parses a JSON body. `lenient` (webhooks): the body is read as JSON whatever Content-Type
 * it declares, because alert senders label it inconsistently (TradingView sends text/plain when
 * it cannot tell, curl's default is form-urlencoded); it still has to be valid JSON.
 * Empty body → undefined.
 */
export function parseJsonBody(raw: Buffer, contentType: string | undefined, lenient: boolean, contentEncoding?: string): unknown {
  if (raw.length === 0) return undefined;
  if (!lenient && !isJsonMediaType(contentType)) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json');
  }
  // A compressed body would be read as its compressed bytes, a body in another charset with
  // its characters changed: refused, never guessed at.
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${printable(contentEncoding, 32)} is not accepted: send the body uncompressed`);
  }
  const charset = charsetOf(contentType);
  if (charset !== undefined && !UTF8_CHARSETS.has(charset)) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', `charset ${printable(charset, 32)} is not accepted: send UTF-8 (JSON is UTF-8, RFC 8259)`);
  }
  // JSON is UTF-8 (RFC 8259): a body that is not would be read with U+FFFD in place of what was
  // sent (a name stored as "���"). A leading byte order mark is skipped, as the RFC allows.
  if (!isUtf8(raw)) {
    throw new AppError('VALIDATION_FAILED', 'Request body is not valid UTF-8', { errors: [{ path: '', message: 'not valid UTF-8' }] });
  }
  const bom = raw.length >= 3 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf;
  const text = raw.toString('utf8', bom ? 3 : 0);
  const members = jsonMemberCount(text, MAX_JSON_DEPTH);
  if (members < 0) {
    throw new AppError('VALIDATION_FAILED', `Request body nests deeper than ${MAX_JSON_DEPTH} levels`, {
      errors: [{ path: '', message: `nesting deeper than ${MAX_JSON_DEPTH} levels` }],
    });
  }
  // Refused before JSON.parse and the schema: their cost grows with the number of distinct keys.
  if (members > MAX_JSON_FIELDS) {
    throw new AppError('VALIDATION_FAILED', `Request body has more than ${MAX_JSON_FIELDS} fields`, {
      errors: [{ path: '', message: `more than ${MAX_JSON_FIELDS} fields (${members})` }],
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    const reason = err instanceof Error ? err.message : 'invalid JSON';
    throw new AppError('VALIDATION_FAILED', 'Request body is not valid JSON', {
      errors: [{ path: '', message: reason }],
    });
  }
  // JSON.parse keeps the last of repeated keys: `{"qty":1,"qty":5}` would place 5. Fewer keys
  // parsed than members written means one was repeated (a count, not a second parse).
  const counted = members > 0 ? keyCount(value) : 0;
  // `__proto__` is no field of any request: copied into another object (by a schema), it becomes
  // that object's prototype and vanishes from its keys (security probe: a webhook leg's
  // `"__proto__": {"trailing": true}` passed where `"trailing": true` is refused).
  if (counted < 0) {
    const path = protoPath(value) ?? '__proto__';
    throw new AppError('VALIDATION_FAILED', `${path}: not a field name any request takes`, { errors: [{ path, message: 'not a field name any request takes' }] });
  }
  if (members > 0 && counted !== members) {
    const path = echoedName(firstRepeatedKey(text) ?? '');
    throw new AppError('VALIDATION_FAILED', `${path || 'body'}: given more than once`, { errors: [{ path, message: 'given more than once' }] });
  }
  return value;
}

/**
 * Own keys of every object in a parsed JSON value (nesting is bounded by MAX_JSON_DEPTH); -1 when
 * an object has a `__proto__` key.
 */
function keyCount(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  let n = 0;
  if (Array.isArray(value)) {
    for (const item of value) {
      const inner = keyCount(item);
      if (inner < 0) return -1;
      n += inner;
    }
    return n;
  }
  for (const key in value) {
    if (key === '__proto__') return -1;
    const inner = keyCount((value as Record<string, unknown>)[key]);
    if (inner < 0) return -1;
    n += inner + 1;
  }
  return n;
}

/** The dotted path of the first `__proto__` key in a parsed JSON value. */
function protoPath(value: unknown, at: string[] = []): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const entries: [string, unknown][] = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  for (const [key, inner] of entries) {
    if (key === '__proto__' && !Array.isArray(value)) return [...at, key].join('.');
    const found = protoPath(inner, [...at, key]);
    if (found) return found;
  }
  return undefined;
}

/**
 * The dotted path (`takeProfit.price`, `legs.0.qty`) of the first key written twice in one
 * object of valid JSON text; keys compare as parsed, so `"q\u0074y"` repeats `"qty"`.
 */
export function firstRepeatedKey(text: string): string | undefined {
  // One frame per open object (its keys so far) or array (null), with the key or index being read.
  const frames: { keys: Set<string> | null; at: string; index: number }[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const start = i;
      for (i++; text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
      const frame = frames[frames.length - 1];
      if (expectKey && frame?.keys) {
        const key = JSON.parse(text.slice(start, i + 1)) as string;
        if (frame.keys.has(key)) return [...frames.slice(0, -1).map((f) => f.at), key].join('.');
        frame.keys.add(key);
        frame.at = key;
        expectKey = false;
      }
    } else if (c === 0x7b) {
      frames.push({ keys: new Set(), at: '', index: 0 });
      expectKey = true;
    } else if (c === 0x5b) {
      frames.push({ keys: null, at: '0', index: 0 });
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
    } else if (c === 0x2c) {
      const frame = frames[frames.length - 1];
      if (frame?.keys) expectKey = true;
      else if (frame) frame.at = String(++frame.index);
    }
  }
  return undefined;
}

/** One entry of the `errors` extension. */
export interface FieldError {
  path: string;
  message: string;
}

/** Most entries the `errors` of a VALIDATION_FAILED answer lists; `errorsOmitted` counts the rest. */
export const MAX_LISTED_ERRORS = 20;

/** Flattens zod issues, at most `max` entries; unknown keys become one entry per key (`stopLos: Unknown field`). */
export function zodIssuesToErrors(issues: readonly z.core.$ZodIssue[], prefix = '', max = Number.POSITIVE_INFINITY): FieldError[] {
  const out: FieldError[] = [];
  const unknown = prefix === 'query' ? 'Unknown query parameter' : 'Unknown field';
  for (const issue of issues) {
    if (out.length >= max) break;
    const base = [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        if (out.length >= max) break;
        const name = echoedName(key);
        out.push({ path: base ? `${base}.${name}` : name, message: unknown });
      }
    } else if (issue.code === 'invalid_union' && issue.message === 'Invalid input') {
      out.push(unionError(issue, base));
    } else {
      out.push({ path: base, message: issue.message });
    }
  }
  return out;
}

/**
 * A union's "Invalid input" said plainly (new-user probe: `"tp": null` answered only that): the
 * shapes the field takes and what it got (`expected number, string, object or array, received null`),
 * or, when one shape failed further in (`{"price": true}`), that shape's own problem at its path.
 */
function unionError(issue: z.core.$ZodIssueInvalidUnion, base: string): FieldError {
  const expected: string[] = [];
  let received = '';
  let deeper: { issue: z.core.$ZodIssue; path: string } | undefined;
  const walk = (branches: z.core.$ZodIssue[][], at: string): void => {
    for (const branch of branches) {
      const only = branch.length === 1 ? branch[0]! : undefined;
      if (only && only.path.length === 0 && only.code === 'invalid_type') {
        if (!expected.includes(only.expected)) expected.push(only.expected);
        received ||= /received (\w+)/.exec(only.message)?.[1] ?? '';
      } else if (only && only.path.length === 0 && only.code === 'invalid_union') {
        walk(only.errors, at);
      } else if (branch[0] && !deeper) {
        deeper = { issue: branch[0], path: [at, ...branch[0].path.map(String)].filter((p) => p !== '').join('.') };
      }
    }
  };
  walk(issue.errors, base);
  if (deeper) {
    const { issue: inner, path } = deeper;
    if (inner.code === 'invalid_union' && inner.message === 'Invalid input') return unionError(inner, path);
    return { path, message: inner.message };
  }
  if (expected.length === 0) return { path: base, message: issue.message };
  const list = expected.length === 1 ? expected[0]! : `${expected.slice(0, -1).join(', ')} or ${expected.at(-1)!}`;
  return { path: base, message: `Invalid input: expected ${list}${received ? `, received ${received}` : ''}` };
}

/** Longest name of a client's field or parameter an error repeats (a 32 KB name would come back twice). */
const MAX_ECHOED_NAME = 100;

/** A client's field or parameter name as an error repeats it: cut to MAX_ECHOED_NAME characters. */
export function echoedName(name: string): string {
  return name.length > MAX_ECHOED_NAME ? `${name.slice(0, MAX_ECHOED_NAME)}…` : name;
}

/** How many entries zodIssuesToErrors would list without a cap. */
function errorCount(issues: readonly z.core.$ZodIssue[]): number {
  let n = 0;
  for (const issue of issues) n += issue.code === 'unrecognized_keys' ? issue.keys.length : 1;
  return n;
}

/** Validates with a zod schema; 400 VALIDATION_FAILED listing the problems (at most MAX_LISTED_ERRORS). */
/**
 * A route that takes no body (unlock, cancel, reads): none, blank, `{}` or `null` pass; anything
 * else is 400 VALIDATION_FAILED, its fields named as unknown, as on every route with a body
 * (clients probe: `POST …/unlock {"flatten": true}` unlocked and said nothing of `flatten`).
 */
export function refuseBody(raw: Buffer, contentType: string | undefined, contentEncoding: string | undefined): void {
  if (raw.length === 0) return;
  const text = raw.toString('utf8').trim();
  if (text === '' || text === '{}' || text === 'null') return;
  let value: unknown;
  try {
    value = parseJsonBody(raw, contentType, true, contentEncoding);
  } catch {
    value = undefined;
  }
  const fields = value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : [];
  const errors: FieldError[] = fields.slice(0, MAX_LISTED_ERRORS).map((key) => ({ path: echoedName(key), message: 'Unknown field' }));
  if (errors.length === 0) errors.push({ path: '', message: 'this route takes no request body' });
  const detail = `${errors[0]!.path ? `${errors[0]!.path}: Unknown field` : 'Request body not taken'}: this route takes no request body`;
  throw new AppError('VALIDATION_FAILED', detail, fields.length > MAX_LISTED_ERRORS ? { errors, errorsOmitted: fields.length - MAX_LISTED_ERRORS } : { errors });
}

export function validate<T>(schema: z.ZodType<T>, value: unknown, what: 'body' | 'query'): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const { issues } = parsed.error;
  const errors = zodIssuesToErrors(issues, what === 'query' ? 'query' : '', MAX_LISTED_ERRORS);
  const first = errors[0];
  const detail = first ? `${first.path || what}: ${first.message}` : `Invalid ${what}`;
  const omitted = errorCount(issues) - errors.length;
  throw new AppError('VALIDATION_FAILED', detail, omitted > 0 ? { errors, errorsOmitted: omitted } : { errors });
}
