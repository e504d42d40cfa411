import { describe, expect, it } from 'vitest';
import { cancelOrder } from '../../../../workers/connection-actor/cancel.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, fakeActorContext, newOrder } from '../../../support/broker-link.js';
import { rejected } from '../../../support/errors.js';

const cancel = (orderId: string) => ({ type: 'cancel-order' as const, accountId: ACCOUNT, orderId });

/** A placed absolute bracket: entry, take-profit and stop-loss ids. */
async function bracket(ctx: ReturnType<typeof fakeActorContext>['ctx']) {
  const r = await placeOrder(ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
  return { entry: r.order.orderId, tp: r.legs!.takeProfit!.orderId, sl: r.legs!.stopLoss!.orderId };
}

describe('cancelOrder', () => {
  it('cancels a single working order and answers its final record', async () => {
    const { broker, ctx } = fakeActorContext();
    const placed = await placeOrder(ctx, newOrder());
    const r = await cancelOrder(ctx, cancel(placed.order.orderId));
    expect(broker.bodies('order/cancelorder')).toEqual([{ orderId: Number(placed.order.orderId), isAutomated: true }]);
    expect(r).toMatchObject({ order: { status: 'cancelled' }, removedLegIds: [], replaced: null, remainderCancelled: false });
  });

  it('an unknown id is 404, a final order 409 ORDER_NOT_WORKING carrying its state; nothing is sent', async () => {
    const { broker, ctx } = fakeActorContext();
    expect((await rejected(cancelOrder(ctx, cancel('424242')))).code).toBe('NOT_FOUND');
    const filled = broker.addOrder({ qty: 1 });
    broker.fill(filled, 1, 5000);
    const err = await rejected(cancelOrder(ctx, cancel(String(filled))));
    expect(err.code).toBe('ORDER_NOT_WORKING');
    expect(err.extensions.order).toMatchObject({ status: 'filled' });
    expect(broker.bodies('order/cancelorder')).toEqual([]);
  });

  it('an unfilled entry takes its legs with it', async () => {
    const { ctx } = fakeActorContext();
    const b = await bracket(ctx);
    const r = await cancelOrder(ctx, cancel(b.entry));
    expect(r.order.status).toBe('cancelled');
    expect(r.removedLegIds).toEqual([b.tp, b.sl]);
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
  });

  it('a partly filled entry: only the remainder is cancelled, the position keeps its legs', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 1, 5000);
    const r = await cancelOrder(ctx, cancel(b.entry));
    expect(r).toMatchObject({ remainderCancelled: true, removedLegIds: [] });
    expect(ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([b.tp, b.sl]);
  });

  it('one leg of a filled bracket: the broker’s OCO takes the other down, which is re-placed under a new id', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const r = await cancelOrder(ctx, cancel(b.tp));
    expect(r.order).toMatchObject({ orderId: b.tp, status: 'cancelled' });
    expect(r.replaced).toEqual({ replacedOrderId: b.sl, newOrderId: expect.any(String) });
    const [replacement] = broker.bodies('order/placeorder');
    expect(replacement).toMatchObject({ clOrdId: `rp-${b.sl}`, action: 'Sell', orderType: 'Stop', stopPrice: 4990, orderQty: 2 });
    // The position is protected again, and the new leg says what it is.
    const working = ctx.model.workingOrders(ACCOUNT);
    expect(working).toEqual([expect.objectContaining({ orderId: r.replaced!.newOrderId, role: 'stop_loss', bracketId: b.entry })]);
    expect(ctx.model.record(Number(b.entry))!.legs).toEqual({ takeProfit: null, stopLoss: r.replaced!.newOrderId });
  });

  it('cancels a lingering sibling itself when the broker has no OCO, then re-places it', async () => {
    const { broker, ctx } = fakeActorContext(50);
    broker.oco = false;
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const r = await cancelOrder(ctx, cancel(b.sl));
    expect(broker.bodies('order/cancelorder').map((x) => String(x.orderId))).toEqual([b.sl, b.tp]);
    expect(r.replaced?.replacedOrderId).toBe(b.tp);
  });

  it('when the survivor cannot be re-placed: BROKER_REJECTED and a bracket alert for the unprotected position', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    broker.handlers['order/placeorder'] = () => ({ failureReason: 'RiskRejected', failureText: 'halted' });
    const err = await rejected(cancelOrder(ctx, cancel(b.tp)));
    expect(err.code).toBe('BROKER_REJECTED');
    expect(err.extensions.brokerReason).toMatch(/RiskRejected: halted/);
    expect(events).toEqual([expect.objectContaining({ type: 'bracket-alert', accountId: ACCOUNT, orderId: b.sl })]);
  });

  it('a cancel the broker accepts but never confirms is BROKER_TIMEOUT with the order as it stands', async () => {
    const { broker, ctx } = fakeActorContext(30);
    const placed = await placeOrder(ctx, newOrder());
    broker.handlers['order/cancelorder'] = () => ({ commandId: 1 });
    const err = await rejected(cancelOrder(ctx, cancel(placed.order.orderId)));
    expect(err.code).toBe('BROKER_TIMEOUT');
    expect(err.extensions.order).toMatchObject({ status: 'working' });
  });

  it('an order that filled while the cancel was on its way is ORDER_NOT_WORKING, not an error of the broker', async () => {
    const { broker, ctx } = fakeActorContext();
    const placed = await placeOrder(ctx, newOrder());
    broker.handlers['order/cancelorder'] = (body) => {
      broker.fill(body.orderId, 1, 5000);
      return { failureReason: 'UnknownReason', failureText: 'too late' };
    };
    const err = await rejected(cancelOrder(ctx, cancel(placed.order.orderId)));
    expect(err.code).toBe('ORDER_NOT_WORKING');
    expect(err.extensions.order).toMatchObject({ status: 'filled' });
  });
});
