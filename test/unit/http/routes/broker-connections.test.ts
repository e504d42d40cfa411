import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TRADOVATE_URLS } from '../../../../src/domain/connections.js';
import { connectionSchema } from '../../../../src/http/schemas.js';
import { LMDB_DIR } from '../../../../src/store/index.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('POST /connections/tradovate', () => {
  it('stores the credentials sealed, starts the actor with them, and answers without them', async () => {
    const res = await call(w, 'POST', '/connections/tradovate', {
      userId: w.a.userId,
      body: { environment: 'live', username: 'trader1', password: 'Pa55-w0rd-never-shown', cid: '123', sec: 'api-secret-xyz' },
    });
    expect(res.status).toBe(201);
    const c = connectionSchema.parse(res.body);
    expect(c).toMatchObject({ broker: 'tradovate', environment: 'live', name: 'Tradovate live (trader1)', status: 'CONNECTING' });
    expect(JSON.stringify(res.body)).not.toMatch(/Pa55|api-secret/);
    const spec = w.gateway.added.at(-1)!;
    expect(spec).toMatchObject({ connectionId: c.id, restUrl: TRADOVATE_URLS.live.restUrl, wsUrl: TRADOVATE_URLS.live.wsUrl, budget: { perMinute: 80 } });
    expect(spec.credentials).toMatchObject({ name: 'trader1', password: 'Pa55-w0rd-never-shown', cid: '123', sec: 'api-secret-xyz', appId: 'tradegate' });
    expect(w.store.connections.credentials(c.id).password).toBe('Pa55-w0rd-never-shown');
    await w.store.flushed();
    const file = readFileSync(join(w.store.dataDir, LMDB_DIR));
    expect(file.includes(Buffer.from('Pa55-w0rd-never-shown'))).toBe(false);
    expect(file.includes(Buffer.from('api-secret-xyz'))).toBe(false);
  });

  it('needs environment, user name and password; cid and sec only together', () => {
    const schema = route(w, 'POST', '/connections/tradovate').body!;
    expect(schema.safeParse({ environment: 'demo', username: 'u', password: 'p' }).success).toBe(true);
    for (const bad of [
      { environment: 'paper', username: 'u', password: 'p' },
      { environment: 'demo', username: '', password: 'p' },
      { environment: 'demo', username: 'u' },
      { environment: 'demo', username: 'u', password: 'p', cid: '1' },
      { environment: 'demo', username: 'u', password: 'p', sec: 's' },
      { environment: 'demo', username: 'u', password: 'p', restUrl: 'http://evil' },
    ]) {
      expect(schema.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('one connection per broker login', () => {
  const add = (userId: string, body: Record<string, unknown>) => call(w, 'POST', '/connections/tradovate', { userId, body: { password: 'pw', ...body } });

  it('refuses a second connection of the same user to the same Tradovate user (any case) with 409 CONFLICT naming the first', async () => {
    const first = await add(w.a.userId, { environment: 'demo', username: 'Trader1' });
    expect(first.status).toBe(201);
    const err = await callError(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username: ' trader1', password: 'other' } });
    expect(err.code).toBe('CONFLICT');
    expect(err.extensions).toMatchObject({ connectionId: (first.body as { id: string }).id });
    expect(w.store.connections.listByUser(w.a.userId).filter((c) => c.broker === 'tradovate')).toHaveLength(1);
    // Another environment is another login; another user may hold the same one.
    expect((await add(w.a.userId, { environment: 'live', username: 'trader1' })).status).toBe(201);
    expect((await add(w.b.userId, { environment: 'demo', username: 'trader1' })).status).toBe(201);
  });

  it('lets one of two concurrent adds of the same login through', async () => {
    const results = await Promise.allSettled([add(w.a.userId, { environment: 'demo', username: 'twice' }), add(w.a.userId, { environment: 'demo', username: 'twice' })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(w.store.connections.listByUser(w.a.userId).filter((c) => c.broker === 'tradovate')).toHaveLength(1);
    // Once both settled, the stored one holds the login.
    expect((await callError(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username: 'twice', password: 'pw' } })).code).toBe('CONFLICT');
  });

  it('refuses new credentials that name a login another connection of the user holds; its own user name is fine', async () => {
    const one = (await add(w.a.userId, { environment: 'demo', username: 'one' })).body as { id: string };
    const two = (await add(w.a.userId, { environment: 'demo', username: 'two' })).body as { id: string };
    const err = await callError(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: two.id }, body: { credentials: { username: 'ONE' } } });
    expect(err).toMatchObject({ code: 'CONFLICT', extensions: { connectionId: one.id } });
    expect(w.store.connections.credentials(two.id).name).toBe('two');
    // Once the add's login turn is over (a PATCH with credentials is a login by hand too).
    const later = new Date(w.deps.now!().getTime() + 31_000);
    w.deps.now = () => later;
    expect((await call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: one.id }, body: { credentials: { username: 'one', password: 'new' } } })).status).toBe(200);
  });
});

