/**
 * One user cannot exhaust the machine: per-user quotas (409 QUOTA_EXCEEDED), the service's
 * actor ceiling (503 ACTOR_LIMIT_REACHED), and DELETE /connections/{id}, which stops the actor,
 * frees the slot and makes the tokens bound to its accounts inactive with the reason. Real
 * HTTP, a real SSE client and the real CLI against `serve --paper` with small limits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http } from '../../support/http.js';
import { cli, createKey, runCli, startServe, type Served } from '../../support/processes.js';
import { openHealthStream } from '../../support/sse.js';

let s: Served;
let bobKey: string;
const as = (key: string) => (method: string, path: string, body?: unknown) => http(s.url, method, path, { key, ...(body !== undefined ? { body } : {}) });
const demo = (method: string, path: string, body?: unknown) => as(s.apiKey)(method, path, body);

async function connected(key: string, id: string): Promise<string[]> {
  return eventually(async () => {
    const c = ((await as(key)('GET', '/api/v1/connections')).json.data as any[]).find((x) => x.id === id);
    return c?.status === 'CONNECTED' && c.accountIds.length > 0 ? (c.accountIds as string[]) : undefined;
  }, `connection ${id} CONNECTED`, 20_000);
}

beforeAll(async () => {
  s = await startServe({
    RATE_LIMIT_PER_MIN: '100000',
    QUOTA_CONNECTIONS: '2',
    QUOTA_WEBHOOK_TOKENS: '1',
    QUOTA_STRATEGIES: '1',
    QUOTA_API_KEYS: '2',
    ACTORS_MAX: '3',
  });
  await cli(s, ['users', 'add', 'bob']);
  bobKey = (await createKey(s, 'bob', 'read,trade')).key;
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('per-user quotas (item 1)', () => {
  it('caps connections per user with 409 QUOTA_EXCEEDED, also for concurrent creates at the last slot', async () => {
    // The demo user has its first-run connection: one slot left, five requests race for it.
    const race = await Promise.all(Array.from({ length: 5 }, () => demo('POST', '/api/v1/connections', {})));
    expect(race.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    const refused = race.find((r) => r.status === 409)!;
    expect(refused.json).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'connections', limit: 2 });
    expect(refused.json.detail).toContain('QUOTA_CONNECTIONS');
    expect((await demo('GET', '/api/v1/connections')).json.data).toHaveLength(2);
  });

  it('caps webhook tokens and strategies', async () => {
    const account = s.accounts[0]!;
    expect((await demo('POST', '/api/v1/webhook-tokens', { accountId: account, name: 'one' })).status).toBe(201);
    expect((await demo('POST', '/api/v1/webhook-tokens', { accountId: account, name: 'two' })).json).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'webhookTokens' });
    expect((await demo('POST', '/api/v1/strategies', { name: 'one' })).status).toBe(201);
    expect((await demo('POST', '/api/v1/strategies', { name: 'two' })).json).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'strategies' });
  });

  it('caps API keys not revoked (the CLI, with the same settings, refuses a third; a revocation frees a slot)', async () => {
    const settings = { QUOTA_API_KEYS: '2' };
    const create = (name: string) => runCli(s.dataDir, ['keys', 'create', '--user', 'demo', '--name', name, '--scopes', 'read', '--json'], '', settings);
    const second = await create('second');
    expect(second.code, second.stderr).toBe(0);
    const third = await create('third');
    expect(third.code).toBe(1);
    expect(third.stderr).toContain('At most 2 API keys (not revoked) per user (QUOTA_API_KEYS)');
    await cli(s, ['keys', 'revoke', JSON.parse(second.stdout).id]);
    expect((await create('third')).code).toBe(0);
  });

  it('refuses a new actor past ACTORS_MAX with 503 ACTOR_LIMIT_REACHED and Retry-After', async () => {
    const bob = as(bobKey);
    expect((await bob('POST', '/api/v1/connections', {})).status).toBe(201); // the 3rd actor of the service
    const past = await bob('POST', '/api/v1/connections', {});
    expect(past.status, past.text).toBe(503);
    expect(past.json).toMatchObject({ code: 'ACTOR_LIMIT_REACHED', limit: 3 });
    expect(Number(past.headers.get('retry-after'))).toBeGreaterThan(1);
  });
});

describe('DELETE /connections/{id} (item 1)', () => {
  it('is 404 for an unknown or another user’s connection', async () => {
    const bobs = (await as(bobKey)('GET', '/api/v1/connections')).json.data as any[];
    expect((await demo('DELETE', `/api/v1/connections/${bobs[0].id}`)).status).toBe(404);
    expect((await demo('DELETE', '/api/v1/connections/con_unknown')).status).toBe(404);
    expect(((await as(bobKey)('GET', '/api/v1/connections')).json.data as any[]).length).toBe(1);
  });

  it('stops the actor, makes its tokens inactive with the reason, and frees the slot', async () => {
    const list = (await demo('GET', '/api/v1/connections')).json.data as any[];
    const victim = list.find((c) => c.name === 'Paper' && c.environment === 'paper' && !c.accountIds.includes(s.accounts[0]))!;
    const [account] = await connected(s.apiKey, victim.id);
    const tokens = (await demo('GET', '/api/v1/webhook-tokens')).json.data as any[];
    // Move the one token (quota 1) onto the victim's account.
    const token = (await demo('PATCH', `/api/v1/webhook-tokens/${tokens[0].id}`, { accountId: account })).json;
    const url = (await demo('GET', `/api/v1/webhook-tokens/${token.id}`)).json.url as string;
    const stream = await openHealthStream(s.url, s.apiKey);
    try {
      const from = stream.events.length;
      const deleted = await demo('DELETE', `/api/v1/connections/${victim.id}`);
      expect(deleted.status, deleted.text).toBe(204);
      expect(deleted.text).toBe('');
      await stream.waitFor((e) => e.connectionId === victim.id && e.status === 'DISABLED', from, 10_000);
    } finally {
      stream.close();
    }
    expect(((await demo('GET', '/api/v1/connections')).json.data as any[]).map((c) => c.id)).not.toContain(victim.id);
    expect((await demo('GET', `/api/v1/accounts/${account}`)).status).toBe(404);

    const record = (await demo('GET', `/api/v1/webhook-tokens/${token.id}`)).json;
    expect(record).toMatchObject({ accountActive: false, inactiveReason: `its connection ${victim.id} was deleted` });
    const alert = await http(url, 'POST', '', { body: { action: 'buy', symbol: 'ES1!', qty: 1 } });
    expect(alert.status, alert.text).toBe(403);
    expect(alert.json.code).toBe('ACCOUNT_INACTIVE');
    expect(alert.json.detail).toBe(`Account is inactive: its connection ${victim.id} was deleted; rebind the token`);

    // The slot is free again, and rebinding the token makes it work.
    expect((await demo('POST', '/api/v1/connections', {})).status).toBe(201);
    const rebound = await demo('PATCH', `/api/v1/webhook-tokens/${token.id}`, { accountId: s.accounts[0] });
    expect(rebound.json).toMatchObject({ accountActive: true, inactiveReason: null });
    expect((await http(url, 'POST', '', { body: { action: 'buy', symbol: 'ES1!', qty: 1 } })).status).toBe(201);
  });
});
