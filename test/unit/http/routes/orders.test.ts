import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PlaceOrderRequest } from '../../../../src/actors/protocol.js';
import { AppError } from '../../../../src/domain/problems.js';
import { clOrdIdFor } from '../../../../src/domain/order-plan.js';
import { cancelOrderResponseSchema, closedTradeSchema, dryRunResponseSchema, listOf, orderRecordSchema, placeOrderResponseSchema } from '../../../../src/http/schemas.js';
import { call, callError, orderRecord, route, world, type World } from '../../../support/routes.js';
import { thrown } from '../../../support/errors.js';
import { GoesOnError } from '../../../../src/http/route-types.js';
import { heldAfterOwnerChange } from '../../../../src/http/routes/common.js';

let w: World;
beforeEach(async () => {
  w = await world();
  w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => ({
    order: orderRecord({ orderId: '9001', accountId: req.accountId, symbol: req.symbol, requestedSymbol: req.requestedSymbol, role: req.takeProfit ? 'entry' : 'single' }),
    legs: req.takeProfit ? { takeProfit: orderRecord({ orderId: '9002', role: 'take_profit' }), stopLoss: null } : undefined,
    reconciled: false,
    brokerMs: 12.5,
  });
});
afterEach(() => w.close());

const place = (body: unknown, extra: { idempotencyKey?: string; query?: Record<string, string>; id?: string } = {}) =>
  call(w, 'POST', '/accounts/:id/orders', {
    userId: w.a.userId,
    params: { id: extra.id ?? '101' },
    body,
    ...(extra.query ? { query: extra.query } : {}),
    ...(extra.idempotencyKey ? { idempotencyKey: extra.idempotencyKey } : {}),
  });

