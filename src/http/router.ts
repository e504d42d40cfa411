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
    if (path.startsWith(`${prefix}/`)) return path.slice(prefix.length);
  }
  return undefined;
}

/** A compiled route table. */
export class Router<R extends Routable> {
  private readonly compiled: { route: R; segments: Segment[] }[];

  constructor(routes: readonly R[]) {
    const seen = new Set<string>();
    this.compiled = routes.map((route) => {
      const shape = `${route.method} ${compile(route.path)
        .map((s) => ('param' in s ? ':' : s.literal))
        .join('/')}`;
      if (seen.has(shape)) throw new Error(`duplicate route ${route.method} ${route.path}`);
      seen.add(shape);
      return { route, segments: compile(route.path) };
    });
  }

  /** Matches a path relative to the API prefix (e.g. `/accounts/7/orders`). */
  match(method: string, relativePath: string): RouteMatch<R> {
    let parts: string[];
    try {
      parts = splitPath(relativePath).map((p) => decodeURIComponent(p));
    } catch {
      return { kind: 'not-found' };
    }
    const allow = new Set<string>();
    let best: { route: R; params: Record<string, string>; literals: number } | undefined;
    for (const c of this.compiled) {
      const params = matchSegments(c.segments, parts);
      if (!params) continue;
      allow.add(c.route.method);
      if (c.route.method !== method) continue;
      // A literal segment beats a parameter (`/tokens/new` over `/tokens/:id`).
      const literals = c.segments.filter((s) => 'literal' in s).length;
      if (!best || literals > best.literals) best = { route: c.route, params, literals };
    }
    if (best) return { kind: 'found', route: best.route, params: best.params };
    if (allow.size === 0) return { kind: 'not-found' };
    return { kind: 'method-not-allowed', allow: [...allow].sort() };
  }
}

function matchSegments(segments: Segment[], parts: string[]): Record<string, string> | undefined {
  if (segments.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment;
    const part = parts[i] as string;
    if ('param' in seg) {
      if (part.length === 0) return undefined;
      params[seg.param] = part;
    } else if (seg.literal !== part) {
      return undefined;
    }
  }
  return params;
}
