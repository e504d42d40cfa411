import { describe, expect, it } from 'vitest';
import { AppError } from '../../../../src/domain/problems.js';
import { cancelOrder, resumeOwedLegs, watchOwedLegs } from '../../../../workers/connection-actor/cancel.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { flatten } from '../../../../workers/connection-actor/flatten.js';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { OrderModel } from '../../../../workers/connection-actor/order-model.js';
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
    expect(r).not.toHaveProperty('warning');
    expect(ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([b.tp, b.sl]);
  });

  it('a bracket entry sent as a strategy, cancelled after a partial fill: its legs never came, so a bracket-alert says the position is unprotected', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const placed = await placeOrder(ctx, newOrder({ qty: 3, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    broker.fill(Number(placed.order.orderId), 2, 5000);
    const r = await cancelOrder(ctx, cancel(placed.order.orderId));
    // In the answer too (ops probe: 200 remainderCancelled and nothing else).
    expect(r).toMatchObject({ remainderCancelled: true, removedLegIds: [], warning: expect.stringContaining('has no take-profit or stop-loss') });
    expect(events.filter((e) => e.type === 'bracket-alert')).toEqual([
      expect.objectContaining({
        orderId: placed.order.orderId,
        detail: expect.stringContaining(`entry ${placed.order.orderId} cancelled after 2 of 3 filled: the ESZ6 position from it has no take-profit or stop-loss`),
      }),
    ]);
    // A plain order's remainder: nothing to report.
    const plain = await placeOrder(ctx, newOrder({ qty: 3 }));
    broker.fill(Number(plain.order.orderId), 1, 5000);
    await cancelOrder(ctx, cancel(plain.order.orderId));
    expect(events.filter((e) => e.type === 'bracket-alert')).toHaveLength(1);
  });

  it('an entry that fills in part while its cancel is on its way: the filled part keeps its legs, or (a strategy bracket) is reported without them (faults probe: legs cancelled with the entry, or nothing said)', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const defaults = (broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults;
    // The broker fills one contract of the entry just before it takes the cancel.
    const fillingAsCancelled = () => {
      broker.handlers['order/cancelorder'] = (b) => {
        delete broker.handlers['order/cancelorder'];
        broker.fill(Number(b.orderId), 1, 5000);
        return defaults['order/cancelorder']!(b);
      };
    };
    const b = await bracket(ctx);
    fillingAsCancelled();
    const r = await cancelOrder(ctx, cancel(b.entry));
    expect(r).toMatchObject({ remainderCancelled: true, removedLegIds: [] });
    expect(ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([b.tp, b.sl]);
    expect(broker.bodies('order/cancelorder').map((x) => String(x.orderId))).toEqual([b.entry]);

    const placed = await placeOrder(ctx, newOrder({ qty: 3, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    fillingAsCancelled();
    const strategy = await cancelOrder(ctx, cancel(placed.order.orderId));
    expect(strategy).toMatchObject({ remainderCancelled: true, warning: expect.stringContaining('has no take-profit or stop-loss') });
    expect(events.filter((e) => e.type === 'bracket-alert')).toEqual([
      expect.objectContaining({ orderId: placed.order.orderId, detail: expect.stringContaining(`entry ${placed.order.orderId} cancelled after 1 of 3 filled`) }),
    ]);
  });

  it('one leg of an entry still filling is refused (409 CONFLICT), nothing sent: a re-placed survivor would not grow with the fills to come', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 1, 5000);
    const sent = broker.sent.length;
    const err = await rejected(cancelOrder(ctx, cancel(b.tp)));
    expect(err).toMatchObject({ code: 'CONFLICT', extensions: { entryId: b.entry } });
    expect(err.message).toContain(`still filling (1 of 2)`);
    expect(broker.sent.length).toBe(sent);
    // Once the entry is done (its remainder cancelled), the leg may go.
    await cancelOrder(ctx, cancel(b.entry));
    const r = await cancelOrder(ctx, cancel(b.tp));
    expect(r.replaced).toEqual({ replacedOrderId: b.sl, newOrderId: expect.any(String) });
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

  it('a re-placed leg stays a leg of its bracket after a restart (a new actor reads it from the snapshot), so the sweep of a flat position covers it', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const r = await cancelOrder(ctx, cancel(b.tp));
    const newId = r.replaced!.newOrderId;
    // What a restarted actor gets: the broker's entities in a snapshot, none of the old actor's notes.
    const restarted = (without: number[] = []) => {
      const mirror = new Mirror();
      const model = new OrderModel(mirror, broker.spec);
      const snapshot: Record<string, unknown[]> = {};
      for (const [plural, type] of [['accounts', 'account'], ['contracts', 'contract'], ['positions', 'position'], ['orders', 'order'], ['orderVersions', 'orderVersion'], ['commands', 'command'], ['fills', 'fill'], ['orderStrategies', 'orderStrategy'], ['orderStrategyLinks', 'orderStrategyLink']] as const) {
        snapshot[plural] = ctx.mirror.all(type).filter((e) => !(type === 'order' && without.includes(e.id)));
      }
      mirror.replace(snapshot);
      return model;
    };
    const model = restarted();
    expect(model.workingOrders(ACCOUNT)).toEqual([expect.objectContaining({ orderId: newId, role: 'stop_loss', bracketId: b.entry })]);
    expect(model.record(Number(b.entry))!.legs).toEqual({ takeProfit: null, stopLoss: newId });
    // The leg it replaced gone from the broker's history: its type says what it is.
    expect(restarted([Number(b.sl)]).workingOrders(ACCOUNT)).toEqual([expect.objectContaining({ orderId: newId, role: 'stop_loss' })]);
  });

  it('both legs of a filled bracket cancelled at once: the second cancels where its leg lives now (re-placed by the first), so nothing stays working', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const [first, second] = await Promise.all([cancelOrder(ctx, cancel(b.tp)), cancelOrder(ctx, cancel(b.sl))]);
    expect(first.replaced).toEqual({ replacedOrderId: b.sl, newOrderId: expect.any(String) });
    expect(second.order).toMatchObject({ orderId: first.replaced!.newOrderId, status: 'cancelled', role: 'stop_loss' });
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    // And later, from a stale list: the old id of a leg that is gone for good is 409 as before.
    expect((await rejected(cancelOrder(ctx, cancel(b.sl)))).code).toBe('ORDER_NOT_WORKING');
  });

  it('after a restart, an absolute bracket’s legs still carry the entry’s clientOrderId (from the broker’s order text, not a note)', async () => {
    const { broker, ctx } = fakeActorContext();
    const r = await placeOrder(ctx, newOrder({ clientOrderId: 'bot-7', takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    broker.fill(Number(r.order.orderId), 1, 5000);
    const mirror = new Mirror();
    const model = new OrderModel(mirror, broker.spec);
    mirror.replace(Object.fromEntries((['order', 'orderVersion', 'account', 'contract', 'fill'] as const).map((t) => [`${t}s`, ctx.mirror.all(t)])));
    expect(model.workingOrders(ACCOUNT).map((o) => [o.role, o.clientOrderId])).toEqual([
      ['take_profit', 'bot-7'],
      ['stop_loss', 'bot-7'],
    ]);
  });

  it('one leg cancelled while an exit of the whole position is on its way: the survivor is not re-placed onto the flat account', async () => {
    const { broker, ctx } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const held = broker.hold('order/placeorder');
    const exit = placeOrder(ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null }));
    await held.reached;
    const cancelling = cancelOrder(ctx, cancel(b.tp));
    await new Promise((r) => setTimeout(r, 5));
    held.release();
    broker.fill(Number((await exit).order.orderId), 2, 5000);
    const r = await cancelling;
    expect(r).toMatchObject({ replaced: null, removedLegIds: [b.sl] });
    expect(broker.bodies('order/placeorder').filter((p) => String(p.clOrdId).startsWith('rp-'))).toEqual([]);
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
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

  it('a re-placement the broker takes and then rejects is no replacement: BROKER_REJECTED, and the alert says the position is unprotected', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    broker.handlers['order/placeorder'] = (body) => {
      const id = broker.addOrder({ action: 'Sell', orderType: 'Stop', qty: 2, stopPrice: 4990, clOrdId: body.clOrdId, ordStatus: 'Rejected' });
      const [command] = broker.mirror.by('command', 'orderId', id);
      broker.mirror.apply('commandReport', 'Created', { id: 9_000_001, commandId: command!.id, commandStatus: 'RiskRejected', rejectReason: 'MaxOrderQtyLimitReached' });
      return { orderId: id };
    };
    const err = await rejected(cancelOrder(ctx, cancel(b.tp)));
    expect(err.code).toBe('BROKER_REJECTED');
    expect(err.extensions.brokerReason).toMatch(/MaxOrderQtyLimitReached/);
    expect(err.message).toMatch(/position is unprotected/);
    expect(events).toEqual([expect.objectContaining({ type: 'bracket-alert', orderId: b.sl, detail: expect.stringMatching(/rejected re-placing stop_loss .*unprotected/) })]);
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    // A rejection is final: nothing is owed for the next reconnect.
    expect(ctx.owedLegs.size).toBe(0);
  });

  it('a leg cancel that times out: alerted at once, and when the broker carries it out late (its OCO taking the other leg), the other leg is placed again at once, not at the next reconnect', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const unwatch = ctx.mirror.onChange(watchOwedLegs(ctx, 'c1'));
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const late = broker.timeOut('order/cancelorder');
    const err = await rejected(cancelOrder(ctx, cancel(b.tp)));
    expect(err.code).toBe('BROKER_TIMEOUT');
    expect(events.at(-1)).toMatchObject({ type: 'bracket-alert', orderId: b.sl, detail: expect.stringMatching(/^cancel of leg \d+ not confirmed .*: if the broker carries it out, its one-cancels-other also cancels stop_loss \d+, which is then placed again at once$/) });
    // Nothing placed while the stop still works.
    await resumeOwedLegs(ctx, ACCOUNT, 'c1');
    expect(broker.bodies('order/placeorder')).toEqual([]);
    // The broker carries the cancel out late: both legs cancelled (OCO).
    late.execute();
    ctx.mirror.apply('order', 'Updated', { id: Number(b.sl), ordStatus: 'Canceled' });
    await expect.poll(() => broker.bodies('order/placeorder').length).toBe(1);
    expect(broker.bodies('order/placeorder')[0]).toMatchObject({ clOrdId: `rp-${b.sl}`, action: 'Sell', orderType: 'Stop', stopPrice: 4990, orderQty: 2 });
    await expect.poll(() => ctx.owedLegs.size).toBe(0);
    unwatch?.();
  });

  it('a flatten owes no leg: after a leg cancel that timed out, the flatten’s own cancel of the other leg does not place it again onto the flattened account', async () => {
    const { broker, ctx } = fakeActorContext();
    const unwatch = ctx.mirror.onChange(watchOwedLegs(ctx, 'c1'));
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    const late = broker.timeOut('order/cancelorder');
    expect((await rejected(cancelOrder(ctx, cancel(b.tp)))).code).toBe('BROKER_TIMEOUT');
    late.execute();
    delete broker.handlers['order/cancelorder'];
    expect([...ctx.owedLegs.keys()]).toEqual([b.sl]);
    // The trader flattens: every working order cancelled (the stop among them), then the
    // position liquidated, its fill still on the way while the stop's cancel is reported.
    const liquidation = broker.hold('order/liquidateposition');
    const flattened = flatten(ctx, { type: 'flatten', accountId: ACCOUNT });
    await liquidation.reached;
    await new Promise((r) => setTimeout(r, 20));
    expect(broker.bodies('order/placeorder')).toEqual([]);
    liquidation.release();
    await flattened;
    await new Promise((r) => setTimeout(r, 20));
    expect(broker.bodies('order/placeorder')).toEqual([]);
    expect(ctx.owedLegs.size).toBe(0);
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    unwatch?.();
  });

  it('once the snapshot after a reconnect shows the leg still working, a timed-out cancel of its sibling owes nothing: a later cancel of that leg places nothing', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const unwatch = ctx.mirror.onChange(watchOwedLegs(ctx, 'c1'));
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    broker.timeOut('order/cancelorder');
    expect((await rejected(cancelOrder(ctx, cancel(b.tp)))).code).toBe('BROKER_TIMEOUT');
    delete broker.handlers['order/cancelorder'];
    // Before a snapshot it stays owed; the snapshot (both legs still working) settles it.
    await resumeOwedLegs(ctx, ACCOUNT, 'c1');
    expect([...ctx.owedLegs.keys()]).toEqual([b.sl]);
    await resumeOwedLegs(ctx, ACCOUNT, 'c1', { afterSnapshot: true });
    expect(ctx.owedLegs.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'bracket-alert', orderId: b.sl, detail: expect.stringMatching(/still working after the reconnect/) });
    // Its take-profit fills later; the broker's OCO cancels the stop: nothing is placed again.
    ctx.mirror.apply('order', 'Updated', { id: Number(b.sl), ordStatus: 'Canceled' });
    await new Promise((r) => setTimeout(r, 20));
    expect(broker.bodies('order/placeorder')).toEqual([]);
    unwatch?.();
  });

  it('a re-placement cut off by a lost connection is BROKER_TIMEOUT, owed, and re-placed after the reconnect, sized to the position then', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    broker.handlers['order/placeorder'] = () => {
      throw new AppError('BROKER_UNAVAILABLE', 'broker connection lost (closed)');
    };
    const err = await rejected(cancelOrder(ctx, cancel(b.tp)));
    expect(err.code).toBe('BROKER_TIMEOUT');
    expect(err.message).toMatch(/re-placed once the connection is back/);
    expect(events).toEqual([expect.objectContaining({ type: 'bracket-alert', orderId: b.sl })]);
    expect([...ctx.owedLegs.keys()]).toEqual([b.sl]);
    // Meanwhile one contract was sold: the owed stop-loss covers what is left.
    broker.fill(broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    delete broker.handlers['order/placeorder'];
    await resumeOwedLegs(ctx, ACCOUNT, 'c1', { afterSnapshot: true });
    expect(broker.bodies('order/placeorder').at(-1)).toMatchObject({ clOrdId: `rp-${b.sl}`, action: 'Sell', orderType: 'Stop', stopPrice: 4990, orderQty: 1 });
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([expect.objectContaining({ role: 'stop_loss', bracketId: b.entry, qty: 1 })]);
    expect(events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/re-placed as \d+ \(1\) once the connection was back/) });
    expect(ctx.owedLegs.size).toBe(0);
  });

  it('an owed leg the broker got before the drop is adopted, not placed twice; one whose position is gone is dropped', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const b = await bracket(ctx);
    broker.fill(Number(b.entry), 2, 5000);
    let reached = 0;
    broker.handlers['order/placeorder'] = (body) => {
      reached = broker.addOrder({ action: 'Sell', orderType: 'Stop', qty: 2, stopPrice: 4990, clOrdId: body.clOrdId });
      throw new AppError('BROKER_TIMEOUT', 'broker did not answer order/placeorder in time');
    };
    expect((await rejected(cancelOrder(ctx, cancel(b.tp)))).code).toBe('BROKER_TIMEOUT');
    delete broker.handlers['order/placeorder'];
    await resumeOwedLegs(ctx, ACCOUNT, 'c1');
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(ctx.model.workingOrders(ACCOUNT)).toEqual([expect.objectContaining({ orderId: String(reached), role: 'stop_loss', bracketId: b.entry })]);
    expect(events.at(-1)?.type === 'bracket-alert' && events.at(-1)).toMatchObject({ detail: expect.stringMatching(/reached the broker before the connection was lost/) });

    // A second bracket, its re-placement cut off, and the position closed before the reconnect.
    const { broker: broker2, ctx: ctx2, events: events2 } = fakeActorContext();
    const b2 = await bracket(ctx2);
    broker2.fill(Number(b2.entry), 2, 5000);
    broker2.handlers['order/placeorder'] = () => {
      throw new AppError('BROKER_UNAVAILABLE', 'broker connection lost (closed)');
    };
    await rejected(cancelOrder(ctx2, cancel(b2.sl)));
    delete broker2.handlers['order/placeorder'];
    broker2.fill(broker2.addOrder({ action: 'Sell', orderType: 'Market', qty: 2 }), 2, 5001);
    const sent = broker2.bodies('order/placeorder').length;
    await resumeOwedLegs(ctx2, ACCOUNT, 'c1');
    expect(broker2.bodies('order/placeorder')).toHaveLength(sent);
    expect(events2.at(-1)).toMatchObject({ detail: `take_profit ${b2.tp} not re-placed: the ESZ6 position it protected is flat now` });
  });
});
