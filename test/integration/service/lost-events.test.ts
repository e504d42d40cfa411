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
  s = await startInProcessService();
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
    expect((await http(s.url, 'GET', `/api/v1/accounts/${acc}/positions`, { key: s.apiKey })).json.data, 'the mirror missed the fill').toEqual([]);
    const flat = await http(s.url, 'POST', `/api/v1/accounts/${acc}/flatten`, { key: s.apiKey, body: {} });
    expect(flat.status, flat.text).toBe(200);
    expect(flat.json.positions).toEqual([expect.objectContaining({ symbol: ES, closedQty: 1, status: 'liquidated' })]);
    await eventually(async () => (await brokerPosition(acc)) === 0, 'flat at the broker');
  });

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
