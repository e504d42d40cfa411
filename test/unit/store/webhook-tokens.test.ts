import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempStore, type TempStore } from './temp-store.js';

let t: TempStore;
let alice: string;
let bob: string;

beforeEach(async () => {
  t = await tempStore();
  alice = (await t.store.users.create({ name: 'alice' })).id;
  bob = (await t.store.users.create({ name: 'bob' })).id;
});
afterEach(() => t.cleanup());

describe('webhookTokens', () => {
  it('creates a whk_<12>_<32> token bound to an account that verifies and can be revealed to its owner only', async () => {
    const { record, token } = await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101' });
    expect(token).toMatch(/^whk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$/);
    expect(record).toMatchObject({ userId: alice, name: 'tv', accountId: '101', strategyId: null, prefix: `whk_${record.id}`, lastUsedAt: null });
    expect(t.store.webhookTokens.verify(token)).toEqual(record);
    expect(t.store.webhookTokens.reveal(alice, record.id)).toBe(token);
    expect(t.store.webhookTokens.reveal(bob, record.id)).toBeUndefined();
    expect(t.store.webhookTokens.getForUser(bob, record.id)).toBeUndefined();
    expect(JSON.stringify(t.store.webhookTokens.listByUser(alice))).not.toContain(token);
  });

  it('rejects a wrong secret, an API key, and malformed tokens without store access', async () => {
    const { token } = await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101' });
    const { key } = await t.store.apiKeys.create({ userId: alice, name: 'k', scopes: ['trade'] });
    expect(t.store.webhookTokens.verify(token.slice(0, -1) + (token.at(-1) === 'x' ? 'y' : 'x'))).toBeNull();
    expect(t.store.webhookTokens.verify(key)).toBeNull();
    await t.store.close();
    expect(() => t.store.webhookTokens.verify(token)).toThrow();
    for (const raw of ['', token.slice(1), `${token}0`, token.replace('whk', 'tgk'), 'whk_' + '9'.repeat(500_000), undefined]) {
      expect(t.store.webhookTokens.verify(raw)).toBeNull();
    }
  });

  it('never verifies and never throws for arbitrary strings (property)', async () => {
    await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101' });
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ maxLength: 60 }).map((s) => `whk_${s}`)), (raw) => {
        expect(t.store.webhookTokens.verify(raw)).toBeNull();
      }),
      { numRuns: 1000 },
    );
  });

  it('update rebinds account and strategy for the owner only; the token keeps working', async () => {
    const { record, token } = await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101', strategyId: 'stg_1' });
    expect(await t.store.webhookTokens.update(bob, record.id, { accountId: '999' })).toBeUndefined();
    const updated = await t.store.webhookTokens.update(alice, record.id, { accountId: '202', name: 'renamed' });
    expect(updated).toMatchObject({ accountId: '202', name: 'renamed', strategyId: 'stg_1' });
    expect((await t.store.webhookTokens.update(alice, record.id, { strategyId: null }))?.strategyId).toBeNull();
    expect(t.store.webhookTokens.verify(token)?.accountId).toBe('202');
    await expect(t.store.webhookTokens.update(alice, record.id, { name: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('remove deletes for the owner only, after which the token no longer verifies', async () => {
    const { record, token } = await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101' });
    expect(await t.store.webhookTokens.remove(bob, record.id)).toBe(false);
    expect(t.store.webhookTokens.verify(token)).not.toBeNull();
    expect(await t.store.webhookTokens.remove(alice, record.id)).toBe(true);
    expect(t.store.webhookTokens.verify(token)).toBeNull();
    expect(t.store.webhookTokens.listByUser(alice)).toEqual([]);
    expect(t.store.webhookTokens.reveal(alice, record.id)).toBeUndefined();
  });

  it('touch records last use, throttled per token', async () => {
    const { record, token } = await t.store.webhookTokens.create({ userId: alice, name: 'tv', accountId: '101' });
    t.store.webhookTokens.touch(record.id, t.now.value);
    t.store.webhookTokens.touch(record.id, t.now.value + 30_000);
    await t.store.flushed();
    expect(t.store.webhookTokens.verify(token)?.lastUsedAt).toBe(new Date(t.now.value).toISOString());
  });
});