describe('DELETE /connections/:id', () => {
  it('stops the actor and deletes the owner’s connection; another user’s is 404 and untouched', async () => {
    const stopped: string[] = [];
    w.gateway.removeConnection = async (...args: unknown[]) => {
      const id = args[0] as string;
      stopped.push(id);
    };
    expect((await callError(w, 'DELETE', '/connections/:id', { userId: w.b.userId, params: { id: w.a.connectionId } })).code).toBe('NOT_FOUND');
    expect(stopped).toEqual([]);
    expect((await call(w, 'DELETE', '/connections/:id', { userId: w.a.userId, params: { id: w.a.connectionId } })).status).toBe(204);
    expect(stopped).toEqual([w.a.connectionId]);
    expect(w.store.connections.getForUser(w.a.userId, w.a.connectionId)).toBeUndefined();
  });
});

describe('adds are broker logins (attack probe: delete and add again logged in as someone else eight times in 3.5 s)', () => {
  const add = (username: string) => call(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username, password: 'guess' } });
  const remove = (res: { body?: unknown }) => call(w, 'DELETE', '/connections/:id', { userId: w.a.userId, params: { id: (res.body as { id: string }).id } });

  it('a login removed and added again within RECONNECT_MIN_INTERVAL_S is 429 RATE_LIMITED with Retry-After, and starts nothing', async () => {
    const first = await add('victim');
    expect(first.status).toBe(201);
    expect((await remove(first)).status).toBe(204);
    const started = w.gateway.added.length;
    const err = await callError(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username: 'VICTIM', password: 'guess2' } });
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429, extensions: { limit: 'broker-login' } });
    expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(w.gateway.added.length).toBe(started);
    expect(w.store.connections.listByUser(w.a.userId).filter((c) => c.broker === 'tradovate')).toHaveLength(0);
    // Another user's add of that login is theirs to make.
    expect((await call(w, 'POST', '/connections/tradovate', { userId: w.b.userId, body: { environment: 'demo', username: 'victim', password: 'pw' } })).status).toBe(201);
  });

  it('an add refused by the quota tried no login and takes no turn (re-probe: refused adds kept a user at the quota from adding for minutes)', async () => {
    const made = [];
    while (w.store.connections.listByUser(w.a.userId).length < 10) made.push(await add(`q${made.length}`));
    expect(made.length).toBeGreaterThan(0);
    for (let i = 0; i < 3; i++) {
      expect(await callError(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username: 'late', password: 'p' } })).toMatchObject({ code: 'QUOTA_EXCEEDED' });
    }
    await remove(made[0]!);
    expect((await add('late')).status).toBe(201);
  });

  it('a PATCH or reconnect takes the login’s turn too: connections added under other names and PATCHed to one username log in as it once per interval, and a FAILED add is not reconnected at once (re-probe: four PATCHes to one username were four logins in a second)', async () => {
    const a = await add('junk-a');
    const b = await add('junk-b');
    const patch = (res: { body?: unknown }, username: string) =>
      call(w, 'PATCH', '/connections/:id', { userId: w.a.userId, params: { id: (res.body as { id: string }).id }, body: { credentials: { username, password: 'guess' } } });
    expect((await patch(a, 'victim')).status).toBe(200);
    expect((await remove(a)).status).toBe(204);
    const started = w.gateway.added.length;
    const err = await patch(b, 'Victim').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429, extensions: { limit: 'broker-login' } });
    expect(w.gateway.added.length).toBe(started);
    // An add whose login failed is not logged in again by hand within the interval either.
    const c = await add('fresh');
    const id = (c.body as { id: string }).id;
    w.gateway.statusOf.set(id, { type: 'status', connectionId: id, status: 'FAILED', reason: 'fatal-error', ts: 1 });
    expect(await callError(w, 'POST', '/connections/:id/reconnect', { userId: w.a.userId, params: { id } })).toMatchObject({ code: 'RATE_LIMITED', extensions: { limit: 'broker-login' } });
  });

  it('a user adds at most 10 broker connections in 10 minutes, whatever the usernames', async () => {
    for (let i = 0; i < 10; i++) {
      const res = await add(`user${i}`);
      expect(res.status).toBe(201);
      await remove(res);
    }
    expect(await callError(w, 'POST', '/connections/tradovate', { userId: w.a.userId, body: { environment: 'demo', username: 'user10', password: 'p' } })).toMatchObject({
      code: 'RATE_LIMITED',
      extensions: { limit: 'connection-adds' },
    });
    expect((await call(w, 'POST', '/connections/tradovate', { userId: w.b.userId, body: { environment: 'demo', username: 'user10', password: 'p' } })).status).toBe(201);
  });
});
