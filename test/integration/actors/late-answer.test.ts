/**
 * An order the broker answers after the actor's request deadline, through a real actor against
 * the paper broker over loopback. The first attempt ends in 504 BROKER_TIMEOUT while the order
 * is still on its way; its outcome stays unknown until the broker says, and a retry with the
 * same clOrdId sends nothing in the meantime (neither Tradovate nor the paper broker refuses a
 * repeated clOrdId): before the late answer it waits for it, or answers 504 again at its
 * deadline; after the late answer, or after a reconnect's full sync, it answers the order the
 * broker has — or places it once if the broker never got it. Every case ends with exactly one
 * order at the broker and an answer carrying it.
 */
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { startActorHarness, SYMBOL, type ActorHarness } from '../../support/actor.js';
import { eventually } from '../../support/http.js';
import type { PlaceOrderRequest } from '../../../src/actors/protocol.js';

/** The actor's broker deadline: the paper broker is slowed past it. */
const REQUEST_TIMEOUT_MS = 400;

let h: ActorHarness;
let account: string;
let seq = 0;

beforeEach(async () => {
  h = await startActorHarness({ requestTimeoutMs: REQUEST_TIMEOUT_MS });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  account = String(h.user.accounts[0]!.id);
  // The contract is named before the broker is slowed: only the order itself is late.
  await h.actor.conn.ensureContract({ name: SYMBOL });
});

afterEach(async () => {
  await h.close();
});

function order(over: Partial<PlaceOrderRequest> = {}): PlaceOrderRequest {
  return {
    type: 'place-order', accountId: account, symbol: SYMBOL, requestedSymbol: 'ES1!', side: 'buy', qty: 1, orderType: 'limit', price: 4990,
    timeInForce: 'day', clOrdId: `late-${process.pid}-${++seq}`, clientOrderId: 'mine', ...over,
  };
}

const slow = (latencyMs: number) => h.control('POST', '/faults', { latencyMs });
const healthy = () => h.control('DELETE', '/faults');

/** Orders at the broker placed under `clOrdId`. */
async function atBroker(clOrdId: string): Promise<{ id: number }[]> {
  return ((await h.control('GET', '/state')).orders as { id: number; clOrdId: string | null }[]).filter((o) => o.clOrdId === clOrdId);
}

/** Order requests the actor sends to the broker from now on. */
function orderRequests(): () => string[] {
  const send = vi.spyOn(h.actor.conn, 'send');
  return () => send.mock.calls.map((c) => c[0]).filter((e) => e.startsWith('order/') || e.startsWith('orderstrategy/'));
}

/** The first attempt: the broker answers after the deadline, so the actor answers 504. */
async function timesOut(req: PlaceOrderRequest): Promise<void> {
  const err = await h.callError(req);
  expect(err.code).toBe('BROKER_TIMEOUT');
}

describe('a retry after a 504 while the order is still on its way to the broker', () => {
  test('arriving before the late answer, it waits for it and answers that order: one order at the broker', async () => {
    await slow(600);
    const req = order();
    await timesOut(req);
    const sent = orderRequests();
    const retry = await h.call(req);
    await healthy();
    expect(sent()).toEqual([]);
    expect(retry).toMatchObject({ reconciled: true, order: { requestedSymbol: 'ES1!', clientOrderId: 'mine', status: 'working', price: 4990 } });
    expect((await atBroker(req.clOrdId)).map((o) => String(o.id))).toEqual([retry.order.orderId]);
  });

  test('still unanswered at its own deadline it answers 504 again and sends nothing; after the late answer the retry gets the order', async () => {
    await slow(1500);
    const req = order();
    await timesOut(req);
    const sent = orderRequests();
    expect((await h.callError(req)).code).toBe('BROKER_TIMEOUT');
    expect(sent()).toEqual([]);
    // The late answer (and the order's events) arrive.
    const late = await h.until(() => h.actor.model.findByClOrdId(account, req.clOrdId), 5000);
    await healthy();
    const retry = await h.call(req);
    expect(retry).toMatchObject({ reconciled: true, order: { orderId: String(late.id), requestedSymbol: 'ES1!', clientOrderId: 'mine' } });
    expect(sent()).toEqual([]);
    expect(await atBroker(req.clOrdId)).toHaveLength(1);
  });

  test('an answer lost with its events stays unknown on the live socket; after a reconnect the full sync answers the order the broker has', async () => {
    await slow(600);
    const req = order();
    await timesOut(req);
    // The broker executes the order but its answer and events never reach the actor.
    await h.control('POST', '/faults', { silent: true });
    const [executed] = await eventually(async () => {
      const orders = await atBroker(req.clOrdId);
      return orders.length > 0 && orders;
    }, 'the order executed at the broker', 5000);
    await healthy();
    const sent = orderRequests();
    // The socket lives on and the mirror never hears of the order: only the broker knows.
    expect((await h.callError(req)).code).toBe('BROKER_TIMEOUT');
    expect(sent()).toEqual([]);
    await h.control('POST', '/connections/drop', { user: h.user.name });
    await h.nextStatus('RECONNECTING');
    await h.nextStatus('CONNECTED');
    const retry = await h.call(req);
    expect(retry).toMatchObject({ reconciled: true, order: { orderId: String(executed!.id), requestedSymbol: 'ES1!', clientOrderId: 'mine' } });
    expect(sent()).toEqual([]);
    expect(await atBroker(req.clOrdId)).toHaveLength(1);
  });

  test('a placement lost with its socket: retries send nothing until the reconnect’s sync shows the broker never got it, then it is placed once', async () => {
    await slow(1500);
    const req = order();
    await timesOut(req);
    const sent = orderRequests();
    expect((await h.callError(req)).code).toBe('BROKER_TIMEOUT');
    expect(sent()).toEqual([]);
    // The socket dies with the request still queued at the broker, which then never executes it.
    await h.control('POST', '/connections/drop', { user: h.user.name });
    await healthy();
    await h.nextStatus('RECONNECTING');
    await h.nextStatus('CONNECTED');
    const retry = await h.call(req);
    expect(retry).toMatchObject({ reconciled: false, order: { requestedSymbol: 'ES1!', clientOrderId: 'mine', status: 'working' } });
    expect(sent()).toEqual(['order/placeorder']);
    expect((await atBroker(req.clOrdId)).map((o) => String(o.id))).toEqual([retry.order.orderId]);
  });

  test('a relative bracket (order strategy) answered late: the retry waits for its entry and never starts a second strategy', async () => {
    // A first strategy (on time) subscribes the contract's quotes, which offset legs are checked against.
    await h.call(order({ orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } }));
    const strategies = async () => new Set(((await h.control('GET', '/state')).orders as { strategyId: number | null }[]).map((o) => o.strategyId).filter((id) => id !== null)).size;
    const before = await strategies();
    await slow(600);
    const req = order({ orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } });
    await timesOut(req);
    const sent = orderRequests();
    const retry = await h.call(req);
    await healthy();
    expect(sent()).toEqual([]);
    expect(retry).toMatchObject({ reconciled: true, order: { role: 'entry', requestedSymbol: 'ES1!', status: 'filled' } });
    expect(await strategies()).toBe(before + 1);
  });
});
