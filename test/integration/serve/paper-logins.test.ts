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
import { cli, createKey, startServe, type Served } from '../../support/processes.js';
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
