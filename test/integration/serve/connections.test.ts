/**
 * Connections over real HTTP against `serve --paper`: adding paper connections (account
 * names checked up front, broker refusals coded, never a 500), leaving FAILED (reconnect, new
 * credentials) as a real SSE client sees it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';
import { control, simState } from '../../support/sim.js';
import { openHealthStream } from '../../support/sse.js';

let s: Served;
/** Short enough for the flows below to wait it out, long enough for a burst to land inside it. */
const RECONNECT_INTERVAL_S = 8;
const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', RECONNECT_MIN_INTERVAL_S: String(RECONNECT_INTERVAL_S) });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('POST /connections account names', () => {
  it('refuses a name given twice in one request with 400 naming the second one', async () => {
    const r = await api('POST', '/api/v1/connections', { accounts: [{ name: 'TWICE' }, { name: 'TWICE' }] });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'accounts.1.name' }] });
  });

  it('opens the default account on every call (its name is unique per login)', async () => {
    const first = await api('POST', '/api/v1/connections', {});
    const second = await api('POST', '/api/v1/connections', {});
    expect([first.status, second.status], `${first.text} ${second.text}`).toEqual([201, 201]);
  });

  it('accepts a name another connection’s login already has (paper account names are per login)', async () => {
    expect((await api('POST', '/api/v1/connections', { accounts: [{ name: 'TAKEN-1' }] })).status).toBe(201);
    const again = await api('POST', '/api/v1/connections', { accounts: [{ name: 'OTHER-1' }, { name: 'TAKEN-1' }] });
    expect(again.status, again.text).toBe(201);
  });

  it('refuses names the broker could not show (spaces, control characters) with 400', async () => {
    const r = await api('POST', '/api/v1/connections', { accounts: [{ name: 'a b' }] });
    expect(r.status).toBe(400);
    expect(r.json.errors[0].path).toBe('accounts.0.name');
  });
});

/** The paper broker's user that holds an account of this name (control API). */
async function brokerUserOf(accountName: string): Promise<string> {
  const users = (await simState(s)).users as { name: string; accounts: { name: string }[] }[];
  const user = users.find((u) => u.accounts.some((a) => a.name === accountName));
  if (!user) throw new Error(`no broker user holds ${accountName}`);
  return user.name;
}

/** POST /reconnect, waiting out a 429 (the manual reconnect interval) as a client should. */
async function reconnect(id: string) {
  for (;;) {
    const r = await api('POST', `/api/v1/connections/${id}/reconnect`);
    if (r.status !== 429) return r;
    expect(r.json.code).toBe('RATE_LIMITED');
    await new Promise((done) => setTimeout(done, Number(r.headers.get('retry-after')) * 1000));
  }
}

async function connected(id: string): Promise<{ accountIds: string[] }> {
  return eventually(async () => {
    const c = ((await api('GET', '/api/v1/connections?limit=500')).json.data as any[]).find((x) => x.id === id);
    return c?.status === 'CONNECTED' && c.accountIds.length > 0 ? c : undefined;
  }, `connection ${id} CONNECTED`, 20_000);
}

