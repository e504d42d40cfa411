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
import { problemReply, type Reply } from './respond.js';

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

export type Coding = 'identity' | 'gzip' | 'br';

/** One file in its three encodings, each with its own strong ETag (they are different bytes). */
interface Asset {
  type: string;
  cacheControl: string;
  bodies: Record<Coding, Buffer>;
  etags: Record<Coding, string>;
}

function asset(body: Buffer, type: string, cacheControl: string): Asset {
  const hash = createHash('sha256').update(body).digest('base64url').slice(0, 22);
  return {
    type,
    cacheControl,
    bodies: {
      identity: body,
      gzip: gzipSync(body, { level: 9 }),
      br: brotliCompressSync(body, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 11 } }),
    },
    etags: { identity: `"${hash}"`, gzip: `"${hash}-gz"`, br: `"${hash}-br"` },
  };
}

/**
 * The encoding to send for an Accept-Encoding header: br, else gzip, whichever the client rates
 * higher (a tie goes to br), never one it rates `q=0`; `*` stands for codings it does not name.
 * Identity when it accepts neither.
 */
export function negotiateEncoding(accept: string): Coding {
  const rated = new Map<string, number>();
  for (const part of accept.split(',')) {
    const [name = '', ...params] = part.split(';');
    const coding = name.trim().toLowerCase();
    if (!coding) continue;
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)).find(Boolean);
    const value = q ? Number(q[1]) : 1;
    rated.set(coding, Number.isFinite(value) ? value : 0);
  }
  const rate = (coding: string) => rated.get(coding) ?? rated.get('*') ?? 0;
  const br = rate('br');
  const gzip = rate('gzip');
  if (br > 0 && br >= gzip) return 'br';
  if (gzip > 0) return 'gzip';
  return 'identity';
}

/** Whether If-None-Match names this ETag (weak comparison, RFC 9110 §13.1.2: `W/` is ignored). */
function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || (t.startsWith('W/') ? t.slice(2) : t) === etag;
  });
}

/**
 * index.html for an app served under `basePath` (TRADEGATE_BASE_URL's path, behind a proxy that
 * strips it): its asset and preload links carry the prefix, and the page names it to the app
 * (`<meta name="tradegate-base">`, read by web/src/base.ts), which puts it before its own paths,
 * API calls and health stream. Loaded from `https://host/tg/` with root-absolute links, every
 * asset and API call went outside the prefix (clients probe: the page stayed blank).
 */
export function rebasedIndex(html: string, basePath: string): string {
  if (basePath === '') return html;
  const attr = basePath.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return html
    .replace(/(href|src)="\/(assets|api)\//g, `$1="${attr}/$2/`)
    .replace('<head>', `<head>\n    <meta name="tradegate-base" content="${attr}" />`);
}

/** The app as the HTTP engine sees it. */
export interface WebApp {
  /** The answer for an app path or asset; undefined when the path is not the app's. */
  serve(method: string, path: string, headers: Readonly<Record<string, string>>): Reply | undefined;
  /** Whether the bundle was found. */
  readonly built: boolean;
}

/** Loads the bundle from `dir`; without one, app paths answer 503 saying how to build it. */
export function loadWebApp(opts: { dir?: string; https?: boolean; basePath?: string } = {}): WebApp {
  const dir = opts.dir ?? WEB_DIST_DIR;
  const secure = securityHeaders(opts.https ?? false);
  const files = new Map<string, Asset>();
  const built = existsSync(join(dir, 'index.html'));
  if (built) {
    const page = rebasedIndex(readFileSync(join(dir, 'index.html'), 'utf8'), opts.basePath ?? '');
    files.set('index.html', asset(Buffer.from(page), TYPES['.html']!, 'no-cache'));
    const assets = join(dir, 'assets');
    for (const name of existsSync(assets) ? readdirSync(assets) : []) {
      // Hashed names change with their content, so a year-long immutable cache is safe.
      files.set(`assets/${name}`, asset(readFileSync(join(assets, name)), TYPES[extname(name)] ?? 'application/octet-stream', 'public, max-age=31536000, immutable'));
    }
  }
  const pages = new Set<string>(APP_PATHS);

  function reply(file: Asset, method: string, headers: Readonly<Record<string, string>>): Reply {
    const coding = negotiateEncoding(headers['accept-encoding'] ?? '');
    const etag = file.etags[coding];
    const base = { ...secure, 'Content-Type': file.type, 'Cache-Control': file.cacheControl, ETag: etag, Vary: 'Accept-Encoding' };
    if (noneMatch(headers['if-none-match'], etag)) return { status: 304, headers: base };
    const out: Reply = { status: 200, headers: coding === 'identity' ? base : { ...base, 'Content-Encoding': coding } };
    if (method !== 'HEAD') out.body = file.bodies[coding];
    return out;
  }

  /**
   * A mistyped address opened in a browser (it asks for HTML): the app, with status 404, which
   * takes a signed-in user home, rather than the API's JSON problem. API paths, assets and
   * other clients keep the JSON 404.
   */
  function mistyped(method: string, path: string, headers: Readonly<Record<string, string>>): Reply | undefined {
    const index = files.get('index.html');
    if (!index || (method !== 'GET' && method !== 'HEAD') || !(headers['accept'] ?? '').includes('text/html')) return undefined;
    if (path.startsWith('/api/') || path.startsWith('/v1/') || path.startsWith('/assets/')) return undefined;
    const { 'if-none-match': _etag, ...fresh } = headers;
    return { ...reply(index, method, fresh), status: 404 };
  }

  return {
    built,
    serve(method, rawPath, headers) {
      const path = rawPath.length > 1 && rawPath.endsWith('/') ? rawPath.slice(0, -1) : rawPath;
      const isPage = pages.has(path);
      const file = isPage ? files.get('index.html') : path.startsWith('/assets/') ? files.get(path.slice(1)) : undefined;
      if (!isPage && !file) return mistyped(method, path, headers);
      if (method !== 'GET' && method !== 'HEAD') {
        // As every other error: a problem with its code (client probe: text/plain here only).
        return problemReply('METHOD_NOT_ALLOWED', `${method} is not allowed here: the web app's pages take GET and HEAD`, {}, { ...secure, Allow: 'GET, HEAD' });
      }
      if (!file) {
        return { status: 503, headers: { ...secure, 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': '60' }, body: 'The web app is not built: run `npm run build`.\n' };
      }
      return reply(file, method, headers);
    },
  };
}
