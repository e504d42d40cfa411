import { describe, expect, it } from 'vitest';
import { flatten } from '../../../../workers/connection-actor/flatten.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, fakeActorContext, newOrder } from '../../../support/broker-link.js';
import { rejected } from '../../../support/errors.js';
import { toErrorData } from '../../../../src/domain/problems.js';

describe('placeOrder: single orders', () => {
  it('sends one automated placeorder under the clOrdId and answers the record with what the client asked', async () => {
    const { broker, ctx } = fakeActorContext();
    const req = newOrder({ clientOrderId: 'my-label' });
    const result = await placeOrder(ctx, req);
    expect(broker.bodies('order/placeorder')).toEqual([
      expect.objectContaining({ accountId: 7, accountSpec: 'DEMO7', clOrdId: req.clOrdId, action: 'Buy', orderType: 'Limit', price: 5000, isAutomated: true }),
    ]);
    expect(result.reconciled).toBe(false);
    expect(result.order).toMatchObject({ accountId: ACCOUNT, symbol: 'ESZ6', requestedSymbol: 'ES1!', status: 'working', role: 'single', clientOrderId: 'my-label' });
    expect(result.brokerMs).toBeGreaterThanOrEqual(0);
  });

  it('a clOrdId the broker already has is the answer: nothing is sent twice', async () => {
    const { broker, ctx } = fakeActorContext();
    const req = newOrder();
    const first = await placeOrder(ctx, req);
    const retry = await placeOrder(ctx, req);
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(retry).toMatchObject({ reconciled: true, brokerMs: 0, order: { orderId: first.order.orderId } });
  });

  it('the key’s order at the broker is not the answer of another request under that key (after a 504 no answer was stored): IDEMPOTENCY_KEY_REUSED, nothing sent', async () => {
    const { broker, ctx } = fakeActorContext();
    const first = await placeOrder(ctx, newOrder({ qty: 1, clOrdId: 'tg-k-same' }));
    for (const other of [newOrder({ qty: 2, clOrdId: 'tg-k-same' }), newOrder({ qty: 1, side: 'sell', clOrdId: 'tg-k-same' })]) {
      const err = await rejected(placeOrder(ctx, other));
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', extensions: { order: { orderId: first.order.orderId } } });
    }
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a webhook alert whose id placed another order (an alert sent again after a 504, a reversal\'s open smaller than it): 422 that does not advise a new id (money probe: "use a new key" would have traded it twice)', async () => {
    const { broker, ctx } = fakeActorContext();
    await placeOrder(ctx, { ...newOrder({ qty: 1, clOrdId: 'tg-alert-1' }), origin: 'webhook' });
    const err = await rejected(placeOrder(ctx, { ...newOrder({ qty: 2, clOrdId: 'tg-alert-1' }), origin: 'webhook' }));
    expect(err.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(err.message).toMatch(/^an earlier alert with this id placed order \d+: buy 1 ESZ6 .* \(quantity\): nothing was placed\. If this is that alert sent again .* do not send it with a new id/);
    expect(err.message).not.toContain('use a new key');
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a retry under the key with another price, order type or bracket is not that order either: 422 naming what differs, nothing noted, nothing sent (ops probe: a plain order answered as a bracket entry)', async () => {
    const { broker, ctx } = fakeActorContext();
    const plain = newOrder({ clOrdId: 'tg-k-plain', price: 5000 });
    const id = broker.addOrder({ clOrdId: plain.clOrdId, price: 5000 });
    const cases: [Partial<typeof plain>, string][] = [
      [{ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }, 'a bracket asked for, none at the broker'],
      [{ price: 5001 }, 'price'],
      [{ orderType: 'market', price: null }, 'order type'],
    ];
    for (const [change, what] of cases) {
      const err = await rejected(placeOrder(ctx, newOrder({ ...plain, ...change })));
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', extensions: { order: { orderId: String(id), role: 'single' } } });
      expect(err.message).toContain(`is not this request's (${what})`);
    }
    expect(ctx.model.noteOf(id)).toBeUndefined();
    // Time in force (re-probe: day answered as gtc).
    const tif = await rejected(placeOrder(ctx, newOrder({ ...plain, timeInForce: plain.timeInForce === 'day' ? 'gtc' : 'day' })));
    expect(tif.message).toContain("(time in force)");
    // The request it was: reconciled, as a plain order.
    const same = await placeOrder(ctx, plain);
    expect(same).toMatchObject({ reconciled: true, order: { orderId: String(id), role: 'single', legs: { takeProfit: null, stopLoss: null } } });
    expect(broker.bodies('order/placeorder')).toEqual([]);
    expect(broker.bodies('order/placeoso')).toEqual([]);
  });

  it('a retry with other fixed leg prices, or another clientOrderId than the first attempt noted, is not that order (re-probe: answered as the original, relabelled)', async () => {
    const { broker, ctx } = fakeActorContext();
    const req = newOrder({ clOrdId: 'tg-k-legs', clientOrderId: 'alpha', takeProfit: { price: 5010 }, stopLoss: { price: 4990 } });
    const first = await placeOrder(ctx, req);
    for (const [change, what] of [
      [{ takeProfit: { price: 5020 } }, 'take-profit price'],
      [{ stopLoss: { price: 4980 } }, 'stop-loss price'],
      [{ clientOrderId: 'beta' }, 'clientOrderId'],
    ] as const) {
      const err = await rejected(placeOrder(ctx, newOrder({ ...req, ...change })));
      expect(err.code).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(err.message).toContain(`(${what})`);
    }
    expect(await placeOrder(ctx, req)).toMatchObject({ reconciled: true, order: { orderId: first.order.orderId, clientOrderId: 'alpha' } });
    expect(broker.bodies('order/placeoso')).toHaveLength(1);
  });

  it('an order the broker has but tradegate never noted (a timed-out first attempt, a crash) answers with what the request says', async () => {
    const { broker, ctx } = fakeActorContext();
    const req = newOrder({ clientOrderId: 'mine', takeProfit: { price: 5010 }, stopLoss: { price: 4990 } });
    const entry = broker.addOrder({ clOrdId: req.clOrdId, price: 5000 });
    const tp = broker.addOrder({ action: 'Sell', orderType: 'Limit', price: 5010, parentId: entry, ordStatus: 'Suspended' });
    const sl = broker.addOrder({ action: 'Sell', orderType: 'Stop', stopPrice: 4990, parentId: entry, ordStatus: 'Suspended' });
    const r = await placeOrder(ctx, req);
    expect(broker.bodies('order/placeoso')).toEqual([]);
    expect(r.order).toMatchObject({ orderId: String(entry), requestedSymbol: 'ES1!', clientOrderId: 'mine', role: 'entry', bracketId: String(entry), legs: { takeProfit: String(tp), stopLoss: String(sl) } });
    expect(r.legs?.takeProfit).toMatchObject({ orderId: String(tp), requestedSymbol: 'ES1!', role: 'take_profit', bracketId: String(entry) });
    expect(r.legs?.stopLoss).toMatchObject({ orderId: String(sl), requestedSymbol: 'ES1!', role: 'stop_loss', bracketId: String(entry) });
    expect(r.reconciled).toBe(true);
  });

  it('a retry arriving while the first attempt waits on the broker waits for it instead of racing it', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.hold('order/placeorder');
    const req = newOrder();
    const first = placeOrder(ctx, req);
    await held.reached;
    // The front timed out and the client retried: the mirror does not know the order yet.
    const retry = placeOrder(ctx, req);
    held.release();
    const [a, b] = await Promise.all([first, retry]);
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(b.order.orderId).toBe(a.order.orderId);
    expect(b.reconciled).toBe(true);
    expect(ctx.placing.size).toBe(0);
  });

  it('refuses before sending while disconnected, or on an inactive or foreign account', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.connected = false;
    expect((await rejected(placeOrder(ctx, newOrder()))).code).toBe('BROKER_UNAVAILABLE');
    broker.connected = true;
    expect((await rejected(placeOrder(ctx, newOrder({ accountId: '99' })))).code).toBe('NOT_FOUND');
    broker.mirror.apply('account', 'Updated', { id: 7, name: 'DEMO7', active: false });
    ctx.model.refreshAccounts();
    expect((await rejected(placeOrder(ctx, newOrder()))).code).toBe('ACCOUNT_INACTIVE');
    expect(broker.sent).toEqual([]);
  });

  it('a refusal in a 200 answer, an answer without an order id, or a rejected order is BROKER_REJECTED with the reason', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.handlers['order/placeorder'] = () => ({ failureReason: 'RiskRejected', failureText: 'max position' });
    const refused = await rejected(placeOrder(ctx, newOrder()));
    expect(refused).toMatchObject({ code: 'BROKER_REJECTED', extensions: { brokerReason: 'RiskRejected: max position' } });

    broker.handlers['order/placeorder'] = () => ({});
    expect((await rejected(placeOrder(ctx, newOrder()))).extensions.brokerReason).toBe('no orderId');

    broker.handlers['order/placeorder'] = (b) => {
      const id = broker.addOrder({ clOrdId: b.clOrdId, ordStatus: 'Rejected' });
      broker.mirror.apply('executionReport', 'Created', { id: 999, orderId: id, execType: 'Rejected', rejectReason: 'OutsideTradingHours', text: 'market closed' });
      return { orderId: id };
    };
    const refusedOrder = await rejected(placeOrder(ctx, newOrder()));
    expect(refusedOrder.code).toBe('BROKER_REJECTED');
    expect(refusedOrder.extensions).toMatchObject({ brokerReason: 'OutsideTradingHours: market closed', order: { status: 'rejected' } });
  });
});

