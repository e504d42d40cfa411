/**
 * Webhook alerts and a SIGKILL the moment their answer arrives, then a restart on the same data
 * dir: what the token's alerts say must match what the sender was told. A 504 says "do not
 * resend: its outcome is added to this token's alerts", so that promise must survive; a slow
 * alert answered 201 must not come back as "outcome unknown". Journal appends are batched (up to
 * 50 ms); before these answers waited for them, such a kill left no trace of the 504's alert, and
 * turned the 201 into "outcome unknown". The paper broker runs as its own process and outlives
 * the kill.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { awaitConnected, startService, startSimProcess, wireUser, type ServiceProcess, type SimProcess, type WiredUser } from '../../support/processes.js';
import { eventually, http } from '../../support/http.js';
import { filledTemplate } from '../../support/tradingview.js';

let sim: SimProcess;
let dataDir: string;
let user: WiredUser;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tg-webhook-crash-'));
  sim = await startSimProcess();
  user = await wireUser(dataDir, sim, 'tv');
  await http(sim.controlUrl, 'POST', '/prices', { body: { symbol: frontOf('ES').contract, price: 5000 } });
}, 60_000);

afterAll(async () => {
  await service?.stop();
  await sim?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A running service with a webhook token on the user's account. */
async function tokenOnAccount(name: string) {
  service ??= await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const created = await http(service.url, 'POST', '/api/v1/webhook-tokens', { key: user.apiKey, body: { accountId: user.accounts[0]!, name } });
  expect(created.status, created.text).toBe(201);
  const token = created.json as { id: string; url: string };
  const alert = (body: string) => http(token.url, 'POST', '', { raw: body, headers: { 'content-type': 'text/plain' } });
  const alerts = async () => ((await http(service!.url, 'GET', `/api/v1/webhook-tokens/${token.id}/alerts`, { key: user.apiKey })).json.data ?? []) as any[];
  return { alert, alerts };
}

it('an alert answered 504 while it waited for its turn, the service SIGKILLed as the answer arrives: after a restart its alerts say its outcome is unknown', async () => {
  const { alert, alerts } = await tokenOnAccount('TV');

  // Every broker call takes 4 s, past the webhook's 2.5 s deadline. A strategy entry holds the
  // account's turn at the broker; the exit behind it waits, and is answered 504 at 2.6 s.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 4_000 } });
  const entry = alert(filledTemplate({ orderId: 'Long', action: 'buy', ticker: 'ES1!', contracts: '1', marketPosition: 'long', positionSize: 1, time: new Date().toISOString() }));
  await new Promise((r) => setTimeout(r, 100));
  const exit = await alert(filledTemplate({ orderId: 'Close entry(s) order Long', action: 'sell', ticker: 'ES1!', contracts: '1', marketPosition: 'flat', positionSize: 0, time: new Date().toISOString() }));
  await service!.crash();
  expect(exit.status, exit.text).toBe(504);
  // Still waiting for its turn at 2.6 s, or in its turn at the broker by then (the entry's own call timed out at 2.5 s).
  expect(exit.json.detail).toMatch(/^(Earlier alerts on this account .* \(it is not lost\)|The broker had not answered this alert within 2600 ms; it goes on): do not resend/);
  expect((await entry).status).toBe(504);
  await http(sim.controlUrl, 'DELETE', '/faults');

  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const requestId = exit.headers.get('x-request-id');
  const followUp = await eventually(async () => (await alerts()).find((a) => a.lateOutcomeOf === requestId), 'the follow-up of the 504 after the restart', 10_000);
  expect(followUp).toMatchObject({ status: 504, action: 'sell', detail: expect.stringMatching(/^outcome unknown: the service stopped after this alert was answered 504/) });
}, 90_000);

