/**
 * The web app's session security over real HTTP against `serve --paper`: no cookie → 401;
 * a cross-site write without the CSRF header → 403 CSRF_REJECTED; a session never reaches
 * another user's objects (404); sign-in never keeps a planted session id (fixation); an API
 * key can never reach key management; failed sign-ins are throttled; a password change
 * ends the user's other sessions; the app's pages carry the strict browser policy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, httpFrom, type Reply } from '../../support/http.js';
import { cliAt, startServe, type Served } from '../../support/processes.js';

let s: Served;
const EVE_PASSWORD = 'eve-has-a-long-password';

interface Session {
  cookie: string;
  csrf: string;
}

function sessionFrom(r: Reply): Session {
  const set = r.headers.get('set-cookie') ?? '';
  const m = /^tg_session=([^;]+);/.exec(set);
  if (!m) throw new Error(`no session cookie in ${r.status} ${set} ${r.text}`);
  return { cookie: `tg_session=${m[1]}`, csrf: r.json.csrfToken as string };
}

async function signIn(name: string, password: string, headers: Record<string, string> = {}): Promise<Session> {
  const r = await http(s.url, 'POST', '/api/v1/session', { body: { name, password }, headers });
  expect(r.status, r.text).toBe(200);
  return sessionFrom(r);
}

/** A request made with a session: cookie always, the CSRF header unless told otherwise. */
function as(session: Session, method: string, path: string, opts: { body?: unknown; csrf?: boolean; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { cookie: session.cookie, ...opts.headers };
  if (opts.csrf !== false && method !== 'GET') headers['x-csrf-token'] = session.csrf;
  return http(s.url, method, path, { headers, ...(opts.body !== undefined ? { body: opts.body } : {}) });
}

let demo: Session;
let eve: Session;
const demoObjects: { token: string; strategy: string; keyId: string; connection: string } = { token: '', strategy: '', keyId: '', connection: '' };

beforeAll(async () => {
  s = await startServe();
  await cliAt(s.dataDir, ['users', 'add', 'eve', '--password-stdin'], `${EVE_PASSWORD}\n`);
  [demo, eve] = await Promise.all([signIn('demo', s.login.password), signIn('eve', EVE_PASSWORD)]);
  const key = (r: Reply) => r.json as { id: string };
  demoObjects.token = key(await as(demo, 'POST', '/api/v1/webhook-tokens', { body: { accountId: s.accounts[0], name: 'mine' } })).id;
  demoObjects.strategy = key(await as(demo, 'POST', '/api/v1/strategies', { body: { name: 'mine' } })).id;
  demoObjects.keyId = (await as(demo, 'GET', '/api/v1/api-keys')).json.data[0].id;
  demoObjects.connection = (await as(demo, 'GET', '/api/v1/connections')).json.data[0].id;
  for (const id of Object.values(demoObjects)) expect(id).toBeTruthy();
}, 60_000);

afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('web sessions over HTTP', () => {
  it('no cookie → 401 UNAUTHENTICATED on session routes, the API and the health stream', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/session'],
      ['GET', '/api/v1/api-keys'],
      ['POST', '/api/v1/api-keys'],
      ['POST', '/api/v1/me/password'],
      ['GET', '/api/v1/accounts'],
      ['GET', '/api/v1/connection-health/stream'],
    ] as const) {
      const r = await http(s.url, method, path, method === 'POST' ? { body: {} } : {});
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.json.code).toBe('UNAUTHENTICATED');
    }
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { cookie: 'tg_session=forged-or-expired' } })).status).toBe(401);
  });

  it('sets the session cookie HttpOnly, SameSite=Strict, Path=/ (Secure behind an https proxy), and no-store', async () => {
    const r = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'eve', password: EVE_PASSWORD } });
    const [session, device] = r.headers.getSetCookie();
    expect(session).toMatch(/^tg_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
    // And the device cookie that lets this browser past a name locked by guesses from elsewhere.
    expect(device).toMatch(/^tg_device=[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=2592000$/);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const proxied = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'eve', password: EVE_PASSWORD }, headers: { 'x-forwarded-proto': 'https' } });
    expect(proxied.headers.get('set-cookie')).toContain('; Secure');
  });

  it('over https the cookies are __Host- ones, which no other host of the domain can set; a session cookie sent twice with two values is no session (attack probe: a sibling site planted its own tg_session ahead of the victim\'s, and the victim\'s page added a broker login to the planter\'s user)', async () => {
    const https = { 'x-forwarded-proto': 'https' };
    const proxied = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'eve', password: EVE_PASSWORD }, headers: https });
    const [session, device] = proxied.headers.getSetCookie();
    expect(session).toMatch(/^__Host-tg_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Secure; Max-Age=\d+$/);
    expect(device).toMatch(/^__Host-tg_device=[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict; Secure; Max-Age=2592000$/);
    const secret = /^__Host-tg_session=([^;]+)/.exec(session!)![1]!;
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { ...https, cookie: `__Host-tg_session=${secret}` } })).json.user.name).toBe('eve');
    // Over https a plain tg_session (one a sibling host could have set) is not read.
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { ...https, cookie: `tg_session=${secret}` } })).status).toBe(401);
    // Over http: the planted cookie first and the victim's second, as a browser sends a longer path first.
    const planted = `${eve.cookie}; ${demo.cookie}`;
    const tossed = await http(s.url, 'GET', '/api/v1/session', { headers: { cookie: planted } });
    expect([tossed.status, tossed.json.code]).toEqual([401, 'UNAUTHENTICATED']);
    const write = await http(s.url, 'POST', '/api/v1/strategies', { body: { name: 'tossed' }, headers: { cookie: planted, 'x-csrf-token': eve.csrf } });
    expect(write.status).toBe(401);
    // The same cookie twice is still that one session.
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { cookie: `${demo.cookie}; ${demo.cookie}` } })).json.user.name).toBe('demo');
  });

  it('a request naming the user its page is signed in as (X-Tradegate-User) is refused 401 under another user\'s session, and nothing happens (web probe: a stale tab created a key for the user signed in since in another tab)', async () => {
    const demoId = (await as(demo, 'GET', '/api/v1/session')).json.user.id as string;
    const eveId = (await as(eve, 'GET', '/api/v1/session')).json.user.id as string;
    expect((await as(demo, 'GET', '/api/v1/session', { headers: { 'x-tradegate-user': demoId } })).status).toBe(200);
    expect((await as(demo, 'GET', '/api/v1/accounts', { headers: { 'x-tradegate-user': demoId } })).status).toBe(200);
    for (const [method, path] of [
      ['GET', '/api/v1/session'],
      ['GET', '/api/v1/accounts'],
      ['POST', '/api/v1/api-keys'],
    ] as const) {
      const r = await as(eve, method, path, { headers: { 'x-tradegate-user': demoId }, ...(method === 'POST' ? { body: { name: 'from-a-stale-tab', scopes: ['read'] } } : {}) });
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(401);
      expect(r.json.detail).toMatch(/signed in as another user/);
    }
    const eves = (await as(eve, 'GET', '/api/v1/api-keys', { headers: { 'x-tradegate-user': eveId } })).json.data as { name: string }[];
    expect(eves.map((k) => k.name)).not.toContain('from-a-stale-tab');
    // The health stream names its user in the URL (EventSource sends no header; the browser reopens a
    // dropped stream by itself with the cookie it holds then: web probe).
    const open = async (session: Session, user: string) => {
      const ac = new AbortController();
      const r = await fetch(`${s.url}/api/v1/connection-health/stream?user=${user}`, { headers: { cookie: session.cookie }, signal: ac.signal });
      const out = { status: r.status, body: r.status === 200 ? '' : await r.text() };
      ac.abort();
      return out;
    };
    expect((await open(demo, demoId)).status).toBe(200);
    const refused = await open(eve, demoId);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatch(/opened for another user/);
  });

  it('a cross-site POST carrying the cookie but not the CSRF header → 403 CSRF_REJECTED, and nothing happens', async () => {
    const before = (await as(demo, 'GET', '/api/v1/api-keys')).json.data.length;
    const forged = await http(s.url, 'POST', '/api/v1/api-keys', {
      raw: 'name=pwned&scopes=trade',
      headers: { cookie: demo.cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(forged.status).toBe(403);
    expect(forged.json.code).toBe('CSRF_REJECTED');
    expect((await as(demo, 'POST', '/api/v1/api-keys', { body: { name: 'x', scopes: ['read'] }, csrf: false })).json.code).toBe('CSRF_REJECTED');
    expect((await as(demo, 'POST', `/api/v1/accounts/${s.accounts[0]}/flatten`, { csrf: false })).json.code).toBe('CSRF_REJECTED');
    expect((await as(demo, 'DELETE', '/api/v1/session', { csrf: false })).json.code).toBe('CSRF_REJECTED');
    // The right token from the wrong origin is refused too; another session's token does not fit.
    expect((await as(demo, 'POST', '/api/v1/api-keys', { body: { name: 'x', scopes: ['read'] }, headers: { origin: 'https://evil.example' } })).json.code).toBe('CSRF_REJECTED');
    expect((await as(demo, 'POST', '/api/v1/api-keys', { body: { name: 'x', scopes: ['read'] }, csrf: false, headers: { 'x-csrf-token': eve.csrf } })).json.code).toBe('CSRF_REJECTED');
    expect((await as(demo, 'GET', '/api/v1/api-keys')).json.data.length).toBe(before);
    const ok = await as(demo, 'POST', '/api/v1/api-keys', { body: { name: 'made by the page', scopes: ['read'] }, headers: { origin: s.url, 'sec-fetch-site': 'same-origin' } });
    expect(ok.status, ok.text).toBe(201);
  });

  it('a session cannot reach another user’s objects: 404, and they stay as they were', async () => {
    const { token, strategy, keyId, connection } = demoObjects;
    for (const [method, path, body] of [
      ['GET', `/api/v1/webhook-tokens/${token}`],
      ['GET', `/api/v1/webhook-tokens/${token}/alerts`],
      ['POST', `/api/v1/webhook-tokens/${token}/rotate`],
      ['PATCH', `/api/v1/webhook-tokens/${token}`, { name: 'stolen' }],
      ['DELETE', `/api/v1/webhook-tokens/${token}`],
      ['PATCH', `/api/v1/strategies/${strategy}`, { name: 'stolen' }],
      ['DELETE', `/api/v1/api-keys/${keyId}`],
      ['GET', `/api/v1/api-keys/${keyId}/guards`],
      ['PUT', `/api/v1/api-keys/${keyId}/guards`, { maxOrderQty: 1000 }],
      ['DELETE', `/api/v1/connections/${connection}`],
      ['GET', `/api/v1/accounts/${s.accounts[0]}/guards`],
      ['PUT', `/api/v1/accounts/${s.accounts[0]}/guards`, {}],
      ['POST', `/api/v1/accounts/${s.accounts[0]}/lock`],
      ['GET', `/api/v1/accounts/${s.accounts[0]}/positions`],
      ['POST', `/api/v1/accounts/${s.accounts[0]}/flatten`],
    ] as const) {
      const r = await as(eve, method, path, body ? { body } : {});
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(404);
      expect(r.json.code).toBe('NOT_FOUND');
    }
    expect((await as(demo, 'GET', `/api/v1/webhook-tokens/${token}`)).json.name).toBe('mine');
    expect((await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey })).status).toBe(200);
    expect((await as(eve, 'GET', '/api/v1/api-keys')).json.data).toEqual([]);
  });

  it('session fixation: sign-in never keeps the id the browser brought; the planted one stops working', async () => {
    const attacker = await signIn('eve', EVE_PASSWORD);
    const victim = await signIn('demo', s.login.password, { cookie: attacker.cookie });
    expect(victim.cookie).not.toBe(attacker.cookie);
    expect((await as(attacker, 'GET', '/api/v1/session')).status).toBe(401);
    expect((await as(victim, 'GET', '/api/v1/session')).json.user.name).toBe('demo');
    const chosen = `tg_session=${'A'.repeat(43)}`;
    const fresh = await signIn('demo', s.login.password, { cookie: chosen });
    expect(fresh.cookie).not.toBe(chosen);
    expect((await http(s.url, 'GET', '/api/v1/session', { headers: { cookie: chosen } })).status).toBe(401);
  });

  it('an API key cannot call key management or session routes (403 SESSION_REQUIRED), even alongside a session cookie', async () => {
    for (const [method, path, body] of [
      ['GET', '/api/v1/api-keys'],
      ['POST', '/api/v1/api-keys', { name: 'minted', scopes: ['read', 'trade'] }],
      ['DELETE', `/api/v1/api-keys/${demoObjects.keyId}`],
      ['PUT', `/api/v1/api-keys/${demoObjects.keyId}/guards`, {}],
      ['POST', '/api/v1/me/password', { currentPassword: 'x', newPassword: 'a-new-long-password' }],
      ['GET', '/api/v1/session'],
      ['DELETE', '/api/v1/session'],
    ] as const) {
      for (const headers of [{}, { cookie: demo.cookie, 'x-csrf-token': demo.csrf }] as Record<string, string>[]) {
        const r = await http(s.url, method, path, { key: s.apiKey, headers, ...(body ? { body } : {}) });
        expect(r.status, `${method} ${path}`).toBe(403);
        expect(r.json.code).toBe('SESSION_REQUIRED');
      }
    }
    expect((await as(demo, 'GET', '/api/v1/api-keys')).json.data.some((k: { name: string }) => k.name === 'minted')).toBe(false);
  });

  it('the app’s own refreshing cannot use up a session’s budget for actions: reads and actions count apart', async () => {
    const tab = await signIn('demo', s.login.password);
    const statuses: number[] = [];
    for (let i = 0; i < 121; i++) statuses.push((await as(tab, 'GET', '/api/v1/accounts')).status);
    expect(statuses.slice(0, 120).every((x) => x === 200)).toBe(true);
    expect(statuses[120]).toBe(429);
    // Reads exhausted (several tabs polling): a flatten, a cancel, the kill switch still go through.
    const created = await as(tab, 'POST', '/api/v1/strategies', { body: { name: 'still allowed' } });
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('x-ratelimit-remaining')).toBe('119');
    expect((await as(tab, 'DELETE', `/api/v1/strategies/${created.json.id}`)).status).toBe(204);
  });

  it('throttles failed sign-ins per address: the 11th attempt is 429 with Retry-After, even with the right password', async () => {
    const from = '127.0.0.77';
    for (let i = 0; i < 10; i++) {
      const r = await httpFrom(from, s.url, 'POST', '/api/v1/session', { body: { name: `nobody${i}`, password: 'wrong' } });
      expect(r.status).toBe(401);
    }
    const blocked = await httpFrom(from, s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } });
    expect(blocked.status).toBe(429);
    expect(blocked.json.code).toBe('RATE_LIMITED');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await httpFrom('127.0.0.78', s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } })).status).toBe(200);
  });

  it('a name locked by failed guesses from elsewhere still signs in from a browser holding its device cookie, from any address (attack probe: the owner was locked out from every new address, and after a restart from every address)', async () => {
    await cliAt(s.dataDir, ['users', 'add', 'dora', '--password-stdin'], 'dora-password-123\n');
    const first = await httpFrom('127.0.0.90', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'dora-password-123' } });
    expect(first.status).toBe(200);
    const device = first.headers.getSetCookie().find((c) => c.startsWith('tg_device='))?.split(';')[0];
    expect(device, first.headers.getSetCookie().join(' | ')).toBeDefined();
    for (let i = 0; i < 5; i++) expect((await httpFrom('127.0.0.91', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: `guess-${i}` } })).status).toBe(401);
    const elsewhere = await httpFrom('127.0.0.92', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'dora-password-123' } });
    expect(elsewhere.status).toBe(429);
    // Another user's device cookie, or a forged one, does not help.
    const forged = await httpFrom('127.0.0.92', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'dora-password-123' }, headers: { cookie: 'tg_device=AAAA' } });
    expect(forged.status).toBe(429);
    const withDevice = await httpFrom('127.0.0.93', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'dora-password-123' }, headers: { cookie: device! } });
    expect(withDevice.status, withDevice.text).toBe(200);
    // The device cookie does not admit a wrong password, and its failures still count for its address.
    expect((await httpFrom('127.0.0.93', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'wrong' }, headers: { cookie: device! } })).status).toBe(401);
    // Its own failures are limited too: after five, from address after address, it no longer passes the
    // name's lock (attack probe: a kept cookie let every guess through, 10 more per address).
    for (let i = 0; i < 4; i++) expect((await httpFrom(`127.0.1.${i + 1}`, s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: `cookie-guess-${i}` }, headers: { cookie: device! } })).status).toBe(401);
    const spent = await httpFrom('127.0.1.9', s.url, 'POST', '/api/v1/session', { body: { name: 'dora', password: 'dora-password-123' }, headers: { cookie: device! } });
    expect(spent.status, spent.text).toBe(429);
  });

  it('a password change ends the device cookies issued under the old password; the browser that changed it gets a new one (attack probe: a cookie kept from before let its holder guess the new password past the name\'s lock)', async () => {
    await cliAt(s.dataDir, ['users', 'add', 'gina', '--password-stdin'], 'gina-password-123\n');
    const first = await httpFrom('127.0.2.1', s.url, 'POST', '/api/v1/session', { body: { name: 'gina', password: 'gina-password-123' } });
    expect(first.status).toBe(200);
    const deviceOf = (r: Reply) => r.headers.getSetCookie().find((c) => c.startsWith('tg_device='))?.split(';')[0];
    const oldDevice = deviceOf(first)!;
    const session = sessionFrom(first);
    const changed = await http(s.url, 'POST', '/api/v1/me/password', { body: { currentPassword: 'gina-password-123', newPassword: 'gina-new-password-456' }, headers: { cookie: session.cookie, 'x-csrf-token': session.csrf } });
    expect(changed.status, changed.text).toBe(200);
    const newDevice = deviceOf(changed);
    expect(newDevice).toBeDefined();
    // Guessed from elsewhere: the name locks.
    for (let i = 0; i < 5; i++) expect((await httpFrom('127.0.2.2', s.url, 'POST', '/api/v1/session', { body: { name: 'gina', password: `guess-${i}` } })).status).toBe(401);
    const withOld = await httpFrom('127.0.2.3', s.url, 'POST', '/api/v1/session', { body: { name: 'gina', password: 'gina-new-password-456' }, headers: { cookie: oldDevice } });
    expect(withOld.status, withOld.text).toBe(429);
    const withNew = await httpFrom('127.0.2.4', s.url, 'POST', '/api/v1/session', { body: { name: 'gina', password: 'gina-new-password-456' }, headers: { cookie: newDevice! } });
    expect(withNew.status, withNew.text).toBe(200);
  });

  it('a password change ends the user’s other sessions and keeps this browser signed in with a new id', async () => {
    const other = await signIn('eve', EVE_PASSWORD);
    const here = await signIn('eve', EVE_PASSWORD);
    const r = await as(here, 'POST', '/api/v1/me/password', { body: { currentPassword: EVE_PASSWORD, newPassword: 'eve-changed-her-password' } });
    expect(r.status, r.text).toBe(200);
    const renewed = sessionFrom(r);
    expect(renewed.cookie).not.toBe(here.cookie);
    for (const old of [other, here, eve]) expect((await as(old, 'GET', '/api/v1/session')).status).toBe(401);
    expect((await as(renewed, 'GET', '/api/v1/session')).json.user.name).toBe('eve');
    expect((await as(demo, 'GET', '/api/v1/session')).status).toBe(200);
    const oldPassword = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'eve', password: EVE_PASSWORD } });
    expect(oldPassword.status).toBe(401);
  });

  it('serves the app with a strict policy: CSP without inline script, no framing, no referrer; hashed assets cached for a year', async () => {
    const page = await http(s.url, 'GET', '/signals');
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(page.text).not.toMatch(/<script>|<script(?![^>]*\bsrc=)[^>]*>/);
    const src = /<script type="module" src="([^"]+)"/.exec(page.text)![1]!;
    const js = await http(s.url, 'GET', src);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const etag = page.headers.get('etag')!;
    expect((await http(s.url, 'GET', '/', { headers: { 'if-none-match': etag } })).status).toBe(304);
    // API answers hold account data: no cache may keep them, and no browser may sniff one into
    // a page or a script; errors and both prefixes included.
    for (const path of ['/api/v1/accounts', '/v1/accounts/nope/working-orders', '/api/v1/me']) {
      const r = await http(s.url, 'GET', path, { key: s.apiKey });
      expect(r.headers.get('cache-control'), path).toBe('no-store');
      expect(r.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    expect((await http(s.url, 'GET', '/api/v1/me')).headers.get('cache-control')).toBe('no-store');
    expect((await http(s.url, 'GET', '/healthz')).headers.get('cache-control')).toBeNull();
    for (const path of ['/healthz', '/readyz', '/api-docs/openapi.json']) expect((await http(s.url, 'GET', path)).headers.get('x-content-type-options'), path).toBe('nosniff');
  });

  it('answers broken bodies on the session routes with the documented 4xx, never a 5xx', async () => {
    const cases: [string, number, string][] = [
      ['{"name": ', 400, 'VALIDATION_FAILED'],
      ['[]', 400, 'VALIDATION_FAILED'],
      ['{"name": 5, "password": 5, "scopes": 5, "currentPassword": 5}', 400, 'VALIDATION_FAILED'],
      ['{"nmae": "typo"}', 400, 'VALIDATION_FAILED'],
      [JSON.stringify({ name: 'x'.repeat(70_000) }), 413, 'PAYLOAD_TOO_LARGE'],
    ];
    for (const path of ['/api/v1/session', '/api/v1/api-keys', '/api/v1/me/password']) {
      for (const [raw, status, code] of cases) {
        const r = await http(s.url, 'POST', path, { raw, headers: { cookie: demo.cookie, 'x-csrf-token': demo.csrf, 'content-type': 'application/json' } });
        expect([r.status, r.json?.code], `${path} ${raw.slice(0, 40)}`).toEqual([status, code]);
      }
      const plain = await http(s.url, 'POST', path, { raw: '{}', headers: { cookie: demo.cookie, 'x-csrf-token': demo.csrf, 'content-type': 'text/plain' } });
      expect(plain.status, path).toBe(415);
    }
  });

  it('never writes session ids or passwords to its output', async () => {
    const out = s.output();
    for (const secret of [demo.cookie.split('=')[1]!, eve.cookie.split('=')[1]!, EVE_PASSWORD, demo.csrf]) expect(out).not.toContain(secret);
  });
});