describe('POST /accounts/:id/orders', () => {
  it('places through the account’s connection and answers 201 with the resolved symbol, legs and broker timing', async () => {
    const res = await place({ symbol: 'ES1!', side: 'buy', qty: 2, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(res.status).toBe(201);
    const body = placeOrderResponseSchema.parse(res.body);
    expect(body).toMatchObject({ orderId: '9001', symbol: 'ESZ6', requestedSymbol: 'ES1!', legs: { takeProfit: '9002', stopLoss: null }, reconciled: false });
    expect(res.timing.filter(([name]) => name !== 'actor')).toEqual([['broker', 12.5]]);
    expect(w.gateway.calls).toHaveLength(1);
    const sent = w.gateway.calls[0]!;
    expect(sent.connectionId).toBe(w.a.connectionId);
    expect(sent.req).toMatchObject({ type: 'place-order', accountId: '101', symbol: 'ESZ6', qty: 2, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } });
  });

  it('journals the placement and a broker refusal (audit trail, no secrets)', async () => {
    await place({ symbol: 'ES', side: 'buy', qty: 1 });
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_REJECTED', 'MaxPosLimitReached');
    };
    await place({ symbol: 'ES', side: 'buy', qty: 1 }).catch(() => undefined);
    await w.store.flushed();
    const entries = await w.store.journal.list({ userId: w.a.userId, limit: 10 });
    expect(entries.map((e) => [e.kind, e.accountId, e.outcome])).toEqual([
      ['place-order', '101', { error: 'BROKER_REJECTED', detail: 'MaxPosLimitReached' }],
      ['place-order', '101', { orderId: '9001', status: 'working' }],
    ]);
    expect(entries[0]!.request).toMatchObject({ symbol: 'ESZ6', via: 'api-key', requestId: 'req-1' });
  });

  it('a 504 because the cluster node that had it stopped answering holds the key (a hung node may still place it), a plain 504 does not (cluster re-probe: the retry on the new owner filled, then the first did too)', async () => {
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_TIMEOUT', 'the node running con_1 stopped before it answered (another node took the connection over): place-order may have reached the broker; retry with the same Idempotency-Key', { ownerChanged: true });
    };
    const held = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ES', side: 'buy', qty: 1 }, idempotencyKey: 'k-held' });
    expect(held).toBeInstanceOf(GoesOnError);
    expect(held).toMatchObject({ code: 'BROKER_TIMEOUT', message: expect.stringContaining('waits 30 s') });
    const settled = await Promise.race([(held as GoesOnError).outcome.then(() => 'freed'), new Promise((r) => setTimeout(() => r('held'), 100))]);
    expect(settled).toBe('held');
    // Without a key there is nothing to hold (the 504 says to look at the account first).
    expect(await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ES', side: 'buy', qty: 1 } })).not.toBeInstanceOf(GoesOnError);
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_TIMEOUT', 'actor request place-order did not complete within 15000 ms');
    };
    expect(await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ES', side: 'buy', qty: 1 }, idempotencyKey: 'k-plain' })).not.toBeInstanceOf(GoesOnError);
    // The hold ends by itself: the key is freed, and the retry reconciles with what the broker did.
    expect(await heldAfterOwnerChange(held, 20)!.outcome).toBeUndefined();
  });

  it('derives the clOrdId from (user, Idempotency-Key) so a retry reconciles at the broker', async () => {
    await place({ symbol: 'ES', side: 'buy', qty: 1 }, { idempotencyKey: 'k-1' });
    expect((w.gateway.calls[0]!.req as PlaceOrderRequest).clOrdId).toBe(clOrdIdFor(w.a.userId, 'k-1'));
  });

  it('sends nothing for an unknown symbol (UNKNOWN_SYMBOL naming it)', async () => {
    const err = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ZZZ1!', side: 'buy', qty: 1 } });
    expect(err.code).toBe('UNKNOWN_SYMBOL');
    expect(err.extensions.symbol).toBe('ZZZ1!');
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('sends nothing for an off-tick price (VALIDATION_FAILED naming the field)', async () => {
    const err = await callError(w, 'POST', '/accounts/:id/orders', {
      userId: w.a.userId,
      params: { id: '101' },
      body: { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 5000.1 },
    });
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.extensions.errors).toEqual([expect.objectContaining({ path: 'price' })]);
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('returns the dryRun plan with 200 and sends nothing', async () => {
    const res = await place({ symbol: 'MES!', side: 'sell', qty: 1, type: 'limit', price: 5000, takeProfit: { ticks: 8 }, stopLoss: { price: 5010 } }, { query: { dryRun: 'true' } });
    expect(res.status).toBe(200);
    const plan = dryRunResponseSchema.parse(res.body);
    expect(plan).toMatchObject({ symbol: 'MESZ6', bracket: 'mixed', takeProfit: { price: 4998 } });
    // Only the guards were asked (here they cannot answer: not checked), nothing was placed.
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['check-order']);
    expect(plan.guardsChecked).toBe(false);
  });

  it('a dryRun the guards would refuse is the real order’s 403 RISK_GUARD; one they admit says guardsChecked', async () => {
    w.gateway.responder['check-order'] = (req: { qty: number }) =>
      ({ refusal: req.qty > 1 ? { guard: 'max_order_qty', limit: 1, value: req.qty, detail: 'max order qty 1' } : null });
    const admitted = await place({ symbol: 'ES', side: 'buy', qty: 1 }, { query: { dryRun: 'true' } });
    expect(admitted.body).toMatchObject({ dryRun: true, guardsChecked: true });
    const err = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ES', side: 'buy', qty: 2 }, query: { dryRun: 'true' } });
    expect(err).toMatchObject({ code: 'RISK_GUARD', extensions: { guard: 'max_order_qty', limit: 1, value: 2 } });
    expect(w.gateway.calls.filter((c) => c.req.type === 'place-order')).toEqual([]);
  });

  it('refuses dryRun with an Idempotency-Key before the key is looked up, so a stored plan can never replay in place of the real order', () => {
    const check = route(w, 'POST', '/accounts/:id/orders').checkIdempotencyKey!;
    for (const dryRun of ['true', '1']) expect(thrown(() => check('k-dry', { query: { dryRun } } as never)).code).toBe('VALIDATION_FAILED');
    for (const query of [{ dryRun: 'false' }, {}]) expect(() => check('k-real', { query } as never)).not.toThrow();
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('answers 404 for another user’s account and for an unknown one, alike', async () => {
    const foreign = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '201' }, body: { symbol: 'ES', side: 'buy', qty: 1 } });
    const unknown = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '999' }, body: { symbol: 'ES', side: 'buy', qty: 1 } });
    expect([foreign.code, unknown.code]).toEqual(['NOT_FOUND', 'NOT_FOUND']);
    expect(foreign.message).toBe(unknown.message);
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('refuses to trade an account the broker no longer reports (403 Account is inactive)', async () => {
    const err = await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '102' }, body: { symbol: 'ES', side: 'buy', qty: 1 } });
    expect(err.code).toBe('ACCOUNT_INACTIVE');
    expect(err.message).toBe('Account is inactive');
  });

  it('rejects unknown fields in the body (typo stopLos)', () => {
    const r = w.routes.find((x) => x.method === 'POST' && x.path === '/accounts/:id/orders')!;
    expect(r.body!.safeParse({ symbol: 'ES', side: 'buy', qty: 1, stopLos: { ticks: 4 } }).success).toBe(false);
    expect(r.idempotent).toBe(true);
  });

  it('passes broker errors through as coded errors', async () => {
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_REJECTED', 'MaxPosLimitReached', { brokerReason: 'MaxPosLimitReached' });
    };
    expect((await callError(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'ES', side: 'buy', qty: 1 } })).code).toBe(
      'BROKER_REJECTED',
    );
  });
});

