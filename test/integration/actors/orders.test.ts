/**
 * Order semantics of a connection actor against the real paper broker over loopback: placing
 * (single, absolute and relative brackets, clOrdId reconciliation, risk rejects), every row of
 * the DESIGN §6 cancel table with fills forced through the sim's control API, flatten, and
 * closed-trade history.
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { startActorHarness, SYMBOL, type ActorHarness } from '../../support/actor.js';
import type { OrderRecord } from '../../../src/domain/orders.js';
import type { PlaceOrderRequest } from '../../../src/actors/protocol.js';

let h: ActorHarness;
let account: string;
let seq = 0;

beforeEach(async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  account = String(h.user.accounts[0]!.id);
});

afterEach(async () => {
  await h.close();
});

function order(over: Partial<PlaceOrderRequest> = {}): PlaceOrderRequest {
  return {
    type: 'place-order',
    accountId: account,
    symbol: SYMBOL,
    requestedSymbol: 'ES1!',
    side: 'buy',
    qty: 1,
    orderType: 'limit',
    price: 4990,
    timeInForce: 'day',
    clOrdId: `cl-${process.pid}-${++seq}`,
    ...over,
  };
}

const bracket = (over: Partial<PlaceOrderRequest> = {}) => order({ takeProfit: { price: 5010 }, stopLoss: { price: 4980 }, ...over });

function record(id: string): OrderRecord {
  const r = h.actor.model.record(Number(id));
  if (!r) throw new Error(`order ${id} not in the mirror`);
  return r;
}

async function fill(id: string, qty?: number): Promise<void> {
  const before = record(id).filledQty;
  await h.control('POST', `/orders/${id}/fill`, qty === undefined ? {} : { qty });
  await h.until(() => (record(id).filledQty > before ? true : undefined));
}

async function working(): Promise<string[]> {
  return (await h.call({ type: 'working-orders', accountId: account })).map((o) => o.orderId);
}

describe('place', () => {
  test('a single limit order comes back working with the broker id, the requested symbol and role single', async () => {
    const req = order({ clientOrderId: 'mine-1' });
    const r = await h.call(req);
    expect(r.reconciled).toBe(false);
    expect(r.order).toMatchObject({ symbol: SYMBOL, requestedSymbol: 'ES1!', side: 'buy', type: 'limit', qty: 1, price: 4990, status: 'working', role: 'single', clientOrderId: 'mine-1' });
    expect(await working()).toEqual([r.order.orderId]);
    const state = await h.control('GET', '/state');
    const atBroker = state.orders.find((o: { id: number }) => String(o.id) === r.order.orderId);
    expect(atBroker.clOrdId).toBe(req.clOrdId);
  });

  test('the same clOrdId twice places one order and answers the second with reconciled: true', async () => {
    const req = order();
    const first = await h.call(req);
    const second = await h.call(req);
    expect(second.reconciled).toBe(true);
    expect(second.order.orderId).toBe(first.order.orderId);
    const state = await h.control('GET', '/state');
    expect(state.orders.filter((o: { clOrdId: string }) => o.clOrdId === req.clOrdId)).toHaveLength(1);
  });

  test('a retried bracket reconciles to its entry (not a leg carrying the same clOrdId) with its legs', async () => {
    const req = bracket();
    const first = await h.call(req);
    const again = await h.call(req);
    expect(again).toMatchObject({ reconciled: true, order: { orderId: first.order.orderId, role: 'entry' } });
    expect(again.legs?.takeProfit?.orderId).toBe(first.legs?.takeProfit?.orderId);
    expect((await h.control('GET', '/state')).orders).toHaveLength(3);
  });

  test('an absolute bracket becomes an OSO: entry plus suspended take-profit Limit and stop-loss Stop legs', async () => {
    const r = await h.call(bracket());
    expect(r.order.role).toBe('entry');
    expect(r.legs?.takeProfit).toMatchObject({ role: 'take_profit', type: 'limit', price: 5010, side: 'sell', bracketId: r.order.orderId, status: 'pending' });
    expect(r.legs?.stopLoss).toMatchObject({ role: 'stop_loss', type: 'stop', stopPrice: 4980, side: 'sell', bracketId: r.order.orderId });
    expect(r.order.legs).toEqual({ takeProfit: r.legs!.takeProfit!.orderId, stopLoss: r.legs!.stopLoss!.orderId });
  });

  test('a relative bracket on a sell uses a strategy whose legs land at signed offsets from the fill', async () => {
    const r = await h.call(order({ side: 'sell', orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    expect(r.order.role).toBe('entry');
    const entryId = r.order.orderId;
    const legs = await h.until(() => {
      const e = record(entryId);
      return e.legs.takeProfit && e.legs.stopLoss ? e.legs : undefined;
    });
    expect(record(legs.takeProfit!)).toMatchObject({ role: 'take_profit', side: 'buy', price: 4990, bracketId: entryId });
    expect(record(legs.stopLoss!)).toMatchObject({ role: 'stop_loss', side: 'buy', stopPrice: 5005, bracketId: entryId });
  });

  test('offset legs are checked from where the entry fills at the live market: a stop past zero is PRICE_OUT_OF_RANGE and nothing is sent', async () => {
    const before = (await h.control('GET', '/state')).orders.length;
    const err = await h.callError(order({ price: 20000, stopLoss: { offsetPoints: 15000 } }));
    expect(err).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', extensions: { anchor: { price: 5000, last: 5000 }, band: { min: 1000, max: 25000 } } });
    expect(err.extensions.errors).toEqual([{ path: 'stopLoss.ticks', message: expect.stringContaining('60000 ticks below the expected fill 5000') }]);
    expect((await h.control('GET', '/state')).orders).toHaveLength(before);
  });

  test('a leg the broker refuses after the fill (the market gapped through a sell stop) raises a bracket alert with the reason', async () => {
    // From a fill at the stop (1500) the target lands at 1025; the gap fills the stop at 400, and the target at -75 is refused.
    const r = await h.call(order({ side: 'sell', orderType: 'stop', price: null, stopPrice: 1500, takeProfit: { offsetPoints: 475 } }));
    expect(r.order.status).toBe('working');
    await h.control('POST', '/prices', { symbol: SYMBOL, price: 400 });
    const alert = await h.until(() => h.events.find((e) => e.type === 'bracket-alert'));
    expect(alert).toMatchObject({ accountId: account, orderId: r.order.orderId });
    expect((alert as { detail: string }).detail).toMatch(/^take_profit leg \d+ of filled entry \d+ is rejected \(InvalidPrice: Price must be positive\): position unprotected$/);
  });

  test('a broker risk reject is BROKER_REJECTED with the broker reason', async () => {
    await h.control('POST', `/accounts/${account}/limits`, { maxOrderQty: 2 });
    const err = await h.callError(order({ qty: 5 }));
    expect(err.code).toBe('BROKER_REJECTED');
    expect(String(err.extensions.brokerReason)).toContain('MaxOrderQtyLimitReached');
  });

  test('an order racing the broker revoking its account answers ACCOUNT_INACTIVE, not a broker rejection', async () => {
    const revoked = h.control('POST', `/accounts/${account}/deactivate`);
    const [, err] = await Promise.all([revoked, h.callError(order({ orderType: 'market', price: null }))]);
    expect(err).toMatchObject({ code: 'ACCOUNT_INACTIVE', message: 'Account is inactive' });
  });

  test('an account the connection does not have is NOT_FOUND and nothing is sent', async () => {
    const err = await h.callError(order({ accountId: '999' }));
    expect(err.code).toBe('NOT_FOUND');
  });
});

describe('cancel (DESIGN §6)', () => {
  test('entry unfilled with TP/SL: entry cancelled, both legs removed and listed', async () => {
    const r = await h.call(bracket());
    const res = await h.call({ type: 'cancel-order', accountId: account, orderId: r.order.orderId });
    expect(res.order.status).toBe('cancelled');
    expect(res.removedLegIds.sort()).toEqual([r.legs!.takeProfit!.orderId, r.legs!.stopLoss!.orderId].sort());
    expect(res.replaced).toBeNull();
    expect(await working()).toEqual([]);
  });

  test('entry partly filled: the remainder is cancelled, the filled part stays a position with its legs', async () => {
    const r = await h.call(bracket({ qty: 3 }));
    await fill(r.order.orderId, 1);
    const res = await h.call({ type: 'cancel-order', accountId: account, orderId: r.order.orderId });
    expect(res.remainderCancelled).toBe(true);
    expect(res.order).toMatchObject({ status: 'cancelled', filledQty: 1 });
    const positions = await h.call({ type: 'positions', accountId: account });
    expect(positions).toEqual([expect.objectContaining({ symbol: SYMBOL, netQty: 1 })]);
    const legs = await h.call({ type: 'working-orders', accountId: account });
    expect(legs.map((o) => [o.role, o.qty, o.status]).sort()).toEqual([['stop_loss', 1, 'working'], ['take_profit', 1, 'working']]);
  });

  test.each([
    ['take_profit', 'stopLoss'],
    ['stop_loss', 'takeProfit'],
  ] as const)('filled bracket, cancelling the %s: that leg goes, the survivor is re-placed under a new id', async (_role, survivorKey) => {
    const r = await h.call(bracket({ qty: 2 }));
    await fill(r.order.orderId);
    await h.until(() => (record(r.legs!.takeProfit!.orderId).status === 'working' ? true : undefined));
    const cancelKey = survivorKey === 'stopLoss' ? 'takeProfit' : 'stopLoss';
    const cancelled = r.legs![cancelKey]!;
    const survivor = r.legs![survivorKey]!;
    const res = await h.call({ type: 'cancel-order', accountId: account, orderId: cancelled.orderId });
    expect(res.order.status).toBe('cancelled');
    expect(res.replaced?.replacedOrderId).toBe(survivor.orderId);
    expect(res.replaced?.newOrderId).not.toBe(survivor.orderId);
    const now = await h.call({ type: 'working-orders', accountId: account });
    expect(now.map((o) => o.orderId)).toEqual([res.replaced!.newOrderId]);
    expect(now[0]).toMatchObject({ role: survivor.role, qty: 2, price: survivor.price, stopPrice: survivor.stopPrice, side: 'sell', bracketId: r.order.orderId });
    expect(await h.call({ type: 'positions', accountId: account })).toEqual([expect.objectContaining({ netQty: 2 })]);
  });

  test('filled relative bracket: cancelling the stop re-places the target under a new id', async () => {
    const r = await h.call(order({ orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    const legs = await h.until(() => {
      const e = record(r.order.orderId);
      return e.legs.takeProfit && e.legs.stopLoss && record(e.legs.takeProfit).status === 'working' ? e.legs : undefined;
    });
    const res = await h.call({ type: 'cancel-order', accountId: account, orderId: legs.stopLoss! });
    expect(res.replaced?.replacedOrderId).toBe(legs.takeProfit);
    const now = await h.call({ type: 'working-orders', accountId: account });
    expect(now).toEqual([expect.objectContaining({ orderId: res.replaced!.newOrderId, role: 'take_profit', price: 5010 })]);
  });

  test('outside the table, a leg of an unfilled entry: refused (409 CONFLICT), nothing cancelled — the broker’s OCO would take both legs and leave the entry to fill with none', async () => {
    const r = await h.call(bracket());
    const err = await h.callError({ type: 'cancel-order', accountId: account, orderId: r.legs!.takeProfit!.orderId });
    expect(err.code).toBe('CONFLICT');
    expect(err.message).toContain('has not filled yet');
    expect((await working()).sort()).toEqual([r.order.orderId, r.legs!.takeProfit!.orderId, r.legs!.stopLoss!.orderId].sort());
  });

  test('an order already final is 409 ORDER_NOT_WORKING carrying its final state', async () => {
    const r = await h.call(order());
    await h.call({ type: 'cancel-order', accountId: account, orderId: r.order.orderId });
    const err = await h.callError({ type: 'cancel-order', accountId: account, orderId: r.order.orderId });
    expect(err.code).toBe('ORDER_NOT_WORKING');
    expect(err.status).toBe(409);
    expect((err.extensions.order as OrderRecord).status).toBe('cancelled');
  });

  test('an unknown order id is NOT_FOUND', async () => {
    const err = await h.callError({ type: 'cancel-order', accountId: account, orderId: '123456' });
    expect(err.code).toBe('NOT_FOUND');
  });
});

describe('flatten', () => {
  async function holdAndRest(): Promise<string> {
    await h.call(order({ orderType: 'market', price: null, qty: 2 }));
    await h.until(() => (h.actor.model.positions(account).length ? true : undefined));
    return (await h.call(order({ price: 4900 }))).order.orderId;
  }

  test('without a symbol: every resting order cancelled, every position liquidated', async () => {
    const resting = await holdAndRest();
    const res = await h.call({ type: 'flatten', accountId: account });
    expect(res.cancelledOrderIds).toContain(resting);
    expect(res.positions).toEqual([{ symbol: SYMBOL, closedQty: 2, status: 'liquidated' }]);
    expect(await working()).toEqual([]);
    expect(await h.call({ type: 'positions', accountId: account })).toEqual([]);
  });

  test('an actor stopped while its flatten is under way lets it finish: the position is closed, not left without its legs (re-probe: a graceful stop of a cluster node left a naked long)', async () => {
    const entry = await h.call(bracket({ orderType: 'market', price: null }));
    await h.until(() => (h.actor.model.positions(account).length && (h.actor.model.record(Number(entry.order.orderId))?.legs?.takeProfit ?? null) !== null ? true : undefined));
    await h.control('POST', '/faults', { latencyMs: 400 });
    const flattening = h.call({ type: 'flatten', accountId: account }).catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 150));
    await h.actor.stop();
    await h.control('DELETE', '/faults');
    await flattening;
    const state = await h.control('GET', '/state');
    const positions = (state.positions as { accountId: number; netPos: number }[]).filter((p) => p.accountId === Number(account));
    const orders = (state.orders as { accountId: number; ordStatus: string }[]).filter((o) => o.accountId === Number(account));
    expect(positions.reduce((n, p) => n + p.netPos, 0)).toBe(0);
    expect(orders.filter((o) => o.ordStatus === 'Working')).toEqual([]);
  });

  /** Long 2 from a filled bracket (take-profit 5010, stop-loss 4980), its legs working. */
  async function filledBracket(): Promise<{ entry: string; takeProfit: string; stopLoss: string }> {
    const entry = await h.call(bracket({ orderType: 'market', price: null, qty: 2 }));
    const legs = await h.until(() => {
      const e = record(entry.order.orderId);
      return e.legs.takeProfit && e.legs.stopLoss && record(e.legs.takeProfit).status === 'working' && record(e.legs.stopLoss).status === 'working' ? e.legs : undefined;
    });
    return { entry: entry.order.orderId, takeProfit: legs.takeProfit!, stopLoss: legs.stopLoss! };
  }

  /** What the paper broker itself holds for the account: net position and working orders. */
  async function atBroker(): Promise<{ net: number; working: number }> {
    const state = await h.control('GET', '/state');
    const positions = (state.positions as { accountId: number; netPos: number }[]).filter((p) => p.accountId === Number(account));
    const orders = (state.orders as { accountId: number; ordStatus: string }[]).filter((o) => o.accountId === Number(account));
    return { net: positions.reduce((n, p) => n + p.netPos, 0), working: orders.filter((o) => o.ordStatus === 'Working').length };
  }

  /**
   * Watches the paper broker every 10 ms until stopped: the first order `matches` picks that was
   * working while the account held no position, or undefined.
   */
  function watchFlatAccount(matches: (o: { clOrdId?: string }) => boolean): { stop(): Promise<unknown> } {
    let seen: unknown;
    let watching = true;
    const run = (async () => {
      while (watching && seen === undefined) {
        const state = await h.control('GET', '/state');
        const flat = !(state.positions as { accountId: number; netPos: number }[]).some((p) => p.accountId === Number(account) && p.netPos !== 0);
        const working = (state.orders as { accountId: number; ordStatus: string; clOrdId?: string }[]).find((o) => o.accountId === Number(account) && o.ordStatus === 'Working' && matches(o));
        if (flat && working) seen = working;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    return {
      async stop() {
        watching = false;
        await run;
        return seen;
      },
    };
  }

  test('an exit whose legs make room for it does not wait out the settle time for itself (money probe: every such exit took 5 s, its leg cancel waiting for the exit that waited for it)', async () => {
    await filledBracket();
    const t0 = performance.now();
    const exit = await h.call(order({ side: 'sell', qty: 2, price: 5005 }));
    // TEST_TUNING's settleMs is 3000: before, the answer came after it and the leg cancel's own ~2 s here (5 s in all).
    expect(performance.now() - t0).toBeLessThan(4000);
    expect(exit.order.status).toBe('working');
  });

  test('a flatten begun while an exit\'s legs make room for it: the exit is not sent (409 CONFLICT) and the account ends flat with nothing working, at no moment (money probe: the exit rested on the flat account and made it short 2; re-probe: its legs given back rested there until a sweep)', async () => {
    await filledBracket();
    await h.control('POST', '/faults', { latencyMs: 300 });
    // Any order working at the broker while the account is flat, seen at any moment.
    const watch = watchFlatAccount(() => true);
    const exiting = h.call(order({ side: 'sell', qty: 2, price: 5005 })).catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 150));
    const flattened = await h.call({ type: 'flatten', accountId: account });
    const exit = await exiting;
    await h.control('DELETE', '/faults');
    await new Promise((r) => setTimeout(r, 500));
    const stray = await watch.stop();
    expect(flattened.positions).toEqual([{ symbol: SYMBOL, closedQty: 2, status: 'liquidated' }]);
    expect(exit).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('a flatten of account') });
    expect(stray).toBeUndefined();
    expect(await atBroker()).toEqual({ net: 0, working: 0 });
  });

  test('a leg cancelled while a flatten runs does not place its survivor again, whichever came first (money probe: the stop-loss went out 2 ms after the liquidation filled and rested on the flat account; touched, the account went short 2)', async () => {
    const cases = [...[0, 50].map((ms) => [false, ms] as const), ...[0, 20].map((ms) => [true, ms] as const)];
    for (const [cancelFirst, gapMs] of cases) {
      const what = `cancel first: ${cancelFirst}, ${gapMs} ms apart`;
      const legs = await filledBracket();
      await h.control('POST', '/faults', { latencyMs: 300 });
      // A re-placed leg (clOrdId rp-…) working at the broker while the account is flat, seen at any moment.
      const watch = watchFlatAccount((o) => (o.clOrdId ?? '').startsWith('rp-'));
      const cancel = () => h.call({ type: 'cancel-order', accountId: account, orderId: legs.takeProfit });
      const flatten = () => h.call({ type: 'flatten', accountId: account });
      const first = cancelFirst ? cancel() : flatten();
      await new Promise((r) => setTimeout(r, gapMs));
      const second = cancelFirst ? flatten() : cancel();
      const results = await Promise.allSettled([first, second]);
      await h.control('DELETE', '/faults');
      await new Promise((r) => setTimeout(r, 300));
      const orphan = await watch.stop();
      expect(results.map((r) => r.status), what).toEqual(['fulfilled', 'fulfilled']);
      expect(orphan, what).toBeUndefined();
      expect(await atBroker(), what).toEqual({ net: 0, working: 0 });
    }
  }, 60_000);

  test('a flatten stopped by a refused cancel after its legs\' cancels went through says the position is open without its protective orders, in its error and on the stream (re-probe: a p-ticket on the first cancel, and the 503 read as if nothing had happened)', async () => {
    await filledBracket();
    await h.call(order({ price: 4900 }));
    // The next order request (the flatten's first cancel: the plain limit's) gets a p-ticket with a captcha: refused.
    await h.control('POST', '/faults', { pTicketSeconds: 2, pTicketCaptcha: true, pTicketTarget: 'orders' });
    const err = await h.callError({ type: 'flatten', accountId: account });
    await h.control('DELETE', '/faults');
    expect(err.message).toMatch(/: the ESZ6 position is open without protective orders: the flatten cancelled its stop-loss and take-profit \(\d+, \d+\) and then stopped before closing it/);
    expect(h.events).toContainEqual(expect.objectContaining({ type: 'bracket-alert', detail: expect.stringContaining('open without protective orders') }));
    expect((await atBroker()).net).toBe(2);
  });

  test('with the held symbol: flattens like without one', async () => {
    await holdAndRest();
    const res = await h.call({ type: 'flatten', accountId: account, symbol: SYMBOL });
    expect(res.positions).toEqual([{ symbol: SYMBOL, closedQty: 2, status: 'liquidated' }]);
    expect(await h.call({ type: 'positions', accountId: account })).toEqual([]);
  });

  test('with a different symbol: 409 SYMBOL_MISMATCH and nothing touched', async () => {
    const resting = await holdAndRest();
    const err = await h.callError({ type: 'flatten', accountId: account, symbol: 'NQZ6' });
    expect(err.code).toBe('SYMBOL_MISMATCH');
    expect(err.status).toBe(409);
    expect(await working()).toEqual([resting]);
    expect(await h.call({ type: 'positions', accountId: account })).toEqual([expect.objectContaining({ netQty: 2 })]);
  });
});

