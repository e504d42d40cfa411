/**
 * Two connections of one user whose brokers number an account alike (DESIGN §4: an account id is
 * unique per user; such a connection is refused). Real processes: `serve` and the CLI, two paper
 * brokers each giving the user's login an account of one id, and orders checked at the brokers.
 *
 * Before: `/accounts` listed the id twice, orders went to whichever connection was listed first,
 * and removing one connection made the other's webhook tokens inactive (re-probe).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { eventually, http } from '../../support/http.js';
import { cliAt, runCli, startService, type ServiceProcess } from '../../support/processes.js';
import { control, simState } from '../../support/sim.js';

let dataDir: string;
let service: ServiceProcess | undefined;
let aliceKey: string;
const brokers: SimHandle[] = [];
const alice = (method: string, path: string, body?: unknown) => http(service!.url, method, path, { key: aliceKey, ...(body !== undefined ? { body } : {}) });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tg-collide-'));
  await cliAt(dataDir, ['users', 'add', 'alice']);
  aliceKey = (JSON.parse(await cliAt(dataDir, ['keys', 'create', '--user', 'alice', '--name', 'k', '--scopes', 'read,trade', '--json'])) as { key: string }).key;
  for (let i = 0; i < 2; i++) {
    const sim = await startSim({ priceStepMs: 0 });
    brokers.push(sim);
    await control(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
  }
}, 60_000);
afterAll(async () => {
  expect(await service?.stop()).toBe(0);
  for (const b of brokers) await b.close();
  rmSync(dataDir, { recursive: true, force: true });
});

interface ConnectionView {
  id: string;
  status: string;
  detail: string | null;
  accountIds: string[];
}

const connectionOf = async (id: string): Promise<ConnectionView | undefined> => ((await alice('GET', '/api/v1/connections')).json.data as ConnectionView[]).find((c) => c.id === id);

async function addByCli(broker: SimHandle): Promise<string> {
  const added = await runCli(dataDir, ['connections', 'add', '--user', 'alice', '--paper', '--paper-url', broker.restUrl.replace(/\/v1$/, ''), '--paper-user', 'u', '--password-stdin', '--json'], 'pw-u\n');
  expect(added.code, added.stderr).toBe(0);
  return JSON.parse(added.stdout).id as string;
}

/** Net position of every account at a broker. */
async function positions(broker: SimHandle): Promise<Record<string, number>> {
  return Object.fromEntries(((await simState(broker)).positions as { accountId: number; netPos: number }[]).map((p) => [String(p.accountId), p.netPos]));
}

describe('an account id two of a user’s connections report', () => {
  it('the connection that served it first keeps it: the other is refused (FAILED, naming the account and the connection), also across a restart where the first is slow to report and while it is disabled; the other serves it once the first is deleted', async () => {
    const id = '424242';
    const [a, b] = brokers as [SimHandle, SimHandle];
    for (const broker of brokers) await control(broker, 'POST', '/users', { name: 'u', password: 'pw-u', accounts: [{ name: 'U', id: Number(id) }] });
    const first = await addByCli(a);
    service = await startService(dataDir, { RATE_LIMIT_PER_MIN: '100000' }, 'warn');
    await eventually(async () => ((await connectionOf(first))?.accountIds.includes(id) ? true : undefined), 'the first connection serving the account', 20_000);
    // Added while it runs: refused.
    const second = await addByCli(b);
    const refused = await eventually(async () => {
      const c = await connectionOf(second);
      return c?.status === 'FAILED' ? c : undefined;
    }, 'the second connection FAILED', 20_000);
    expect(refused.detail).toContain(`account ${id} is also an account of connection ${first}, which served it first`);
    expect(refused.accountIds).toEqual([]);

    // A webhook token bound to the id while the first serves it.
    const token = await alice('POST', '/api/v1/webhook-tokens', { accountId: id, name: 'tv' });
    expect(token.status, token.text).toBe(201);
    // (By path: the service listens on another port after the restart below.)
    const hook = (body: object) => http(service!.url, 'POST', `/api/v1/webhooks/${token.json.token as string}`, { body });
    const listed = (await alice('GET', '/api/v1/accounts')).json.data as { id: string; connectionId: string }[];
    expect(listed.filter((x) => x.id === id)).toEqual([expect.objectContaining({ id, connectionId: first })]);
    const order = await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'buy', qty: 1, type: 'market' });
    expect(order.status, order.text).toBe(201);
    await eventually(async () => ((await positions(a))[id] === 1 ? true : undefined), 'long 1 at the first connection’s broker', 10_000);
    // A reconnect by hand checks again: still refused.
    expect((await alice('POST', `/api/v1/connections/${second}/reconnect`)).status).toBe(202);
    await eventually(async () => ((await connectionOf(second))?.status === 'FAILED' ? true : undefined), 'refused again after a reconnect', 20_000);

    // Restarted with the first connection's broker slow to answer: the second never serves the id
    // meanwhile (re-probe: it did until the first reported, and an order sent then filled at its broker).
    expect(await service.stop()).toBe(0);
    await control(a, 'POST', '/faults', { latencyMs: 3000 });
    try {
      service = await startService(dataDir, { RATE_LIMIT_PER_MIN: '100000' }, 'warn');
      await eventually(async () => ((await connectionOf(second))?.status === 'FAILED' ? true : undefined), 'the second refused after the restart', 20_000);
      const early = await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'buy', qty: 1, type: 'market' });
      expect(early.status, early.text).toBe(503);
    } finally {
      await control(a, 'DELETE', '/faults');
    }
    await eventually(async () => ((await connectionOf(first))?.status === 'CONNECTED' ? true : undefined), 'the first connected again', 20_000);
    expect((await connectionOf(second))?.status).toBe('FAILED');

    // Disabled (its record kept): the id stays the first's, listed once; the second stays refused.
    expect((await runCli(dataDir, ['connections', 'disable', first])).code).toBe(0);
    await eventually(async () => ((await connectionOf(first))?.status === 'DISABLED' ? true : undefined), 'the first disabled', 10_000);
    await new Promise((r) => setTimeout(r, 3000));
    expect((await connectionOf(second))?.status).toBe('FAILED');
    expect(((await alice('GET', '/api/v1/accounts')).json.data as { id: string }[]).filter((x) => x.id === id)).toHaveLength(1);
    expect((await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'buy', qty: 1, type: 'market' })).status).toBe(503);

    // Deleted while disabled, with the CLI: the second starts and serves its own account of that id.
    expect((await runCli(dataDir, ['connections', 'remove', first])).code).toBe(0);
    const started = await eventually(async () => {
      const c = await connectionOf(second);
      return c?.status === 'CONNECTED' && c.accountIds.length > 0 ? c : undefined;
    }, 'the second connection started', 20_000);
    expect(started.accountIds).toEqual([id]);
    // The first's token went with it (re-probe: it stayed active, and its next alert filled at the second's broker).
    const alert = await hook({ action: 'buy', symbol: 'ESZ6', qty: 1 });
    expect(alert.status, alert.text).toBe(403);
    expect(alert.json).toMatchObject({ code: 'ACCOUNT_INACTIVE', detail: expect.stringContaining(`its connection ${first} was deleted`) });
    expect((await positions(b))[id] ?? 0).toBe(0);
    const again = await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'sell', qty: 2, type: 'market' });
    expect(again.status, again.text).toBe(201);
    await eventually(async () => ((await positions(b))[id] === -2 ? true : undefined), 'short 2 at the second connection’s broker', 10_000);
    expect((await positions(a))[id]).toBe(1);
  }, 120_000);
});