describe('placeOrder: brackets', () => {
  it('absolute legs go as one placeoso: take-profit Limit, stop-loss Stop, linked under the entry', async () => {
    const { broker, ctx } = fakeActorContext();
    const result = await placeOrder(ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    const [body] = broker.bodies('order/placeoso');
    expect(body).toMatchObject({ bracket1: { action: 'Sell', orderType: 'Limit', price: 5010 }, bracket2: { action: 'Sell', orderType: 'Stop', stopPrice: 4990 } });
    expect(result.order).toMatchObject({ role: 'entry', bracketId: result.order.orderId });
    expect(result.legs?.takeProfit).toMatchObject({ role: 'take_profit', price: 5010, bracketId: result.order.orderId, status: 'pending' });
    expect(result.legs?.stopLoss).toMatchObject({ role: 'stop_loss', stopPrice: 4990 });
    expect(result.order.legs).toEqual({ takeProfit: result.legs!.takeProfit!.orderId, stopLoss: result.legs!.stopLoss!.orderId });
  });

  it('relative legs start an order strategy with signed point offsets anchored to the fill', async () => {
    const { broker, ctx } = fakeActorContext();
    const result = await placeOrder(ctx, newOrder({ side: 'sell', orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    const [body] = broker.bodies('orderstrategy/startorderstrategy');
    expect(JSON.parse(body!.params).brackets[0]).toMatchObject({ profitTarget: -10, stopLoss: 5 });
    expect(result.order).toMatchObject({ role: 'entry', side: 'sell' });
  });

  it("the legs an order strategy creates at the broker show their entry's requestedSymbol and clientOrderId", async () => {
    const { broker, ctx } = fakeActorContext();
    const result = await placeOrder(ctx, newOrder({ orderType: 'market', price: null, clientOrderId: 'bot-7', takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    const entry = Number(result.order.orderId);
    broker.fill(entry, 1, 5000);
    // The broker's own legs: linked to the strategy, never placed (or noted) by the service.
    const [link] = broker.mirror.by('orderStrategyLink', 'orderId', entry);
    for (const leg of [{ orderType: 'Limit', price: 5010 }, { orderType: 'Stop', stopPrice: 4995 }]) {
      const id = broker.addOrder({ action: 'Sell', ...leg });
      broker.mirror.apply('orderStrategyLink', 'Created', { id: id + 100_000, orderStrategyId: link!.orderStrategyId, orderId: id });
    }
    const legs = ctx.model.workingOrders(ACCOUNT);
    expect(legs.map((o) => o.role).sort()).toEqual(['stop_loss', 'take_profit']);
    for (const leg of legs) expect(leg).toMatchObject({ bracketId: String(entry), requestedSymbol: 'ES1!', clientOrderId: 'bot-7' });
  });

  it('a mixed bracket converts the absolute leg into an offset from the entry price, and needs one', async () => {
    const { broker, ctx } = fakeActorContext();
    await placeOrder(ctx, newOrder({ orderType: 'stop', price: null, stopPrice: 5004, takeProfit: { price: 5010 }, stopLoss: { offsetPoints: 3 } }));
    expect(JSON.parse(broker.bodies('orderstrategy/startorderstrategy')[0]!.params).brackets[0]).toMatchObject({ profitTarget: 6, stopLoss: -3 });
    const market = newOrder({ orderType: 'market', price: null, takeProfit: { price: 5010 }, stopLoss: { offsetPoints: 3 } });
    expect((await rejected(placeOrder(ctx, market))).code).toBe('VALIDATION_FAILED');
  });

  it('a strategy that fails at the broker is BROKER_REJECTED; one whose entry never shows is BROKER_TIMEOUT', async () => {
    const { broker, ctx } = fakeActorContext(50);
    broker.handlers['orderstrategy/startorderstrategy'] = () => {
      broker.mirror.apply('orderStrategy', 'Created', { id: 500, accountId: 7, action: 'Buy', status: 'ExecutionFailed', failureMessage: 'not enough margin' });
      return { orderStrategy: { id: 500 } };
    };
    const rel = newOrder({ orderType: 'market', price: null, takeProfit: { offsetPoints: 2 } });
    expect(await rejected(placeOrder(ctx, rel))).toMatchObject({ code: 'BROKER_REJECTED', extensions: { brokerReason: 'not enough margin' } });
    broker.handlers['orderstrategy/startorderstrategy'] = () => ({ orderStrategy: { id: 501 } });
    expect((await rejected(placeOrder(ctx, newOrder({ orderType: 'market', price: null, takeProfit: { offsetPoints: 2 } })))).code).toBe('BROKER_TIMEOUT');
  });
});

describe('placeOrder: an attempt the broker did not answer in time', () => {
  it('leaves the outcome unknown: a retry sends nothing, waits for the late answer and answers that order', async () => {
    const { broker, ctx } = fakeActorContext(200, { waitMs: 1000 });
    const late = broker.timeOut('order/placeorder');
    const req = newOrder({ clientOrderId: 'mine' });
    expect((await rejected(placeOrder(ctx, req))).code).toBe('BROKER_TIMEOUT');
    const retry = placeOrder(ctx, req);
    late.execute();
    late.answer();
    const r = await retry;
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(r).toMatchObject({ reconciled: true, order: { requestedSymbol: 'ES1!', clientOrderId: 'mine', status: 'working' } });
    expect(ctx.unknown.size).toBe(0);
  });

  it('a late answer naming an order the mirror shows under no clOrdId is still the answer', async () => {
    const { broker, ctx } = fakeActorContext(200, { waitMs: 1000 });
    broker.handlers['order/placeorder'] = () => ({ orderId: broker.addOrder({ price: 5000 }) });
    const late = broker.timeOut('order/placeorder');
    const req = newOrder();
    await rejected(placeOrder(ctx, req));
    const retry = placeOrder(ctx, req);
    late.execute();
    late.answer();
    const r = await retry;
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(r).toMatchObject({ reconciled: true, order: { orderId: expect.any(String), requestedSymbol: 'ES1!' } });
  });

  it('still unknown at the retry’s deadline: BROKER_TIMEOUT again and nothing sent; the next retry after the answer reconciles', async () => {
    const { broker, ctx } = fakeActorContext(200, { waitMs: 30 });
    const late = broker.timeOut('order/placeorder');
    const req = newOrder();
    await rejected(placeOrder(ctx, req));
    const again = await rejected(placeOrder(ctx, req));
    expect(toErrorData(again)).toMatchObject({ code: 'BROKER_TIMEOUT', retryable: true });
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    late.execute();
    late.answer();
    const r = await placeOrder(ctx, req);
    expect(r.reconciled).toBe(true);
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a late refusal means nothing was placed: the retry places the order', async () => {
    const { broker, ctx } = fakeActorContext(200, { waitMs: 1000 });
    const late = broker.timeOut('order/placeorder');
    const req = newOrder();
    await rejected(placeOrder(ctx, req));
    const retry = placeOrder(ctx, req);
    await new Promise((r) => setImmediate(r));
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    late.refuse(400, 'No usable value for symbol');
    const r = await retry;
    expect(r.reconciled).toBe(false);
    expect(broker.bodies('order/placeorder')).toHaveLength(2);
  });

  it('a strategy whose entry did not show in time: a retry waits for the entry and never starts a second strategy', async () => {
    const { broker, ctx } = fakeActorContext(50, { waitMs: 1000 });
    let strategy: Record<string, any> | undefined;
    broker.handlers['orderstrategy/startorderstrategy'] = (b) => {
      strategy = { id: 900, accountId: 7, action: b.action, status: 'ActiveStrategy', uuid: b.uuid };
      broker.mirror.apply('orderStrategy', 'Created', strategy);
      return { orderStrategy: { id: 900 } };
    };
    const req = newOrder({ orderType: 'market', price: null, takeProfit: { offsetPoints: 2 } });
    expect((await rejected(placeOrder(ctx, req))).code).toBe('BROKER_TIMEOUT');
    const retry = placeOrder(ctx, req);
    const entry = broker.addOrder({ orderType: 'Market' });
    broker.mirror.apply('orderStrategyLink', 'Created', { id: 901, orderStrategyId: 900, orderId: entry });
    const r = await retry;
    expect(broker.bodies('orderstrategy/startorderstrategy')).toHaveLength(1);
    expect(r).toMatchObject({ reconciled: true, order: { orderId: String(entry), role: 'entry', requestedSymbol: 'ES1!' } });
  });
});

describe('placeOrder: reduce-only (a webhook partial exit)', () => {
  it('is sent while the account holds at least its quantity on the other side', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 2 }), 2, 5000);
    const r = await placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null }), reduceOnly: true });
    expect(r.order).toMatchObject({ side: 'sell', qty: 2 });
    expect(broker.bodies('order/placeorder')).toEqual([expect.objectContaining({ action: 'Sell', orderQty: 2 })]);
  });

  it.each([
    ['flat', 0, 'sell', 1, 'a partial exit may only reduce the position: the account holds no ESZ6, the order would sell 1'],
    ['long 1, selling 2', 1, 'sell', 2, 'a partial exit may only reduce the position: the account is long 1 ESZ6, the order would sell 2'],
    ['long 1, buying', 1, 'buy', 1, 'a partial exit may only reduce the position: the account is long 1 ESZ6, the order would buy 1'],
  ] as const)('is refused with SYMBOL_MISMATCH and nothing sent when %s', async (_case, held, side, qty, message) => {
    const { broker, ctx } = fakeActorContext();
    if (held) broker.fill(broker.addOrder({ qty: held }), held, 5000);
    const sentBefore = broker.bodies('order/placeorder').length;
    await expect(placeOrder(ctx, { ...newOrder({ side, qty, orderType: 'market', price: null }), reduceOnly: true })).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message });
    expect(broker.bodies('order/placeorder')).toHaveLength(sentBefore);
  });
});

