/**
 * A webhook alert answered 504 tells its sender "do not resend: its outcome is added to this
 * token's alerts". The service is SIGKILLed the moment that answer arrives and restarted on the
 * same data dir: the promise must survive, so the token's alerts end up saying what became of
 * the alert. Journal appends are batched (up to 50 ms); before the follow-up was flushed ahead of
 * the 504, such a kill left no trace of the alert at all. The paper broker runs as its own
 * process and outlives the kill.
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

it('an alert answered 504 while it waited for its turn, the service SIGKILLed as the answer arrives: after a restart its alerts say its outcome is unknown', async () => {
  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  const account = user.accounts[0]!;
  const created = await http(service.url, 'POST', '/api/v1/webhook-tokens', { key: user.apiKey, body: { accountId: account, name: 'TV' } });
  expect(created.status, created.text).toBe(201);
  const token = created.json as { id: string; url: string };
  const alert = (body: string) => http(token.url, 'POST', '', { raw: body, headers: { 'content-type': 'text/plain' } });
  const alerts = async () => ((await http(service!.url, 'GET', `/api/v1/webhook-tokens/${token.id}/alerts`, { key: user.apiKey })).json.data ?? []) as any[];

  // Every broker call takes 4 s, past the webhook's 2.5 s deadline. A strategy entry holds the
  // account's turn at the broker; the exit behind it waits, and is answered 504 at 2.6 s.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 4_000 } });
  const entry = alert(filledTemplate({ orderId: 'Long', action: 'buy', ticker: 'ES1!', contracts: '1', marketPosition: 'long', positionSize: 1, time: new Date().toISOString() }));
  await new Promise((r) => setTimeout(r, 100));
  const exit = await alert(filledTemplate({ orderId: 'Close entry(s) order Long', action: 'sell', ticker: 'ES1!', contracts: '1', marketPosition: 'flat', positionSize: 0, time: new Date().toISOString() }));
  await service.crash();
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
