import { describe, expect, it, vi } from 'vitest';
import { AppError } from '../../../../src/domain/problems.js';
import { flatten } from '../../../../workers/connection-actor/flatten.js';
import { FLATTEN_WAIT_MS, placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, CONTRACT, fakeActorContext, newOrder } from '../../../support/broker-link.js';

const request = (patch: { symbol?: string | null; symbolOnly?: boolean; productOnly?: boolean; clOrdIdPrefix?: string } = {}) => ({ type: 'flatten' as const, accountId: ACCOUNT, ...patch });

/** Long 1, and a flatten of it held at its liquidation: the flatten runs until `liquidation.release()`. */
async function flattenHeldAtLiquidation(scope: Parameters<typeof request>[0] = {}) {
  const { broker, ctx } = fakeActorContext();
  const held = broker.addOrder({ qty: 1 });
  broker.fill(held, 1, 5000);
  const liquidation = broker.hold('order/liquidateposition');
  const flat = flatten(ctx, request(scope));
  await liquidation.reached;
  return { broker, ctx, liquidation, flat, before: broker.bodies('order/placeorder').length };
}

describe('flatten', () => {
  it('cancels every resting order, entries first, then liquidates every position', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 2 });
    broker.fill(held, 2, 5000);
    const single = await placeOrder(ctx, newOrder({ price: 4995 }));
    const b = await placeOrder(ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    const r = await flatten(ctx, request({ clOrdIdPrefix: 'tg-f-abc' }));
    // The entry and the plain order go out together; the entry takes its suspended legs along: no request per leg.
    expect(broker.bodies('order/cancelorder').map((c) => String(c.orderId)).sort()).toEqual([b.order.orderId, single.order.orderId].sort());
    expect(broker.bodies('order/cancelorder').find((c) => String(c.orderId) === b.order.orderId)).toMatchObject({ clOrdId: `tg-f-abc-x${b.order.orderId}`, isAutomated: true });
    expect(r.cancelledOrderIds.sort()).toEqual([b.order.orderId, b.legs!.takeProfit!.orderId, b.legs!.stopLoss!.orderId, single.order.orderId].sort());
    expect(broker.bodies('order/liquidateposition')).toEqual([{ accountId: 7, contractId: CONTRACT, admin: false, isAutomated: true }]);
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 2, status: 'liquidated' }]);
    expect(ctx.model.positions(ACCOUNT)).toEqual([]);
  });

  it('sends its cancels together, not one round trip after another: one leg per filled bracket (its OCO takes the other), and the liquidation after them', async () => {
    const { broker, ctx } = fakeActorContext();
    const brackets = [];
    for (let i = 0; i < 3; i++) {
      const b = await placeOrder(ctx, newOrder({ takeProfit: { price: 5010 + i }, stopLoss: { price: 4990 - i } }));
      broker.fill(Number(b.order.orderId), 1, 5000);
      brackets.push(b);
    }
    const resting = await Promise.all([1, 2, 3].map((i) => placeOrder(ctx, newOrder({ price: 4900 + i }))));
    const held = broker.hold('order/cancelorder');
    const done = flatten(ctx, request({}));
    await held.reached;
    await new Promise((r) => setTimeout(r, 20));
    // The three plain orders at once, while none is answered yet.
    expect(broker.bodies('order/cancelorder').map((c) => String(c.orderId)).sort()).toEqual(resting.map((r) => r.order.orderId).sort());
    held.release();
    const r = await done;
    const legCancels = broker.bodies('order/cancelorder').map((c) => String(c.orderId)).filter((id) => !resting.some((x) => x.order.orderId === id));
    expect(legCancels).toHaveLength(3);
    expect(r.cancelledOrderIds).toHaveLength(9);
    expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
  });

  it('an order that arrives while the flatten runs goes after it, so its liquidation does not close that order too (a close and the next entry a moment apart)', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const liquidation = broker.hold('order/liquidateposition');
    const flattened = flatten(ctx, request());
    await liquidation.reached;
    const entry = placeOrder(ctx, newOrder({ orderType: 'market', price: undefined } as never));
    await new Promise((r) => setTimeout(r, 20));
    // Not sent while the liquidation is on its way.
    expect(broker.bodies('order/placeorder')).toEqual([]);
    liquidation.release();
    await flattened;
    await entry;
    expect(broker.bodies('order/placeorder')).toHaveLength(1);
    expect(broker.sent.map((s) => s.endpoint).filter((e) => e !== 'contract/find' && e !== 'contract/item')).toEqual(['order/liquidateposition', 'order/placeorder']);
  });

  it('a liquidation the broker rejects (a closed market) is failed, not liquidated, and the position left without its stops is alerted', async () => {
    const { broker, ctx, events } = fakeActorContext();
    const b = await placeOrder(ctx, newOrder({ qty: 1, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    broker.fill(Number(b.order.orderId), 1, 5000);
    broker.handlers['order/liquidateposition'] = () => ({ orderId: broker.addOrder({ action: 'Sell', orderType: 'Market', ordStatus: 'Rejected' }) });
    const r = await flatten(ctx, request());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'failed', code: 'BROKER_REJECTED', detail: expect.stringMatching(/did not fill the liquidation .*still open/) }]);
    expect(events.at(-1)).toMatchObject({ type: 'bracket-alert', detail: expect.stringMatching(/ESZ6 position is open without protective orders/) });
    expect(ctx.model.positions(ACCOUNT)).toHaveLength(1);
  });

  it('with a symbol the account does not hold (while it holds another), refuses with SYMBOL_MISMATCH and touches nothing', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    await placeOrder(ctx, newOrder());
    let err: unknown;
    try {
      await flatten(ctx, request({ symbol: 'NQZ6' }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('SYMBOL_MISMATCH');
    expect((err as AppError).extensions).toMatchObject({ symbol: 'NQZ6', held: ['ESZ6'] });
    expect(broker.sent.filter((s) => s.endpoint !== 'order/placeorder')).toEqual([]);
  });

  it('a flat account with a symbol: its resting orders in that contract are cancelled; resting only in another, SYMBOL_MISMATCH and nothing cancelled (new-user probe: an NQ close cancelled the ES entry and its stop-loss)', async () => {
    const { broker, ctx } = fakeActorContext();
    await placeOrder(ctx, newOrder());
    await expect(flatten(ctx, request({ symbol: 'NQZ6' }))).rejects.toMatchObject({ code: 'SYMBOL_MISMATCH', message: 'account has working orders in ESZ6, not NQZ6', extensions: { held: ['ESZ6'] } });
    expect(broker.bodies('order/cancelorder')).toEqual([]);
    const r = await flatten(ctx, request({ symbol: 'ESZ6' }));
    expect(r.cancelledOrderIds).toHaveLength(1);
    expect(broker.bodies('order/liquidateposition')).toEqual([]);
  });

  it("symbol only (a strategy's exit) of another contract touches nothing of this one, and is no SYMBOL_MISMATCH", async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    await placeOrder(ctx, newOrder({ price: 4995 }));
    const r = await flatten(ctx, request({ symbol: 'NQZ6', symbolOnly: true }));
    expect(r).toMatchObject({ cancelledOrderIds: [], positions: [] });
    expect(broker.sent.filter((s) => s.endpoint !== 'order/placeorder')).toEqual([]);
    expect(ctx.model.positions(ACCOUNT)).toHaveLength(1);
  });

  it('an exit that named the product (ES1!) closes the position in another month of it: one opened before the roll', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    // ES1! resolves to March now; the position is in December.
    expect(await flatten(ctx, request({ symbol: 'ESH7', symbolOnly: true }))).toMatchObject({ positions: [] });
    expect(ctx.model.positions(ACCOUNT)).toHaveLength(1);
    const r = await flatten(ctx, request({ symbol: 'ESH7', symbolOnly: true, productOnly: true }));
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
    expect(ctx.model.positions(ACCOUNT)).toEqual([]);
  });

  it('symbol only of the held contract cancels its orders and closes its position', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const b = await placeOrder(ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
    const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
    expect(r.cancelledOrderIds.sort()).toEqual([b.order.orderId, b.legs!.takeProfit!.orderId, b.legs!.stopLoss!.orderId].sort());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
    expect(ctx.model.positions(ACCOUNT)).toEqual([]);
  });

  it("a strategy's exit (symbol only) does not count an order of another contract on its way in its outstandingOrders: it never touches it (probe: an NQ entry counted in an ES close)", async () => {
    // A settle time long enough to tell waiting for the NQ order from not.
    const { broker, ctx } = fakeActorContext(5_000);
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const onItsWay = broker.hold('order/placeorder');
    const nq = placeOrder(ctx, newOrder({ symbol: 'NQZ6', requestedSymbol: 'NQ1!', orderType: 'market', price: null }));
    await onItsWay.reached;
    const t0 = performance.now();
    const exit = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
    // Nor does it wait for that order (cluster probe: the ES liquidation went out 5 s late).
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(exit.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
    expect(exit.outstandingOrders).toBeUndefined();
    // The whole account's flatten counts it: it may fill after that flatten.
    const all = flatten(ctx, request());
    onItsWay.release();
    await nq;
    await all;
  });

  it("an order in another contract than a strategy's close goes out at once, not held behind it (probe: an NQ entry held 17 s behind an ES exit, refused as 'a flatten of the account')", async () => {
    const { broker, ctx, liquidation, flat, before } = await flattenHeldAtLiquidation({ symbol: 'ESZ6', symbolOnly: true });
    await placeOrder(ctx, { ...newOrder({ symbol: 'NQZ6', requestedSymbol: 'NQ1!', orderType: 'market', price: null }), callerGoneAt: performance.now() + 15_000 });
    expect(broker.bodies('order/placeorder').slice(before).map((b) => b.symbol), 'sent while the ES close still runs').toEqual(['NQZ6']);
    // One in the closed contract still waits for it.
    let esSent = false;
    const es = placeOrder(ctx, newOrder({ orderType: 'market', price: null } as never)).then((r) => ((esSent = true), r));
    await new Promise((r) => setTimeout(r, 50));
    expect(esSent).toBe(false);
    liquidation.release();
    await flat;
    await es;
    expect(broker.bodies('order/placeorder').length).toBe(before + 2);
  });

  it('waits for an entry still on its way to the broker: it is cancelled or closed, not left to fill after the flatten', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.hold('order/placeorder');
    const entry = placeOrder(ctx, newOrder({ orderType: 'market', price: null }));
    await held.reached;
    const flattening = flatten(ctx, request());
    // The broker answers the entry (filled) only once the flatten has started.
    await new Promise((r) => setTimeout(r, 5));
    held.release();
    const placed = await entry;
    broker.fill(Number(placed.order.orderId), 1, 5000);
    const r = await flattening;
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
    expect(ctx.model.positions(ACCOUNT)).toEqual([]);
  });

  it('reports a liquidation the broker refused as failed, with its reason', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'RiskRejected', failureText: 'account locked' });
    const r = await flatten(ctx, request());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'failed', code: 'BROKER_REJECTED', detail: 'broker rejected liquidateposition: RiskRejected: account locked' }]);
  });

  it('a liquidation refused because the broker holds no position any more (closed as our events caught up) is no failure: the account is flat', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const pos = ctx.mirror.all('position')[0]!;
    broker.handlers['order/liquidateposition'] = () => {
      // The broker had closed it (a leg filled); its event arrives right after the refusal.
      setTimeout(() => ctx.mirror.apply('position', 'Updated', { ...pos, netPos: 0 }), 20);
      return { failureReason: 'UnknownReason', failureText: 'No position to liquidate' };
    };
    const r = await flatten(ctx, request());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'liquidated', detail: 'already flat at the broker (broker rejected liquidateposition: UnknownReason: No position to liquidate)' }]);
  });

  it('a refusal for no position whose closing events never came reads the position from the broker: flat there, it is flat here too (re-probe: a phantom long after a short silence, every flatten 422 for good)', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const pos = ctx.mirror.all('position')[0]!;
    // Closed at the broker, its events lost: only a read says so.
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'UnknownReason', failureText: 'No position to liquidate' });
    broker.handlers['position/item'] = () => ({ ...pos, netPos: 0 });
    const r = await flatten(ctx, request());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'liquidated', detail: 'already flat at the broker (broker rejected liquidateposition: UnknownReason: No position to liquidate)' }]);
    expect(ctx.model.positions(ACCOUNT)).toEqual([]);
    // Another refusal (not "no position") is not read again, and stays a failure.
    const again = broker.addOrder({ qty: 1 });
    broker.fill(again, 1, 5000);
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'RiskRejected', failureText: 'account locked' });
    expect((await flatten(ctx, request())).positions).toMatchObject([{ status: 'failed', code: 'BROKER_REJECTED' }]);
  });

  it('a refusal for no position reads the whole state again where the connection can (money probe: the lost events took the position\'s legs with them, and the dead legs stayed listed)', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    const pos = ctx.mirror.all('position')[0]!;
    broker.handlers['order/liquidateposition'] = () => ({ failureReason: 'UnknownReason', failureText: 'No position to liquidate' });
    broker.handlers['position/item'] = () => {
      throw new Error('the position alone is not read when the whole state is');
    };
    const why: string[] = [];
    Object.assign(ctx.conn, {
      resyncNow: async (reason: string) => {
        why.push(reason);
        ctx.mirror.apply('position', 'Updated', { ...pos, netPos: 0 });
        return true;
      },
    });
    const r = await flatten(ctx, request());
    expect(r.positions).toMatchObject([{ symbol: 'ESZ6', status: 'liquidated' }]);
    expect(why).toEqual(['the broker refused to liquidate ESZ6, which the mirror holds 1: it has no such position']);
  });

  it('says so when a liquidation was sent but the position is not flat yet', async () => {
    const { broker, ctx } = fakeActorContext(30);
    const held = broker.addOrder({ qty: 1 });
    broker.fill(held, 1, 5000);
    broker.handlers['order/liquidateposition'] = () => ({ commandId: 9 });
    const r = await flatten(ctx, request());
    expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated', detail: 'liquidation sent; position not yet flat' }]);
  });

  describe('a connection lost during the flatten (re-probe 3: an exit answered 504 "it goes on" never ran again; the position stayed open with its legs)', () => {
    /** Long 1 with its take-profit and stop-loss working. */
    async function longWithBracket(): Promise<ReturnType<typeof fakeActorContext>> {
      const fake = fakeActorContext();
      const b = await placeOrder(fake.ctx, newOrder({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
      fake.broker.fill(Number(b.order.orderId), 1, 5000);
      return fake;
    }

    /** The first request to `endpoint` is lost with the socket, unanswered; the connection is back `afterMs` later (its mirror as the broker left it). */
    function loseFirst(broker: ReturnType<typeof fakeActorContext>['broker'], endpoint: string, afterMs: number, meanwhile?: () => void): void {
      const defaults = (broker as unknown as { defaults: Record<string, (b: unknown) => unknown> }).defaults;
      let lost = false;
      broker.handlers[endpoint] = (b) => {
        if (lost) return defaults[endpoint]!(b);
        lost = true;
        broker.connected = false;
        setTimeout(() => {
          meanwhile?.();
          broker.connected = true;
        }, afterMs);
        throw new AppError('BROKER_TIMEOUT', `broker connection lost (socket closed (1006)) before it answered: the ${endpoint} may have reached the broker`);
      };
    }
    const loseFirstCancel = (broker: ReturnType<typeof fakeActorContext>['broker'], afterMs: number, meanwhile?: () => void) => loseFirst(broker, 'order/cancelorder', afterMs, meanwhile);

    it('carries on once the connection is back: the legs are cancelled and the position closed', async () => {
      const { broker, ctx } = await longWithBracket();
      loseFirstCancel(broker, 400);
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
      expect(broker.bodies('order/liquidateposition')).toHaveLength(1);
      expect(ctx.model.positions(ACCOUNT)).toEqual([]);
      expect(ctx.model.workingOrders(ACCOUNT)).toEqual([]);
    });

    it('closes nothing that grew while the connection was down (traded elsewhere): that is not the position it was for', async () => {
      const { broker, ctx } = await longWithBracket();
      loseFirstCancel(broker, 300, () => broker.fill(broker.addOrder({ qty: 2 }), 2, 5001));
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'failed', code: 'CONFLICT', detail: 'the position was traded elsewhere while the connection was down (1 when the flatten began, 3 now): not closed' }]);
      expect(broker.bodies('order/liquidateposition')).toEqual([]);
    });

    it('closes nothing that was closed and opened again at the same size while the connection was down (re-probe 5, suspected: the new position would have been closed)', async () => {
      const { broker, ctx } = await longWithBracket();
      loseFirstCancel(broker, 300, () => {
        broker.fill(broker.addOrder({ action: 'Sell', qty: 1 }), 1, 5002);
        broker.fill(broker.addOrder({ action: 'Buy', qty: 1 }), 1, 5003);
      });
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 0, status: 'failed', code: 'CONFLICT', detail: 'the position was traded elsewhere while the connection was down (1 when the flatten began, 1 now): not closed' }]);
      expect(broker.bodies('order/liquidateposition')).toEqual([]);
    });

    it('a liquidation lost unanswered with the connection is sent again once it is back, the position still open (re-probe 4: left open without its legs)', async () => {
      const { broker, ctx } = await longWithBracket();
      loseFirst(broker, 'order/liquidateposition', 300);
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
      expect(broker.bodies('order/liquidateposition')).toHaveLength(2);
      expect(ctx.model.positions(ACCOUNT)).toEqual([]);
    });

    it('an entry it was cancelling that filled during the outage is its own to close, not "traded elsewhere" (re-probe 4)', async () => {
      const { broker, ctx } = fakeActorContext();
      const entry = await placeOrder(ctx, newOrder({ price: 4995, takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }));
      loseFirstCancel(broker, 300, () => broker.fill(Number(entry.order.orderId), 1, 4995));
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }]);
      expect(ctx.model.positions(ACCOUNT)).toEqual([]);
    });

    it('a cancel lost with the connection whose order ended meanwhile (an entry that filled) still waits for the connection before the positions are read (re-probe 6: read from a half-rebuilt mirror, an exit answered 200 with long 2 left)', async () => {
      const { broker, ctx } = fakeActorContext();
      const entry = await placeOrder(ctx, newOrder({ price: 4995 }));
      // The entry fills as the socket drops, before the cancel's loss is known.
      loseFirstCancel(broker, 300);
      const fillNow = broker.handlers['order/cancelorder']!;
      let filled = false;
      broker.handlers['order/cancelorder'] = (b) => {
        if (!filled) broker.fill(Number(entry.order.orderId), entry.order.qty, 4995);
        filled = true;
        return fillNow(b);
      };
      const readWhile: boolean[] = [];
      const read = ctx.model.openPositionEntities.bind(ctx.model);
      ctx.model.openPositionEntities = (accountId: string) => {
        readWhile.push(broker.connected);
        return read(accountId);
      };
      const r = await flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
      expect(r.positions).toEqual([{ symbol: 'ESZ6', closedQty: entry.order.qty, status: 'liquidated' }]);
      // The first read is the flatten's start (connected); none while the connection was down.
      expect(readWhile.every(Boolean)).toBe(true);
      expect(ctx.model.positions(ACCOUNT)).toEqual([]);
    });

    it('fails as before when the connection is not back within its wait', async () => {
      const { broker, ctx } = await longWithBracket();
      loseFirstCancel(broker, 60_000);
      vi.useFakeTimers({ toFake: ['setTimeout'], shouldAdvanceTime: true, advanceTimeDelta: 50 });
      try {
        const done = flatten(ctx, request({ symbol: 'ESZ6', symbolOnly: true }));
        const outcome = expect(done).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
        await vi.advanceTimersByTimeAsync(25_000);
        await outcome;
      } finally {
        vi.useRealTimers();
      }
      expect(broker.bodies('order/liquidateposition')).toEqual([]);
    });
  });

  it('an order that arrives while a slow flatten runs is refused after FLATTEN_WAIT_MS with nothing sent, not sent after its caller was answered 504 (re-probe: a retry doubled the position)', async () => {
    const { broker, ctx, liquidation, flat, before } = await flattenHeldAtLiquidation();
    vi.useFakeTimers({ toFake: ['setTimeout'], shouldAdvanceTime: true, advanceTimeDelta: 50 });
    try {
      const order = placeOrder(ctx, newOrder({ orderType: 'market', price: null } as never));
      const refused = expect(order).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1, message: expect.stringMatching(/flatten of account 7 was still running after 4 s: this order was not sent/) });
      await vi.advanceTimersByTimeAsync(FLATTEN_WAIT_MS + 1_000);
      await refused;
    } finally {
      vi.useRealTimers();
    }
    expect(broker.bodies('order/placeorder').length, 'nothing sent for it').toBe(before);
    liquidation.release();
    await flat;
    expect(broker.bodies('order/placeorder').length, 'nor after the flatten').toBe(before);
  });

  it('an API order whose caller stopped waiting while it waited (here for a flatten) is not sent at all: 503, nothing at the broker; a webhook alert’s order still goes (cluster probe: sent after its caller’s 504, a retry without a key doubled it)', async () => {
    const { broker, ctx, liquidation, flat, before } = await flattenHeldAtLiquidation();
    const market = newOrder({ orderType: 'market', price: null } as never);
    // The caller waits 300 ms; the flatten ends after 400 ms, well within FLATTEN_WAIT_MS.
    const order = placeOrder(ctx, { ...market, callerGoneAt: performance.now() + 300 });
    const alert = placeOrder(ctx, { ...newOrder({ orderType: 'market', price: null } as never), origin: 'webhook', callerGoneAt: performance.now() + 300 });
    const waiting = placeOrder(ctx, { ...newOrder({ orderType: 'market', price: null } as never), callerGoneAt: performance.now() + 60_000 });
    await new Promise((r) => setTimeout(r, 400));
    liquidation.release();
    await flat;
    await expect(order).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1, message: expect.stringMatching(/this order was not sent \(nothing reached the broker\)/) });
    await alert;
    await waiting;
    const sent = broker.bodies('order/placeorder').slice(before).map((b) => b.clOrdId);
    expect(sent, 'the alert’s and the still-awaited order only').toHaveLength(2);
    expect(sent, 'the refused order never reached the broker').not.toContain(market.clOrdId);
  });

  it('an exit whose legs have made room for it is sent even when its caller stopped waiting meanwhile: refused then, the legs were given back while a retry under its key made room again (re-probe: a take-profit larger than the position)', async () => {
    const { broker, ctx } = fakeActorContext();
    const held = broker.addOrder({ qty: 2 });
    broker.fill(held, 2, 5000);
    const rooms: string[] = [];
    ctx.makeRoom = async () => {
      rooms.push('cut');
      await new Promise((r) => setTimeout(r, 400));
      return false;
    };
    ctx.roomUsed = async () => void rooms.push('used');
    const before = broker.bodies('order/placeorder').length;
    // The caller waits 300 ms; cutting the legs takes 400.
    const exit = await placeOrder(ctx, { ...newOrder({ side: 'sell', orderType: 'market', price: null } as never), callerGoneAt: performance.now() + 300 });
    expect(exit.order.side).toBe('sell');
    expect(broker.bodies('order/placeorder').length).toBe(before + 1);
    expect(rooms).toEqual(['cut', 'used']);
  });

  it('a webhook alert’s order waits for the flatten however long it takes, and is placed after it (its late outcome is followed up; TradingView does not resend)', async () => {
    const { broker, ctx, liquidation, flat, before } = await flattenHeldAtLiquidation();
    let settled = false;
    vi.useFakeTimers({ toFake: ['setTimeout'], shouldAdvanceTime: true, advanceTimeDelta: 50 });
    let order: Promise<unknown>;
    try {
      order = placeOrder(ctx, { ...newOrder({ orderType: 'market', price: null } as never), origin: 'webhook' });
      void order.finally(() => (settled = true)).catch(() => undefined);
      await vi.advanceTimersByTimeAsync(FLATTEN_WAIT_MS + 1_000);
      expect(settled, 'still waiting for the flatten').toBe(false);
    } finally {
      vi.useRealTimers();
    }
    liquidation.release();
    await flat;
    await order!;
    expect(broker.bodies('order/placeorder').length, 'placed after the flatten').toBe(before + 1);
  });

  it('refuses while disconnected', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.connected = false;
    await expect(flatten(ctx, request())).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  });
});
