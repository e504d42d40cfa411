/**
 * kill -9 of the service while it protects a position: what it had taken on must survive the
 * crash, not just live in the actor's memory. The paper broker runs as its own process (its
 * ledger survives every crash and is the judge) and answers slowly, so the kill lands while the
 * service's own broker calls are in flight.
 * - A leg cancel of a filled bracket: the broker's one-cancels-other takes the other leg down and
 *   the service re-places it. Killed before that re-placement reached the broker, the restarted
 *   service still places it.
 * - A daily loss limit trips and its flatten is on its way. Killed then, the restarted service
 *   still flattens the account (the stored lock owes it).
 * - A flatten has cancelled a filled bracket's legs and its liquidation is on its way. Killed
 *   then, the restarted service puts the legs back on the position, still one-cancels-other (it
 *   does not liquidate: the caller had no answer).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { awaitConnected, startService, startSimProcess, wireUser, type ServiceProcess, type SimProcess, type WiredUser } from '../../support/processes.js';
import { http } from '../../support/http.js';

const ES = frontOf('ES').contract;

let sim: SimProcess;
let dataDir: string;
let user: WiredUser;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tg-crash-protect-'));
  sim = await startSimProcess();
  user = await wireUser(dataDir, sim, 'protector', ['P1', 'P2', 'P3']);
  service = await startService(dataDir);
  await awaitConnected(service.url, user.apiKey);
}, 60_000);

afterAll(async () => {
  await service?.stop();
  await sim?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

interface BrokerOrder {
  id: number;
  accountId: number;
  action: string;
  ordStatus: string;
  orderType: string;
  orderQty: number;
  stopPrice: number | null;
  clOrdId: string | null;
  price: number | null;
}

async function brokerState(): Promise<{ orders: BrokerOrder[]; positions: { accountId: number; netPos: number }[] }> {
  return (await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(user.brokerUser)}`)).json;
}

const control = (method: string, path: string, body?: unknown) => http(sim.controlUrl, method, path, body === undefined ? {} : { body });
const api = (method: string, path: string, body?: unknown) => http(service!.url, method, path, { key: user.apiKey, ...(body !== undefined && { body }) });

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A market buy of `qty` ES at 5000 with its take-profit at 5010 and stop-loss at 4990: the legs' ids. */
async function filledBracket(account: string, qty: number): Promise<{ takeProfit: string; stopLoss: string }> {
  await control('POST', '/prices', { symbol: ES, price: 5000 });
  const placed = await api('POST', `/api/v1/accounts/${account}/orders`, { symbol: 'ES1!', side: 'buy', qty, type: 'market', takeProfit: { price: 5010 }, stopLoss: { price: 4990 } });
  expect(placed.status, placed.text).toBe(201);
  return placed.json.legs as { takeProfit: string; stopLoss: string };
}

/** kill -9, the broker back to full speed, and a new service on the same data dir, CONNECTED. */
async function crashAndRestart(): Promise<void> {
  await service!.crash();
  await control('DELETE', '/faults');
  service = await startService(dataDir);
  await awaitConnected(service.url, user.apiKey);
}

