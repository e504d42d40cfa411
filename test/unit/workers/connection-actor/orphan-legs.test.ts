import { describe, expect, it } from 'vitest';
import { OrphanLegs } from '../../../../workers/connection-actor/orphan-legs.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { cancelOrder } from '../../../../workers/connection-actor/cancel.js';
import { flatten } from '../../../../workers/connection-actor/flatten.js';
import { ACCOUNT, CONTRACT, fakeActorContext, newOrder } from '../../../support/broker-link.js';

const GRACE_MS = 20;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fake actor context with the orphan sweep listening, as the actor wires it. */
function setup(graceMs = GRACE_MS) {
  const { broker, ctx, events } = fakeActorContext();
  const orphans = new OrphanLegs(ctx, 'c1', graceMs);
  ctx.makeRoom = (accountId, coming) => orphans.makeRoom(accountId, coming);
  ctx.roomUsed = async (accountId, coming, failed) => (failed ? orphans.undoRoom(accountId, coming, failed.why, failed.outcomeUnknown, 0, failed.sentQty) : orphans.roomTaken(coming, accountId));
  broker.mirror.onChange((c) => orphans.onChange(c));
  return { broker, ctx, events, orphans };
}

/** A filled bracket: long 1 at 5000, its take-profit and stop-loss working. */
async function filledBracket(s: ReturnType<typeof setup>) {
  const placed = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
  s.broker.fill(Number(placed.order.orderId), 1, 5000);
  expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.role).sort()).toEqual(['stop_loss', 'take_profit']);
  return placed;
}

