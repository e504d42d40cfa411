/**
 * tradegate behind a reverse proxy that serves it under a path (TRADEGATE_BASE_URL
 * `http://host/tg/`) and strips the path before passing a request on, as nginx's
 * `location /tg/ { proxy_pass http://127.0.0.1:8080/; }` does. The web app loads, signs in,
 * moves between pages, reads the API and holds its health stream through that prefix, and the
 * OpenAPI document's servers carry it (clients probe: every asset and API call of the page went
 * outside the prefix, and generated clients called /api/v1 at the host's root).
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.js';
import { startServe, type Served } from '../support/processes.js';

const PREFIX = '/tg';
let proxy: Server;
let origin: string;
let s: Served;
let browser: Browser;
/** What the proxy was asked for outside the prefix (a link the app got wrong). */
const outside: string[] = [];

/** Passes `/tg/…` on as `/…` (bodies and streams piped both ways); anything else is 404 here. */
function prefixProxy(target: () => string): Server {
  return createServer((req, res) => {
    const url = req.url ?? '/';
    if (url !== PREFIX && !url.startsWith(`${PREFIX}/`)) {
      outside.push(`${req.method} ${url}`);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('outside the prefix\n');
      return;
    }
    const upstream = new URL(target());
    const forwarded = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: url.slice(PREFIX.length) || '/', headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    res.on('close', () => forwarded.destroy());
    req.pipe(forwarded);
  });
}

beforeAll(async () => {
  let upstream = '';
  proxy = prefixProxy(() => upstream);
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  [s, browser] = await Promise.all([startServe({ TRADEGATE_BASE_URL: `${origin}${PREFIX}/` }), launchBrowser()]);
  upstream = s.url;
}, 90_000);

afterAll(async () => {
  await browser?.close();
  proxy?.closeAllConnections();
  await new Promise((resolve) => proxy?.close(resolve));
  expect(await s?.stop()).toBe(0);
});

it('the web app works under the base URL’s path: assets, sign-in, pages, API reads and the health stream stay inside it', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const failed: string[] = [];
  page.on('response', (r) => {
    // The first question, "am I signed in?", is 401 until the sign-in: every other answer is a success.
    if (r.status() >= 400 && !(r.status() === 401 && r.url() === `${origin}${PREFIX}/api/v1/session`)) failed.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(`${origin}${PREFIX}/`);
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  await page.getByLabel('User name').fill(s.login.name);
  await page.getByLabel('Password').fill(s.login.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
  expect(new URL(page.url()).pathname).toBe(`${PREFIX}/accounts`);
  // The accounts came through the API under the prefix.
  await page.getByText(s.accounts[0]!).first().waitFor();

  const mainNav = page.getByRole('navigation', { name: 'Main' });
  expect(await mainNav.getByRole('link', { name: 'Connections', exact: true }).getAttribute('href')).toBe(`${PREFIX}/connections`);
  await mainNav.getByRole('link', { name: 'Connections', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Connections' }).waitFor();
  expect(new URL(page.url()).pathname).toBe(`${PREFIX}/connections`);
  // The health stream is open through the proxy.
  await page.getByText('Live updates on').waitFor();

  // A reload of an app page under the prefix lands on that page, still signed in.
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Connections' }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
  expect(new URL(page.url()).pathname).toBe(`${PREFIX}/accounts`);

  expect(outside).toEqual([]);
  expect(failed).toEqual([]);
  await context.close();
}, 60_000);

it('the OpenAPI document and the docs page name the API under the base URL’s path, and a client following them reaches it', async () => {
  const doc = (await (await fetch(`${origin}${PREFIX}/openapi.json`)).json()) as { servers: { url: string }[]; paths: Record<string, Record<string, { servers?: { url: string }[] }>> };
  expect(doc.servers.map((x) => x.url)).toEqual([`${PREFIX}/api/v1`, `${PREFIX}/v1`]);
  expect(doc.paths['/healthz']!['get']!.servers).toEqual([{ url: PREFIX }]);
  const me = await fetch(new URL(`${doc.servers[0]!.url}/me`, origin), { headers: { 'x-api-key': s.apiKey } });
  expect(me.status).toBe(200);
  const health = await fetch(new URL(`${doc.paths['/healthz']!['get']!.servers![0]!.url}/healthz`, origin));
  expect(health.status).toBe(200);
  const page = await (await fetch(`${origin}${PREFIX}/api-docs`)).text();
  expect(page).toContain(`href="${PREFIX}/api-docs/openapi.json"`);
  expect(page).not.toContain('href="/api-docs/openapi.json"');
  expect(outside).toEqual([]);
});
