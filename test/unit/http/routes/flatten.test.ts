import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FlattenRequest } from '../../../../src/actors/protocol.js';
import { flattenResponseSchema } from '../../../../src/http/schemas.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
  w.gateway.responder.flatten = (req: FlattenRequest) => ({
    cancelledOrderIds: ['7'],
    positions: req.symbol ? [{ symbol: req.symbol, closedQty: 1, status: 'liquidated' }] : [],
    brokerMs: 2,
  });
});
afterEach(() => w.close());

describe('POST /accounts/:id/flatten', () => {
  it('flattens every symbol with an empty body', async () => {
    const res = await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
    expect(flattenResponseSchema.parse(res.body)).toMatchObject({ accountId: '101', symbol: null, cancelledOrderIds: ['7'] });
    expect(w.gateway.calls[0]!.req).toMatchObject({ type: 'flatten', accountId: '101', symbol: null });
    expect(res.timing.filter(([name]) => name !== 'actor')).toEqual([['broker', 2]]);
  });

  it('resolves a given symbol to its contract before calling the actor', async () => {
    const res = await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'CME_MINI:ES1!' } });
    expect(flattenResponseSchema.parse(res.body).symbol).toBe('ESZ6');
  });

  it('derives liquidation clOrdIds from the Idempotency-Key so a retry cannot double-close', async () => {
    await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-1' });
    await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-1' });
    const [a, b] = w.gateway.calls.map((c) => (c.req as FlattenRequest).clOrdIdPrefix);
    expect(a).toBe(b);
    expect(route(w, 'POST', '/accounts/:id/flatten').idempotent).toBe(true);
  });

  it('refuses an unknown symbol without broker traffic, and foreign or inactive accounts', async () => {
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'QQQ' } })).code).toBe('UNKNOWN_SYMBOL');
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.b.userId, params: { id: '101' } })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '102' } })).code).toBe('ACCOUNT_INACTIVE');
    expect(w.gateway.calls).toHaveLength(0);
  });
});
