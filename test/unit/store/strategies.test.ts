import { describe, expect, it } from 'vitest';
import { useTwoUsers } from '../../support/store.js';

const world = useTwoUsers();

describe('strategies', () => {
  it('creates, reads and lists per owner', async () => {
    const s = await world.t.store.strategies.create(world.alice, {
      name: 'ES scalp',
      description: 'two ticks',
      symbol: 'ES1!',
      qty: 2,
      orderType: 'limit',
      takeProfit: { ticks: 8 },
      stopLoss: { price: 4990 },
    });
    expect(s).toMatchObject({ userId: world.alice, name: 'ES scalp', qty: 2, takeProfit: { ticks: 8 }, stopLoss: { price: 4990 } });
    expect(s.createdAt).toBe(s.updatedAt);
    expect(world.t.store.strategies.getForUser(world.alice, s.id)).toEqual(s);
    expect(world.t.store.strategies.getForUser(world.bob, s.id)).toBeUndefined();
    expect(world.t.store.strategies.listByUser(world.bob)).toEqual([]);
    await world.t.reopen();
    expect(world.t.store.strategies.listByUser(world.alice)).toEqual([s]);
  });

  it('update patches fields, clears optionals with null, bumps updatedAt, and is owner-only', async () => {
    const s = await world.t.store.strategies.create(world.alice, { name: 'n', description: '', symbol: 'NQ', qty: 1 });
    world.t.now.value += 60_000;
    expect(await world.t.store.strategies.update(world.bob, s.id, { qty: 5 })).toBeUndefined();
    const u = await world.t.store.strategies.update(world.alice, s.id, { qty: 3, symbol: null, description: 'd' });
    expect(u).toEqual({ ...s, qty: 3, description: 'd', symbol: undefined, updatedAt: new Date(world.t.now.value).toISOString() });
    expect(u && 'symbol' in u).toBe(false);
    expect(world.t.store.strategies.getForUser(world.alice, s.id)).toEqual(u);
  });

  it('counts a name in characters as the API documents it (an emoji is one), not UTF-16 units', async () => {
    await expect(world.t.store.strategies.create(world.alice, { name: '📈'.repeat(100), description: '' })).resolves.toMatchObject({ name: '📈'.repeat(100) });
    await expect(world.t.store.strategies.create(world.alice, { name: '📈'.repeat(101), description: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('remove deletes for the owner only', async () => {
    const s = await world.t.store.strategies.create(world.alice, { name: 'n', description: '' });
    expect(await world.t.store.strategies.remove(world.bob, s.id)).toBe(false);
    expect(await world.t.store.strategies.remove(world.alice, s.id)).toBe(true);
    expect(world.t.store.strategies.getForUser(world.alice, s.id)).toBeUndefined();
    expect(world.t.store.strategies.listByUser(world.alice)).toEqual([]);
  });
});
