import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRoutes } from '../../../../src/http/routes/index.js';
import { connectionSchema, listOf } from '../../../../src/http/schemas.js';
import { createLogger } from '../../../../src/log.js';
import { call, callError, world, WORLD_PAPER_PASSWORD, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('connections', () => {
  it('lists the caller’s connections with live status and account ids, never credentials', async () => {
    const res = await call(w, 'GET', '/connections', { userId: w.a.userId });
    const page = listOf(connectionSchema).parse(res.body);
    expect(page.data).toEqual([
      {
        id: w.a.connectionId,
        name: 'Paper',
        broker: 'paper',
        environment: 'paper',
        status: 'CONNECTED',
        since: '2026-11-21T15:00:00.000Z',
        reason: 'connect',
        detail: null,
        retryAt: null,
        accountIds: ['101', '102'],
      },
    ]);
    expect(JSON.stringify(res.body)).not.toContain(WORLD_PAPER_PASSWORD);
  });

  it('reports DISABLED for a disabled connection', async () => {
    await w.store.connections.setDisabled(w.a.connectionId, true);
    const page = listOf(connectionSchema).parse((await call(w, 'GET', '/connections', { userId: w.a.userId })).body);
    expect(page.data[0]!.status).toBe('DISABLED');
  });

  it('adds a paper connection: a fresh login with the named accounts at the paper broker, then its actor', async () => {
    const opened: { name: string; password: string; accounts: string[] }[] = [];
    w.deps.paper = { restUrl: 'http://127.0.0.1:9/v1', wsUrl: 'ws://127.0.0.1:9/v1/websocket', openLogin: async (login) => void opened.push(login), closeLogin: async () => undefined };
    const routes = buildRoutes(w.deps);
    const add = routes.find((r) => r.method === 'POST' && r.path === '/connections')!;
    const res = await add.handler({
      req: { method: 'POST', path: '/connections', params: {}, query: {}, headers: {}, body: { name: 'Two', accounts: [{ name: 'P1' }, { name: 'P2' }] }, rawBody: Buffer.alloc(0), ip: '' },
      auth: { userId: w.a.userId, principalId: 'k', scopes: ['trade'], kind: 'api-key' },
      requestId: 'r', timing: { add: () => undefined }, log: createLogger('silent'),
    });
    expect(res.status).toBe(201);
    expect(opened).toHaveLength(1);
    expect(opened[0]!.accounts).toEqual(['P1', 'P2']);
    const spec = w.gateway.added[0]!;
    expect(spec).toMatchObject({ userId: w.a.userId, broker: 'paper', restUrl: 'http://127.0.0.1:9/v1', credentials: { name: opened[0]!.name, password: opened[0]!.password } });
    expect(connectionSchema.parse(res.body)).toMatchObject({ name: 'Two', status: 'CONNECTING' });
    // The password is in the sealed store, never in the answer.
    expect(JSON.stringify(res.body)).not.toContain(opened[0]!.password);
  });

  it('refuses to add a paper connection when no paper broker runs: 409, no Retry-After (a standing state: a 503 with Retry-After 1 had clients retrying every second for good)', async () => {
    const err = await callError(w, 'POST', '/connections', { userId: w.a.userId, body: {} });
    expect(err).toMatchObject({ code: 'CONFLICT', status: 409 });
    expect(err.retryAfterSeconds).toBeUndefined();
  });
});

describe('leaving FAILED and deleting', () => {
  const failed = (w: World) =>
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'FAILED', reason: 'fatal-error', ts: 1, detail: 'authentication refused: bad password' });

  it('answers requests on a FAILED connection with CONNECTION_FAILED without asking its actor', async () => {
    failed(w);
    const err = await callError(w, 'GET', '/accounts/:id/working-orders', { userId: w.a.userId, params: { id: '101' } });
    expect(err).toMatchObject({ code: 'CONNECTION_FAILED', retryAfterSeconds: undefined, extensions: { connectionId: w.a.connectionId } });
    expect(err.message).toContain('bad password');
    expect(w.gateway.calls).toEqual([]);
  });

  it('an unknown account while a connection that never synced is FAILED is CONNECTION_FAILED, while one is connecting 503', async () => {
    failed(w);
    w.gateway.accountsOf.set(w.a.connectionId, []);
    expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '999' } })).code).toBe('CONNECTION_FAILED');
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: 1 });
    expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '999' } })).code).toBe('BROKER_UNAVAILABLE');
  });

  it('an account a connection stored as served is answered with that connection’s state, not the first FAILED one’s', async () => {
    // Alice's first connection failed before it reported anything; her second served account 555
    // and is now disabled, or refused over it: the answer must name the second and say why.
    failed(w);
    w.gateway.accountsOf.set(w.a.connectionId, []);
    const second = await w.store.connections.create({ userId: w.a.userId, name: 'Other', broker: 'paper', environment: 'paper', restUrl: 'http://127.0.0.1:1/v1', wsUrl: 'ws://127.0.0.1:1/v1/websocket', credentials: { name: 'x', password: 'y' } });
    await w.store.connections.setServedAccounts(second.id, ['555']);
    // Disabled: named as disabled (503, an operator enables it), not with the other's bad password.
    await w.store.connections.setDisabled(second.id, true);
    expect(await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '555' } })).toMatchObject({ code: 'BROKER_UNAVAILABLE', extensions: { connectionId: second.id, connectionStatus: 'DISABLED' } });
    // Refused (FAILED): its own refusal, though another FAILED connection may come first.
    await w.store.connections.setDisabled(second.id, false);
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'FAILED', reason: 'fatal-error', ts: 1, detail: 'account 555 is also an account of connection con_x, which served it first' });
    const err = await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '555' } });
    expect(err).toMatchObject({ code: 'CONNECTION_FAILED', extensions: { connectionId: second.id } });
    expect(err.message).toContain('served it first');
    // An id nobody served still gets a FAILED connection's answer (which is first is a tie here: one clock).
    expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '999' } })).code).toBe('CONNECTION_FAILED');
  });

  it('reconnects only a FAILED connection of the caller, with its stored credentials', async () => {
    expect(await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } })).toMatchObject({ code: 'CONFLICT', extensions: { connectionStatus: 'CONNECTED' } });
    failed(w);
    expect((await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.b.userId, params: { id: w.a.connectionId } })).code).toBe('NOT_FOUND');
    const res = await call(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } });
    expect(res.status).toBe(202);
    expect(w.gateway.added.map((s) => [s.connectionId, s.credentials])).toEqual([[w.a.connectionId, w.store.connections.credentials(w.a.connectionId)]]);
  });

  it('reconnect starts a stored connection that runs no actor (its start failed, or nothing started it yet)', async () => {
    w.gateway.statusOf.delete(w.a.connectionId);
    const res = await call(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } });
    expect(res.status).toBe(202);
    expect(w.gateway.added.map((s) => s.connectionId)).toEqual([w.a.connectionId]);
  });

  it('reconnect is 409 while a login is in flight (CONNECTING) and for a disabled connection', async () => {
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: 1 });
    expect(await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } })).toMatchObject({ code: 'CONFLICT', extensions: { connectionStatus: 'CONNECTING' } });
    failed(w);
    await w.store.connections.setDisabled(w.a.connectionId, true);
    expect(await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } })).toMatchObject({ code: 'CONFLICT', extensions: { connectionStatus: 'DISABLED' } });
    expect(w.gateway.added).toEqual([]);
  });

  it('a second manual reconnect within RECONNECT_MIN_INTERVAL_S is 429 RATE_LIMITED with Retry-After, and starts nothing', async () => {
    failed(w);
    expect((await call(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } })).status).toBe(202);
    failed(w); // the login was refused again at once
    const again = await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id: w.a.connectionId } });
    expect(again).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryAfterSeconds: 30, extensions: { connectionId: w.a.connectionId } });
    expect(again.message).toContain('RECONNECT_MIN_INTERVAL_S');
    expect(w.gateway.added).toHaveLength(1);
    // Another connection has its own interval; new credentials take it too.
    w.gateway.statusOf.set(w.b.connectionId, { type: 'status', connectionId: w.b.connectionId, status: 'FAILED', reason: 'fatal-error', ts: 1 });
    expect((await call(w, 'PATCH', '/connections/:id', { userId: w.b.userId, params: { id: w.b.connectionId }, body: { credentials: { password: 'new' } } })).status).toBe(200);
    expect((await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.b.userId, params: { id: w.b.connectionId } })).code).toBe('RATE_LIMITED');
  });

  it('PATCH with the credentials already stored is a manual reconnect: one per interval, then 429 and no login (security probe: each re-save was a broker login)', async () => {
    const stored = w.store.connections.credentials(w.a.connectionId);
    const same = { credentials: { password: stored.password } };
    expect((await call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: same })).status).toBe(200);
    expect(w.gateway.added).toHaveLength(1);
    const again = await callError(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: same });
    expect(again).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(w.gateway.added).toHaveLength(1);
    // New credentials are a login too: within the interval, refused the same way (attack probe: ten
    // PATCHes with new passwords, for any username, were ten broker logins in 3 s).
    const changed = await callError(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: { credentials: { username: 'someone-else', password: 'guess-1' } } });
    expect(changed).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(w.gateway.added).toHaveLength(1);
    expect(w.store.connections.credentials(w.a.connectionId)).toEqual(stored);
  });


  it('PATCH cannot point a connection on the embedded paper broker at another paper login (attack probe: renamed to another user’s login, it took that login and its account over at the next restart)', async () => {
    const record = w.store.connections.byId(w.a.connectionId)!;
    w.deps.paper = { restUrl: record.restUrl, wsUrl: record.wsUrl, openLogin: async () => undefined, closeLogin: async () => undefined };
    await w.store.connections.create({ userId: w.b.userId, name: 'victim', broker: 'paper', environment: 'paper', restUrl: record.restUrl, wsUrl: record.wsUrl, credentials: { name: 'paper-victim', password: 'pw' } });
    const err = await callError(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: { credentials: { username: 'paper-victim' } } });
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', status: 400, extensions: { errors: [{ path: 'credentials.username' }] } });
    expect(w.store.connections.credentials(w.a.connectionId).name).not.toBe('paper-victim');
    expect(w.gateway.added).toHaveLength(0);
  });

  it('PATCH merges new credentials, restarts with them, and renames without a restart', async () => {
    const before = w.store.connections.credentials(w.a.connectionId);
    const res = await call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: { credentials: { password: 'new-secret', cid: 7 } } });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain('new-secret');
    expect(w.store.connections.credentials(w.a.connectionId)).toEqual({ ...before, password: 'new-secret', cid: 7 });
    expect(w.gateway.added.map((s) => s.credentials.password)).toEqual(['new-secret']);
    await call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: { name: 'Renamed' } });
    expect(w.gateway.added).toHaveLength(1);
    expect(w.store.connections.byId(w.a.connectionId)?.name).toBe('Renamed');
    // New credentials again only after the interval (each is a broker login).
    const later = new Date(w.deps.now!().getTime() + 31_000);
    w.deps.now = () => later;
    const moved = await call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId }, body: { credentials: { username: 'other-login' } } });
    expect(moved.status).toBe(200);
    expect(w.store.connections.credentials(w.a.connectionId).name).toBe('other-login');
  });

  it('DELETE stops the actor, removes the record and makes the tokens of its accounts inactive; another user gets 404', async () => {
    const { record } = await w.store.webhookTokens.create({ userId: w.a.userId, name: 't', accountId: '101' });
    expect((await callError(w, 'DELETE', '/connections/:id', { userId: w.b.userId, params: { id: w.a.connectionId } })).code).toBe('NOT_FOUND');
    const res = await call(w, 'DELETE', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId } });
    expect(res.status).toBe(204);
    expect(w.gateway.removed).toEqual([w.a.connectionId]);
    expect(w.store.connections.byId(w.a.connectionId)).toBeUndefined();
    expect(w.store.webhookTokens.getForUser(w.a.userId, record.id)?.inactiveReason).toBe(`its connection ${w.a.connectionId} was deleted`);
    expect((await callError(w, 'DELETE', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId } })).code).toBe('NOT_FOUND');
  });

  it('DELETE of a second connection to the same broker login keeps the tokens of the accounts the first still serves', async () => {
    const { record } = await w.store.webhookTokens.create({ userId: w.a.userId, name: 't', accountId: '101' });
    const twin = await w.store.connections.create({ userId: w.a.userId, name: 'twin', broker: 'paper', environment: 'paper', restUrl: 'http://x', wsUrl: 'ws://x', credentials: { name: 'same', password: 'pw' } });
    w.gateway.accountsOf.set(twin.id, w.gateway.accountsOf.get(w.a.connectionId)!.map((a) => ({ ...a, connectionId: twin.id })));
    expect((await call(w, 'DELETE', '/connections/:id', { userId: w.a.userId, params: { id: twin.id } })).status).toBe(204);
    expect(w.store.webhookTokens.getForUser(w.a.userId, record.id)?.inactiveReason ?? null).toBeNull();
  });
});
