import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connectionSchema, listOf } from '../../../../src/http/schemas.js';
import { call, callError, world, type World } from './harness.js';

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

  it('refuses to add a paper connection when no paper broker runs', async () => {
    expect((await callError(w, 'POST', '/connections', { userId: w.a.userId, body: {} })).code).toBe('BROKER_UNAVAILABLE');
  });
});
