/**
 * Tradovate's rate limit (429) locks a login out for about an hour, and every request inside it
 * extends the lockout. The actor waits it out; this protects that a restart of `serve` (here a
 * crash, SIGKILL) waits out the rest of it too instead of logging straight back in.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { http } from '../../support/http.js';
import { awaitConnected, startService, startSimProcess, wireUser, type ServiceProcess, type SimProcess, type WiredUser } from '../../support/processes.js';

let sim: SimProcess;
let dataDir: string;
let user: WiredUser;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tg-hold-'));
  sim = await startSimProcess();
  user = await wireUser(dataDir, sim, 'held');
}, 60_000);

afterAll(async () => {
  await service?.stop();
  await sim?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const logins = async (): Promise<number> => ((await http(sim.controlUrl, 'GET', '/state')).json.requests['auth/accesstokenrequest'] as number | undefined) ?? 0;

async function connection(url: string): Promise<{ status: string; retryAt?: string }> {
  const r = await http(url, 'GET', '/api/v1/connections', { key: user.apiKey });
  return (r.json.data as { id: string; status: string; retryAt?: string }[]).find((c) => c.id === user.connectionId)!;
}

test("a serve restarted inside the broker's rate-limit hold waits out the rest of it: no login, FAILED with the same retryAt, orders 503 with Retry-After (it used to log straight back in, extending Tradovate's lockout)", async () => {
  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
  await http(sim.controlUrl, 'POST', '/faults', { body: { rateLimit429: true } });
  const path = `/api/v1/accounts/${user.accounts[0]}/orders`;
  const order = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 };
  const refused = await http(service.url, 'POST', path, { key: user.apiKey, body: order });
  expect(refused.status).toBe(503);
  let failed = await connection(service.url);
  for (const deadline = Date.now() + 5000; failed.status !== 'FAILED' && Date.now() < deadline; failed = await connection(service.url)) await new Promise((r) => setTimeout(r, 50));
  expect(failed).toMatchObject({ status: 'FAILED', retryAt: expect.any(String) });
  // The hold is written durably as FAILED is announced, a commit and flush later (a few ms; a crash
  // inside them logs in once more, a known window): the crash comes after it (a loaded CI run once
  // crashed within it).
  await new Promise((r) => setTimeout(r, 1000));

  await service.crash();
  // The broker would let a login through now: a restarted serve that forgot the hold logs in and trades.
  await http(sim.controlUrl, 'DELETE', '/faults');
  const before = await logins();
  service = await startService(dataDir, {}, 'warn');
  await new Promise((r) => setTimeout(r, 3000));
  expect(await logins()).toBe(before);
  const after = await connection(service.url);
  expect(after).toMatchObject({ status: 'FAILED', retryAt: failed.retryAt });
  const held = await http(service.url, 'POST', path, { key: user.apiKey, body: order });
  expect(held.status).toBe(503);
  expect(Number(held.headers.get('retry-after'))).toBeGreaterThan(3000);
  expect((await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(user.brokerUser)}`)).json.orders).toHaveLength(0);
  // A manual reconnect still tries sooner; once CONNECTED the hold is forgotten, also by the next start.
  expect((await http(service.url, 'POST', `/api/v1/connections/${user.connectionId}/reconnect`, { key: user.apiKey })).status).toBeLessThan(300);
  await awaitConnected(service.url, user.apiKey);
  await service.stop();
  service = await startService(dataDir, {}, 'warn');
  await awaitConnected(service.url, user.apiKey);
}, 90_000);
