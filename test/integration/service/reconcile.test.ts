/**
 * An idempotent order retried after a 504 through the whole service (HTTP front, supervisor,
 * actor thread) against the paper broker: the broker was slow, the first attempt timed out, the
 * order reached the broker anyway. The retry with the same key is reconciled by clOrdId — one
 * broker order — and answers the same fields a normal 201 carries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { eventually, http } from '../../support/http.js';
import { startInProcessService, type InProcessService } from '../../support/service.js';
import { control, simState } from '../../support/sim.js';

const front = resolveSymbol('ES', new Date());
if (!front.ok) throw new Error(front.reason);
const ES = front.contract;

let s: InProcessService;
let acc: string;

beforeAll(async () => {
  // The broker answers order requests after 300 ms at most, or they time out in the actor.
  s = await startInProcessService({ spec: { requestTimeoutMs: 300 } });
  acc = s.accounts[0]!;
  await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
}, 60_000);
afterAll(async () => {
  if (!s) return;
  await control(s.sim, 'DELETE', '/faults');
  await s.close();
});

const post = (body: unknown, key: string) => http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body, headers: { 'Idempotency-Key': key } });
const brokerOrders = async () => ((await simState(s.sim)).orders as any[]).filter((o) => String(o.accountId) === acc);

/** The first attempt times out (504) while the broker is slow; the order reaches the broker anyway. */
async function timedOut(body: unknown, key: string, brokerOrdersAfter: number): Promise<void> {
  await control(s.sim, 'POST', '/faults', { latencyMs: 800 });
  try {
    const first = await post(body, key);
    expect(first.status, first.text).toBe(504);
    expect(first.json.code).toBe('BROKER_TIMEOUT');
    await eventually(async () => (await brokerOrders()).length >= brokerOrdersAfter, 'the slow order reached the broker');
  } finally {
    await control(s.sim, 'DELETE', '/faults');
  }
}

/** Order strategies (relative brackets) at the broker on the account. */
const strategies = async () => new Set((await brokerOrders()).map((o) => o.strategyId).filter((id) => id !== null)).size;

/** As timedOut, for a relative bracket: its order strategy reaches the broker after the 504. */
async function strategyTimedOut(body: unknown, key: string): Promise<void> {
  const before = await strategies();
  await control(s.sim, 'POST', '/faults', { latencyMs: 800 });
  try {
    const first = await post(body, key);
    expect(first.status, first.text).toBe(504);
    await eventually(async () => (await strategies()) > before, 'the slow strategy reached the broker');
  } finally {
    await control(s.sim, 'DELETE', '/faults');
  }
}

/** A 201 body without what differs between two orders (ids, times, live state). */
function shape(body: any): unknown {
  const strip = (o: any) =>
    o && { ...o, orderId: typeof o.orderId, bracketId: o.bracketId === null ? null : typeof o.bracketId, createdAt: 0, updatedAt: 0, status: 0, filledQty: 0, avgFillPrice: 0, legs: o.legs && { takeProfit: typeof o.legs.takeProfit, stopLoss: typeof o.legs.stopLoss } };
  return { ...strip(body), reconciled: 0, legOrders: body.legOrders && { takeProfit: strip(body.legOrders.takeProfit), stopLoss: strip(body.legOrders.stopLoss) } };
}

