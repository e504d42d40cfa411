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
