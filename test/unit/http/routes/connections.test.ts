import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRoutes } from '../../../../src/http/routes/index.js';
import { connectionSchema, listOf } from '../../../../src/http/schemas.js';
import { createLogger } from '../../../../src/log.js';
import { call, callError, world, type World } from '../../../support/routes.js';

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
        accountIds: ['101', '102'],
      },
    ]);
    expect(JSON.stringify(res.body)).not.toContain('pw');
  });

  it('reports DISABLED for a disabled connection', async () => {
    await w.store.connections.setDisabled(w.a.connectionId, true);
    const page = listOf(connectionSchema).parse((await call(w, 'GET', '/connections', { userId: w.a.userId })).body);
    expect(page.data[0]!.status).toBe('DISABLED');
  });

  it('adds a paper connection: a fresh login with the named accounts at the paper broker, then its actor', async () => {
    const opened: { name: string; password: string; accounts: string[] }[] = [];
    w.deps.paper = { restUrl: 'http://127.0.0.1:9/v1', wsUrl: 'ws://127.0.0.1:9/v1/websocket', openLogin: async (login) => void opened.push(login) };
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

  it('refuses to add a paper connection when no paper broker runs', async () => {
    expect((await callError(w, 'POST', '/connections', { userId: w.a.userId, body: {} })).code).toBe('BROKER_UNAVAILABLE');
  });
});
