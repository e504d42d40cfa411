/**
 * Path matching for the route table: exact segments and `:param` segments, both API prefixes
 * (`/api/v1` and `/v1`). Pure; the server turns a miss into 404 NOT_FOUND and a path that
 * exists under another method into 405 METHOD_NOT_ALLOWED with `Allow`.
 */
import type { HttpMethod } from './route-types.js';

/** The prefixes every route is served under (DESIGN §3). */
export const API_PREFIXES = ['/api/v1', '/v1'] as const;

/** What the router needs of a route. */
export interface Routable {
  method: HttpMethod;
  path: string;
}

export type RouteMatch<R extends Routable> =
  | { kind: 'found'; route: R; params: Record<string, string> }
  | { kind: 'method-not-allowed'; allow: string[] }
  | { kind: 'not-found' };

type Segment = { literal: string } | { param: string };

function splitPath(path: string): string[] {
  return path.split('/').filter((s) => s.length > 0);
}

function compile(path: string): Segment[] {
  return splitPath(path).map((s) => (s.startsWith(':') ? { param: s.slice(1) } : { literal: s }));
}

/** Strips `/api/v1` or `/v1`; undefined when the path is under neither. */
export function stripApiPrefix(path: string): string | undefined {
  for (const prefix of API_PREFIXES) {
    if (path === prefix) return '/';
    if (path.startsWith(prefix) && path.charCodeAt(prefix.length) === SLASH) return path.slice(prefix.length);
  }
  return undefined;
}

const SLASH = 0x2f;
const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

interface Compiled<R extends Routable> {
  route: R;
  segments: Segment[];
  /** Literal segments: a literal beats a parameter (`/tokens/new` over `/tokens/:id`). */
  literals: number;
}

/** A compiled route table. */
export class Router<R extends Routable> {
  /** Routes by segment count, in table order: a request only meets routes of its own length. */
  private readonly byLength = new Map<number, Compiled<R>[]>();
  /**
   * Routes without parameters by method and exact path: a request for exactly such a path has
   * found its best match (all literals) without splitting it. Anything else takes the full walk.
   */
  private readonly exact = new Map<string, Map<string, RouteMatch<R>>>();

  constructor(routes: readonly R[]) {
    const seen = new Set<string>();
    for (const route of routes) {
      const segments = compile(route.path);
      const shape = `${route.method} ${segments.map((s) => ('param' in s ? ':' : s.literal)).join('/')}`;
      if (seen.has(shape)) throw new Error(`duplicate route ${route.method} ${route.path}`);
      seen.add(shape);
      const list = this.byLength.get(segments.length) ?? [];
      list.push({ route, segments, literals: segments.filter((s) => 'literal' in s).length });
      this.byLength.set(segments.length, list);
      if (segments.every((seg) => 'literal' in seg)) {
        const byPath = this.exact.get(route.method) ?? new Map<string, RouteMatch<R>>();
        byPath.set(`/${segments.map((seg) => (seg as { literal: string }).literal).join('/')}`, Object.freeze({ kind: 'found', route, params: NO_PARAMS }));
        this.exact.set(route.method, byPath);
      }
    }
  }

  /** Matches a path relative to the API prefix (e.g. `/accounts/7/orders`). */
  match(method: string, relativePath: string): RouteMatch<R> {
    const exact = this.exact.get(method)?.get(relativePath);
    if (exact) return exact;
    const parts = pathParts(relativePath);
    const candidates = parts && this.byLength.get(parts.length);
    if (!parts || !candidates) return { kind: 'not-found' };
    let best: Compiled<R> | undefined;
    let anyMethod = false;
    for (const c of candidates) {
      if (!fits(c.segments, parts)) continue;
      anyMethod = true;
      if (c.route.method !== method) continue;
      if (!best || c.literals > best.literals) best = c;
    }
    if (best) return { kind: 'found', route: best.route, params: paramsOf(best.segments, parts) };
    if (!anyMethod) return { kind: 'not-found' };
    const allow = new Set<string>();
    for (const c of candidates) if (fits(c.segments, parts)) allow.add(c.route.method);
    return { kind: 'method-not-allowed', allow: [...allow].sort() };
  }
}

/** The path's non-empty segments, percent-decoded; undefined when one cannot be decoded. */
function pathParts(path: string): string[] | undefined {
  const parts = splitPath(path);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (!part.includes('%')) continue;
    try {
      parts[i] = decodeURIComponent(part);
    } catch {
      return undefined;
    }
  }
  return parts;
}

/**
 * The longest path parameter any route takes (ids are at most a few dozen characters; a webhook
 * token at most 256). Longer ones match no route (404): they never reach a store lookup, whose keys
 * LMDB bounds at about 1,978 bytes.
 */
export const MAX_PARAM_LENGTH = 256;

function fits(segments: Segment[], parts: string[]): boolean {
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment;
    const part = parts[i] as string;
    if ('param' in seg ? part.length === 0 || part.length > MAX_PARAM_LENGTH : seg.literal !== part) return false;
  }
  return true;
}

function paramsOf(segments: Segment[], parts: string[]): Record<string, string> {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment;
    if ('param' in seg) params[seg.param] = parts[i] as string;
  }
  return params;
}