test('trade history pairs fills FIFO with pnl in account currency', async () => {
  await h.call(order({ orderType: 'market', price: null, qty: 2 }));
  await h.control('POST', '/prices', { symbol: SYMBOL, price: 5004 });
  await h.call(order({ orderType: 'market', price: null, side: 'sell', qty: 1 }));
  const trades = await h.until(() => {
    const t = h.actor.model.tradeHistory(account, () => 50);
    return t.length ? t : undefined;
  });
  const history = await h.call({ type: 'trade-history', accountId: account });
  expect(history).toEqual(trades);
  expect(history).toEqual([expect.objectContaining({ direction: 'long', qty: 1, entryPrice: 5000, exitPrice: 5004, pnlPoints: 4, pnl: 200, symbol: SYMBOL })]);
});

test('a retry with the same clOrdId while the first attempt is still at the broker waits for it: one order', async () => {
  await h.control('POST', '/faults', { latencyMs: 300 });
  const req = order();
  const [a, b] = await Promise.all([h.call(req), h.call(req)]);
  await h.control('DELETE', '/faults');
  expect(b.order.orderId).toBe(a.order.orderId);
  expect([a.reconciled, b.reconciled].sort()).toEqual([false, true]);
  expect((await h.control('GET', '/state')).orders).toHaveLength(1);
});
