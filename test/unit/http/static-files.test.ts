import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_PATHS, CONTENT_SECURITY_POLICY, loadWebApp, negotiateEncoding, type WebApp } from '../../../src/http/static-files.js';

let dir: string;
let app: WebApp;
const HTML = '<!doctype html><script type="module" src="/assets/app-ABC.js"></script>';
const JS = 'console.log("tradegate");'.repeat(50);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-web-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), HTML);
  writeFileSync(join(dir, 'assets', 'app-ABC.js'), JS);
  writeFileSync(join(dir, 'assets', 'app-DEF.css'), 'body{color:red}');
  app = loadWebApp({ dir });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('web app files', () => {
  it('serves index.html at every page path, revalidated on each load', () => {
    expect(app.built).toBe(true);
    for (const path of [...APP_PATHS, '/keys/']) {
      const r = app.serve('GET', path, {});
      expect(r?.status, path).toBe(200);
      expect(r?.body?.toString()).toBe(HTML);
      expect(r?.headers).toMatchObject({ 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache' });
    }
  });

  it('serves hashed assets with a year-long immutable cache and their type', () => {
    const js = app.serve('GET', '/assets/app-ABC.js', {});
    expect(js?.headers).toMatchObject({ 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=31536000, immutable' });
    expect(app.serve('GET', '/assets/app-DEF.css', {})?.headers['Content-Type']).toBe('text/css; charset=utf-8');
  });

  it('puts the strict browser policy on every answer', () => {
    for (const path of ['/', '/assets/app-ABC.js']) {
      const h = app.serve('GET', path, {})!.headers;
      expect(h['Content-Security-Policy']).toBe(CONTENT_SECURITY_POLICY);
      expect(h['Content-Security-Policy']).toContain("frame-ancestors 'none'");
      expect(h['Content-Security-Policy']).toContain("script-src 'self'");
      expect(h['Content-Security-Policy']).not.toContain('unsafe-inline');
      expect(h).toMatchObject({ 'Referrer-Policy': 'no-referrer', 'X-Content-Type-Options': 'nosniff', 'X-Frame-Options': 'DENY' });
      expect(h['Strict-Transport-Security']).toBeUndefined();
    }
    expect(loadWebApp({ dir, https: true }).serve('GET', '/', {})?.headers['Strict-Transport-Security']).toBe('max-age=31536000');
  });

  it('compresses with brotli or gzip as the client accepts, the same bytes underneath', () => {
    const br = app.serve('GET', '/assets/app-ABC.js', { 'accept-encoding': 'gzip, deflate, br' })!;
    expect(br.headers['Content-Encoding']).toBe('br');
    expect(brotliDecompressSync(br.body as Buffer).toString()).toBe(JS);
    const gz = app.serve('GET', '/assets/app-ABC.js', { 'accept-encoding': 'gzip' })!;
    expect(gz.headers['Content-Encoding']).toBe('gzip');
    expect(gunzipSync(gz.body as Buffer).toString()).toBe(JS);
    expect((gz.body as Buffer).length).toBeLessThan(JS.length);
    expect(app.serve('GET', '/assets/app-ABC.js', {})!.headers['Content-Encoding']).toBeUndefined();
  });

  it('never sends an encoding the client rates q=0, and prefers the one it rates higher', () => {
    expect(negotiateEncoding('gzip;q=0, br;q=0')).toBe('identity');
    expect(negotiateEncoding('identity, br;q=0, gzip;q=0')).toBe('identity');
    expect(negotiateEncoding('br;q=0, gzip')).toBe('gzip');
    expect(negotiateEncoding('br;q=0.5, gzip;q=0.8')).toBe('gzip');
    expect(negotiateEncoding('BR; Q=1, gzip')).toBe('br');
    expect(negotiateEncoding('*')).toBe('br');
    expect(negotiateEncoding('*;q=0, gzip')).toBe('gzip');
    expect(negotiateEncoding('deflate')).toBe('identity');
    expect(negotiateEncoding('')).toBe('identity');
    expect(app.serve('GET', '/', { 'accept-encoding': 'gzip;q=0, br;q=0' })!.headers['Content-Encoding']).toBeUndefined();
  });

  it('gives each encoding its own strong ETag, and revalidates each (weak If-None-Match too)', () => {
    const tags = ['', 'gzip', 'br'].map((enc) => app.serve('GET', '/', { 'accept-encoding': enc })!.headers['ETag']!);
    expect(new Set(tags).size).toBe(3);
    expect(app.serve('GET', '/', { 'accept-encoding': 'br', 'if-none-match': tags[2]! })?.status).toBe(304);
    expect(app.serve('GET', '/', { 'accept-encoding': 'br', 'if-none-match': `W/${tags[2]!}` })?.status).toBe(304);
    expect(app.serve('GET', '/', { 'accept-encoding': 'br', 'if-none-match': `"x", ${tags[2]!}` })?.status).toBe(304);
    // The identity bytes' tag does not revalidate the brotli bytes.
    expect(app.serve('GET', '/', { 'accept-encoding': 'br', 'if-none-match': tags[0]! })?.status).toBe(200);
  });

  it('answers 304 to a matching If-None-Match, and HEAD without a body', () => {
    const etag = app.serve('GET', '/', {})!.headers['ETag']!;
    expect(app.serve('GET', '/', { 'if-none-match': etag })).toMatchObject({ status: 304 });
    expect(app.serve('GET', '/', { 'if-none-match': '"other"' })?.status).toBe(200);
    const head = app.serve('HEAD', '/', {})!;
    expect(head.status).toBe(200);
    expect(head.body).toBeUndefined();
  });

  it('leaves other paths to the API (undefined) and refuses writes to pages', () => {
    for (const path of ['/api/v1/me', '/assets/missing.js', '/assets/../index.html', '/nope', '/healthz']) expect(app.serve('GET', path, {}), path).toBeUndefined();
    expect(app.serve('POST', '/', {})).toMatchObject({ status: 405, headers: { Allow: 'GET, HEAD', 'Content-Type': 'application/problem+json' } });
    // A problem like every other error, with its code (client probe: text/plain here only).
    expect(JSON.parse(String(app.serve('POST', '/accounts', {})!.body))).toMatchObject({ code: 'METHOD_NOT_ALLOWED', status: 405 });
  });

  it('a mistyped address opened in a browser gets the app with status 404 (it takes the user home); API paths, assets and other clients keep the JSON 404', () => {
    const browser = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'if-none-match': 'x' };
    const r = app.serve('GET', '/acounts', browser)!;
    expect(r.status).toBe(404);
    expect(r.headers['Content-Type']).toBe('text/html; charset=utf-8');
    expect(String(r.body)).toBe(HTML);
    for (const path of ['/api/v1/nothing', '/v1/nothing', '/assets/missing.js']) expect(app.serve('GET', path, browser), path).toBeUndefined();
    expect(app.serve('GET', '/acounts', { accept: 'application/json' })).toBeUndefined();
    expect(app.serve('POST', '/acounts', browser)).toBeUndefined();
  });

  it('says how to build when the bundle is missing', () => {
    const missing = loadWebApp({ dir: join(dir, 'nowhere') });
    expect(missing.built).toBe(false);
    const r = missing.serve('GET', '/', {})!;
    expect(r.status).toBe(503);
    expect(r.body?.toString()).toContain('npm run build');
  });
});
