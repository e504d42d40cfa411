/**
 * Paper logins at the embedded paper broker follow the connections: a create refused at the
 * actor ceiling opens nothing, a deleted connection's login goes with it, and paper account
 * names are scoped per login, so one user cannot learn another's. Real HTTP against
 * `serve --paper`, the paper broker's control API and the data dir's `paper-logins.json`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http, type Reply } from '../../support/http.js';
import { cli, cliAt, createKey, startServe, type Served } from '../../support/processes.js';
import { simState } from '../../support/sim.js';

let s: Served;
let bobKey: string;
const as = (key: string) => (method: string, path: string, body?: unknown) => http(s.url, method, path, { key, ...(body !== undefined ? { body } : {}) });
const demo = (method: string, path: string, body?: unknown) => as(s.apiKey)(method, path, body);

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', ACTORS_MAX: '3' });
  await cli(s, ['users', 'add', 'bob']);
  bobKey = (await createKey(s, 'bob', 'read,trade')).key;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

/** Login names the paper broker has now. */
async function brokerLogins(): Promise<string[]> {
  return ((await simState(s)).users as { name: string }[]).map((u) => u.name).sort();
}

/** Login names the service will re-create at its next start. */
function rememberedLogins(): string[] {
  return Object.keys(JSON.parse(readFileSync(join(s.dataDir, 'paper-logins.json'), 'utf8')) as object).sort();
}

function tally(replies: Reply[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of replies) out[r.status] = (out[r.status] ?? 0) + 1;
  return out;
}

describe('paper logins follow their connections (item 5)', () => {
  it('creates refused at ACTORS_MAX open nothing at the paper broker; deleting a connection removes its login', async () => {
    const before = await brokerLogins();
    expect(rememberedLogins()).toEqual(before);
    // The demo connection is one of the 3 actors: two slots left, six requests race for them.
    const replies = await Promise.all(Array.from({ length: 6 }, () => demo('POST', '/api/v1/connections', {})));
    expect(tally(replies)).toEqual({ 201: 2, 503: 4 });
    for (const r of replies.filter((x) => x.status === 503)) {
      expect(r.json).toMatchObject({ code: 'ACTOR_LIMIT_REACHED', limit: 3 });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(1);
    }
    const opened = await brokerLogins();
    expect(opened).toHaveLength(before.length + 2);
    expect(rememberedLogins()).toEqual(opened);

    for (const r of replies.filter((x) => x.status === 201)) expect((await demo('DELETE', `/api/v1/connections/${r.json.id as string}`)).status).toBe(204);
    expect(await brokerLogins()).toEqual(before);
    expect(rememberedLogins()).toEqual(before);
  });
});

describe('paper account names are per login (item 6)', () => {
  it('two users may both name a paper account ALICE1; neither gets a 409 that reveals the other’s', async () => {
    const mine = await demo('POST', '/api/v1/connections', { accounts: [{ name: 'ALICE1' }] });
    const theirs = await as(bobKey)('POST', '/api/v1/connections', { accounts: [{ name: 'ALICE1' }] });
    expect([mine.status, theirs.status], `${mine.text} ${theirs.text}`).toEqual([201, 201]);
    const named = async (key: string, connectionId: string) =>
      eventually(async () => {
        const accounts = ((await as(key)('GET', '/api/v1/accounts')).json?.data ?? []) as { id: string; name: string; connectionId: string }[];
        return accounts.find((a) => a.connectionId === connectionId && a.name === 'ALICE1');
      }, `account ALICE1 of ${connectionId}`, 20_000);
    const [a, b] = await Promise.all([named(s.apiKey, mine.json.id), named(bobKey, theirs.json.id)]);
    expect(a.id).not.toBe(b.id);
    // Each sees only its own.
    expect((await demo('GET', `/api/v1/accounts/${b.id}`)).status).toBe(404);
  });
});

describe('a paper connection the CLI adds while serve --paper runs, without a password (docs probe)', () => {
  it('shows FAILED with the reason instead of CONNECTING with none, never holds the user\'s account list at 503, and starts once given a password', async () => {
    // Room under ACTORS_MAX (3): the connections the tests above added go (the demo's own stays).
    for (const key of [s.apiKey, bobKey]) {
      const mine = ((await as(key)('GET', '/api/v1/connections')).json.data as { id: string; accountIds: string[] }[]).filter((c) => !c.accountIds.includes(s.accounts[0]!));
      for (const c of mine) expect((await as(key)('DELETE', `/api/v1/connections/${c.id}`)).status).toBe(204);
    }
    await cli(s, ['users', 'add', 'dana']);
    const danaKey = (await createKey(s, 'dana', 'read,trade')).key;
    const dana = as(danaKey);
    const added = JSON.parse(await cliAt(s.dataDir, ['connections', 'add', '--user', 'dana', '--paper', '--paper-url', s.paperUrl, '--paper-user', 'dana-paper', '--json'])) as { id: string };
    // Its actor starts (it had none, and stayed CONNECTING with no word) and says why it cannot log in.
    const failed = await eventually(async () => {
      const c = ((await dana('GET', '/api/v1/connections')).json?.data as { id: string; status: string; detail: string | null }[] | undefined)?.find((x) => x.id === added.id);
      return c?.status === 'FAILED' ? c : undefined;
    }, 'the connection FAILED', 20_000);
    expect(failed.detail).toBeTruthy();
    // The list is not held for it (once the start's grace has passed).
    await eventually(async () => (await dana('GET', '/api/v1/accounts')).status === 200, "dana's account list answered", 40_000);
    // Given a password, its login is opened at the embedded broker and it connects (it failed until a restart).
    const fixed = await dana('PATCH', `/api/v1/connections/${added.id}`, { credentials: { password: 'dana-paper-password-1' } });
    expect(fixed.status, fixed.text).toBe(200);
    await eventually(async () => {
      const c = ((await dana('GET', '/api/v1/connections')).json?.data as { id: string; status: string }[] | undefined)?.find((x) => x.id === added.id);
      return c?.status === 'CONNECTED' ? true : undefined;
    }, 'the connection CONNECTED', 30_000);
    expect(await brokerLogins()).toContain('dana-paper');
  }, 120_000);
});
