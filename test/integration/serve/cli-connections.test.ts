/**
 * Connections changed by the CLI while `serve --paper` runs (LMDB is multi-process): the
 * server starts an added one within seconds (with its login at the embedded paper broker, as at
 * start-up), stops a disabled one and starts it again when enabled, and stops a removed one,
 * making its webhook tokens inactive. Real processes throughout: the server, the CLI, an SSE
 * client and the paper broker's control API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http } from '../../support/http.js';
import { cli, createKey, runCli, startServe, type Served } from '../../support/processes.js';
import { control } from '../../support/sim.js';
import { openHealthStream } from '../../support/sse.js';

let s: Served;
let aliceKey: string;
const alice = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: aliceKey, ...(body !== undefined ? { body } : {}) });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  await cli(s, ['users', 'add', 'alice']);
  aliceKey = (await createKey(s, 'alice', 'read,trade')).key;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

interface ConnectionView {
  id: string;
  status: string;
  since: string | null;
  accountIds: string[];
}

async function connectionOf(id: string): Promise<ConnectionView | undefined> {
  return ((await alice('GET', '/api/v1/connections')).json.data as ConnectionView[]).find((c) => c.id === id);
}

async function connected(id: string): Promise<ConnectionView> {
  return eventually(async () => {
    const c = await connectionOf(id);
    return c?.status === 'CONNECTED' && c.accountIds.length > 0 ? c : undefined;
  }, `connection ${id} CONNECTED`, 20_000);
}

async function addByCli(brokerUser: string, password: string): Promise<string> {
  const added = await runCli(s.dataDir, ['connections', 'add', '--user', 'alice', '--paper', '--paper-url', s.paperUrl, '--paper-user', brokerUser, '--password-stdin', '--json'], `${password}\n`);
  expect(added.code, added.stderr).toBe(0);
  return JSON.parse(added.stdout).id as string;
}

describe('connections the CLI adds while the server runs (item 1)', () => {
  it('says at once when the paper broker refuses the credentials given (ops probe: exit 0 and nothing said, the connection FAILED)', async () => {
    await control(s, 'POST', '/users', { name: 'alice-typo', password: 'right-password', accounts: [{ name: 'ALICE-T' }] });
    const added = await runCli(s.dataDir, ['connections', 'add', '--user', 'alice', '--paper', '--paper-url', s.paperUrl, '--paper-user', 'alice-typo', '--password-stdin'], 'wrong-password\n');
    expect(added.code, added.stderr).toBe(0);
    expect(added.stderr).toContain(`the paper broker at ${s.paperUrl}`);
    expect(added.stderr).toContain('refuses these credentials now');
    const id = /\((con_[A-Za-z0-9]+)\)/.exec(added.stdout)![1]!;
    expect((await runCli(s.dataDir, ['connections', 'remove', id])).code).toBe(0);
  });

  it('start within seconds and trade: a login made at the paper broker beforehand', async () => {
    await control(s, 'POST', '/users', { name: 'alice-own', password: 'pw-alice-own', accounts: [{ name: 'ALICE-A' }] });
    const id = await addByCli('alice-own', 'pw-alice-own');
    const c = await connected(id);
    expect(c.since).not.toBeNull();
    const order = await alice('POST', `/api/v1/accounts/${c.accountIds[0]}/orders`, { symbol: 'ES', side: 'buy', qty: 1, type: 'market' });
    expect(order.status, order.text).toBe(201);
  });

  it('start with their login opened at the embedded paper broker when it has none (as every start does)', async () => {
    const id = await addByCli('alice-fresh', 'pw-alice-fresh');
    const c = await connected(id);
    const accounts = (await alice('GET', '/api/v1/accounts')).json.data as { id: string; name: string }[];
    expect(accounts.find((a) => a.id === c.accountIds[0])?.name).toBe('ALICE-FRESH-1');
  });
});

describe('connections the CLI disables, enables and removes while the server runs (item 1)', () => {
  it('disable stops the actor (DISABLED), enable starts it again, remove stops it and makes its tokens inactive', async () => {
    await control(s, 'POST', '/users', { name: 'alice-life', password: 'pw-alice-life', accounts: [{ name: 'LIFE-A' }] });
    const id = await addByCli('alice-life', 'pw-alice-life');
    const [account] = (await connected(id)).accountIds;
    const token = await alice('POST', '/api/v1/webhook-tokens', { accountId: account, name: 'life' });
    expect(token.status, token.text).toBe(201);
    const stream = await openHealthStream(s.url, aliceKey);
    try {
      let from = stream.events.length;
      expect((await runCli(s.dataDir, ['connections', 'disable', id])).code).toBe(0);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'DISABLED', from, 10_000);
      expect((await connectionOf(id))?.status).toBe('DISABLED');

      from = stream.events.length;
      expect((await runCli(s.dataDir, ['connections', 'enable', id])).code).toBe(0);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'CONNECTED', from, 20_000);

      from = stream.events.length;
      const removed = await runCli(s.dataDir, ['connections', 'remove', id]);
      expect(removed.stdout).toContain(`removed connection ${id}`);
      await stream.waitFor((e) => e.connectionId === id && e.status === 'DISABLED', from, 10_000);
    } finally {
      stream.close();
    }
    expect(await connectionOf(id)).toBeUndefined();
    const after = await eventually(async () => {
      const t = (await alice('GET', `/api/v1/webhook-tokens/${token.json.id as string}`)).json;
      return t.inactiveReason ? t : undefined;
    }, 'token inactive', 10_000);
    expect(after).toMatchObject({ accountActive: false, inactiveReason: `its connection ${id} was deleted` });
  });

  it('the CLI refuses an unknown id, and needs one', async () => {
    const unknown = await runCli(s.dataDir, ['connections', 'remove', 'con_nope']);
    expect([unknown.code, unknown.stderr]).toEqual([1, "tradegate connections: unknown connection 'con_nope'\n"]);
    expect((await runCli(s.dataDir, ['connections', 'disable'])).code).toBe(2);
  });
});
