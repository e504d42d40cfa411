/**
 * Bearer secrets of the form `<prefix>_<id>_<secret>` (API keys `tgk_`, webhook tokens `whk_`):
 * `id` (12 base62) is the lookup key, `secret` (32 base62, ~190 bits) the part only the holder
 * knows. Only sha256 of the whole string is stored to check it.
 */
import { randomBase62, sha256Hex, timingSafeEqual } from './crypto.js';

export const TOKEN_ID_LENGTH = 12;
export const TOKEN_SECRET_LENGTH = 32;

export type TokenPrefix = 'tgk' | 'whk';

const PATTERNS: Record<TokenPrefix, RegExp> = {
  tgk: /^tgk_([A-Za-z0-9]{12})_[A-Za-z0-9]{32}$/,
  whk: /^whk_([A-Za-z0-9]{12})_[A-Za-z0-9]{32}$/,
};

const TOKEN_LENGTH = 3 + 1 + TOKEN_ID_LENGTH + 1 + TOKEN_SECRET_LENGTH;

/** A fresh token and its parts; with `id`, a new secret for an existing token (rotation). */
export function newToken(prefix: TokenPrefix, id = randomBase62(TOKEN_ID_LENGTH)): { id: string; token: string; digest: string } {
  const token = `${prefix}_${id}_${randomBase62(TOKEN_SECRET_LENGTH)}`;
  return { id, token, digest: sha256Hex(token) };
}

/** Strict format check, no I/O and no allocation: whether `raw` is a well-formed token (checked before any store read). */
export function wellFormedToken(prefix: TokenPrefix, raw: unknown): raw is string {
  return typeof raw === 'string' && raw.length === TOKEN_LENGTH && PATTERNS[prefix].test(raw);
}

/** Strict format check, no I/O: the id of a well-formed token, or null. */
export function parseToken(prefix: TokenPrefix, raw: unknown): { id: string } | null {
  // The length test comes first so a megabyte of garbage costs one comparison.
  if (typeof raw !== 'string' || raw.length !== TOKEN_LENGTH) return null;
  const m = PATTERNS[prefix].exec(raw);
  return m ? { id: m[1]! } : null;
}

/** `tgk_<id>`: what may be shown after creation. */
export function tokenPrefix(prefix: TokenPrefix, id: string): string {
  return `${prefix}_${id}`;
}

/**
 * The stored row a raw token authenticates: well-formed, known (`row` looks its id up) and
 * matching in constant time; otherwise undefined. Malformed input never reaches `row`.
 */
export function verifiedRow<R extends { digest: string }>(prefix: TokenPrefix, raw: unknown, row: (id: string) => R | undefined): R | undefined {
  const parsed = parseToken(prefix, raw);
  if (!parsed) return undefined;
  const r = row(parsed.id);
  return r && timingSafeEqual(sha256Hex(raw as string), r.digest) ? r : undefined;
}

/**
 * Tokens that verified, remembered while their stored row is the same object (a store that keeps
 * its rows in memory and replaces a row on every change: the cluster store's KV mirror): a known
 * token costs two map lookups, not a SHA-256 and a view per request. Only tokens that verified are
 * kept (garbage cannot fill it), at most `max` (all forgotten past it).
 */
export class VerifiedTokens<R extends { digest: string }, V> {
  private readonly seen = new Map<string, { id: string; row: R; view: V }>();
  /** The remembered token of each id. */
  private readonly byId = new Map<string, string>();

  constructor(
    private readonly prefix: TokenPrefix,
    private readonly row: (id: string) => R | undefined,
    /** The view of a verified row; null when it may not authenticate (revoked). */
    private readonly viewOf: (r: R) => V | null,
    private readonly max = 10_000,
  ) {}

  verify(raw: unknown): V | null {
    if (typeof raw !== 'string') return null;
    const hit = this.seen.get(raw);
    if (hit !== undefined && this.row(hit.id) === hit.row) return hit.view;
    if (hit !== undefined) this.seen.delete(raw);
    const r = verifiedRow(this.prefix, raw, this.row);
    const view = r === undefined ? null : this.viewOf(r);
    if (view === null) return null;
    if (this.seen.size >= this.max) {
      this.seen.clear();
      this.byId.clear();
    }
    const id = parseToken(this.prefix, raw)!.id;
    this.seen.set(raw, { id, row: r!, view });
    this.byId.set(id, raw);
    return view;
  }

  /** Builds the view of token `id` again at its next use (what it shows changed: its last use). */
  forget(id: string): void {
    const raw = this.byId.get(id);
    if (raw === undefined) return;
    this.byId.delete(id);
    this.seen.delete(raw);
  }
}