describe('DELETE /accounts/:id/orders/:orderId', () => {
  it('cancels through the actor and answers the §6 shape', async () => {
    w.gateway.responder['cancel-order'] = () => ({
      order: orderRecord({ status: 'cancelled', role: 'take_profit' }),
      removedLegIds: [],
      replaced: { replacedOrderId: '9003', newOrderId: '9004' },
      remainderCancelled: false,
      brokerMs: 3,
    });
    const res = await call(w, 'DELETE', '/accounts/:id/orders/:orderId', { userId: w.a.userId, params: { id: '101', orderId: '9002' } });
    expect(res.status).toBe(200);
    expect(cancelOrderResponseSchema.parse(res.body).replaced).toEqual({ replacedOrderId: '9003', newOrderId: '9004' });
    expect(w.gateway.calls[0]!.req).toEqual({ type: 'cancel-order', accountId: '101', orderId: '9002' });
    expect(res.timing.filter(([name]) => name !== 'actor')).toEqual([['broker', 3]]);
  });

  it('answers 404 for another user’s account without calling the broker', async () => {
    const err = await callError(w, 'DELETE', '/accounts/:id/orders/:orderId', { userId: w.b.userId, params: { id: '101', orderId: '9002' } });
    expect(err.code).toBe('NOT_FOUND');
    expect(w.gateway.calls).toHaveLength(0);
  });
});

describe('working orders and trade history', () => {
  it('serves working orders from the actor’s serialized pages, paginated with a cursor', async () => {
    const records = Array.from({ length: 5 }, (_, i) => orderRecord({ orderId: String(i) }));
    const asked: { after: number; limit: number }[] = [];
    w.gateway.responder['working-orders-page'] = (r) => {
      asked.push({ after: r.after, limit: r.limit });
      const rest = records.filter((o) => Number(o.orderId) > r.after || (r.after === 0 && o.orderId === '0'));
      const page = rest.slice(0, r.limit);
      return { json: JSON.stringify(page), total: records.length, more: rest.length > page.length, lastId: Number(page.at(-1)!.orderId) };
    };
    const first = await call(w, 'GET', '/accounts/:id/working-orders', { userId: w.a.userId, params: { id: '101' }, query: { limit: '2' } });
    expect(first.headers).toEqual({ 'Content-Type': 'application/json' });
    const page1 = listOf(orderRecordSchema).parse(JSON.parse(first.body as string));
    expect(page1.data.map((o) => o.orderId)).toEqual(['0', '1']);
    expect(page1.nextCursor).not.toBeNull();
    const last = await call(w, 'GET', '/accounts/:id/working-orders', { userId: w.a.userId, params: { id: '101' }, query: { limit: '3', cursor: page1.nextCursor! } });
    const page2 = listOf(orderRecordSchema).parse(JSON.parse(last.body as string));
    expect(page2.data.map((o) => o.orderId)).toEqual(['2', '3', '4']);
    expect(page2.nextCursor).toBeNull();
    // The second page is asked for after the last order the first showed.
    expect(asked).toEqual([{ after: 0, limit: 2 }, { after: 1, limit: 3 }]);
  });

  it('answers a page the front still holds synchronously, without a call into the actor', async () => {
    const page = { json: '[]', total: 0, version: 1 };
    const askedKept: unknown[][] = [];
    w.gateway.keptPage = (...args) => (askedKept.push(args), page);
    const res = await call(w, 'GET', '/accounts/:id/working-orders', { userId: w.a.userId, params: { id: '101' } });
    expect(JSON.parse(res.body!.toString())).toEqual({ data: [], nextCursor: null });
    expect(askedKept).toEqual([[w.a.connectionId, '101', 0, 100]]);
    expect(w.gateway.calls).toHaveLength(0);
    const handler = route(w, 'GET', '/accounts/:id/working-orders').handler;
    expect(handler({ auth: { userId: w.a.userId }, req: { params: { id: '101' }, query: {} } } as never)).not.toBeInstanceOf(Promise);
  });

  it('refuses a forged cursor', async () => {
    w.gateway.responder['working-orders-page'] = () => ({ json: '[]', total: 0 });
    const err = await callError(w, 'GET', '/accounts/:id/working-orders', { userId: w.a.userId, params: { id: '101' }, query: { cursor: 'bm9wZQ' } });
    expect(err.code).toBe('VALIDATION_FAILED');
  });

  it('serves closed trades on the legacy /orders path, not working orders', async () => {
    w.gateway.responder['trade-history'] = () => [
      {
        id: 't1', accountId: '101', symbol: 'ESZ6', direction: 'long', qty: 1, entryPrice: 5000, exitPrice: 5005,
        openedAt: NOW_ISO, closedAt: NOW_ISO, pnlPoints: 5, pnl: 250, entryOrderIds: ['1'], exitOrderIds: ['2'],
      },
    ];
    const res = await call(w, 'GET', '/accounts/:id/orders', { userId: w.a.userId, params: { id: '101' } });
    expect(listOf(closedTradeSchema).parse(res.body).data[0]!.pnl).toBe(250);
    expect(w.gateway.calls[0]!.req.type).toBe('trade-history');
  });
});

const NOW_ISO = '2026-11-21T15:00:00.000Z';
