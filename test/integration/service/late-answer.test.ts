/**
 * The late-answer rule through the whole service (HTTP front, supervisor, actor thread, paper
 * broker): the broker answers an order after the actor's deadline, the client gets 504 and
 * retries with the same Idempotency-Key while the order is still on its way. The retry sends
 * nothing new: it waits for the broker's late answer and answers the order (201, reconciled),
 * or answers 504 again when the broker is slower than its own deadline. One order at the broker.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http } from '../../support/http.js';
import { startInProcessService, type InProcessService } from '../../support/service.js';
import { control, simState } from '../../support/sim.js';

let s: InProcessService;
let acc: string;

beforeAll(async () => {
  // The actor gives the broker 400 ms per request (a retry waits as long for an unknown outcome).
  s = await startInProcessService({ spec: { requestTimeoutMs: 400 } });
  acc = s.accounts[0]!;
  await control(s.sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
  // One order on time first: the actor has named the contract before the broker is slowed.
  const warm = await post({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 }, 'warm-up');
  expect(warm.status, warm.text).toBe(201);
}, 60_000);
afterEach(async () => {
  await control(s.sim, 'DELETE', '/faults');
});
afterAll(async () => {
  if (s) await s.close();
});

function post(body: unknown, key: string) {
  return http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body, headers: { 'Idempotency-Key': key } });
}

/** The account's orders at the broker with this limit price (each test uses its own). */
async function atPrice(price: number): Promise<{ id: number }[]> {
  return ((await simState(s.sim)).orders as { id: number; accountId: number; price: number | null }[]).filter((o) => String(o.accountId) === acc && o.price === price);
}

describe('a retry with the same key while the broker has not answered the first attempt yet', () => {
  it('a single order: the retry waits for the late answer and answers 201 with that order — one order at the broker', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4910, clientOrderId: 'late-1' };
    await control(s.sim, 'POST', '/faults', { latencyMs: 600 });
    const first = await post(body, 'late-single');
    expect(first.status, first.text).toBe(504);
    expect(first.json.code).toBe('BROKER_TIMEOUT');
    const retry = await post(body, 'late-single');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, requestedSymbol: 'ES1!', clientOrderId: 'late-1', role: 'single', price: 4910 });
    expect((await atPrice(4910)).map((o) => String(o.id))).toEqual([retry.json.orderId]);
  });

  it('an absolute bracket: the retry answers the entry with its legs — one entry and two legs at the broker', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4920, takeProfit: { price: 4970 }, stopLoss: { price: 4870 } };
    await control(s.sim, 'POST', '/faults', { latencyMs: 600 });
    const first = await post(body, 'late-oso');
    expect(first.status, first.text).toBe(504);
    const retry = await post(body, 'late-oso');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, role: 'entry', bracketId: retry.json.orderId });
    expect(retry.json.legOrders.takeProfit).toMatchObject({ orderId: retry.json.legs.takeProfit, role: 'take_profit', price: 4970 });
    expect(retry.json.legOrders.stopLoss).toMatchObject({ orderId: retry.json.legs.stopLoss, role: 'stop_loss', stopPrice: 4870 });
    expect((await atPrice(4920)).map((o) => String(o.id))).toEqual([retry.json.orderId]);
    expect(await atPrice(4970)).toHaveLength(1);
  });

  it('a broker slower than the retry’s own deadline: 504 again and nothing placed; after the late answer the retry answers the one order', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4930 };
    await control(s.sim, 'POST', '/faults', { latencyMs: 1500 });
    expect((await post(body, 'later')).status).toBe(504);
    const again = await post(body, 'later');
    expect(again.status, again.text).toBe(504);
    expect(again.json).toMatchObject({ code: 'BROKER_TIMEOUT' });
    // A marker order sent after the retry reaches the broker after anything the retry sent
    // (equal delays keep their order): once it is there, a second order would be too.
    expect((await post({ ...body, price: 4940 }, 'marker')).status).toBe(504);
    await eventually(async () => (await atPrice(4940)).length > 0, 'the marker at the broker');
    await control(s.sim, 'DELETE', '/faults');
    const retry = await post(body, 'later');
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json).toMatchObject({ reconciled: true, price: 4930 });
    expect((await atPrice(4930)).map((o) => String(o.id))).toEqual([retry.json.orderId]);
  });
});