describe('leaving FAILED (item 3)', () => {
  it('answers 409 CONNECTION_FAILED without Retry-After while FAILED, and POST /reconnect brings it back; the stream shows each step', async () => {
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      const created = await api('POST', '/api/v1/connections', { name: 'fails', accounts: [{ name: 'FAILME-1' }] });
      expect(created.status, created.text).toBe(201);
      const id = created.json.id as string;
      const [account] = (await connected(id)).accountIds;
      const brokerUser = await brokerUserOf('FAILME-1');

      // The broker starts refusing the login, this login's token expires and its socket drops:
      // the reconnect needs a new token, and re-authentication fails for good.
      await control(s, 'POST', '/faults', { rejectAuth: 'Incorrect username or password' });
      const from = stream.events.length;
      await control(s, 'POST', '/auth/expire', { user: brokerUser });
      await control(s, 'POST', '/connections/drop', { user: brokerUser });
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', from, 15_000);

      const order = { symbol: 'ES', side: 'buy', qty: 1, type: 'market' };
      const refused = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: s.apiKey, body: order, headers: { 'Idempotency-Key': 'after-failed' } });
      expect(refused.status, refused.text).toBe(409);
      expect(refused.json).toMatchObject({ code: 'CONNECTION_FAILED', connectionId: id, connectionStatus: 'FAILED' });
      expect(refused.json.detail).toContain('Incorrect username or password');
      expect(refused.headers.get('retry-after')).toBeNull();
      const read = await api('GET', `/api/v1/accounts/${account}/working-orders`);
      expect(read.status).toBe(409);
      expect(read.json.code).toBe('CONNECTION_FAILED');
      expect(((await api('GET', '/api/v1/connections?limit=500')).json.data as any[]).find((c) => c.id === id)).toMatchObject({ status: 'FAILED' });

      // Still refused at the broker: a reconnect goes CONNECTING, then FAILED again.
      const early = stream.events.length;
      const again = await reconnect(id);
      expect(again.status, again.text).toBe(202);
      // The answer shows the status as it is then: on a loaded machine the refused login can be back already.
      expect(['CONNECTING', 'FAILED']).toContain(again.json.status);
      const connecting = await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTING', early, 10_000);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', connecting.index + 1, 15_000);

      // Fixed at the broker: reconnect → CONNECTED, and the order under the same key now runs.
      await control(s, 'DELETE', '/faults');
      const later = stream.events.length;
      expect((await reconnect(id)).status).toBe(202);
      const back = await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTING', later, 10_000);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTED', back.index + 1, 15_000);
      await connected(id);
      const placed = await http(s.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: s.apiKey, body: order, headers: { 'Idempotency-Key': 'after-failed' } });
      expect(placed.status, placed.text).toBe(201);
      expect(placed.headers.get('idempotent-replayed')).toBeNull();

      const notFailed = await api('POST', `/api/v1/connections/${id}/reconnect`);
      expect(notFailed.status).toBe(409);
      expect(notFailed.json).toMatchObject({ code: 'CONFLICT', connectionStatus: 'CONNECTED' });
    } finally {
      await control(s, 'DELETE', '/faults');
      stream.close();
    }
  });

  it('a burst of reconnects on a FAILED connection logs in at most once: the rest are 409 (login in flight) or 429 with Retry-After (item 3)', async () => {
    const created = await api('POST', '/api/v1/connections', { name: 'burst', accounts: [{ name: 'BURST-1' }] });
    const id = created.json.id as string;
    await connected(id);
    const brokerUser = await brokerUserOf('BURST-1');
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      await control(s, 'POST', '/faults', { rejectAuth: 'Incorrect username or password' });
      let from = stream.events.length;
      await control(s, 'POST', '/auth/expire', { user: brokerUser });
      await control(s, 'POST', '/connections/drop', { user: brokerUser });
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', from, 15_000);
      // A first reconnect (still refused at the broker): FAILED again at once.
      from = stream.events.length;
      expect((await reconnect(id)).status).toBe(202);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', from, 15_000);

      // Ten more in a row, as a client retrying in a loop would: at most one login (the warm-up's interval is likely still running).
      from = stream.events.length;
      const burst = [];
      for (let i = 0; i < 10; i++) burst.push(await api('POST', `/api/v1/connections/${id}/reconnect`));
      const started = burst.filter((r) => r.status === 202).length;
      expect(started).toBeLessThanOrEqual(1);
      for (const r of burst.filter((x) => x.status !== 202)) {
        if (r.status === 429) {
          expect(r.json).toMatchObject({ code: 'RATE_LIMITED', connectionId: id });
          expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
          expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(RECONNECT_INTERVAL_S);
        } else expect(r.json, r.text).toMatchObject({ code: 'CONFLICT', connectionStatus: 'CONNECTING' });
      }
      expect(burst.filter((r) => r.status === 429).length).toBeGreaterThan(0);

      // After the interval one reconnect goes through. Logins before its own: one per 202 of the burst, none for the refused ones.
      expect((await reconnect(id)).status).toBe(202);
      const logins = () => stream.events.slice(from).filter((e) => e.connectionId === id && e.status === 'CONNECTING').length;
      await eventually(async () => logins() === started + 1, `${started + 1} logins (the burst's and the last), saw ${logins()}`, 15_000);
    } finally {
      await control(s, 'DELETE', '/faults');
      stream.close();
    }
  });

  it('guards and the kill switch work on a FAILED connection; the owed flatten runs when it is back, before anything trades (item 4)', async () => {
    const created = await api('POST', '/api/v1/connections', { name: 'locked', accounts: [{ name: 'LOCK-1' }] });
    const id = created.json.id as string;
    const [account] = (await connected(id)).accountIds;
    const buy = { symbol: 'ES', side: 'buy', qty: 1, type: 'market' };
    expect((await api('POST', `/api/v1/accounts/${account}/orders`, buy)).status).toBe(201);
    const position = async () => ((await api('GET', `/api/v1/accounts/${account}/positions`)).json?.data ?? []) as { netQty: number }[];
    await eventually(async () => (await position()).some((p) => p.netQty === 1), 'a long position');
    const brokerUser = await brokerUserOf('LOCK-1');
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      await control(s, 'POST', '/faults', { rejectAuth: 'Incorrect username or password' });
      let from = stream.events.length;
      await control(s, 'POST', '/auth/expire', { user: brokerUser });
      await control(s, 'POST', '/connections/drop', { user: brokerUser });
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', from, 15_000);

      const plain = await api('POST', `/api/v1/accounts/${account}/lock`, { flatten: false });
      expect(plain.status, plain.text).toBe(200);
      expect(plain.json).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: false }, flatten: null });
      expect((await api('GET', `/api/v1/accounts/${account}/guards`)).json).toMatchObject({ lock: { guard: 'kill_switch' } });
      const put = await api('PUT', `/api/v1/accounts/${account}/guards`, { maxOrderQty: 5 });
      expect(put.status, put.text).toBe(200);
      expect(put.json).toMatchObject({ guards: { maxOrderQty: 5 }, lock: { guard: 'kill_switch' } });
      const flattening = await api('POST', `/api/v1/accounts/${account}/lock`, { reason: 'before the fix' });
      expect(flattening.status, flattening.text).toBe(200);
      expect(flattening.json.lock).toMatchObject({ guard: 'kill_switch', flattenPending: true });
      expect(flattening.json.flatten.error).toMatch(/^not flattened: .*Incorrect username or password.*flatten runs once the connection is CONNECTED again$/);

      // Fixed at the broker, restarted: flat and locked before any alert can trade.
      await control(s, 'DELETE', '/faults');
      from = stream.events.length;
      expect((await reconnect(id)).status).toBe(202);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTED', from, 20_000);
      await eventually(async () => (await position()).every((p) => p.netQty === 0), 'flat after the restart', 15_000);
      const refused = await api('POST', `/api/v1/accounts/${account}/orders`, buy);
      expect(refused.status, refused.text).toBe(403);
      expect(refused.json).toMatchObject({ code: 'RISK_GUARD', guard: 'kill_switch' });
      await eventually(async () => (await api('GET', `/api/v1/accounts/${account}/guards`)).json.lock?.flattenPending === false, 'flatten no longer pending');
      expect((await api('POST', `/api/v1/accounts/${account}/unlock`)).json.lock).toBeNull();
      expect((await api('POST', `/api/v1/accounts/${account}/orders`, buy)).status).toBe(201);
    } finally {
      await control(s, 'DELETE', '/faults');
      stream.close();
    }
  });

  it('PATCH with new credentials restarts the connection with them: wrong password → FAILED, right one → CONNECTED', async () => {
    await control(s, 'POST', '/users', { name: 'patch-login', password: 'right-pass', accounts: [{ name: 'PATCH-1' }] });
    const created = await api('POST', '/api/v1/connections', { name: 'patched' });
    const id = created.json.id as string;
    await connected(id);
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      const moved = await api('PATCH', `/api/v1/connections/${id}`, { credentials: { username: 'patch-login', password: 'right-pass' } });
      expect(moved.status, moved.text).toBe(200);
      expect(moved.text).not.toContain('right-pass');
      const patchAccount = ((await simState(s)).accounts as { id: number; name: string }[]).find((a) => a.name === 'PATCH-1')!.id;
      await eventually(async () => ((await connected(id)).accountIds.includes(String(patchAccount)) ? true : undefined), 'accounts of the new login', 20_000);

      // Each PATCH with credentials is a broker login: one per reconnect interval (429 with Retry-After within it).
      const early = await api('PATCH', `/api/v1/connections/${id}`, { credentials: { password: 'wrong-pass' } });
      expect(early.status).toBe(429);
      await new Promise((r) => setTimeout(r, Number(early.headers.get('retry-after')) * 1000));
      const from = stream.events.length;
      expect((await api('PATCH', `/api/v1/connections/${id}`, { credentials: { password: 'wrong-pass' } })).status).toBe(200);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'FAILED', from, 15_000);

      await new Promise((r) => setTimeout(r, RECONNECT_INTERVAL_S * 1000));
      const fixed = stream.events.length;
      const renamed = await api('PATCH', `/api/v1/connections/${id}`, { name: 'patched again', credentials: { password: 'right-pass' } });
      expect(renamed.json).toMatchObject({ name: 'patched again' });
      await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTED', fixed, 15_000);
    } finally {
      stream.close();
    }
  });

  it('PATCH and reconnect are 404 for another user’s or an unknown connection, and PATCH needs a field', async () => {
    expect((await api('POST', '/api/v1/connections/con_nope/reconnect')).status).toBe(404);
    expect((await api('PATCH', '/api/v1/connections/con_nope', { name: 'x' })).status).toBe(404);
    const list = (await api('GET', '/api/v1/connections')).json.data as any[];
    const empty = await api('PATCH', `/api/v1/connections/${list[0].id}`, {});
    expect(empty.status).toBe(400);
    expect((await api('PATCH', `/api/v1/connections/${list[0].id}`, { credentials: { pasword: 'typo' } })).status).toBe(400);
  });
});