describe('kill -9 while the service protects a position', () => {
  it('a leg cancel of a filled bracket killed before the survivor was re-placed: the restarted service places it', async () => {
    const account = user.accounts[0]!;
    const { takeProfit, stopLoss } = await filledBracket(account, 1);

    // Every broker call takes 1.5 s: the cancel reaches the broker (and its OCO takes the stop
    // with it) after 1.5 s, the stop's re-placement is on its way when the service is killed.
    await control('POST', '/faults', { latencyMs: 1500 });
    void api('DELETE', `/api/v1/accounts/${account}/orders/${takeProfit}`).catch(() => undefined);
    await eventually('the broker cancelling both legs', async () => {
      const orders = (await brokerState()).orders;
      return [takeProfit, stopLoss].every((id) => orders.find((o) => String(o.id) === id)?.ordStatus === 'Canceled') ? true : undefined;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect((await brokerState()).orders.filter((o) => o.clOrdId === `rp-${stopLoss}`), 'the re-placement had not reached the broker at the kill').toEqual([]);
    await crashAndRestart();

    // Long 1 and protected again: the stop, re-placed once, nothing else working.
    const stop = await eventually('the stop re-placed', async () => {
      const working = (await brokerState()).orders.filter((o) => String(o.accountId) === account && o.ordStatus === 'Working');
      return working.length > 0 ? working : undefined;
    });
    expect(stop).toHaveLength(1);
    expect(stop[0]).toMatchObject({ action: 'Sell', orderType: 'Stop', stopPrice: 4990, orderQty: 1, clOrdId: `rp-${stopLoss}` });
    const state = await brokerState();
    expect(state.positions.find((p) => String(p.accountId) === account)?.netPos).toBe(1);
    // No second copy a moment later (a later sweep must not place it again).
    await new Promise((r) => setTimeout(r, 1500));
    expect((await brokerState()).orders.filter((o) => String(o.accountId) === account && o.ordStatus === 'Working')).toHaveLength(1);
  }, 90_000);

  it('a daily loss limit tripped and killed while its flatten was on its way: the restarted service flattens the account', async () => {
    const account = user.accounts[1]!;
    await control('POST', '/prices', { symbol: ES, price: 5000 });
    expect((await api('PUT', `/api/v1/accounts/${account}/guards`, { dailyLossLimit: 100 })).status).toBe(200);
    const placed = await api('POST', `/api/v1/accounts/${account}/orders`, { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market', stopLoss: { price: 4900 } });
    expect(placed.status, placed.text).toBe(201);

    // Every broker call takes 4 s; the price move makes the day −150: the limit trips and its
    // flatten (cancel the stop, liquidate) is on its way when the service is killed.
    await control('POST', '/faults', { latencyMs: 4000 });
    await control('POST', '/prices', { symbol: ES, price: 4997 });
    const lock = await eventually('the lock', async () => {
      const g = await api('GET', `/api/v1/accounts/${account}/guards`);
      return g.json.lock ?? undefined;
    });
    expect(lock).toMatchObject({ guard: 'daily_loss', flattenPending: true });
    await new Promise((r) => setTimeout(r, 500));
    expect((await brokerState()).positions.find((p) => String(p.accountId) === account)?.netPos, 'still long at the kill').toBe(1);
    await crashAndRestart();

    await eventually('the account flat', async () => {
      const s = await brokerState();
      const flat = (s.positions.find((p) => String(p.accountId) === account)?.netPos ?? 0) === 0;
      const working = s.orders.filter((o) => String(o.accountId) === account && o.ordStatus === 'Working');
      return flat && working.length === 0 ? true : undefined;
    });
    const after = await eventually('the flatten recorded', async () => {
      const g = await api('GET', `/api/v1/accounts/${account}/guards`);
      return g.json.lock?.flattenPending === false ? g.json.lock : undefined;
    });
    expect(after).toMatchObject({ guard: 'daily_loss' });
  }, 90_000);

  it('a flatten killed after it cancelled the legs, before its liquidation: the restarted service puts them back on the open position as a pair', async () => {
    const account = user.accounts[2]!;
    const { takeProfit, stopLoss } = await filledBracket(account, 2);
    const working = async () => (await brokerState()).orders.filter((o) => String(o.accountId) === account && o.ordStatus === 'Working');
    expect(await working()).toHaveLength(2);

    // Every broker call takes 1.5 s: the flatten's leg cancel reaches the broker (its OCO takes
    // the other leg), and its liquidation is on its way when the service is killed.
    await control('POST', '/faults', { latencyMs: 1500 });
    void api('POST', `/api/v1/accounts/${account}/flatten`, {}).catch(() => undefined);
    await eventually('the broker cancelling both legs', async () => {
      const orders = (await brokerState()).orders;
      return [takeProfit, stopLoss].every((id) => orders.find((o) => String(o.id) === id)?.ordStatus === 'Canceled') ? true : undefined;
    });
    await crashAndRestart();
    expect((await brokerState()).positions.find((p) => String(p.accountId) === account)?.netPos, 'the liquidation had not reached the broker at the kill').toBe(2);

    // Long 2 and protected again: the take-profit and the stop-loss, for 2, one cancelling the other.
    const back = await eventually('the legs back', async () => {
      const now = await working();
      return now.length >= 2 ? now : undefined;
    });
    expect(back).toHaveLength(2);
    expect(back.find((o) => o.orderType === 'Limit')).toMatchObject({ action: 'Sell', price: 5010, orderQty: 2, clOrdId: `rr-${takeProfit}` });
    expect(back.find((o) => o.orderType === 'Stop')).toMatchObject({ action: 'Sell', stopPrice: 4990, orderQty: 2 });
    // No second copy a moment later (a later sweep must not place them again).
    await new Promise((r) => setTimeout(r, 1500));
    expect(await working()).toHaveLength(2);
    // One cancels the other: the take-profit filling leaves the account flat with nothing working.
    await control('POST', '/prices', { symbol: ES, price: 5011 });
    await eventually('the take-profit filled and the stop gone', async () => {
      const s = await brokerState();
      const flat = (s.positions.find((p) => String(p.accountId) === account)?.netPos ?? 0) === 0;
      return flat && (await working()).length === 0 ? true : undefined;
    });
  }, 90_000);
});
