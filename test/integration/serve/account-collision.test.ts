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
  it('refuses the newer connection (FAILED, naming the account and the other), lists the account once and trades it at the older one’s broker; the newer starts once the older is deleted', async () => {
    const id = '424242';
    for (const b of brokers) await control(b, 'POST', '/users', { name: 'u', password: 'pw-u', accounts: [{ name: 'U', id: Number(id) }] });
    const older = await addByCli(brokers[0]!);
    const newer = await addByCli(brokers[1]!);
    // Both start together: the older keeps the account whichever reports first.
    service = await startService(dataDir, { RATE_LIMIT_PER_MIN: '100000' }, 'warn');

    const refused = await eventually(async () => {
      const c = await connectionOf(newer);
      return c?.status === 'FAILED' ? c : undefined;
    }, 'the newer connection FAILED', 20_000);
    expect(refused.detail).toContain(`account ${id} is also an account of connection ${older}`);
    expect(refused.accountIds).toEqual([]);
    await eventually(async () => ((await connectionOf(older))?.status === 'CONNECTED' ? true : undefined), 'the older connection CONNECTED', 20_000);

    const listed = (await alice('GET', '/api/v1/accounts')).json.data as { id: string; connectionId: string }[];
    expect(listed.filter((a) => a.id === id)).toEqual([expect.objectContaining({ id, connectionId: older })]);
    const order = await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'buy', qty: 1, type: 'market' });
    expect(order.status, order.text).toBe(201);
    await eventually(async () => ((await positions(brokers[0]!))[id] === 1 ? true : undefined), 'long 1 at the older connection’s broker', 10_000);
    expect((await positions(brokers[1]!))[id] ?? 0).toBe(0);
    // A reconnect by hand checks again: still refused while the older runs.
    expect((await alice('POST', `/api/v1/connections/${newer}/reconnect`)).status).toBe(202);
    await eventually(async () => ((await connectionOf(newer))?.status === 'FAILED' ? true : undefined), 'refused again after a reconnect', 20_000);

    // The older deleted: the newer starts and serves its own account of that id.
    expect((await alice('DELETE', `/api/v1/connections/${older}`)).status).toBe(204);
    const started = await eventually(async () => {
      const c = await connectionOf(newer);
      return c?.status === 'CONNECTED' && c.accountIds.length > 0 ? c : undefined;
    }, 'the newer connection started', 20_000);
    expect(started.accountIds).toEqual([id]);
    const again = await alice('POST', `/api/v1/accounts/${id}/orders`, { symbol: 'ESZ6', side: 'sell', qty: 2, type: 'market' });
    expect(again.status, again.text).toBe(201);
    await eventually(async () => ((await positions(brokers[1]!))[id] === -2 ? true : undefined), 'short 2 at the newer connection’s broker', 10_000);
    expect((await positions(brokers[0]!))[id]).toBe(1);
  });
});
