import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listOf, strategySchema } from '../../../../src/http/schemas.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('strategies', () => {
  it('creates, reads, patches (null clears) and deletes a strategy', async () => {
    const created = strategySchema.parse(
      (await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'ORB', symbol: 'MES1!', qty: 2, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } } })).body,
    );
    expect(created).toMatchObject({ name: 'ORB', description: null, symbol: 'MES1!', qty: 2, orderType: null, takeProfit: { ticks: 40 } });
    const got = strategySchema.parse((await call(w, 'GET', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } })).body);
    expect(got).toEqual(created);
    const patched = strategySchema.parse(
      (await call(w, 'PATCH', '/strategies/:id', { userId: w.a.userId, params: { id: created.id }, body: { qty: null, description: 'opening range' } })).body,
    );
    expect(patched).toMatchObject({ qty: null, description: 'opening range', symbol: 'MES1!' });
    expect(listOf(strategySchema).parse((await call(w, 'GET', '/strategies', { userId: w.a.userId })).body).data).toHaveLength(1);
    expect((await call(w, 'DELETE', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } })).status).toBe(204);
    expect((await callError(w, 'GET', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } })).code).toBe('NOT_FOUND');
  });

  it('refuses to delete a strategy webhook tokens are bound to (409 naming them); once they are rebound it goes (API probe: the tokens then traded without its legs)', async () => {
    const created = strategySchema.parse((await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'ORB', stopLoss: { ticks: 20 } } })).body);
    const token = (await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'TV', strategyId: created.id } })).body as { id: string };
    const err = await callError(w, 'DELETE', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } });
    expect(err).toMatchObject({ code: 'CONFLICT', extensions: { tokenIds: [token.id] } });
    expect(err.message).toContain(`TV (${token.id})`);
    expect((await call(w, 'GET', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } })).status).toBe(200);
    await call(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: token.id }, body: { strategyId: null } });
    expect((await call(w, 'DELETE', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } })).status).toBe(204);
  });

  it('a delete and a token bound to the strategy at the same moment: never both (re-probe: 204 and 201 together left the token on a deleted strategy)', async () => {
    for (let i = 0; i < 15; i++) {
      const created = strategySchema.parse((await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: `S${i}`, stopLoss: { ticks: 20 } } })).body);
      const [removed, bound] = await Promise.allSettled([
        call(w, 'DELETE', '/strategies/:id', { userId: w.a.userId, params: { id: created.id } }),
        call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: `T${i}`, strategyId: created.id } }),
      ]);
      expect(removed.status === 'fulfilled' && bound.status === 'fulfilled', `round ${i}`).toBe(false);
      expect(removed.status === 'rejected' || bound.status === 'rejected').toBe(true);
      if (bound.status === 'fulfilled') await call(w, 'DELETE', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: (bound.value.body as { id: string }).id } });
    }
  });

  it('refuses a market strategy with one leg at a price and the other in ticks (every alert would be refused); a limit one, or the same kind of legs, is taken (new-user probe)', async () => {
    const mixed = { name: 'm', symbol: 'ES', takeProfit: { ticks: 8 }, stopLoss: { price: 4000 } };
    expect(await callError(w, 'POST', '/strategies', { userId: w.a.userId, body: mixed })).toMatchObject({ code: 'VALIDATION_FAILED', extensions: { errors: [{ path: 'stopLoss' }] } });
    const limit = await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { ...mixed, orderType: 'limit' } });
    expect(limit.status).toBe(201);
    // Made a market one later: refused the same way.
    expect(await callError(w, 'PATCH', '/strategies/:id', { userId: w.a.userId, params: { id: (limit.body as { id: string }).id }, body: { orderType: 'market' } })).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect((await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { ...mixed, stopLoss: { ticks: 4 } } })).status).toBe(201);
  });

  it('refuses a qty over ORDER_QTY_MAX, on create and patch (re-probe: 20,000 was stored, and every alert of the strategy was 400)', async () => {
    expect(await callError(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'big', qty: 20_000 } })).toMatchObject({ code: 'VALIDATION_FAILED', extensions: { errors: [{ path: 'qty' }] } });
    const made = await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'ok', qty: 10_000 } });
    expect(made.status).toBe(201);
    expect(await callError(w, 'PATCH', '/strategies/:id', { userId: w.a.userId, params: { id: (made.body as { id: string }).id }, body: { qty: 10_001 } })).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('refuses an unresolvable symbol with UNKNOWN_SYMBOL', async () => {
    expect((await callError(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'x', symbol: 'NOPE' } })).code).toBe('UNKNOWN_SYMBOL');
  });

  it('refuses leg prices that can never trade when the strategy is written, not when an alert fires', async () => {
    const post = (body: Record<string, unknown>) => callError(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'x', ...body } });
    const audit = await post({ takeProfit: { price: 4000.1 }, stopLoss: { price: 1e21 } });
    expect(audit).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', extensions: { errors: [{ path: 'stopLoss.price' }] } });
    expect((await post({ symbol: 'ES1!', takeProfit: { price: 4000.1 } })).code).toBe('VALIDATION_FAILED');
    expect((await post({ symbol: 'ES1!', stopLoss: { price: 30000 } })).extensions).toMatchObject({ band: { min: 1000, max: 25000 } });
    expect(w.store.strategies.listByUser(w.a.userId)).toEqual([]);

    const s = strategySchema.parse((await call(w, 'POST', '/strategies', { userId: w.a.userId, body: { name: 'es', symbol: 'ES1!', takeProfit: { price: 5100 } } })).body);
    const patch = (body: Record<string, unknown>) => callError(w, 'PATCH', '/strategies/:id', { userId: w.a.userId, params: { id: s.id }, body });
    // A new symbol meets the legs kept, and new legs the symbol kept.
    expect((await patch({ symbol: 'CL1!' })).code).toBe('PRICE_OUT_OF_RANGE');
    expect((await patch({ stopLoss: { price: 4999.9 } })).code).toBe('VALIDATION_FAILED');
    const moved = await call(w, 'PATCH', '/strategies/:id', { userId: w.a.userId, params: { id: s.id }, body: { symbol: 'CL1!', takeProfit: { price: 80.5 } } });
    expect(moved.body).toMatchObject({ symbol: 'CL1!', takeProfit: { price: 80.5 } });
  });

  it('hides other users’ strategies (404 on read, patch and delete)', async () => {
    const s = await w.store.strategies.create(w.b.userId, { name: 'b', description: '' });
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'mine' }], ['DELETE', undefined]] as const) {
      expect((await callError(w, method, '/strategies/:id', { userId: w.a.userId, params: { id: s.id }, body })).code).toBe('NOT_FOUND');
    }
    expect(w.store.strategies.getForUser(w.b.userId, s.id)?.name).toBe('b');
  });

  it('rejects unknown fields in strategy bodies', () => {
    expect(route(w, 'POST', '/strategies').body!.safeParse({ name: 'x', stopLos: { ticks: 1 } }).success).toBe(false);
    expect(route(w, 'PATCH', '/strategies/:id').body!.safeParse({ nme: 'x' }).success).toBe(false);
  });
});