/** The price reaches the stop-loss `stopId` (filling `qty`) just as the first cut of a leg (cancel or modify) reaches the broker. */
function stopFillsAtFirstCut(s: ReturnType<typeof setup>, stopId: number, qty: number): { hit: boolean } {
  const defaults = (s.broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults;
  const cut = { hit: false };
  for (const endpoint of ['order/cancelorder', 'order/modifyorder']) {
    s.broker.handlers[endpoint] = (b) => {
      if (!cut.hit) {
        cut.hit = true;
        s.broker.fill(stopId, qty, 4990);
      }
      return defaults[endpoint]!(b);
    };
  }
  return cut;
}

/**
 * The price reaches the stop-loss `stopId` just after the legs are cut for an exit (both modifies
 * applied): the cut stop fills whole, and the broker's OCO cancels the take-profit `tpId` (as the
 * paper broker did for re-probe 3).
 */
function cutStopFillsWhole(s: ReturnType<typeof setup>, stopId: number, tpId: number): void {
  const defaults = (s.broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults;
  let cuts = 0;
  s.broker.handlers['order/modifyorder'] = (b) => {
    const answer = defaults['order/modifyorder']!(b);
    if (++cuts === 2) {
      const open = Number(s.broker.mirror.latestVersion(stopId)!.orderQty);
      s.broker.fill(stopId, open, 4990);
      s.broker.mirror.apply('order', 'Updated', { ...s.broker.mirror.get('order', tpId)!, ordStatus: 'Canceled' });
    }
    return answer;
  };
}

describe('orphaned bracket legs', () => {
  it('an exit whose position shrank below it while it was on its way is cancelled once placed: filling, it would open the other way (final probe: two exits of 2 on long 3 at a slow broker left a sell 2 on long 1)', async () => {
    const s = setup();
    const held = s.broker.addOrder({ qty: 2 });
    s.broker.fill(held, 2, 5000);
    const answer = s.broker.hold('order/placeorder');
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, price: 5010 }));
    await answer.reached;
    // Another exit fills first: long 1, while this one is still on its way.
    const other = s.broker.addOrder({ action: 'Sell', orderType: 'Market' });
    s.broker.fill(other, 1, 5000);
    await pause(GRACE_MS * 3);
    answer.release();
    const placed = await exit;
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([placed.order.orderId]);
    expect(s.events).toEqual([expect.objectContaining({ type: 'bracket-alert', orderId: placed.order.orderId, detail: expect.stringMatching(/cancelled: the position it was to reduce is long 1 now/) })]);
  });

  it('an exit whose placement timed out and that the broker placed late, on a position another exit took below it meanwhile, is cancelled too (final probe: it was not known as an exit, rested on long 1 and filled into short 2)', async () => {
    const s = setup();
    const held = s.broker.addOrder({ qty: 2 });
    s.broker.fill(held, 2, 5000);
    const late = s.broker.timeOut('order/placeorder');
    await expect(placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, price: 5010 }))).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
    const other = s.broker.addOrder({ action: 'Sell', orderType: 'Market' });
    s.broker.fill(other, 1, 5000);
    await pause(GRACE_MS * 3);
    late.execute();
    late.answer();
    await pause(GRACE_MS * 5);
    const exitId = s.ctx.model.workingOrders(ACCOUNT).length === 0 ? undefined : s.ctx.model.workingOrders(ACCOUNT)[0]!.orderId;
    expect(exitId, 'nothing left working').toBeUndefined();
    expect(s.broker.bodies('order/cancelorder')).toHaveLength(1);
    expect(s.events).toEqual([expect.objectContaining({ type: 'bracket-alert', detail: expect.stringMatching(/cancelled: the position it was to reduce is long 1 now/) })]);
  });

  it('a resting partial exit whose position went flat (its stop hit) is cancelled: filling, it would open the other way', async () => {
    const s = setup();
    const held = s.broker.addOrder({ qty: 2 });
    s.broker.fill(held, 2, 5000);
    const partial = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, price: 5008, reduceOnly: true } as never));
    // A resting sell larger than the position stays: the trader's own order to go short, not an exit.
    const own = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 3, price: 5020 }));
    const stop = s.broker.addOrder({ action: 'Sell', orderType: 'Market' });
    s.broker.fill(stop, 2, 4990);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([partial.order.orderId]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([own.order.orderId]);
    expect(s.events).toEqual([expect.objectContaining({ type: 'bracket-alert', orderId: partial.order.orderId, detail: expect.stringMatching(/^partial exit \d+ \(sell 1 ESZ6\) cancelled: the position it was to reduce is flat now/) })]);
  });

  it('a position closed by an ordinary opposite order gets its legs cancelled at once (no grace: a stop firing meanwhile would open a short), with one bracket-alert', async () => {
    // A grace far longer than the test: only a sweep that does not wait for it passes.
    const s = setup(60_000);
    const placed = await filledBracket(s);
    const exit = s.broker.addOrder({ action: 'Sell', orderType: 'Market' });
    s.broker.fill(exit, 1, 5001);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    await pause(GRACE_MS * 5);
    // The first cancel takes its OCO sibling along (as Tradovate does): one request.
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([placed.legs!.takeProfit!.orderId]);
    expect(s.ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    expect(s.events).toEqual([
      expect.objectContaining({
        type: 'bracket-alert', accountId: ACCOUNT, orderId: placed.order.orderId,
        detail: `take_profit ${placed.legs!.takeProfit!.orderId} cancelled (entry ${placed.order.orderId}): another order left the ESZ6 position flat`,
      }),
    ]);
  });

  it('a resting partial exit makes room for itself: long 3 with a take-profit for 3 and a limit sell of 1 cuts the take-profit to 2, so one move through both cannot open a short', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, price: 5007.5, reduceOnly: true } as never));
    expect(exit.order.status).toBe('working');
    // Cut before the exit was sent: no moment with both working at full size.
    const sent = s.broker.sent.map((r) => r.endpoint);
    expect(sent.lastIndexOf('order/modifyorder')).toBeLessThan(sent.lastIndexOf('order/placeorder'));
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toEqual([[placed.legs!.takeProfit!.orderId, 2]]);
    expect(s.events).toEqual([expect.objectContaining({ detail: expect.stringContaining('fitted to the ESZ6 position long 3 with a limit exit of 1 about to be sent on it') })]);
    // The move through 5007.5 and 5010: the exit sells 1, the take-profit 2 — flat, not short.
    s.broker.fill(Number(exit.order.orderId), 1, 5007.5);
    s.broker.fill(Number(placed.legs!.takeProfit!.orderId), 2, 5010);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(0);
  });

  it('a market partial exit makes room too, cutting both legs before it is sent (TV probe: sent as the full-size stop filled, it left the account short 1 with no stop)', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true } as never));
    const sent = s.broker.sent.map((r) => r.endpoint);
    expect(sent.lastIndexOf('order/modifyorder')).toBeLessThan(sent.lastIndexOf('order/placeorder'));
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty]).sort()).toEqual(
      [[placed.legs!.takeProfit!.orderId, 1], [placed.legs!.stopLoss!.orderId, 1]].sort(),
    );
    // The stop fills for what is left as the exit fills: flat, never short.
    s.broker.fill(Number(placed.legs!.stopLoss!.orderId), 1, 4990);
    s.broker.fill(Number(exit.order.orderId), 1, 4990);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(0);
  });

  it.each([
    ['a whole-position market exit (long 1)', 1, 1],
    ['a partial exit (long 2, sell 1)', 2, 1],
  ])('%s whose stop-loss fills while its legs are being cut is not sent: it would open a position the other way (faults probe: short 1 with nothing working)', async (_, held, qty) => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: held, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), held, 5000);
    const stopId = Number(placed.legs!.stopLoss!.orderId);
    // The price reaches the stop just as the first cut (cancel or modify of a leg) reaches the broker.
    const cut = stopFillsAtFirstCut(s, stopId, held);
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty, orderType: 'market', price: null, ...(qty < held && { reduceOnly: true }) } as never));
    await expect(exit).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: expect.stringMatching(/^the position changed while its stop-loss and take-profit made room for this exit \(one of them filled\): the account holds no ESZ6 now, the exit would sell \d; nothing sent, and the legs cut for it are given back for what is left/) });
    expect(cut.hit).toBe(true);
    expect(s.broker.bodies('order/placeorder')).toEqual([]);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(0);
  });

  it("a strategy's partial exit that keeps the strategy's size is not sent when a leg fill meanwhile already took the position there (trader probe: long 1 under a strategy long 2)", async () => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const stopId = Number(placed.legs!.stopLoss!.orderId);
    stopFillsAtFirstCut(s, stopId, 1);
    // Long 3, the strategy long 2 after it: sell 1.
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true, keepQty: 2 } as never));
    await expect(exit).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: expect.stringContaining("is long 2 ESZ6 now and keeps 2 (the strategy's size after the alert), the exit would sell 1; nothing sent") });
    expect(s.broker.bodies('order/placeorder')).toEqual([]);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(2);
    // Without a fill meanwhile the same exit goes out.
    const again = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true, keepQty: 1 } as never));
    expect(again.order.side).toBe('sell');
  });

  it("a strategy's partial exit that a leg fill took part of goes out for what is above the strategy's size, and the position keeps a bracket for what is left (re-probe 3: refused, long 2 under a strategy long 1, nothing working)", async () => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    // The legs are cut to 1 each for the exit; the cut stop then fills (1), and its OCO takes the take-profit.
    cutStopFillsWhole(s, Number(placed.legs!.stopLoss!.orderId), Number(placed.legs!.takeProfit!.orderId));
    // Long 3, the strategy long 1 after it: sell 2.
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null, reduceOnly: true, keepQty: 1 } as never));
    expect(exit.order.qty).toBe(1);
    expect(s.broker.bodies('order/placeorder').map((b) => b.orderQty)).toEqual([1]);
    s.broker.fill(Number(exit.order.orderId), 1, 4990);
    await pause(GRACE_MS * 5);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(1);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'take_profit' || o.role === 'stop_loss');
    expect(legs.map((o) => [o.role, o.qty - o.filledQty]).sort()).toEqual([['stop_loss', 1], ['take_profit', 1]]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/^the exit sell 2 ESZ6 \(market\) was sent for 1 only \(a stop-loss or take-profit filled 1 while the legs made room for it, and the strategy keeps 1\)/) });
  });

  it('a leg cut the broker refuses (it filled meanwhile, and may not be cut to what it filled) is not taken for cut: it is planned again, and the legs end within the position (re-probe 4: a take-profit 2 open on long 1 reversed the account)', async () => {
    const s = setup(GRACE_MS);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const tpId = Number(placed.legs!.takeProfit!.orderId);
    // The take-profit fills 1 as the first cut (to 1 each, for sell 2) reaches the broker: its cut to a total of 1 is refused.
    const defaults = (s.broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults;
    let first = true;
    s.broker.handlers['order/modifyorder'] = (b) => {
      if (first) {
        first = false;
        s.broker.fill(tpId, 1, 5010);
      }
      return defaults['order/modifyorder']!(b);
    };
    const t0 = Date.now();
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null, reduceOnly: true, keepQty: 1 } as never));
    // Known refused at once: not waited out for the 200 ms settle time of this context.
    expect(Date.now() - t0).toBeLessThan(150);
    expect(exit.order.qty).toBe(1);
    s.broker.fill(Number(exit.order.orderId), 1, 5000);
    await pause(GRACE_MS * 10);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(1);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'take_profit' || o.role === 'stop_loss');
    for (const role of ['take_profit', 'stop_loss']) {
      expect(legs.filter((o) => o.role === role).reduce((n, o) => n + o.qty - o.filledQty, 0), role).toBe(1);
    }
  });

  it('a partial exit refused because a leg fill already took the position to the strategy’s size: a bracket whose cut legs then ended is put back for what is left (re-probe 3: long 1, nothing working, though the 409 said the legs were given back)', async () => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    cutStopFillsWhole(s, Number(placed.legs!.stopLoss!.orderId), Number(placed.legs!.takeProfit!.orderId));
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null, reduceOnly: true, keepQty: 1 } as never));
    await expect(exit).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH' });
    expect(s.broker.bodies('order/placeorder')).toEqual([]);
    await pause(GRACE_MS * 5);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(1);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'take_profit' || o.role === 'stop_loss');
    expect(legs.map((o) => [o.role, o.qty - o.filledQty, o.role === 'take_profit' ? o.price : o.stopPrice]).sort()).toEqual([['stop_loss', 1, 4990], ['take_profit', 1, 5010]]);
  });

  it('a whole-position exit refused because its stop-loss filled in part while the legs were cut: what is left gets its take-profit and stop-loss back (re-probe: long 1 left with nothing working)', async () => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const stopId = Number(placed.legs!.stopLoss!.orderId);
    stopFillsAtFirstCut(s, stopId, 1);
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null } as never));
    await expect(exit).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: expect.stringContaining('is long 1 ESZ6 now') });
    expect(s.broker.bodies('order/placeorder')).toEqual([]);
    await pause(GRACE_MS * 5);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'take_profit' || o.role === 'stop_loss');
    expect(legs.map((o) => [o.role, o.qty, o.role === 'take_profit' ? o.price : o.stopPrice]).sort()).toEqual([['stop_loss', 1, 4990], ['take_profit', 1, 5010]]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/was not placed .*re-placed for 1/) });
  });

  it('an API exit resting on a bracketed position (a plain stop sell of 1 on long 2) makes room too; a resting sell larger than the position (a reversal) does not', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const reversal = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 3, price: 5030 }));
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/modifyorder')).toEqual([]);
    await s.broker.send('order/cancelorder', { orderId: Number(reversal.order.orderId) });
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4995 } as never));
    expect(exit.order.role).toBe('single');
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toEqual([[placed.legs!.stopLoss!.orderId, 1]]);
    // The position closed another way: the exit would open a short now, so it goes too.
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market', qty: 2 }), 2, 5001);
    await pause(GRACE_MS * 3);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toContain(exit.order.orderId);
    expect(s.ctx.model.workingOrders(ACCOUNT)).toEqual([]);
  });

  it('an exit resting for the whole position takes the take-profit out but keeps the stop-loss (re-placed: the broker’s OCO takes it with the take-profit)', async () => {
    const s = setup(60_000);
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, price: 5003 }));
    await pause(GRACE_MS * 3);
    const working = s.ctx.model.workingOrders(ACCOUNT);
    expect(working.map((o) => [o.role, o.type, o.qty]).sort()).toEqual([['single', 'limit', 2], ['stop_loss', 'stop', 2]]);
    expect(working.find((o) => o.role === 'stop_loss')!.stopPrice).toBe(4990);
    expect(working.some((o) => o.orderId === exit.order.orderId)).toBe(true);
    expect(s.events).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(new RegExp(`^take_profit ${placed.legs!.takeProfit!.orderId} cancelled \\(its stop-loss ${placed.legs!.stopLoss!.orderId} re-placed as \\d+\\)`)) }),
    ]);
  });

  it('a bracket entry filling on after its legs ended (take-profit filled, stop-loss taken by the OCO) is reported: what it fills since has no stop', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, price: 4990, takeProfit: { price: 5005 }, stopLoss: { price: 4980 } }));
    const entry = Number(placed.order.orderId);
    const [tp, sl] = [Number(placed.legs!.takeProfit!.orderId), Number(placed.legs!.stopLoss!.orderId)];
    s.broker.fill(entry, 1, 4990);
    s.broker.fill(tp, 1, 5005);
    // At the broker the legs were sized to the 1 filled: the take-profit is done, its OCO took the stop-loss.
    s.broker.mirror.apply('order', 'Updated', { ...s.broker.mirror.get('order', tp)!, ordStatus: 'Filled' });
    s.broker.mirror.apply('order', 'Updated', { ...s.broker.mirror.get('order', sl)!, ordStatus: 'Canceled' });
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([]); // flat: nothing to protect
    s.broker.fill(entry, 2, 4990);
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([
      expect.objectContaining({
        type: 'bracket-alert',
        orderId: String(entry),
        detail: `the ESZ6 position long 2 has no protective order: the legs of its bracket (entry ${entry}: ${tp} filled, ${sl} cancelled) ended before the entry filled completely, and nothing protects what it filled since`,
      }),
    ]);
  });

  it('a reversal in one order (long 1, sell 2) cancels the long bracket\'s sell legs, which would add to the short', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market', qty: 2 }), 2, 5001);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([placed.legs!.takeProfit!.orderId]);
    expect(s.ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    expect(s.events).toEqual([
      expect.objectContaining({ detail: `take_profit ${placed.legs!.takeProfit!.orderId} cancelled (entry ${placed.order.orderId}): another order left the ESZ6 position short 1` }),
    ]);
  });

  it('a reversal still filling (long 1, a bracket sell of 3 filled 2) cancels the long bracket’s legs, and leaves the filling entry’s own legs alone', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    const reversal = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 3, price: 5000, takeProfit: { price: 4980 }, stopLoss: { price: 5020 } }));
    s.broker.fill(Number(reversal.order.orderId), 2, 5000);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([placed.legs!.takeProfit!.orderId]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId).sort()).toEqual(
      [reversal.order.orderId, reversal.legs!.takeProfit!.orderId, reversal.legs!.stopLoss!.orderId].sort(),
    );
  });

  it('a partial exit (long 2 with legs for 2, sell 1) cuts both legs to 1, prices and types unchanged', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.broker.bodies('order/modifyorder')).toEqual([
      { orderId: Number(placed.legs!.takeProfit!.orderId), orderQty: 1, orderType: 'Limit', price: 5010, timeInForce: 'GTC', isAutomated: true },
      { orderId: Number(placed.legs!.stopLoss!.orderId), orderQty: 1, orderType: 'Stop', stopPrice: 4990, timeInForce: 'GTC', isAutomated: true },
    ]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => [o.role, o.qty])).toEqual([['take_profit', 1], ['stop_loss', 1]]);
    expect(s.events).toHaveLength(1);
    expect(s.events[0]).toMatchObject({ detail: expect.stringContaining('cut from 2 to 1') });
  });

  it("a reversal with a bracket (long 1, sell 2 with legs for 2) cancels the long's legs and cuts the new ones to the short 1", async () => {
    const s = setup();
    s.broker.oco = false;
    const long = await filledBracket(s);
    const short = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, takeProfit: { price: 4990 }, stopLoss: { price: 5010 } }));
    s.broker.fill(Number(short.order.orderId), 2, 5000);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId)).sort()).toEqual([long.legs!.takeProfit!.orderId, long.legs!.stopLoss!.orderId].sort());
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toEqual([[short.legs!.takeProfit!.orderId, 1], [short.legs!.stopLoss!.orderId, 1]]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => [o.orderId, o.qty])).toEqual([[short.legs!.takeProfit!.orderId, 1], [short.legs!.stopLoss!.orderId, 1]]);
  });

  it('a reversal bracket whose last fill comes before its status: its legs are cut once it is reported filled, not left sized for 2', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const long = await filledBracket(s);
    const short = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, takeProfit: { price: 4990 }, stopLoss: { price: 5010 } }));
    const id = Number(short.order.orderId);
    s.broker.fill(id, 1, 5000); // flat: the long's legs go at once; the short's wait for their entry
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId)).sort()).toEqual([long.legs!.takeProfit!.orderId, long.legs!.stopLoss!.orderId].sort());
    // The last fill and the position, the order's own update still to come.
    s.broker.mirror.apply('fill', 'Created', { id: 990001, orderId: id, contractId: CONTRACT, action: 'Sell', qty: 1, price: 5000, timestamp: new Date().toISOString() });
    const pos = s.broker.mirror.by('position', 'accountId', Number(ACCOUNT))[0]!;
    s.broker.mirror.apply('position', 'Updated', { ...pos, netPos: -1 });
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/modifyorder')).toEqual([]);
    s.broker.mirror.apply('order', 'Updated', { ...s.broker.mirror.get('order', id)!, ordStatus: 'Filled' });
    await pause(GRACE_MS * 2);
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toEqual([[short.legs!.takeProfit!.orderId, 1], [short.legs!.stopLoss!.orderId, 1]]);
  });

  /** Open quantity of the working legs of each kind. */
  const cover = (s: ReturnType<typeof setup>) => {
    const legs = s.ctx.model.workingOrders(ACCOUNT);
    const sum = (role: string) => legs.filter((o) => o.role === role).reduce((n, o) => n + o.qty - o.filledQty, 0);
    return { takeProfit: sum('take_profit'), stopLoss: sum('stop_loss') };
  };

  it('a sweep right after another plans with the cuts the broker answered before its events came: long 2 keeps legs for 2', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    // The broker answers a modify at once and reports it 40 ms later.
    const apply = (s.broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults['order/modifyorder']!;
    s.broker.handlers['order/modifyorder'] = (b) => {
      setTimeout(() => apply(b), 40);
      return { commandId: 424242 };
    };
    const a = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(a.order.orderId), 2, 5000);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001); // long 1: the first bracket's legs cut to 1
    await pause(5);
    const b = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(b.order.orderId), 2, 5000); // long 3
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001); // long 2: the second's cut to 1, not cancelled
    await pause(150);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(2);
    expect(cover(s)).toEqual({ takeProfit: 2, stopLoss: 2 });
  });

  it('sweeps of an account never overlap: one that comes while another waits on the broker runs after it, from what the first left', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const a = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(a.order.orderId), 2, 5000);
    const held = s.broker.hold('order/modifyorder');
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001); // long 1: cut to 1, held at the broker
    await held.reached;
    const b = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(b.order.orderId), 2, 5000); // long 3
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001); // long 2
    await pause(GRACE_MS);
    held.release();
    await pause(100);
    expect(cover(s)).toEqual({ takeProfit: 2, stopLoss: 2 });
  });

  it('a cut the broker answers with a command id but never applies is not said to be done: the alert says so, and the next look asks again (protocol audit: a rejected modify was reported as a cut)', async () => {
    const s = setup();
    s.broker.oco = false;
    s.broker.handlers['order/modifyorder'] = () => ({ commandId: 424242 });
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001); // long 1
    await pause(200 + GRACE_MS * 4);
    const alert = s.events.find((e) => e.type === 'bracket-alert') as { detail: string } | undefined;
    expect(alert?.detail).toContain(`stop_loss ${placed.legs!.stopLoss!.orderId}: cut from 2 to 1 asked, not confirmed by the broker within 0.2 s`);
    await pause(200 + GRACE_MS * 4);
    const asked = s.broker.bodies('order/modifyorder').filter((b) => String(b.orderId) === placed.legs!.stopLoss!.orderId);
    expect(asked.length).toBeGreaterThanOrEqual(2);
  });

  it('two brackets over a position cut to one: the newest bracket goes, the oldest stays', async () => {
    const s = setup();
    s.broker.oco = false;
    const first = await filledBracket(s);
    const second = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(second.order.orderId), 1, 5000);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId)).sort()).toEqual([second.legs!.takeProfit!.orderId, second.legs!.stopLoss!.orderId].sort());
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([first.legs!.takeProfit!.orderId, first.legs!.stopLoss!.orderId]);
  });

  it("a filled leg's sibling that the broker has not cancelled yet goes, not a live bracket's leg in its place", async () => {
    const s = setup();
    s.broker.oco = false; // the broker's OCO slower than the grace
    const first = await filledBracket(s);
    const second = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(second.order.orderId), 1, 5000);
    // The first bracket's take-profit fills: long 2 → 1; its stop-loss is still working.
    s.broker.fill(Number(first.legs!.takeProfit!.orderId), 1, 5010);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId))).toEqual([first.legs!.stopLoss!.orderId]);
    expect(s.broker.bodies('order/modifyorder')).toEqual([]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toEqual([second.legs!.takeProfit!.orderId, second.legs!.stopLoss!.orderId]);
  });

  it("a take-profit partly filled leaves its stop-loss alive: cut to what is left, never cancelled", async () => {
    const s = setup();
    s.broker.oco = false; // the broker's resize of the sibling slower than the grace
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    s.broker.fill(Number(placed.legs!.takeProfit!.orderId), 1, 5010);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toEqual([[placed.legs!.stopLoss!.orderId, 1]]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => [o.role, o.qty - o.filledQty])).toEqual([['take_profit', 1], ['stop_loss', 1]]);
  });

  it('without OCO at the broker, each leg is cancelled', async () => {
    const s = setup();
    s.broker.oco = false;
    const placed = await filledBracket(s);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder').map((b) => String(b.orderId)).sort()).toEqual([placed.legs!.takeProfit!.orderId, placed.legs!.stopLoss!.orderId].sort());
    expect(s.events).toHaveLength(1);
  });

  it('a leg that filled waits the grace for the broker’s OCO to cancel its sibling, and so does a position update whose fill is not known yet', async () => {
    const s = setup(60_000);
    s.broker.oco = false;
    const placed = await filledBracket(s);
    s.broker.fill(Number(placed.legs!.takeProfit!.orderId), 1, 5010);
    // A position update with no fill before it (its fill still on the way) is not blamed on the entry's fill.
    const pos = s.broker.mirror.by('position', 'accountId', Number(ACCOUNT))[0]!;
    s.broker.mirror.apply('position', 'Updated', { ...pos, netPos: -1 });
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.broker.bodies('order/modifyorder')).toEqual([]);
  });

  it('a leg that filled leaves nothing to do once the broker cancels its sibling within the grace', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    s.broker.fill(Number(placed.legs!.takeProfit!.orderId), 1, 5010);
    s.broker.mirror.apply('order', 'Updated', { ...s.broker.mirror.get('order', Number(placed.legs!.stopLoss!.orderId))!, ordStatus: 'Canceled' });
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.events).toEqual([]);
  });

  it('the legs of a resting bracket wait for their entry, flat or not', async () => {
    const s = setup();
    const resting = await placeOrder(s.ctx, newOrder({ price: 4900, takeProfit: { price: 4910 }, stopLoss: { price: 4890 } }));
    s.broker.fill(s.broker.addOrder({ action: 'Buy', orderType: 'Market' }), 1, 5000);
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5000);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.orphans.plan(ACCOUNT)).toEqual([]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.orderId)).toContain(resting.order.orderId);
  });

  it('legs protecting an open position stay', async () => {
    const s = setup();
    await filledBracket(s);
    s.orphans.onChange({ entityType: '*', eventType: 'Snapshot', entity: null });
    await pause(GRACE_MS * 5);
    expect(s.orphans.plan(ACCOUNT)).toEqual([]);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
  });

  it('a sweep that finds the broker down sends nothing; the snapshot after the reconnect sweeps again', async () => {
    const s = setup();
    await filledBracket(s);
    const exit = s.broker.addOrder({ action: 'Sell', orderType: 'Market', qty: 1 });
    s.broker.connected = false;
    s.broker.fill(exit, 1, 5001);
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toEqual([]);
    expect(s.orphans.plan(ACCOUNT)).toHaveLength(2);
    // Reconnected: the snapshot sweeps again.
    s.broker.connected = true;
    s.orphans.onChange({ entityType: '*', eventType: 'Snapshot', entity: null });
    await pause(GRACE_MS * 5);
    expect(s.broker.bodies('order/cancelorder')).toHaveLength(1);
    expect(s.orphans.plan(ACCOUNT)).toEqual([]);
  });

  it('after a snapshot, a position whose bracket legs all ended unfilled (a crash cut off their re-placement) is reported, once', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    // As after a restart mid-cancel: both legs cancelled at the broker, nothing re-placed.
    await s.broker.send('order/cancelorder', { orderId: Number(placed.legs!.takeProfit!.orderId) });
    expect(s.ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([
      { symbol: 'ESZ6', net: 1, entryId: placed.order.orderId, legs: `${placed.legs!.takeProfit!.orderId} cancelled, ${placed.legs!.stopLoss!.orderId} cancelled` },
    ]);
    s.orphans.onChange({ entityType: '*', eventType: 'Snapshot', entity: null });
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([
      expect.objectContaining({ orderId: placed.order.orderId, detail: expect.stringMatching(/^the ESZ6 position long 1 has no protective order: the legs of its bracket \(entry \d+: .*cancelled\) ended without filling$/) }),
    ]);
    // Not again without a new snapshot, and not once something protects it.
    s.broker.fill(s.broker.addOrder({ action: 'Buy', orderType: 'Market' }), 1, 5000);
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toHaveLength(1);
    s.broker.addOrder({ action: 'Sell', orderType: 'Stop', stopPrice: 4980, qty: 2 });
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([]);
  });

  it('legs cancelled at the broker by hand while connected leave the position unprotected: reported after the grace, no snapshot needed', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    // Someone cancels the take-profit in the broker's own app; its OCO takes the stop-loss along.
    await s.broker.send('order/cancelorder', { orderId: Number(placed.legs!.takeProfit!.orderId) });
    expect(s.events).toEqual([]);
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([
      expect.objectContaining({ type: 'bracket-alert', orderId: placed.order.orderId, detail: expect.stringMatching(/^the ESZ6 position long 1 has no protective order/) }),
    ]);
  });

  it('a stop exit cancelled after it cut the stop-loss: the cancel answer says the rest has no stop, and so does an alert after the grace (prop probe: long 3 with a stop for 2, nothing said)', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const exit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    await pause(GRACE_MS * 3);
    expect(s.broker.bodies('order/modifyorder').map((b) => [String(b.orderId), b.orderQty])).toContainEqual([placed.legs!.stopLoss!.orderId, 2]);
    const before = s.events.length;
    const cancelled = await cancelOrder(s.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: exit.order.orderId });
    expect(cancelled.warning).toBe('the ESZ6 position long 3 has stop-losses for 2 only now: the stop-loss cut to make room for this exit is not given back; protect the rest or close it');
    await pause(GRACE_MS * 5);
    expect(s.events.slice(before)).toEqual([
      expect.objectContaining({
        type: 'bracket-alert',
        detail: expect.stringMatching(new RegExp(`^the ESZ6 position long 3 has stop-losses for 2 only: a protective order ended without filling \\(stop exit ${exit.order.orderId} cancelled`)),
      }),
    ]);
    // A limit exit cancelled cut only the take-profit: nothing to say.
    const limit = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, price: 5015 }));
    await pause(GRACE_MS * 3);
    const quiet = s.events.length;
    expect((await cancelOrder(s.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: limit.order.orderId })).warning).toBeUndefined();
    await pause(GRACE_MS * 5);
    expect(s.events.slice(quiet).filter((e) => e.type === 'bracket-alert')).toEqual([]);
  });

  it('a stop exit that had a stop-loss cut for it is forgotten once it ends, however it ends (cancelled at the broker by hand, or filled): the actor keeps no record of it for its life', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const byHand = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    await pause(GRACE_MS * 3);
    expect(s.ctx.stopsCutBy?.has(byHand.order.orderId)).toBe(true);
    await s.broker.send('order/cancelorder', { orderId: Number(byHand.order.orderId) });
    await pause(GRACE_MS * 5);
    // Its alert was still said (the rest has stops for 2 only), and then it is forgotten.
    expect(s.events.filter((e) => e.type === 'bracket-alert').map((e) => e.detail)).toContainEqual(expect.stringMatching(/has stop-losses for 2 only: a protective order ended without filling \(stop exit/));
    expect(s.ctx.stopsCutBy?.has(byHand.order.orderId)).toBe(false);
    const filled = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4985 } as never));
    await pause(GRACE_MS * 3);
    s.broker.fill(Number(filled.order.orderId), 1, 4985);
    await pause(GRACE_MS * 5);
    expect(s.ctx.stopsCutBy?.size ?? 0).toBe(0);
  });

  it('stop exits on a plain position, or next to a bracket whose stop-loss was not cut, say nothing when cancelled (re-probe: a false "stop-loss cut" warning and alert)', async () => {
    const s = setup();
    s.broker.fill(s.broker.addOrder({ action: 'Buy', orderType: 'Market', qty: 3 }), 3, 5000); // plain long 3
    const a = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'stop', price: null, stopPrice: 4985 } as never));
    await pause(GRACE_MS * 3);
    expect((await cancelOrder(s.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: a.order.orderId })).warning).toBeUndefined();
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([]);
  });

  it('a stop exit for the whole position, cancelled after its stop-loss was taken out, says the position has no stop-loss now; one cancelled after a partial fill says what is short', async () => {
    const whole = setup();
    const p = await placeOrder(whole.ctx, newOrder({ qty: 2, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    whole.broker.fill(Number(p.order.orderId), 2, 5000);
    const exit = await placeOrder(whole.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    await pause(GRACE_MS * 3);
    expect((await cancelOrder(whole.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: exit.order.orderId })).warning).toMatch(/^the ESZ6 position long 2 has no stop-loss now: the stop-loss cut to make room for this exit is not given back/);

    const part = setup();
    const q = await placeOrder(part.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    part.broker.fill(Number(q.order.orderId), 3, 5000);
    const exit2 = await placeOrder(part.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'stop', price: null, stopPrice: 4990 } as never));
    await pause(GRACE_MS * 3);
    part.broker.fill(Number(exit2.order.orderId), 1, 4990); // long 2, the exit's 1 left
    await pause(GRACE_MS * 3);
    const r = await cancelOrder(part.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: exit2.order.orderId });
    expect(r.warning).toMatch(/^the ESZ6 position long 2 has stop-losses for 1 only now/);
  });

  it('an exit the broker refuses after its legs were cut for it: the legs are sized back to the position, and the stream says so (fault probe: long 3 left with stops for 1, nothing said)', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    s.broker.handlers['order/placeorder'] = () => ({ failureReason: 'RiskCheck', failureText: 'Exceeds max order qty' });
    const refused = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null } as never)).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: 'BROKER_REJECTED' });
    await pause(GRACE_MS * 3);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role !== 'entry');
    expect(legs.map((o) => [o.role, o.qty]).sort()).toEqual([['stop_loss', 3], ['take_profit', 3]]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/^the exit sell 2 ESZ6 \(market\) was not placed \(BROKER_REJECTED.*the legs cut for it were sized back: stop_loss \d+ back to 3, take_profit \d+ back to 3$/) });
  });

  it('a whole-position exit the broker refuses: the bracket its legs were cancelled for is put back as an OCO pair at its prices (re-probe: long 3 left with no order at all)', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    s.broker.handlers['order/placeorder'] = () => ({ failureReason: 'RiskCheck', failureText: 'Exceeds max order qty' });
    const refused = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 3, orderType: 'market', price: null } as never)).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: 'BROKER_REJECTED' });
    await pause(GRACE_MS * 3);
    const legs = s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role !== 'entry');
    expect(legs.map((o) => [o.role, o.type, o.qty, o.price ?? o.stopPrice, o.bracketId]).sort()).toEqual([
      ['stop_loss', 'stop', 3, 4980, placed.order.orderId],
      ['take_profit', 'limit', 3, 5020, placed.order.orderId],
    ]);
    expect(s.broker.bodies('order/placeoco')).toHaveLength(1);
    expect(s.events.filter((e) => e.type === 'bracket-alert').at(-1)).toMatchObject({ detail: expect.stringMatching(/^the exit sell 3 ESZ6 \(market\) was not placed .*re-placed for 3 as take_profit \d+ and stop_loss \d+ \(one cancels the other\)$/) });
  });

  it('an exit refused after the account turned short meanwhile gives nothing back: the long’s sell legs would add to the short (probe: re-placed on short 2, the sell stop made it short 4)', async () => {
    const s = setup();
    for (const qty of [1, 2]) {
      const placed = await placeOrder(s.ctx, newOrder({ qty, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
      s.broker.fill(Number(placed.order.orderId), qty, 5000);
    }
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(3);
    // A sell 5 sent elsewhere (an API reversal) fills as the partial exit reaches the broker, which refuses the exit.
    s.broker.handlers['order/placeorder'] = () => {
      s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market', qty: 5 }), 5, 5000);
      return { failureReason: 'RiskCheck', failureText: 'Exceeds max order qty' };
    };
    const refused = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null } as never)).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: 'BROKER_REJECTED' });
    await pause(GRACE_MS * 5);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(-2);
    expect(s.broker.bodies('order/placeoco'), 'no bracket re-placed on the short').toHaveLength(0);
    const grown = s.broker.bodies('order/modifyorder').filter((b) => Number(b.orderQty) > 1);
    expect(grown, 'no sell leg sized back up').toEqual([]);
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.side === 'sell').map((o) => [o.role, o.qty]), 'no sell order works on the short').toEqual([]);
  });

  it('legs cut for an exit still on its way are not reported as ended: no "partly unprotected" alert before the exit is answered and fills (probe: "long 3 has stop-losses for 1 only: protect the rest" 3 ms before the exit of 2 filled)', async () => {
    const s = setup();
    for (const qty of [1, 2]) {
      const placed = await placeOrder(s.ctx, newOrder({ qty, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
      s.broker.fill(Number(placed.order.orderId), qty, 5000);
    }
    const held = s.broker.hold('order/placeorder');
    const exit = placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null } as never));
    await held.reached;
    // The newest bracket was cancelled for the exit: its legs ended, and several graces pass with the exit unanswered.
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([1]);
    await pause(GRACE_MS * 6);
    const unprotected = () => s.events.filter((e) => e.type === 'bracket-alert' && /has stop-losses for|has no protective order/.test(String((e as { detail?: unknown }).detail)));
    expect(unprotected(), 'nothing said while the exit is on its way').toEqual([]);
    held.release();
    const sent = await exit;
    s.broker.fill(Number(sent.order.orderId), 2, 5000);
    await pause(GRACE_MS * 6);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(1);
    expect(unprotected(), 'long 1 with its stop-loss for 1: nothing to say').toEqual([]);
  });

  it('an exit whose outcome is unknown (timed out) leaves the legs cut for it, and the stream says so; once the broker says it did not place it, they are sized back', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 3, 5000);
    const answer = s.broker.timeOut('order/placeorder');
    const late = await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 2, orderType: 'market', price: null } as never)).catch((err: unknown) => err);
    expect(late).toMatchObject({ code: 'BROKER_TIMEOUT' });
    await pause(GRACE_MS * 3);
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([1]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/^the exit sell 2 ESZ6 \(market\) the legs were cut for may not have reached the broker .*they stay cut until its outcome is known/) });
    // Then the broker says it refused it: the legs are sized back (re-probe: they stayed cut for good).
    answer.refuse(400, 'Exceeds max order qty');
    await pause(GRACE_MS * 3);
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([3]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/^the exit sell 2 ESZ6 \(market\) was not placed \(it timed out, and the broker has not placed it \(refused\)\); the legs cut for it were sized back/) });
  });

  it('an exit found not placed while the connection is still syncing again: its legs are sized back once it is up, not left cut (faults probe: "was not placed" said 4 ms before CONNECTED)', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const answer = s.broker.timeOut('order/placeorder');
    await placeOrder(s.ctx, newOrder({ side: 'sell', qty: 1, orderType: 'market', price: null } as never)).catch(() => undefined);
    await pause(GRACE_MS * 3);
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([1]);
    s.broker.connected = false;
    answer.refuse(400, 'not placed');
    await pause(400);
    // Nothing sized while down (what the position is comes back with the sync).
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([1]);
    s.broker.connected = true;
    await pause(400);
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.role === 'stop_loss').map((o) => o.qty)).toEqual([2]);
    expect(s.events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/^the exit sell 1 ESZ6 \(market\) was not placed .*; the legs cut for it were sized back/) });
  });

  it('the suspended legs of a bracket entry still resting protect nothing: a position left short of stops next to one is reported (new-user probe: a resting scale-in bracket hid it)', async () => {
    const s = setup();
    const a = await filledBracket(s);
    const b = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(b.order.orderId), 1, 5000);
    const resting = await placeOrder(s.ctx, newOrder({ price: 4900, takeProfit: { price: 4950 }, stopLoss: { price: 4850 } }));
    expect(s.ctx.model.workingOrders(ACCOUNT).filter((o) => o.bracketId === resting.order.orderId && o.role === 'stop_loss')).toHaveLength(1);
    await s.broker.send('order/cancelorder', { orderId: Number(a.legs!.stopLoss!.orderId) }); // its OCO takes the take-profit
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([expect.objectContaining({ type: 'bracket-alert', detail: expect.stringMatching(/^the ESZ6 position long 2 has stop-losses for 1 only/) })]);
  });

  it('a position whose bracket legs all ended is reported unprotected even while another bracket entry rests with its suspended legs', async () => {
    const s = setup();
    const a = await filledBracket(s);
    await placeOrder(s.ctx, newOrder({ price: 4900, takeProfit: { price: 4950 }, stopLoss: { price: 4850 } }));
    await s.broker.send('order/cancelorder', { orderId: Number(a.legs!.stopLoss!.orderId) });
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([expect.objectContaining({ type: 'bracket-alert', orderId: a.order.orderId, detail: expect.stringMatching(/^the ESZ6 position long 1 has no protective order/) })]);
  });

  it('a bracket of two cancelled at the broker by hand leaves long 2 with a stop for 1: reported, the rest has no stop', async () => {
    const s = setup();
    const a = await filledBracket(s);
    const b = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5020 }, stopLoss: { price: 4980 } }));
    s.broker.fill(Number(b.order.orderId), 1, 5000);
    await s.broker.send('order/cancelorder', { orderId: Number(a.legs!.stopLoss!.orderId) }); // its OCO takes the take-profit
    await pause(GRACE_MS * 5);
    expect(s.events).toEqual([
      expect.objectContaining({
        type: 'bracket-alert',
        detail: expect.stringMatching(new RegExp(`^the ESZ6 position long 2 has stop-losses for 1 only: a protective order ended without filling \\(.*stop_loss ${a.legs!.stopLoss!.orderId} cancelled`)),
      }),
    ]);
    // Fitted legs (an exit took one contract off) are no loss of protection: nothing more said.
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    await pause(GRACE_MS * 5);
    expect(s.events).toHaveLength(1);
  });

  it('a re-placed leg cancelled at the broker by hand is reported too', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    await cancelOrder(s.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: placed.legs!.takeProfit!.orderId });
    const [survivor] = s.ctx.model.workingOrders(ACCOUNT);
    expect(survivor).toMatchObject({ role: 'stop_loss' });
    await s.broker.send('order/cancelorder', { orderId: Number(survivor!.orderId) });
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([expect.objectContaining({ detail: expect.stringMatching(/^the ESZ6 position long 1 has no protective order/) })]);
  });

  it('no unprotected-position alert when our own cancel of one leg re-places the other, or when a flatten takes the legs before it closes', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    await cancelOrder(s.ctx, { type: 'cancel-order', accountId: ACCOUNT, orderId: placed.legs!.takeProfit!.orderId });
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([]);
    expect(s.ctx.model.workingOrders(ACCOUNT).map((o) => o.role)).toEqual(['stop_loss']);
    // The flatten: legs cancelled (the re-placed one, and a whole bracket's), the liquidation slower than the grace.
    const second = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(second.order.orderId), 1, 5000);
    const liquidation = s.broker.hold('order/liquidateposition');
    const done = flatten(s.ctx, { type: 'flatten', accountId: ACCOUNT });
    await liquidation.reached;
    await pause(GRACE_MS * 3);
    liquidation.release();
    await done;
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([]);
  });

  it('after a snapshot, a position from a bracket entry cancelled after a partial fill (the broker never placed its legs) is reported', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 3, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([]); // still filling: its legs are yet to come
    await s.broker.send('order/cancelorder', { orderId: Number(placed.order.orderId) });
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([{ symbol: 'ESZ6', net: 2, entryId: placed.order.orderId, legs: 'never placed' }]);
    s.orphans.onChange({ entityType: '*', eventType: 'Snapshot', entity: null });
    await pause(GRACE_MS * 5);
    expect(s.events.filter((e) => e.type === 'bracket-alert')).toEqual([
      expect.objectContaining({ detail: `the ESZ6 position long 2 has no protective order: its bracket entry ${placed.order.orderId} was cancelled after a partial fill, before the broker placed its legs` }),
    ]);
  });

  it('a position whose bracket legs ended after one filled in part is reported too: what is left of it has no protection', async () => {
    const s = setup();
    const placed = await placeOrder(s.ctx, newOrder({ qty: 2, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(placed.order.orderId), 2, 5000);
    const tp = Number(placed.legs!.takeProfit!.orderId);
    s.broker.fill(tp, 1, 5010);
    await s.broker.send('order/cancelorder', { orderId: tp });
    await s.broker.send('order/cancelorder', { orderId: Number(placed.legs!.stopLoss!.orderId) });
    expect(s.ctx.model.positions(ACCOUNT)).toEqual([expect.objectContaining({ netQty: 1 })]);
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([expect.objectContaining({ symbol: 'ESZ6', net: 1, entryId: placed.order.orderId })]);
  });

  it('a plain position next to a bracket whose stop-loss closed all the bracket bought is not reported (web probe: a red "needs protection" alert for the plain order)', async () => {
    const s = setup();
    s.broker.fill(s.broker.addOrder({ action: 'Buy', orderType: 'Market' }), 1, 5000); // plain long 1
    const b = await placeOrder(s.ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    s.broker.fill(Number(b.order.orderId), 1, 5000); // long 2
    s.broker.fill(Number(b.legs!.stopLoss!.orderId), 1, 4990); // its OCO cancels the take-profit: long 1, the plain one
    await pause(GRACE_MS * 5);
    expect(s.ctx.model.netPosition(ACCOUNT, 'ESZ6')).toBe(1);
    expect(s.events.filter((e) => e.type === 'bracket-alert' && /no protective order/.test((e as { detail: string }).detail))).toEqual([]);
  });

  it('a position opened by a plain order is not reported, whatever became of earlier brackets', async () => {
    const s = setup();
    const placed = await filledBracket(s);
    await s.broker.send('order/cancelorder', { orderId: Number(placed.legs!.takeProfit!.orderId) });
    // The bracket is closed by hand, then a plain buy opens a new long.
    s.broker.fill(s.broker.addOrder({ action: 'Sell', orderType: 'Market' }), 1, 5001);
    s.broker.fill(s.broker.addOrder({ action: 'Buy', orderType: 'Market' }), 1, 5002);
    expect(s.orphans.unprotected(ACCOUNT)).toEqual([]);
  });
});
