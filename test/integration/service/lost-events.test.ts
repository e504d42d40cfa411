/**
 * Events the broker sent that never arrived, in a silence shorter than the watchdog's (which reads
 * the whole state again only after it): a resting entry filled meanwhile, and the mirror still
 * shows it working, the account flat. A flatten or kill switch then cancels the entry (the broker
 * answers the cancel; the order never ends here) and must not answer "nothing to close" with the
 * position open (money probe: 200 `positions: []`, long 1 left at the broker, under a kill switch).
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

beforeAll(async () => {
  // A session more than the service's two: a trade made at the broker directly, as on its own platform.
  s = await startInProcessService({ sim: { maxSessionsPerUser: 3 } });
}, 60_000);
afterAll(async () => {
  if (!s) return;
  await control(s.sim, 'DELETE', '/faults');
  await s.close();
});

const brokerPosition = async (acc: string) =>
  ((await simState(s.sim)).positions as any[]).filter((p) => String(p.accountId) === acc).reduce((n, p) => n + Number(p.netPos), 0);

/** A resting buy at 4990 that fills while the broker's events are lost. */
async function filledUnseen(acc: string): Promise<void> {
  await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
  const entry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4990 } });
  expect(entry.status, entry.text).toBe(201);
  await control(s.sim, 'POST', '/faults', { silent: true });
  try {
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4990 });
    await eventually(async () => (await brokerPosition(acc)) === 1, 'the entry filled at the broker');
    await new Promise((r) => setTimeout(r, 1500));
  } finally {
    await control(s.sim, 'DELETE', '/faults');
  }
  // The mirror has not seen the fill: the entry still works, the account is flat here.
  const positions = await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey });
  expect(positions.json.data, 'the mirror missed the fill (else this test shows nothing)').toEqual([]);
}

/** `acc` flattened and flat at the broker, the price at 5000. */
async function flatAt5000(acc: string): Promise<void> {
  await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
  await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
}

