import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createdWebhookTokenSchema, listOf, webhookTokenSchema } from '../../../../src/http/schemas.js';
import { call, callError, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

const create = (body: unknown, userId = w.a.userId) => call(w, 'POST', '/webhook-tokens', { userId, body });

describe('webhook tokens', () => {
  it('creates a token bound to the user’s account and returns the URL with the token once', async () => {
    const res = await create({ accountId: '101', name: 'TV long' });
    expect(res.status).toBe(201);
    const body = createdWebhookTokenSchema.parse(res.body);
    expect(body.token).toMatch(/^whk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$/);
    expect(body.url).toBe(`https://trade.example.com/api/v1/webhooks/${body.token}`);
    expect(body).toMatchObject({ accountId: '101', accountActive: true, strategyId: null });
    expect(w.store.webhookTokens.verify(body.token)?.accountId).toBe('101');
  });

  it('refuses to bind another user’s account or an unknown one (same message), or an inactive one', async () => {
    const foreign = await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '201', name: 'x' } });
    const unknown = await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '999', name: 'x' } });
    expect([foreign.code, unknown.code]).toEqual(['VALIDATION_FAILED', 'VALIDATION_FAILED']);
    expect(foreign.message).toBe(unknown.message);
    expect((await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '102', name: 'x' } })).code).toBe('ACCOUNT_INACTIVE');
  });

  it("the ready alert message leaves out what the bound strategy sets, so the strategy's legs are not overridden", async () => {
    const legs = await w.store.strategies.create(w.a.userId, { name: 'legs', description: '', orderType: 'market', takeProfit: { ticks: 20 }, stopLoss: { ticks: 10 } });
    const bound = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'bound', strategyId: legs.id })).body);
    const message = JSON.parse(bound.alertMessage!) as Record<string, unknown>;
    expect(Object.keys(message).sort()).toEqual(['action', 'id', 'marketPosition', 'marketPositionSize', 'qty', 'symbol', 'time']);
    const again = webhookTokenSchema.parse((await call(w, 'GET', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: bound.id } })).body);
    expect(again.alertMessage).toBe(bound.alertMessage);
    // A strategy that sets none of them, or none at all: the whole template.
    const bare = await w.store.strategies.create(w.a.userId, { name: 'bare', description: '' });
    const plain = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'plain', strategyId: bare.id })).body);
    expect(JSON.parse(plain.alertMessage!)).toMatchObject({ orderType: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
  });

  it('refuses a strategy the user does not own', async () => {
    const s = await w.store.strategies.create(w.b.userId, { name: 'b', description: '' });
    const err = await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'x', strategyId: s.id } });
    expect(err.extensions.errors).toEqual([expect.objectContaining({ path: 'strategyId' })]);
  });

  it('refuses a strategy id no record can have (5,000 characters: too long for an LMDB key) as unknown, a 400 and not a 500', async () => {
    for (const strategyId of ['x'.repeat(5000), `str_${'a'.repeat(200)}`]) {
      const err = await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'x', strategyId } });
      expect(err.code).toBe('VALIDATION_FAILED');
      expect(err.extensions.errors).toEqual([expect.objectContaining({ path: 'strategyId' })]);
    }
  });

  it('lists without secrets, shows the URL to its owner on GET one, 404 to others', async () => {
    const created = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'a' })).body);
    const list = listOf(webhookTokenSchema).parse((await call(w, 'GET', '/webhook-tokens', { userId: w.a.userId })).body);
    expect(list.data).toHaveLength(1);
    expect(JSON.stringify(list)).not.toContain(created.token);
    const one = webhookTokenSchema.parse((await call(w, 'GET', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id } })).body);
    expect(one.url).toBe(created.url);
    expect((await callError(w, 'GET', '/webhook-tokens/:id', { userId: w.b.userId, params: { id: created.id } })).code).toBe('NOT_FOUND');
    expect((await call(w, 'GET', '/webhook-tokens', { userId: w.b.userId })).body).toEqual({ data: [], nextCursor: null });
  });

  it('flags a token whose account became inactive and rebinds it with PATCH', async () => {
    const created = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'a' })).body);
    w.gateway.accountsOf.get(w.a.connectionId)![0]!.active = false;
    w.gateway.accountsOf.get(w.a.connectionId)![1]!.active = true;
    const flagged = webhookTokenSchema.parse((await call(w, 'GET', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id } })).body);
    expect(flagged.accountActive).toBe(false);
    const patched = await call(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id }, body: { accountId: '102' } });
    expect(webhookTokenSchema.parse(patched.body)).toMatchObject({ accountId: '102', accountActive: true });
  });

  it('while the connection has not reported its accounts (just started): accountActive is null, not false, and binding its account is 503, not a final 400 (clients probe)', async () => {
    const created = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'a' })).body);
    w.gateway.accountsOf.set(w.a.connectionId, []);
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: 0 });
    const listed = listOf(webhookTokenSchema).parse((await call(w, 'GET', '/webhook-tokens', { userId: w.a.userId })).body);
    expect(listed.data.map((t) => t.accountActive)).toEqual([null]);
    const created2 = await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'b' } });
    expect([created2.code, created2.retryAfterSeconds]).toEqual(['BROKER_UNAVAILABLE', 1]);
    expect((await callError(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id }, body: { accountId: '102' } })).code).toBe('BROKER_UNAVAILABLE');
    // An id that cannot be an account stays a 400 meanwhile.
    expect((await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: 'abc', name: 'c' } })).code).toBe('VALIDATION_FAILED');
    // Failed before it ever reported: 409, retrying cannot help; still unknown, not inactive.
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'FAILED', reason: 'fatal-error', detail: 'bad login', ts: 0 });
    expect((await callError(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'b' } })).code).toBe('CONNECTION_FAILED');
    expect(webhookTokenSchema.parse((await call(w, 'GET', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id } })).body).accountActive).toBeNull();
  });

  it('PATCH refuses another user’s account and another user’s token', async () => {
    const created = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'a' })).body);
    expect((await callError(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id }, body: { accountId: '201' } })).code).toBe('VALIDATION_FAILED');
    expect((await callError(w, 'PATCH', '/webhook-tokens/:id', { userId: w.b.userId, params: { id: created.id }, body: { name: 'mine' } })).code).toBe('NOT_FOUND');
    expect(w.store.webhookTokens.getForUser(w.a.userId, created.id)).toMatchObject({ accountId: '101', name: 'a' });
  });

  it('DELETE removes the token (its URL stops verifying); a second DELETE is 404', async () => {
    const created = createdWebhookTokenSchema.parse((await create({ accountId: '101', name: 'a' })).body);
    expect((await callError(w, 'DELETE', '/webhook-tokens/:id', { userId: w.b.userId, params: { id: created.id } })).code).toBe('NOT_FOUND');
    expect((await call(w, 'DELETE', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id } })).status).toBe(204);
    expect(w.store.webhookTokens.verify(created.token)).toBeNull();
    expect((await callError(w, 'DELETE', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: created.id } })).code).toBe('NOT_FOUND');
  });
});