describe('placeOrder: reduce-only in flight', () => {
  it('two partial exits of a long 1 arriving together: the first goes, the second is refused while it is on its way', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 1 }), 1, 5000);
    const held = broker.hold('order/placeorder');
    const first = placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true });
    await held.reached;
    await expect(placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true })).rejects.toMatchObject({
      code: 'SYMBOL_MISMATCH',
      message: 'a partial exit may only reduce the position: the account is long 1 ESZ6 (1 already on the way out or resting to go), the order would sell 1',
    });
    held.release();
    await first;
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(ctx.reducing.size).toBe(0);
  });

  it('an exit resting on the position counts too: long 2 with an API stop sell of 2 resting takes no partial exit (both filling would leave it short)', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 2 }), 2, 5000);
    const exit = await placeOrder(ctx, newOrder({ side: 'sell', qty: 2, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    expect(exit.order.status).toBe('working');
    await expect(placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true })).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH' });
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a partial exit counts an ordinary exit sent just before it: it waits for the broker to have it, then sees the position it left', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 2 }), 2, 5000);
    const held = broker.hold('order/placeorder');
    const apiExit = placeOrder(ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null }));
    await held.reached;
    const partial = placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true });
    held.release();
    const placed = await apiExit;
    broker.fill(Number(placed.order.orderId), 2, 5000);
    await expect(partial).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: 'a partial exit may only reduce the position: the account holds no ESZ6, the order would sell 1' });
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a partial exit sent while a flatten runs waits for it, and sees the flat account it leaves', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 2 }), 2, 5000);
    const held = broker.hold('order/liquidateposition');
    const flattening = flatten(ctx, { type: 'flatten', accountId: ACCOUNT });
    await held.reached;
    const partial = placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true });
    held.release();
    await flattening;
    await expect(partial).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: 'a partial exit may only reduce the position: the account holds no ESZ6, the order would sell 1' });
    expect(broker.bodies('order/placeorder')).toHaveLength(0);
  });

  it('a partial exit after an ordinary exit whose outcome is unknown (broker timeout) is refused: that exit may still fill', async () => {
    const { broker, ctx } = fakeActorContext(50, { waitMs: 20 });
    broker.fill(broker.addOrder({ qty: 2 }), 2, 5000);
    broker.timeOut('order/placeorder');
    expect((await rejected(placeOrder(ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null })))).code).toBe('BROKER_TIMEOUT');
    const err = await rejected(placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true }));
    expect(err).toMatchObject({ code: 'CONFLICT' });
    expect(err.message).toContain('1 still has no outcome from the broker');
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
  });

  it('a refused or failed partial exit takes nothing off what the next one may reduce', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.fill(broker.addOrder({ qty: 1 }), 1, 5000);
    broker.handlers['order/placeorder'] = () => ({ failureReason: 'RiskRejected', failureText: 'no' });
    await expect(placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true })).rejects.toMatchObject({ code: 'BROKER_REJECTED' });
    expect(ctx.reducing.size).toBe(0);
    delete broker.handlers['order/placeorder'];
    await expect(placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true })).resolves.toMatchObject({ order: { side: 'sell' } });
  });
  it('a partial exit whose broker answer timed out keeps counting until its outcome is known', async () => {
    const exit = () => placeOrder(ctx, { ...newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null }), reduceOnly: true });
    const { broker, ctx } = fakeActorContext(50, { waitMs: 20 });
    broker.fill(broker.addOrder({ qty: 1 }), 1, 5000);
    const late = broker.timeOut('order/placeorder');
    await expect(exit()).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
    // It may still take the last contract off: another partial exit is refused meanwhile.
    await expect(exit()).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: expect.stringMatching(/1 already on the way out/) });
    // The broker's late refusal says nothing was placed: the next one goes.
    late.refuse(400, 'no');
    expect(ctx.reducing.size).toBe(0);
    await expect(exit()).resolves.toMatchObject({ order: { side: 'sell' } });
  });
});
