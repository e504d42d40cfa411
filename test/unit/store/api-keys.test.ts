import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { REVOKED_KEYS_KEPT, TOUCH_INTERVAL_MS } from '../../../src/store/api-keys.js';
import { sha256Hex } from '../../../src/store/crypto.js';
import { useTwoUsers } from '../../support/store.js';

const world = useTwoUsers();

describe('apiKeys.create', () => {
  it('returns a tgk_<12>_<32> key once and a view without the key or its digest', async () => {
    const { record, key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read', 'trade'] });
    expect(key).toMatch(/^tgk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$/);
    expect(key.slice(4, 16)).toBe(record.id);
    expect(record).toEqual({
      id: record.id,
      userId: world.alice,
      name: 'bot',
      scopes: ['read', 'trade'],
      prefix: `tgk_${record.id}`,
      createdAt: new Date(world.t.now.value).toISOString(),
      lastUsedAt: null,
      revokedAt: null,
      guards: null,
    });
    expect(JSON.stringify(record)).not.toContain(sha256Hex(key));
  });

  it('setGuards narrows a key for its owner only; verify carries the narrowing; null removes it', async () => {
    const { record, key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['trade'] });
    const narrowing = { maxOrderQty: 1, allowedProducts: ['MES'] };
    expect(await world.t.store.apiKeys.setGuards(world.bob, record.id, narrowing)).toBeUndefined();
    expect((await world.t.store.apiKeys.setGuards(world.alice, record.id, narrowing))?.guards).toEqual(narrowing);
    expect(world.t.store.apiKeys.verify(key)?.guards).toEqual(narrowing);
    const reopened = await world.t.reopen();
    expect(reopened.apiKeys.getForUser(world.alice, record.id)?.guards).toEqual(narrowing);
    expect((await reopened.apiKeys.setGuards(world.alice, record.id, null))?.guards).toBeNull();
    expect(reopened.apiKeys.verify(key)?.guards).toBeNull();
  });

  it('rejects empty or unknown scopes and bad names', async () => {
    await expect(world.t.store.apiKeys.create({ userId: world.alice, name: 'x', scopes: [] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(world.t.store.apiKeys.create({ userId: world.alice, name: 'x', scopes: ['admin' as 'read'] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(world.t.store.apiKeys.create({ userId: world.alice, name: '', scopes: ['read'] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});

describe('apiKeys.verify', () => {
  it('accepts a created key and returns its view', async () => {
    const { record, key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['trade'] });
    expect(world.t.store.apiKeys.verify(key)).toEqual(record);
  });

  it('rejects a key whose id exists but whose secret differs', async () => {
    const { key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    const last = key.at(-1) === 'A' ? 'B' : 'A';
    expect(world.t.store.apiKeys.verify(key.slice(0, -1) + last)).toBeNull();
  });

  it('rejects a revoked key from the next call on, and revocation survives reopening', async () => {
    const { record, key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    expect(await world.t.store.apiKeys.revoke(world.alice, record.id)).toBe(true);
    expect(world.t.store.apiKeys.verify(key)).toBeNull();
    expect(world.t.store.apiKeys.getForUser(world.alice, record.id)?.revokedAt).toBe(new Date(world.t.now.value).toISOString());
    expect(await world.t.store.apiKeys.revoke(world.alice, record.id)).toBe(false);
    await world.t.reopen();
    expect(world.t.store.apiKeys.verify(key)).toBeNull();
  });

  it('rejects malformed keys without touching the store (a closed store would throw)', async () => {
    const { key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    const wellFormedUnknown = `tgk_${'Z'.repeat(12)}_${'Q'.repeat(32)}`;
    await world.t.store.close();
    // Control: anything that reaches LMDB now throws.
    expect(() => world.t.store.apiKeys.verify(wellFormedUnknown)).toThrow();
    const malformed: unknown[] = [
      '',
      'tgk_',
      key.replace('tgk_', 'tgx_'), // wrong prefix
      key.replace('tgk_', 'TGK_'),
      key.slice(0, -1), // secret 31
      key + 'a', // secret 33
      `tgk_${key.slice(4, 15)}_${key.slice(17)}a`, // id 11
      key.slice(0, 20) + '-' + key.slice(21), // bad char
      key.slice(0, 20) + 'é' + key.slice(21),
      key.replace(/_/g, '-'),
      ` ${key}`,
      `${key}\n`,
      'tgk_' + 'a'.repeat(1_000_000), // huge
      undefined,
      null,
      42,
      { key },
    ];
    for (const raw of malformed) {
      expect(world.t.store.apiKeys.parseKey(raw)).toBeNull();
      expect(world.t.store.apiKeys.verify(raw)).toBeNull();
    }
  });

  it('never verifies and never throws for arbitrary strings (property)', async () => {
    await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    const keyish = fc.tuple(fc.string({ maxLength: 14 }), fc.string({ maxLength: 34 })).map(([a, b]) => `tgk_${a}_${b}`);
    const base62 = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'.split(''));
    const wellFormed = fc
      .tuple(fc.string({ unit: base62, minLength: 12, maxLength: 12 }), fc.string({ unit: base62, minLength: 32, maxLength: 32 }))
      .map(([id, secret]) => `tgk_${id}_${secret}`);
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), keyish, wellFormed), (raw) => {
        expect(world.t.store.apiKeys.verify(raw)).toBeNull();
      }),
      { numRuns: 2000 },
    );
  });
});

describe('apiKeys ownership', () => {
  it("never returns another user's key by id", async () => {
    const { record } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    expect(world.t.store.apiKeys.getForUser(world.bob, record.id)).toBeUndefined();
    expect(world.t.store.apiKeys.getForUser(world.alice, record.id)?.id).toBe(record.id);
    expect(world.t.store.apiKeys.listByUser(world.bob)).toEqual([]);
    expect(await world.t.store.apiKeys.revoke(world.bob, record.id)).toBe(false);
    expect(world.t.store.apiKeys.getForUser(world.alice, record.id)?.revokedAt).toBeNull();
  });

  it('lists only the owner keys, oldest first, including revoked ones', async () => {
    const a1 = await world.t.store.apiKeys.create({ userId: world.alice, name: 'one', scopes: ['read'] });
    world.t.now.value += 1000;
    const a2 = await world.t.store.apiKeys.create({ userId: world.alice, name: 'two', scopes: ['trade'] });
    await world.t.store.apiKeys.create({ userId: world.bob, name: 'bobs', scopes: ['read'] });
    await world.t.store.apiKeys.revokeById(a1.record.id);
    const list = world.t.store.apiKeys.listByUser(world.alice);
    expect(list.map((k) => k.name)).toEqual(['one', 'two']);
    expect(list[0]?.revokedAt).not.toBeNull();
    expect(list[1]?.id).toBe(a2.record.id);
    expect(JSON.stringify(list)).not.toContain(a2.key);
  });

  it(`keeps a user's newest ${REVOKED_KEYS_KEPT} revoked keys: a revocation deletes the oldest beyond them, never a live key or another user's (attack probe: create and revoke in a loop grew the store without end)`, async () => {
    const live = await world.t.store.apiKeys.create({ userId: world.alice, name: 'live', scopes: ['read'] });
    const bobs = await world.t.store.apiKeys.create({ userId: world.bob, name: 'bobs', scopes: ['read'] });
    await world.t.store.apiKeys.revoke(world.bob, bobs.record.id);
    const revoked: string[] = [];
    for (let i = 0; i < REVOKED_KEYS_KEPT + 3; i++) {
      world.t.now.value += 1000;
      const { record } = await world.t.store.apiKeys.create({ userId: world.alice, name: `k${i}`, scopes: ['read'] });
      expect(await world.t.store.apiKeys.revoke(world.alice, record.id)).toBe(true);
      revoked.push(record.id);
    }
    const listed = world.t.store.apiKeys.listByUser(world.alice);
    expect(listed.filter((k) => k.revokedAt !== null).map((k) => k.id)).toEqual(revoked.slice(3));
    expect(listed.map((k) => k.id)).toContain(live.record.id);
    expect(world.t.store.apiKeys.verify(live.key)?.id).toBe(live.record.id);
    expect(world.t.store.apiKeys.getForUser(world.alice, revoked[0]!)).toBeUndefined();
    expect(world.t.store.apiKeys.getForUser(world.bob, bobs.record.id)?.revokedAt).not.toBeNull();
    const reopened = await world.t.reopen();
    expect(reopened.apiKeys.listByUser(world.alice)).toHaveLength(REVOKED_KEYS_KEPT + 1);
  });

  it('revokeById revokes any key once and reports unknown ids', async () => {
    const { record } = await world.t.store.apiKeys.create({ userId: world.bob, name: 'k', scopes: ['read'] });
    expect(await world.t.store.apiKeys.revokeById(record.id)).toBe(true);
    expect(await world.t.store.apiKeys.revokeById(record.id)).toBe(false);
    expect(await world.t.store.apiKeys.revokeById('nonexistent1')).toBe(false);
  });
});

describe('apiKeys.touch', () => {
  it('records last use at most once a minute per key: the first use at once, the last one of the minute when it ends (clients probe: it was never recorded once the key went quiet)', async () => {
    const { record, key } = await world.t.store.apiKeys.create({ userId: world.alice, name: 'bot', scopes: ['read'] });
    const lastUsed = () => world.t.store.apiKeys.verify(key)?.lastUsedAt;
    const t1 = world.t.now.value + 5000;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      world.t.store.apiKeys.touch(record.id, t1);
      await world.t.store.flushed();
      expect(lastUsed()).toBe(new Date(t1).toISOString());
      world.t.store.apiKeys.touch(record.id, t1 + 1_000);
      world.t.store.apiKeys.touch(record.id, t1 + 20_000);
      await world.t.store.flushed();
      expect(lastUsed(), 'not written again inside the minute').toBe(new Date(t1).toISOString());
      // The minute runs from the recorded use (t1); the timer was set at t1 + 1 s.
      await vi.advanceTimersByTimeAsync(TOUCH_INTERVAL_MS - 1_000 - 1);
      expect(lastUsed()).toBe(new Date(t1).toISOString());
      await vi.advanceTimersByTimeAsync(1);
      await world.t.store.flushed();
      expect(lastUsed(), 'the last use of the minute, once it ends').toBe(new Date(t1 + 20_000).toISOString());
      // The next use a minute after that one is written at once.
      world.t.store.apiKeys.touch(record.id, t1 + 20_000 + TOUCH_INTERVAL_MS);
      await world.t.store.flushed();
      expect(lastUsed()).toBe(new Date(t1 + 20_000 + TOUCH_INTERVAL_MS).toISOString());
    } finally {
      vi.useRealTimers();
    }
  });
});
