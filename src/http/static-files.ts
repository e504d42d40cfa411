/**
 * Serves the web app built into `dist/web` (web/build.mjs): `index.html` for the app's
 * page paths, revalidated on every load (`no-cache` + ETag), and the content-hashed assets
 * under `/assets/` cached for a year. Everything is read and compressed (br, gzip) once at
 * start-up; a request costs a map lookup.
 *
 * Every answer carries the strict browser policy: a CSP without inline script, no
 * framing, no referrer, no MIME sniffing.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { brotliCompressSync, constants as zlibConstants, gzipSync } from 'node:zlib';
import { PACKAGE_ROOT } from '../paths.js';
import type { Reply } from './respond.js';

/** The page paths of the single-page app (its router knows the same list). */
export const APP_PATHS = ['/', '/sign-in', '/keys', '/signals', '/connections', '/accounts', '/strategies', '/settings'] as const;

/** Where `npm run build` puts the bundle. */
export const WEB_DIST_DIR = join(PACKAGE_ROOT, 'dist', 'web');

/** The Content-Security-Policy of the app: its own scripts and styles only, never inline. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers every app response carries. */
export function securityHeaders(https: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Security-Policy': CONTENT_SECURITY_POLICY,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
  };
  if (https) headers['Strict-Transport-Security'] = 'max-age=31536000';
  return headers;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.map': 'application/json',
};

interface Asset {
  type: string;
  etag: string;
  cacheControl: string;
  identity: Buffer;
  gzip: Buffer;
  br: Buffer;
}

function asset(body: Buffer, type: string, cacheControl: string): Asset {
  return {
    type,
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
    cacheControl,
    identity: body,
    gzip: gzipSync(body, { level: 9 }),
    br: brotliCompressSync(body, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 11 } }),
  };
}

/** The app as the HTTP engine sees it. */
export interface WebApp {
  /** The answer for an app path or asset; undefined when the path is not the app's. */
  serve(method: string, path: string, headers: Readonly<Record<string, string>>): Reply | undefined;
  /** Whether the bundle was found. */
  readonly built: boolean;
}

/** Loads the bundle from `dir`; without one, app paths answer 503 saying how to build it. */
export function loadWebApp(opts: { dir?: string; https?: boolean } = {}): WebApp {
  const dir = opts.dir ?? WEB_DIST_DIR;
  const secure = securityHeaders(opts.https ?? false);
  const files = new Map<string, Asset>();
  const built = existsSync(join(dir, 'index.html'));
  if (built) {
    files.set('index.html', asset(readFileSync(join(dir, 'index.html')), TYPES['.html']!, 'no-cache'));
    const assets = join(dir, 'assets');
    for (const name of existsSync(assets) ? readdirSync(assets) : []) {
      // Hashed names change with their content, so a year-long immutable cache is safe.
      files.set(`assets/${name}`, asset(readFileSync(join(assets, name)), TYPES[extname(name)] ?? 'application/octet-stream', 'public, max-age=31536000, immutable'));
    }
  }
  const pages = new Set<string>(APP_PATHS);

  function reply(file: Asset, method: string, headers: Readonly<Record<string, string>>): Reply {
    const base = { ...secure, 'Content-Type': file.type, 'Cache-Control': file.cacheControl, ETag: file.etag, Vary: 'Accept-Encoding' };
    if (headers['if-none-match'] === file.etag) return { status: 304, headers: base };
    const accept = headers['accept-encoding'] ?? '';
    const [body, encoding] = /\bbr\b/.test(accept) ? [file.br, 'br'] : /\bgzip\b/.test(accept) ? [file.gzip, 'gzip'] : [file.identity, undefined];
    const out: Reply = { status: 200, headers: encoding ? { ...base, 'Content-Encoding': encoding } : base };
    if (method !== 'HEAD') out.body = body;
    return out;
  }

  return {
    built,
    serve(method, rawPath, headers) {
      const path = rawPath.length > 1 && rawPath.endsWith('/') ? rawPath.slice(0, -1) : rawPath;
      const isPage = pages.has(path);
      const file = isPage ? files.get('index.html') : path.startsWith('/assets/') ? files.get(path.slice(1)) : undefined;
      if (!isPage && !file) return undefined;
      if (method !== 'GET' && method !== 'HEAD') {
        return { status: 405, headers: { ...secure, Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }, body: 'Method not allowed\n' };
      }
      if (!file) {
        return { status: 503, headers: { ...secure, 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': '60' }, body: 'The web app is not built: run `npm run build`.\n' };
      }
      return reply(file, method, headers);
    },
  };
}
