import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { apiKeySchema } from '../../../../src/http/routes/api-keys.js';
import { listOf } from '../../../../src/http/schemas.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

const session = (userId: string) => ({ userId, kind: 'session' as const, principalId: 'session:ses_1' });
const create = (body: unknown, userId = w.a.userId) => call(w, 'POST', '/api-keys', { ...session(userId), body });

describe('API key management', () => {
  it('creates a key with the chosen scopes; the key is in that answer only and works at once', async () => {
    const res = await create({ name: ' bot ', scopes: ['read'] });
    expect(res.status).toBe(201);
    expect(res.headers?.['Cache-Control']).toBe('no-store');
    const body = res.body as { id: string; key: string; name: string; scopes: string[]; prefix: string };
    expect(body).toMatchObject({ name: 'bot', scopes: ['read'], prefix: `tgk_${body.id}`, revokedAt: null, lastUsedAt: null });
    expect(w.store.apiKeys.verify(body.key)).toMatchObject({ id: body.id, userId: w.a.userId, scopes: ['read'] });
    const list = listOf(apiKeySchema).parse((await call(w, 'GET', '/api-keys', session(w.a.userId))).body);
    expect(list.data.map((k) => k.id)).toEqual([body.id]);
    expect(JSON.stringify(list)).not.toContain(body.key);
  });

  it('refuses bad names and scopes (validated by the route schema)', () => {
    const schema = route(w, 'POST', '/api-keys').body!;
    for (const bad of [{ name: '', scopes: ['read'] }, { name: '   ', scopes: ['read'] }, { name: 'x', scopes: [] }, { name: 'x', scopes: ['admin'] }, { name: 'x'.repeat(101), scopes: ['read'] }]) {
      expect(schema.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
    // An invisible character is refused as in every other name, not trimmed away (fuzz probe: a BOM was stored trimmed).
    expect(schema.safeParse({ name: '\ufeffmykey  ', scopes: ['read'] }).success).toBe(false);
    expect(schema.parse({ name: '  mykey  ', scopes: ['read'] }).name).toBe('mykey');
  });

  it('lists revoked keys marked as such, and never another user’s keys', async () => {
    const first = (await create({ name: 'one', scopes: ['read'] })).body as { id: string };
    const second = (await create({ name: 'two', scopes: ['read', 'trade'] })).body as { id: string };
    await create({ name: 'bobs', scopes: ['read'] }, w.b.userId);
    expect((await call(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id: first.id } })).status).toBe(204);
    const list = listOf(apiKeySchema).parse((await call(w, 'GET', '/api-keys', session(w.a.userId))).body).data;
    expect(Object.fromEntries(list.map((k) => [k.name, k.revokedAt !== null]))).toEqual({ two: false, one: true });
    expect(list.some((k) => k.id === second.id)).toBe(true);
  });

  it('revokes effective on the next verify; again is a no-op 204; another user’s key is 404 and stays valid', async () => {
    const mine = (await create({ name: 'k', scopes: ['read'] })).body as { id: string; key: string };
    const bobs = (await create({ name: 'b', scopes: ['read'] }, w.b.userId)).body as { id: string; key: string };
    expect((await call(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id: mine.id } })).status).toBe(204);
    expect(w.store.apiKeys.verify(mine.key)).toBeNull();
    expect((await call(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id: mine.id } })).status).toBe(204);
    expect((await callError(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id: bobs.id } })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id: 'nope' } })).code).toBe('NOT_FOUND');
    expect(w.store.apiKeys.verify(bobs.key)).not.toBeNull();
    await w.store.flushed();
    expect((await w.store.journal.list({ userId: w.a.userId, limit: 10 })).map((e) => e.kind)).toEqual(['api-key-revoke', 'api-key-create']);
  });

  it('caps live keys at QUOTA_API_KEYS per user (revoked ones do not count)', async () => {
    const live = w.store.apiKeys.listByUser(w.a.userId).filter((k) => !k.revokedAt).length;
    for (let i = live; i < w.deps.config.quotaApiKeys; i++) await w.store.apiKeys.create({ userId: w.a.userId, name: `k${i}`, scopes: ['read'] });
    expect(await callError(w, 'POST', '/api-keys', { ...session(w.a.userId), body: { name: 'one more', scopes: ['read'] } })).toMatchObject({ code: 'QUOTA_EXCEEDED', status: 409 });
    const [oldest] = w.store.apiKeys.listByUser(w.a.userId);
    await w.store.apiKeys.revoke(w.a.userId, oldest!.id);
    expect((await create({ name: 'one more', scopes: ['read'] })).status).toBe(201);
  });
});

describe('revocation and open health streams', () => {
  it('revoking a key ends its open streams at once (once, not again for an already revoked key)', async () => {
    const ended: unknown[] = [];
    w.deps.streams = { closeStreams: (match, reason) => (ended.push([match, reason]), 1) };
    const { id } = (await create({ name: 'streaming', scopes: ['read'] })).body as { id: string };
    await call(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id } });
    await call(w, 'DELETE', '/api-keys/:id', { ...session(w.a.userId), params: { id } });
    expect(ended).toEqual([[{ principalId: id }, 'key-revoked']]);
  });
});
