import { describe, expect, it } from 'vitest';
import { guardConfig } from '../../../src/domain/guards.js';
import { accountGuardsOf } from '../../../src/store/guards.js';
import { useTwoUsers } from '../../support/store.js';

const world = useTwoUsers();
const lock = { guard: 'daily_loss' as const, since: 1_000, until: 2_000, detail: 'P&L of the day -1000 reached the daily loss limit of 1000' };

describe('guards', () => {
  it('keeps an account’s guards and lock apart: setting one leaves the other', async () => {
    const { store } = world.t;
    expect(store.guards.get(world.alice, '101')).toBeUndefined();
    const config = guardConfig({ maxOrderQty: 5, dailyLossLimit: 1000, allowedProducts: ['ES', 'MES'] });
    const first = await store.guards.setConfig(world.alice, '101', config);
    expect(first).toMatchObject({ userId: world.alice, accountId: '101', config, lock: null });
    await store.guards.setLock(world.alice, '101', lock);
    expect(store.guards.get(world.alice, '101')).toMatchObject({ config, lock });
    const narrower = guardConfig({ maxOrderQty: 2 });
    await store.guards.setConfig(world.alice, '101', narrower);
    expect(store.guards.get(world.alice, '101')).toMatchObject({ config: narrower, lock });
    await store.guards.setLock(world.alice, '101', null);
    expect(store.guards.get(world.alice, '101')).toMatchObject({ config: narrower, lock: null });
  });

  it('keeps the bracket legs owed to an account beside its guards and lock, and hands them to the actor; empty clears them', async () => {
    const { store } = world.t;
    const leg = {
      accountId: '303',
      leg: { orderId: '77', accountId: '303', symbol: 'ESZ6', side: 'sell', qty: 1, filledQty: 0, type: 'stop', stopPrice: 4990, status: 'working' },
      entryId: 75,
      role: 'stop_loss',
      attempts: 0,
    } as never;
    await store.guards.setConfig(world.alice, '303', guardConfig({ maxOrderQty: 3 }));
    await store.guards.setOwedLegs(world.alice, '303', [leg]);
    await store.guards.setLock(world.alice, '303', lock);
    expect(store.guards.get(world.alice, '303')).toMatchObject({ config: { maxOrderQty: 3 }, lock, owedLegs: [leg] });
    expect(accountGuardsOf(store, world.alice)['303']).toMatchObject({ lock, owedLegs: [leg] });
    await store.guards.setOwedLegs(world.alice, '303', []);
    expect(store.guards.get(world.alice, '303')).not.toHaveProperty('owedLegs');
    expect(accountGuardsOf(store, world.alice)['303']).not.toHaveProperty('owedLegs');
  });

  it('a lock on an account without guards creates the record with none', async () => {
    const r = await world.t.store.guards.setLock(world.alice, '202', { ...lock, guard: 'kill_switch', until: null });
    expect(r.config).toEqual(guardConfig({}));
    expect(r.lock).toMatchObject({ guard: 'kill_switch', until: null });
  });

  it('lists one user’s records only, and another user’s account of the same id is theirs', async () => {
    const { store } = world.t;
    await store.guards.setConfig(world.alice, '1', guardConfig({ maxOrderQty: 1 }));
    await store.guards.setConfig(world.alice, '2', guardConfig({ maxOrderQty: 2 }));
    await store.guards.setConfig(world.bob, '1', guardConfig({ maxOrderQty: 9 }));
    expect(store.guards.listByUser(world.alice).map((r) => [r.accountId, r.config.maxOrderQty]).sort()).toEqual([['1', 1], ['2', 2]]);
    expect(store.guards.listByUser(world.bob).map((r) => r.config.maxOrderQty)).toEqual([9]);
    expect(store.guards.get(world.bob, '2')).toBeUndefined();
  });

  it('survives a reopen (a lock must outlive a restart)', async () => {
    await world.t.store.guards.setLock(world.alice, '101', lock);
    const reopened = await world.t.reopen();
    expect(reopened.guards.get(world.alice, '101')?.lock).toEqual(lock);
  });

  it('refuses account ids that cannot name a record', async () => {
    await expect(world.t.store.guards.setConfig(world.alice, 'a.b', guardConfig({}))).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(world.t.store.guards.get(world.alice, 'a.b')).toBeUndefined();
  });
});
