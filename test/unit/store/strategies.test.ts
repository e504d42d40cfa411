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

describe('strategies', () => {
  it('creates, reads and lists per owner', async () => {
    const s = await t.store.strategies.create(alice, {
      name: 'ES scalp',
      description: 'two ticks',
      symbol: 'ES1!',
      qty: 2,
      orderType: 'limit',
      takeProfit: { ticks: 8 },
      stopLoss: { price: 4990 },
    });
    expect(s).toMatchObject({ userId: alice, name: 'ES scalp', qty: 2, takeProfit: { ticks: 8 }, stopLoss: { price: 4990 } });
    expect(s.createdAt).toBe(s.updatedAt);
    expect(t.store.strategies.getForUser(alice, s.id)).toEqual(s);
    expect(t.store.strategies.getForUser(bob, s.id)).toBeUndefined();
    expect(t.store.strategies.listByUser(bob)).toEqual([]);
    await t.reopen();
    expect(t.store.strategies.listByUser(alice)).toEqual([s]);
  });

  it('update patches fields, clears optionals with null, bumps updatedAt, and is owner-only', async () => {
    const s = await t.store.strategies.create(alice, { name: 'n', description: '', symbol: 'NQ', qty: 1 });
    t.now.value += 60_000;
    expect(await t.store.strategies.update(bob, s.id, { qty: 5 })).toBeUndefined();
    const u = await t.store.strategies.update(alice, s.id, { qty: 3, symbol: null, description: 'd' });
    expect(u).toEqual({ ...s, qty: 3, description: 'd', symbol: undefined, updatedAt: new Date(t.now.value).toISOString() });
    expect(u && 'symbol' in u).toBe(false);
    expect(t.store.strategies.getForUser(alice, s.id)).toEqual(u);
  });

  it('remove deletes for the owner only', async () => {
    const s = await t.store.strategies.create(alice, { name: 'n', description: '' });
    expect(await t.store.strategies.remove(bob, s.id)).toBe(false);
    expect(await t.store.strategies.remove(alice, s.id)).toBe(true);
    expect(t.store.strategies.getForUser(alice, s.id)).toBeUndefined();
    expect(t.store.strategies.listByUser(alice)).toEqual([]);
  });
});