/** A buy 1 at market made at the broker itself (as on its own platform) while its events are lost: the service still sees `acc` flat. */
async function tradedAtBrokerUnseen(acc: string): Promise<void> {
  await flatAt5000(acc);
  const login = (await (await fetch(`${s.sim.restUrl}/auth/accesstokenrequest`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(s.login) })).json()) as { accessToken: string };
  await control(s.sim, 'POST', '/faults', { silent: true });
  try {
    const traded = await fetch(`${s.sim.restUrl}/order/placeorder`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${login.accessToken}` },
      body: JSON.stringify({ accountId: Number(acc), action: 'Buy', symbol: ES, orderQty: 1, orderType: 'Market', isAutomated: true }),
    });
    expect(traded.status, await traded.clone().text()).toBe(200);
    await eventually(async () => (await brokerPosition(acc)) === 1, 'long 1 at the broker');
    await new Promise((r) => setTimeout(r, 1200));
  } finally {
    await control(s.sim, 'DELETE', '/faults');
  }
  expect((await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data, 'the service missed the trade').toEqual([]);
}

/** A resting buy for 2 at 4990 of which 1 fills while the broker's events are lost; its order id. */
async function partFilledUnseen(acc: string, shownBefore: unknown[] = []): Promise<number> {
  await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
  const entry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 2, type: 'limit', price: 4990 } });
  expect(entry.status, entry.text).toBe(201);
  await control(s.sim, 'POST', '/faults', { silent: true });
  try {
    await control(s.sim, 'POST', `/orders/${entry.json.orderId}/fill`, { qty: 1 });
    await new Promise((r) => setTimeout(r, 1200));
  } finally {
    await control(s.sim, 'DELETE', '/faults');
  }
  expect((await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data, 'the mirror missed the fill').toEqual(shownBefore);
  return Number(entry.json.orderId);
}

describe('a flatten after lost events', () => {
  it('reads the state again when a cancel it sent never ends here, and closes the position the fill opened', async () => {
    const acc = s.accounts[0]!;
    await filledUnseen(acc);
    const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
    expect(flat.status, flat.text).toBe(200);
    expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  });

  it('a partial fill lost in a silence (its order’s cancel seen after it): the broker’s positions are read before anything is judged, and the position is closed (re-probe: 200, long 1 left open)', async () => {
    const acc = s.accounts[0]!;
    await partFilledUnseen(acc);
    const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
    expect(flat.status, flat.text).toBe(200);
    expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  });

  it('at a broker answering in 1.2 s, the state read its position read starts is waited for before anything is judged (re-probe: 200 "nothing to close" over the partial fill)', async () => {
    const acc = s.accounts[0]!;
    const entry = await partFilledUnseen(acc);
    await control(s.sim, 'POST', '/faults', { latencyMs: 1200 });
    try {
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(200);
      expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
      expect(flat.json.cancelledOrderIds).toContain(String(entry));
    } finally {
      await control(s.sim, 'DELETE', '/faults');
    }
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  }, 45_000);

  it('a flatten naming the symbol a lost fill opened is not refused on the service’s state alone: the broker’s list is asked first (re-probe: 409 "account holds NQZ6, not ESZ6" while the broker held ESZ6)', async () => {
    const acc = s.accounts[1] ?? s.accounts[0]!;
    const nq = resolveSymbol('NQ', new Date());
    if (!nq.ok) throw new Error(nq.reason);
    await control(s.sim, 'POST', '/prices', { symbol: nq.contract, price: 20000 });
    const long = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'NQ1!', side: 'buy', qty: 1, type: 'market' } });
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data?.length === 1, 'long NQ here');
    await partFilledUnseen(acc, [expect.objectContaining({ symbol: nq.contract })]);
    const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: { symbol: 'ES1!' } });
    expect(flat.status, flat.text).toBe(200);
    expect(flat.json.positions).toEqual(expect.arrayContaining([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]));
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  }, 45_000);

  it('a position opened at the broker itself while its events were lost, at a broker answering in 2.5 s: "nothing to close" waits for the broker’s list, and the position is closed (re-probe: 200 "nothing to close", long 1 left open)', async () => {
    const acc = s.accounts[0]!;
    await tradedAtBrokerUnseen(acc);
    await control(s.sim, 'POST', '/faults', { latencyMs: 2500 });
    try {
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(200);
      expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
    }
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  }, 60_000);

  it('with an order of the service still on its way too (6 s a request): the broker’s list is waited for all the same, and the position is closed (re-probe: 200 "nothing to close" with outstandingOrders 1 at 5 s, long 1 left open for good)', async () => {
    const acc = s.accounts[0]!;
    await tradedAtBrokerUnseen(acc);
    await control(s.sim, 'POST', '/faults', { latencyMs: 6000 });
    let onItsWay: Promise<unknown> | undefined;
    try {
      // A sell limit far above the market: on its way while the flatten runs, and never filled.
      onItsWay = http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'sell', qty: 1, type: 'limit', price: 5100 } });
      await new Promise((r) => setTimeout(r, 300));
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(200);
      expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
      await onItsWay;
    }
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
    await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
  }, 60_000);

  it('a broker that cannot answer the position list within its deadline (12 s a request) makes a flatten over nothing it sees a 504 saying so, never 200 "nothing to close" (re-probe: 200 with long 1 at the broker)', async () => {
    const acc = s.accounts[0]!;
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
    await control(s.sim, 'POST', '/faults', { latencyMs: 12_000 });
    try {
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(504);
      expect(flat.json.detail).toMatch(/broker's own positions could not be confirmed/);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
    }
  }, 60_000);

  it('its 504 names an order still on its way too: it may rest or fill after (re-probe: a limit the 504 did not name rested and filled)', async () => {
    const acc = s.accounts[0]!;
    await flatAt5000(acc);
    await control(s.sim, 'POST', '/faults', { latencyMs: 12_000 });
    let limit: Promise<unknown> | undefined;
    try {
      limit = http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4990 } });
      await new Promise((r) => setTimeout(r, 1000));
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(504);
      expect(flat.json.outstandingOrders).toBe(1);
      expect(flat.json.detail).toMatch(/1 order\(s\) sent to the account before had no answer from the broker yet and may still rest or fill/);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
      await limit;
    }
    await eventually(async () => (await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} })).status === 200, 'flattened once the broker answers');
    await eventually(async () => ((await simState(s.sim)).orders as any[]).every((o) => String(o.accountId) !== acc || o.ordStatus !== 'Working'), 'nothing left working');
  }, 60_000);

  it('the kill switch does too: locked and flat', async () => {
    const acc = s.accounts[1] ?? s.accounts[0]!;
    await filledUnseen(acc);
    const locked = await http(s.url, 'POST', `/api/v1/accounts/${acc}/lock`, { key: s.apiKey, body: {} });
    expect(locked.status, locked.text).toBe(200);
    expect(locked.json.flatten.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
    await http(s.url, 'POST', `/api/v1/accounts/${acc}/unlock`, { key: s.apiKey });
  });
});

describe('a flatten at a slow broker', () => {
  it('an order sent just before it that reaches the broker while it waits for the broker’s positions is cancelled too (re-probe: a buy limit landed during that wait, 200 "nothing to close" said nothing of it, and it filled later)', async () => {
    const acc = s.accounts[0]!;
    await flatAt5000(acc);
    await control(s.sim, 'POST', '/faults', { latencyMs: 6000 });
    let limit: Promise<Awaited<ReturnType<typeof http>>> | undefined;
    try {
      limit = http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4990 } });
      await new Promise((r) => setTimeout(r, 500));
      const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
      expect(flat.status, flat.text).toBe(200);
      const placed = await limit;
      expect(placed.status, placed.text).toBe(201);
      expect(flat.json.cancelledOrderIds).toContain(placed.json.orderId);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
      await limit;
    }
    const resting = ((await simState(s.sim)).orders as any[]).filter((o) => String(o.accountId) === acc && o.ordStatus === 'Working');
    expect(resting, 'nothing left resting at the broker').toEqual([]);
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4985 });
    await new Promise((r) => setTimeout(r, 300));
    expect(await brokerPosition(acc)).toBe(0);
  }, 60_000);
});

describe('orders after lost events', () => {
  it('a strategy’s partial exit reads the broker’s position first: a stop-loss that filled unseen leaves nothing to reduce, and nothing is sold (re-probe: it sold into the flat account and left it short)', async () => {
    const acc = s.accounts[1] ?? s.accounts[0]!;
    await control(s.sim, 'POST', '/prices', { symbol: ES, price: 5000 });
    const entry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 2, type: 'market', stopLoss: { ticks: 8 } } });
    expect(entry.status, entry.text).toBe(201);
    await eventually(async () => (await brokerPosition(acc)) === 2, 'long 2 at the broker');
    await eventually(async () => (await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data?.[0]?.netQty === 2, 'long 2 here');
    await control(s.sim, 'POST', '/faults', { silent: true });
    try {
      await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4990 });
      await eventually(async () => (await brokerPosition(acc)) === 0, 'the stop-loss filled at the broker');
      await new Promise((r) => setTimeout(r, 1200));
    } finally {
      await control(s.sim, 'DELETE', '/faults');
    }
    expect((await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data?.[0]?.netQty, 'the mirror missed the stop’s fill').toBe(2);
    const { token } = await s.store.webhookTokens.create({ userId: s.userId, name: 'tv-lost', accountId: acc });
    const exit = await http(s.url, 'POST', `/api/v1/webhooks/${token}`, { body: { action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 } });
    expect(exit.status, exit.text).not.toBe(201);
    await new Promise((r) => setTimeout(r, 500));
    expect(await brokerPosition(acc)).toBe(0);
  }, 45_000);

  it('a strategy entry sent while the account state is being read again waits for it: sized against the broker’s state, it does not double the position (re-probe: long 2 where the strategy asked for long 1)', async () => {
    const acc = s.accounts[0]!;
    await flatAt5000(acc);
    const entry = await http(s.url, 'POST', `/api/v1/accounts/${acc}/orders`, { key: s.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4990 } });
    expect(entry.status, entry.text).toBe(201);
    const { token } = await s.store.webhookTokens.create({ userId: s.userId, name: 'tv-resync', accountId: acc });
    // A quiet spell past the watchdog's (the broker silent for over two heartbeats), the fill inside it;
    // the broker answers slowly afterwards, so the state read the watchdog starts takes a while.
    await control(s.sim, 'POST', '/faults', { silent: true });
    try {
      await control(s.sim, 'POST', '/prices', { symbol: ES, price: 4990 });
      await eventually(async () => (await brokerPosition(acc)) === 1, 'the entry filled at the broker');
      await eventually(async () => (await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).status === 503, 'reads refused over the quiet spell');
    } finally {
      await control(s.sim, 'POST', '/faults', { silent: false, latencyMs: 1500 });
    }
    try {
      // Heard from again: the state is read again (1.5 s a request); the alert lands in that read.
      // Until the first frame comes (1.5 s late) the broker still reads as quiet: 503, nothing sent,
      // and the alert is sent again at once, as a sender that gets a 503 would.
      let alert = await http(s.url, 'POST', `/api/v1/webhooks/${token}`, { body: { action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 } });
      for (let i = 0; i < 50 && alert.status === 503; i++) {
        await new Promise((r) => setTimeout(r, 100));
        alert = await http(s.url, 'POST', `/api/v1/webhooks/${token}`, { body: { action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 } });
      }
      expect([200, 201, 504], alert.text).toContain(alert.status);
    } finally {
      await control(s.sim, 'DELETE', '/faults');
    }
    await new Promise((r) => setTimeout(r, 3000));
    expect(await brokerPosition(acc)).toBe(1);
  }, 60_000);
});