describe('a retry after a 504 is reconciled with the order the broker already has', () => {
  it('a single order: one broker order, and the answer carries requestedSymbol and clientOrderId like a normal 201', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900, clientOrderId: 'mine-1' };
    const normal = await post(body, 'normal-single');
    expect(normal.status, normal.text).toBe(201);
    const before = (await brokerOrders()).length;
    await timedOut(body, 'slow-single', before + 1);
    const retry = await post(body, 'slow-single');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, symbol: ES, requestedSymbol: 'ES1!', clientOrderId: 'mine-1', role: 'single' });
    expect(shape(retry.json)).toEqual(shape(normal.json));
    expect(await brokerOrders()).toHaveLength(before + 1);
  });

  it('an order the broker rejected after the 504: the retry answers 422 BROKER_REJECTED with the reason, not 201 (re-probe: 201 `reconciled` for a rejected order)', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 2, type: 'limit', price: 4900 };
    await control(s.sim, 'POST', `/accounts/${acc}/limits`, { maxOrderQty: 1 });
    try {
      const before = (await brokerOrders()).length;
      await timedOut(body, 'slow-rejected', before + 1);
      await eventually(async () => (await brokerOrders()).at(-1)?.ordStatus === 'Rejected', 'rejected at the broker');
      const retry = await post(body, 'slow-rejected');
      expect(retry.status, retry.text).toBe(422);
      expect(retry.json).toMatchObject({ code: 'BROKER_REJECTED', brokerReason: expect.stringMatching(/MaxOrderQty/i) });
      expect(await brokerOrders()).toHaveLength(before + 1);
    } finally {
      await control(s.sim, 'POST', `/accounts/${acc}/limits`, { maxOrderQty: null });
    }
  });

  it('an absolute bracket: the entry with its legs (ids and orders), the legs named like a normal 201’s', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900, takeProfit: { price: 4950 }, stopLoss: { price: 4850 } };
    const normal = await post(body, 'normal-oso');
    expect(normal.status, normal.text).toBe(201);
    const before = (await brokerOrders()).length;
    await timedOut(body, 'slow-oso', before + 3);
    const retry = await post(body, 'slow-oso');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, requestedSymbol: 'ES1!', role: 'entry', bracketId: retry.json.orderId });
    expect(retry.json.legOrders.takeProfit).toMatchObject({ orderId: retry.json.legs.takeProfit, role: 'take_profit', requestedSymbol: 'ES1!', price: 4950 });
    expect(retry.json.legOrders.stopLoss).toMatchObject({ orderId: retry.json.legs.stopLoss, role: 'stop_loss', requestedSymbol: 'ES1!', stopPrice: 4850 });
    expect(shape(retry.json)).toEqual(shape(normal.json));
    expect(await brokerOrders()).toHaveLength(before + 3);
  });

  it('a relative bracket whose entry filled: the legs the broker hung from the fill', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } };
    const normal = await post(body, 'normal-strategy');
    expect(normal.status, normal.text).toBe(201);
    const before = await strategies();
    await strategyTimedOut(body, 'slow-strategy');
    const retry = await post(body, 'slow-strategy');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, requestedSymbol: 'ES1!', role: 'entry', status: 'filled' });
    expect(retry.json.legOrders.takeProfit).toMatchObject({ orderId: retry.json.legs.takeProfit, role: 'take_profit', price: 5010 });
    expect(retry.json.legOrders.stopLoss).toMatchObject({ orderId: retry.json.legs.stopLoss, role: 'stop_loss', stopPrice: 4995 });
    expect(shape(retry.json)).toEqual(shape(normal.json));
    expect(await strategies()).toBe(before + 1);
  });
});

describe('a retry after a 504 asking for other legs than the broker has is refused, not answered as carried out', () => {
  it('a stop-loss added to an absolute bracket: 422 IDEMPOTENCY_KEY_REUSED, nothing placed (money probe: 201 `reconciled`, the position without its stop)', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900, takeProfit: { price: 4950 } };
    const before = (await brokerOrders()).length;
    await timedOut(body, 'slow-add-sl', before + 2);
    const retry = await post({ ...body, stopLoss: { price: 4850 } }, 'slow-add-sl');
    expect(retry.status, retry.text).toBe(422);
    expect(retry.json).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', detail: expect.stringContaining('a stop-loss asked for, none at the broker') });
    // Left out again, the same request is the first one's: reconciled.
    expect((await post(body, 'slow-add-sl')).json).toMatchObject({ reconciled: true });
    expect(await brokerOrders()).toHaveLength(before + 2);
  });

  it('a relative bracket retried with another stop distance or a leg more: 422, nothing placed (money probe: 201 `reconciled`, the stop where the first one put it)', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4900, stopLoss: { ticks: 40 } };
    const before = await strategies();
    const orders = (await brokerOrders()).length;
    await strategyTimedOut(body, 'slow-sl-ticks');
    // Resting: its legs are not orders yet, but the strategy at the broker holds them.
    for (const [retryBody, why] of [
      [{ ...body, stopLoss: { ticks: 8 } }, 'stop-loss distance'],
      [{ ...body, takeProfit: { ticks: 40 } }, 'a take-profit asked for, none at the broker'],
    ] as const) {
      const retry = await post(retryBody, 'slow-sl-ticks');
      expect(retry.status, retry.text).toBe(422);
      expect(retry.json.detail).toContain(why);
    }
    expect((await post(body, 'slow-sl-ticks')).json).toMatchObject({ reconciled: true });
    expect(await strategies()).toBe(before + 1);
    expect(await brokerOrders()).toHaveLength(orders + 1);
  });
});
