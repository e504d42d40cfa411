import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useTwoUsers } from '../../support/store.js';

const world = useTwoUsers();

describe('webhookTokens', () => {
  it('creates a whk_<12>_<32> token bound to an account that verifies and can be revealed to its owner only', async () => {
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101' });
    expect(token).toMatch(/^whk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$/);
    expect(record).toMatchObject({ userId: world.alice, name: 'tv', accountId: '101', strategyId: null, prefix: `whk_${record.id}`, lastUsedAt: null });
    expect(world.t.store.webhookTokens.verify(token)).toEqual(record);
    expect(world.t.store.webhookTokens.reveal(world.alice, record.id)).toBe(token);
    expect(world.t.store.webhookTokens.reveal(world.bob, record.id)).toBeUndefined();
    expect(world.t.store.webhookTokens.getForUser(world.bob, record.id)).toBeUndefined();
    expect(JSON.stringify(world.t.store.webhookTokens.listByUser(world.alice))).not.toContain(token);
  });

  it('rejects a wrong secret, an API key, and malformed tokens without store access', async () => {
    const { token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101' });
    const { key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'k', scopes: ['trade'] });
    expect(world.t.store.webhookTokens.verify(token.slice(0, -1) + (token.at(-1) === 'x' ? 'y' : 'x'))).toBeNull();
    expect(world.t.store.webhookTokens.verify(key)).toBeNull();
    await world.t.store.close();
    expect(() => world.t.store.webhookTokens.verify(token)).toThrow();
    for (const raw of ['', token.slice(1), `${token}0`, token.replace('whk', 'tgk'), 'whk_' + '9'.repeat(500_000), undefined]) {
      expect(world.t.store.webhookTokens.verify(raw)).toBeNull();
    }
  });

  it('never verifies and never throws for arbitrary strings (property)', async () => {
    await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101' });
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ maxLength: 60 }).map((s) => `whk_${s}`)), (raw) => {
        expect(world.t.store.webhookTokens.verify(raw)).toBeNull();
      }),
      { numRuns: 1000 },
    );
  });

  it('update rebinds account and strategy for the owner only; the token keeps working', async () => {
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101', strategyId: 'stg_1' });
    expect(await world.t.store.webhookTokens.update(world.bob, record.id, { accountId: '999' })).toBeUndefined();
    const updated = await world.t.store.webhookTokens.update(world.alice, record.id, { accountId: '202', name: 'renamed' });
    expect(updated).toMatchObject({ accountId: '202', name: 'renamed', strategyId: 'stg_1' });
    expect((await world.t.store.webhookTokens.update(world.alice, record.id, { strategyId: null }))?.strategyId).toBeNull();
    expect(world.t.store.webhookTokens.verify(token)?.accountId).toBe('202');
    await expect(world.t.store.webhookTokens.update(world.alice, record.id, { name: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('rotate gives the owner a new secret for the same id and binding; the old token stops verifying at once', async () => {
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101', strategyId: 'stg_1' });
    expect(await world.t.store.webhookTokens.rotate(world.bob, record.id)).toBeUndefined();
    expect(world.t.store.webhookTokens.verify(token)).not.toBeNull();
    expect(record.rotatedAt).toBeNull();
    const rotated = await world.t.store.webhookTokens.rotate(world.alice, record.id);
    // Listed with when it was rotated: a page showing the URL knows to read it again (web probe).
    expect(rotated?.record.rotatedAt).toEqual(expect.any(String));
    expect(world.t.store.webhookTokens.listByUser(world.alice).find((t) => t.id === record.id)?.rotatedAt).toBe(rotated?.record.rotatedAt);
    expect(rotated?.token).toMatch(new RegExp(`^whk_${record.id}_[A-Za-z0-9]{32}$`));
    expect(rotated?.token).not.toBe(token);
    expect(world.t.store.webhookTokens.verify(token)).toBeNull();
    expect(world.t.store.webhookTokens.verify(rotated!.token)).toMatchObject({ id: record.id, accountId: '101', strategyId: 'stg_1' });
    expect(world.t.store.webhookTokens.reveal(world.alice, record.id)).toBe(rotated!.token);
  });

  it('a token carries its narrowing of the account guards from creation; PATCH replaces it, null removes it', async () => {
    const narrowing = { maxOrderQty: 2, direction: 'long_only' as const };
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101', guards: narrowing });
    expect(record.guards).toEqual(narrowing);
    expect(world.t.store.webhookTokens.verify(token)?.guards).toEqual(narrowing);
    const wider = { maxOrderQty: 5 };
    expect((await world.t.store.webhookTokens.update(world.alice, record.id, { guards: wider }))?.guards).toEqual(wider);
    expect((await world.t.store.webhookTokens.update(world.alice, record.id, { name: 'renamed' }))?.guards).toEqual(wider);
    expect((await world.t.store.webhookTokens.update(world.alice, record.id, { guards: null }))?.guards).toBeNull();
    const plain = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'plain', accountId: '101' });
    expect(plain.record.guards).toBeNull();
  });

  it('remove deletes for the owner only, after which the token no longer verifies', async () => {
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101' });
    expect(await world.t.store.webhookTokens.remove(world.bob, record.id)).toBe(false);
    expect(world.t.store.webhookTokens.verify(token)).not.toBeNull();
    expect(await world.t.store.webhookTokens.remove(world.alice, record.id)).toBe(true);
    expect(world.t.store.webhookTokens.verify(token)).toBeNull();
    expect(world.t.store.webhookTokens.listByUser(world.alice)).toEqual([]);
    expect(world.t.store.webhookTokens.reveal(world.alice, record.id)).toBeUndefined();
  });

  it('touch records last use, throttled per token', async () => {
    const { record, token } = await world.t.store.webhookTokens.create({ userId: world.alice, name: 'tv', accountId: '101' });
    world.t.store.webhookTokens.touch(record.id, world.t.now.value);
    world.t.store.webhookTokens.touch(record.id, world.t.now.value + 30_000);
    await world.t.store.flushed();
    expect(world.t.store.webhookTokens.verify(token)?.lastUsedAt).toBe(new Date(world.t.now.value).toISOString());
  });
});

describe('webhookTokens.deactivateForAccounts', () => {
  it('marks the owner’s tokens of those accounts inactive with the reason, durably, until a rebind', async () => {
    const s = () => world.t.store.webhookTokens;
    const a = await s().create({ userId: world.alice, name: 'a', accountId: '101' });
    const b = await s().create({ userId: world.alice, name: 'b', accountId: '202' });
    const bob = await s().create({ userId: world.bob, name: 'bob', accountId: '101' });
    expect(a.record.inactiveReason).toBeNull();
    expect(await s().deactivateForAccounts(world.alice, ['101', '303'], 'connection con_x was deleted')).toEqual([a.record.id]);
    expect(await s().deactivateForAccounts(world.alice, ['101'], 'again')).toEqual([]);
    expect(await s().deactivateForAccounts(world.alice, [], 'none')).toEqual([]);
    await world.t.reopen();
    expect(s().getForUser(world.alice, a.record.id)?.inactiveReason).toBe('connection con_x was deleted');
    expect(s().verify(a.token)?.inactiveReason).toBe('connection con_x was deleted');
    expect(s().getForUser(world.alice, b.record.id)?.inactiveReason).toBeNull();
    expect(s().getForUser(world.bob, bob.record.id)?.inactiveReason).toBeNull();
    expect((await s().update(world.alice, a.record.id, { name: 'renamed' }))?.inactiveReason).toBe('connection con_x was deleted');
    expect((await s().update(world.alice, a.record.id, { accountId: '202' }))?.inactiveReason).toBeNull();
  });
});