it('a slow alert answered 201, the service SIGKILLed as the answer arrives: after a restart its alerts show the 201, not "outcome unknown" (re-probe)', async () => {
  const { alert, alerts } = await tokenOnAccount('TV2');
  // 400 ms to the broker: the alert is still at work 250 ms after it arrived, and is marked so.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 400 } });
  const placed = await alert(JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 4400 }));
  await service!.crash();
  expect(placed.status, placed.text).toBe(201);
  await http(sim.controlUrl, 'DELETE', '/faults');
  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const requestId = placed.headers.get('x-request-id');
  await new Promise((r) => setTimeout(r, 500));
  const entries = (await alerts()).filter((a) => a.requestId === requestId);
  expect(entries).toEqual([expect.objectContaining({ status: 201, orderId: placed.json.order.orderId, lateOutcomeOf: null })]);
}, 90_000);

/**
 * Four strategy alerts (entry, reversal, exit, re-entry) at 700 ms to the broker, SIGTERM `termAtMs`
 * after the first was sent (undefined: once all four were answered): the stopping service acts on the
 * ones answered 504 before its actors close, and the account ends long 1, as the strategy is.
 */
async function sigtermDuringQueue(name: string, termAtMs: number | undefined): Promise<void> {
  const { alert, alerts } = await tokenOnAccount(name);
  const account = user.accounts[0]!;
  expect((await http(service!.url, 'POST', `/api/v1/accounts/${account}/flatten`, { key: user.apiKey, body: {} })).status).toBeLessThan(300);
  let n = 0;
  const fire = (action: 'buy' | 'sell', contracts: number, size: number) =>
    filledTemplate({ orderId: `${name}-${++n}`, action, ticker: 'ES1!', contracts: String(contracts), marketPosition: size > 0 ? 'long' : size < 0 ? 'short' : 'flat', positionSize: size, time: new Date().toISOString() });
  // 700 ms to the broker: the reversal is answered 504 at 2.6 s and goes on, the exit and the re-entry wait for it.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 700 } });
  const t0 = Date.now();
  const sent = [];
  for (const body of [fire('buy', 1, 1), fire('sell', 2, -1), fire('buy', 1, 0), fire('buy', 1, 1)]) {
    sent.push(alert(body));
    await new Promise((r) => setTimeout(r, 60));
  }
  let stopped: Promise<number | null> | undefined;
  if (termAtMs !== undefined) {
    await new Promise((r) => setTimeout(r, Math.max(0, termAtMs - (Date.now() - t0))));
    stopped = service!.stop();
  }
  const answers = await Promise.all(sent);
  expect(answers.slice(1).map((a) => a.status)).toEqual([504, 504, 504]);
  expect(await (stopped ?? service!.stop())).toBe(0);
  await http(sim.controlUrl, 'DELETE', '/faults');
  const state = await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(user.brokerUser)}`);
  const net = (state.json.positions as { accountId: number; netPos: number }[]).filter((p) => p.accountId === Number(account)).reduce((sum, p) => sum + p.netPos, 0);
  expect(net).toBe(1);
  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const late = (await alerts()).filter((a) => a.lateOutcomeOf !== null && answers.some((x) => x.headers.get('x-request-id') === a.lateOutcomeOf));
  expect(late.map((a) => a.status).sort()).toEqual([200, 201, 201]);
}

it('alerts answered 504 that go on when SIGTERM comes are acted on before the actors close: a reversal, an exit and a re-entry end long 1, as the strategy is (re-probe: the reversal\'s open was refused, flat while the strategy was short, the alerts behind it not acted on)', () => sigtermDuringQueue('TV3', undefined), 90_000);

it('so are alerts answered 504 after the SIGTERM came, still in their 2.6 s when it did (re-probe 6: the shutdown waited only for those answered before it)', () => sigtermDuringQueue('TV4', 1_000), 90_000);

it('an exit answered 504 and cut short by a SIGKILL, delivered again after the restart, closes the position (re-probe: the repeat was refused 409 "went on" while the account stayed long)', async () => {
  const { alert, net } = await flatAccountWithToken('TV5');
  const entry = await alert(JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1 }));
  expect(entry.status, entry.text).toBe(201);
  await eventually(async () => (await net()) === 1, 'long 1');
  // 3 s to the broker: the exit's flatten is answered 504 at 2.5 s; the kill cuts it short (the
  // paper broker drops what the closed socket asked).
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 3_000 } });
  const exit = filledTemplate({ orderId: 'Close entry(s) order K', action: 'sell', ticker: 'ES1!', contracts: '1', marketPosition: 'flat', positionSize: 0, time: new Date().toISOString() });
  const first = await alert(exit);
  await service!.crash();
  expect(first.status, first.text).toBe(504);
  await http(sim.controlUrl, 'DELETE', '/faults');
  expect(await net()).toBe(1);

  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  // Its id is held until the restarted service has looked at the account (409 IN_USE, Retry-After 1):
  // found still long, the flatten was cut short, and the id is free.
  let again = await alert(exit);
  for (let i = 0; i < 20 && again.status === 409 && (again.json as { code?: string }).code === 'IDEMPOTENCY_KEY_IN_USE'; i++) {
    await new Promise((r) => setTimeout(r, 500));
    again = await alert(exit);
  }
  expect(again.status, again.text).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBeNull();
  expect(again.json).toMatchObject({ action: 'flatten' });
  await eventually(async () => (await net()) === 0, 'flat');
}, 90_000);

it('an exit answered 504 whose close the broker carried out, then SIGKILL: after the restart its repeat is refused, and does not close the re-entry opened since (re-probe: the id was free after the restart, and the repeat closed the re-entry)', async () => {
  const { alert, net } = await flatAccountWithToken('TV6');
  const entry = (id: string) => filledTemplate({ orderId: id, action: 'buy', ticker: 'ES1!', contracts: '1', marketPosition: 'long', positionSize: 1, time: new Date().toISOString() });
  expect((await alert(entry('Long A'))).status).toBe(201);
  await eventually(async () => (await net()) === 1, 'long 1');
  // 3 s to the broker: the exit is answered 504 at 2.5 s, and the broker closes the position after.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 3_000 } });
  const exit = filledTemplate({ orderId: 'Close entry(s) order A', action: 'sell', ticker: 'ES1!', contracts: '1', marketPosition: 'flat', positionSize: 0, time: new Date().toISOString() });
  expect((await alert(exit)).status).toBe(504);
  await eventually(async () => (await net()) === 0, 'flat');
  await service!.crash();
  await http(sim.controlUrl, 'DELETE', '/faults');

  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  expect((await alert(entry('Long B'))).status).toBe(201);
  await eventually(async () => (await net()) === 1, 'long 1 again');
  // Delivered again: in flight while the restarted service looks, then the stored "carried out".
  let again = await alert(exit);
  for (let i = 0; i < 20 && again.status === 409 && (again.json as { code?: string }).code === 'IDEMPOTENCY_KEY_IN_USE'; i++) {
    await new Promise((r) => setTimeout(r, 500));
    again = await alert(exit);
  }
  expect(again.status, again.text).toBe(409);
  expect(again.json).toMatchObject({ code: 'CONFLICT' });
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await net()).toBe(1);
}, 90_000);

/**
 * The service up (started again if a test before left it down), a token named `name` on the first
 * account, and that account flat. `alert` posts to the token's path on whichever service runs now
 * (a restarted one listens on another port); `net` is the account's position at the broker.
 */
async function flatAccountWithToken(name: string) {
  service ??= await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const account = user.accounts[0]!;
  const created = await http(service.url, 'POST', '/api/v1/webhook-tokens', { key: user.apiKey, body: { accountId: account, name } });
  expect(created.status, created.text).toBe(201);
  const path = new URL((created.json as { url: string }).url).pathname;
  const alert = (body: string) => http(service!.url, 'POST', path, { raw: body, headers: { 'content-type': 'text/plain' } });
  expect((await http(service.url, 'POST', `/api/v1/accounts/${account}/flatten`, { key: user.apiKey, body: {} })).status).toBeLessThan(300);
  const net = async () => {
    const state = await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(user.brokerUser)}`);
    return (state.json.positions as { accountId: number; netPos: number }[]).filter((p) => p.accountId === Number(account)).reduce((sum, p) => sum + p.netPos, 0);
  };
  return { alert, net };
}
