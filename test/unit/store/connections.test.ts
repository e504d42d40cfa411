import { describe, expect, it } from 'vitest';
import type { NewConnection } from '../../../src/store/index.js';
import { accountsLeaving, type ConnectionRecord } from '../../../src/store/connections.js';
import { useTwoUsers } from '../../support/store.js';

const world = useTwoUsers();

const paper = (userId: string, name = 'paper'): NewConnection => ({
  userId,
  name,
  broker: 'paper',
  environment: 'paper',
  restUrl: 'http://127.0.0.1:8091/v1',
  wsUrl: 'ws://127.0.0.1:8091/v1/websocket',
  credentials: { name: 'ptrader', password: 'paper-pass-123' },
});

describe('connections', () => {
  it('stores a connection whose credentials only come back through credentials()', async () => {
    const rec = await world.t.store.connections.create(paper(world.alice));
    expect(rec).toMatchObject({ userId: world.alice, broker: 'paper', environment: 'paper', disabled: false });
    expect(JSON.stringify(rec)).not.toContain('paper-pass-123');
    expect(JSON.stringify(world.t.store.connections.all())).not.toContain('paper-pass-123');
    expect(world.t.store.connections.credentials(rec.id)).toEqual({ name: 'ptrader', password: 'paper-pass-123' });
    await world.t.reopen();
    expect(world.t.store.connections.credentials(rec.id).password).toBe('paper-pass-123');
  });

  it('scopes reads and removal to the owner', async () => {
    const a = await world.t.store.connections.create(paper(world.alice, 'a1'));
    const b = await world.t.store.connections.create(paper(world.bob, 'b1'));
    expect(world.t.store.connections.getForUser(world.bob, a.id)).toBeUndefined();
    expect(world.t.store.connections.listByUser(world.alice).map((c) => c.id)).toEqual([a.id]);
    expect(world.t.store.connections.all().map((c) => c.id).sort()).toEqual([a.id, b.id].sort());
    expect(await world.t.store.connections.remove(world.bob, a.id)).toBe(false);
    expect(await world.t.store.connections.remove(world.alice, a.id)).toBe(true);
    expect(world.t.store.connections.byId(a.id)).toBeUndefined();
    expect(world.t.store.connections.listByUser(world.alice)).toEqual([]);
    expect(() => world.t.store.connections.credentials(a.id)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it('setDisabled toggles the flag durably', async () => {
    const a = await world.t.store.connections.create(paper(world.alice));
    expect(await world.t.store.connections.setDisabled(a.id, true)).toBe(true);
    await world.t.reopen();
    expect(world.t.store.connections.byId(a.id)?.disabled).toBe(true);
    expect(await world.t.store.connections.setDisabled('con_missing', true)).toBe(false);
  });
});

describe('connections.setServedAccounts', () => {
  it('keeps the account ids a connection serves durably, listed with it and through a rename (who keeps an id two connections report)', async () => {
    const a = await world.t.store.connections.create(paper(world.alice));
    expect(world.t.store.connections.byId(a.id)?.servedAccountIds).toBeUndefined();
    expect(await world.t.store.connections.setServedAccounts(a.id, ['424242', '7'])).toBe(true);
    await world.t.store.connections.update(world.alice, a.id, { name: 'renamed' });
    await world.t.reopen();
    expect(world.t.store.connections.listByUser(world.alice)).toEqual([expect.objectContaining({ id: a.id, name: 'renamed', servedAccountIds: ['424242', '7'] })]);
    expect(await world.t.store.connections.setServedAccounts(a.id, [])).toBe(true);
    expect(world.t.store.connections.byId(a.id)?.servedAccountIds).toEqual([]);
    expect(await world.t.store.connections.setServedAccounts('con_missing', ['1'])).toBe(false);
  });
});

describe('accountsLeaving', () => {
  const rec = (id: string, servedAccountIds?: string[]): ConnectionRecord => ({
    id, userId: 'u', name: id, broker: 'paper', environment: 'paper', restUrl: 'r', wsUrl: 'w', createdAt: '', disabled: false, ...(servedAccountIds && { servedAccountIds }),
  });
  it('takes what a deleted connection serves or claims (a refused or stopped one serves nothing live), less what another serves or claims', () => {
    const refused = rec('A', ['424242', '9']);
    const others = [refused, rec('B'), rec('C', ['9'])];
    // A refused: nothing live; B (refused by it) reports nothing yet; C claims 9.
    expect(accountsLeaving(refused, others, () => [])).toEqual(['424242']);
    // Live accounts count on both sides.
    expect(accountsLeaving(rec('A'), others, (id) => (id === 'A' ? ['1', '2'] : id === 'B' ? ['2'] : []))).toEqual(['1']);
  });
});

describe('connections.update', () => {
  it('renames and replaces the sealed credentials of the owner’s connection only, durably', async () => {
    const a = await world.t.store.connections.create(paper(world.alice));
    expect(await world.t.store.connections.update(world.bob, a.id, { name: 'stolen' })).toBeUndefined();
    const renamed = await world.t.store.connections.update(world.alice, a.id, { name: 'renamed', credentials: { name: 'ptrader', password: 'new-pass-456' } });
    expect(renamed).toMatchObject({ id: a.id, name: 'renamed' });
    expect(JSON.stringify(renamed)).not.toContain('new-pass-456');
    await world.t.reopen();
    expect(world.t.store.connections.credentials(a.id)).toEqual({ name: 'ptrader', password: 'new-pass-456' });
    expect(world.t.store.connections.byId(a.id)?.name).toBe('renamed');
    expect(await world.t.store.connections.update(world.alice, 'con_missing', { name: 'x' })).toBeUndefined();
  });

  it('refuses an empty or overlong name', async () => {
    const a = await world.t.store.connections.create(paper(world.alice));
    await expect(world.t.store.connections.update(world.alice, a.id, { name: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(world.t.store.connections.update(world.alice, a.id, { name: 'x'.repeat(101) })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});
