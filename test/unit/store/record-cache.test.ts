/**
 * The LMDB store's record cache: verified keys and tokens, connection and strategy lists are
 * served from memory, and any write to them, through any store method or straight to the
 * database, makes the next read see it. (Another process's writes: test/integration/serve/
 * revocation.test.ts.)
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from 'lmdb';
import { GENERATION_FRESH_MS, GENERATION_KEY, RecordCache } from '../../../src/store/record-cache.js';
import type { Store } from '../../../src/store/index.js';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
let store: Store;
let userId: string;

beforeEach(async () => {
  t = await tempStore();
  store = t.store;
  userId = (await store.users.create({ name: 'cache' })).id;
});
afterEach(async () => {
  await t.cleanup();
});

const connection = (name: string) => ({
  userId, name, broker: 'paper' as const, environment: 'paper' as const, restUrl: 'http://x/v1', wsUrl: 'ws://x/v1/websocket',
  credentials: { name: 'u', password: 'p' },
});

describe('record cache (LMDB)', () => {
  it('remembers a verified key, and forgets it on revocation', async () => {
    const { key, record } = await store.apiKeys.create({ userId, name: 'k', scopes: ['read'] });
    const first = store.apiKeys.verify(key);
    expect(first?.id).toBe(record.id);
    // The same object: no record read, no digest, no view built on the second request.
    expect(store.apiKeys.verify(key)).toBe(first);
    expect(await store.apiKeys.revoke(userId, record.id)).toBe(true);
    expect(store.apiKeys.verify(key)).toBeNull();
  });

  it('never remembers a wrong secret', async () => {
    const { key } = await store.apiKeys.create({ userId, name: 'k', scopes: ['read'] });
    const wrong = `${key.slice(0, -1)}${key.endsWith('a') ? 'b' : 'a'}`;
    expect(store.apiKeys.verify(wrong)).toBeNull();
    expect(store.apiKeys.verify(wrong)).toBeNull();
    expect(store.apiKeys.verify(key)).not.toBeNull();
  });

  it('sees a rebound or deleted webhook token at once', async () => {
    const { token, record } = await store.webhookTokens.create({ userId, name: 't', accountId: '1' });
    expect(store.webhookTokens.verify(token)?.accountId).toBe('1');
    await store.webhookTokens.update(userId, record.id, { accountId: '2' });
    expect(store.webhookTokens.verify(token)?.accountId).toBe('2');
    await store.webhookTokens.remove(userId, record.id);
    expect(store.webhookTokens.verify(token)).toBeNull();
  });

  it('serves connection lists from memory and sees every change', async () => {
    const a = await store.connections.create(connection('a'));
    const list = store.connections.listByUser(userId);
    expect(store.connections.listByUser(userId)).toBe(list);
    expect(store.connections.all()).toBe(store.connections.all());
    await store.connections.setDisabled(a.id, true);
    expect(store.connections.listByUser(userId).map((c) => c.disabled)).toEqual([true]);
    expect(store.connections.byId(a.id)?.disabled).toBe(true);
    const b = await store.connections.create(connection('b'));
    expect(store.connections.listByUser(userId).map((c) => c.id).sort()).toEqual([a.id, b.id].sort());
    expect(await store.connections.remove(userId, a.id)).toBe(true);
    expect(store.connections.getForUser(userId, a.id)).toBeUndefined();
    expect(store.connections.all().map((c) => c.id)).toEqual([b.id]);
  });

  it('a write that bypasses the store methods still moves the generation', async () => {
    const { key, record } = await store.apiKeys.create({ userId, name: 'k', scopes: ['read'] });
    expect(store.apiKeys.verify(key)).not.toBeNull();
    const ctx = (await import('lmdb')).open({ path: `${t.dir}/tradegate.lmdb`, maxDbs: 32 });
    // Another writer (what a CLI process does): revoke by writing the record directly.
    const keys = ctx.openDB({ name: 'apiKeys' });
    const meta = ctx.openDB({ name: 'meta' });
    const before = meta.get(GENERATION_KEY);
    await keys.put(record.id, { ...(keys.get(record.id) as object), revokedAt: new Date().toISOString() });
    // This handle is not wrapped, so it must move the generation itself, as the store's own writes do.
    await meta.put(GENERATION_KEY, Math.random());
    expect(meta.get(GENERATION_KEY)).not.toBe(before);
    // As a CLI process ends (the store's close: settled()), the server's last read of the generation has expired.
    await new Promise((r) => setTimeout(r, 2 * GENERATION_FRESH_MS + 1));
    expect(store.apiKeys.verify(key)).toBeNull();
  });

  it('one read of the generation vouches for a millisecond, from a fresh snapshot; a write of its own is read again at once, and after its commit', async () => {
    let generation = 1;
    let reads = 0;
    let resets = 0;
    let now = 0;
    const meta = {
      get: () => (reads++, generation),
      put: async () => void (generation = Math.random()),
      putSync: () => void (generation = Math.random()),
      resetReadTxn: () => void resets++,
    } as unknown as Database;
    const cache = new RecordCache(meta, () => now);
    let loads = 0;
    const load = () => ++loads;
    expect(cache.get('k', load)).toBe(1);
    expect(cache.get('k', load)).toBe(1);
    expect(cache.peek('k')).toBe(1);
    expect([reads, resets]).toEqual([1, 1]);
    // Another process moved it: not seen inside the millisecond…
    generation = 7;
    now = GENERATION_FRESH_MS - 0.01;
    expect(cache.get('k', load)).toBe(1);
    expect(reads).toBe(1);
    // …and seen by the first lookup after it, from a new snapshot.
    now = GENERATION_FRESH_MS;
    expect(cache.get('k', load)).toBe(2);
    expect([reads, resets]).toEqual([2, 2]);
    // A write of its own (a sync put moves the generation at once): the next lookup sees it, with no time passing.
    cache.bump(true);
    expect(cache.get('k', load)).toBe(3);
    expect(reads).toBe(3);
    cache.get('k', load);
    expect(reads).toBe(3);
    // A write awaited through the store has committed (durable → written()): the next lookup reads again.
    cache.written();
    cache.get('k', load);
    cache.get('k', load);
    expect(reads).toBe(4);
    // A process that wrote ends only after its writes cannot be hidden by anyone's last read.
    const t0 = performance.now();
    await cache.settled();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(2 * GENERATION_FRESH_MS);
  });

  it('a process that wrote nothing ends at once', async () => {
    const cache = new RecordCache({ get: () => 1, resetReadTxn: () => undefined } as unknown as Database, () => 0);
    cache.peek('k');
    const t0 = performance.now();
    await cache.settled();
    expect(performance.now() - t0).toBeLessThan(1);
  });
});
