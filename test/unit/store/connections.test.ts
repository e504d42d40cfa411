import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewConnection } from '../../../src/store/index.js';
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
    const rec = await t.store.connections.create(paper(alice));
    expect(rec).toMatchObject({ userId: alice, broker: 'paper', environment: 'paper', disabled: false });
    expect(JSON.stringify(rec)).not.toContain('paper-pass-123');
    expect(JSON.stringify(t.store.connections.all())).not.toContain('paper-pass-123');
    expect(t.store.connections.credentials(rec.id)).toEqual({ name: 'ptrader', password: 'paper-pass-123' });
    await t.reopen();
    expect(t.store.connections.credentials(rec.id).password).toBe('paper-pass-123');
  });

  it('scopes reads and removal to the owner', async () => {
    const a = await t.store.connections.create(paper(alice, 'a1'));
    const b = await t.store.connections.create(paper(bob, 'b1'));
    expect(t.store.connections.getForUser(bob, a.id)).toBeUndefined();
    expect(t.store.connections.listByUser(alice).map((c) => c.id)).toEqual([a.id]);
    expect(t.store.connections.all().map((c) => c.id).sort()).toEqual([a.id, b.id].sort());
    expect(await t.store.connections.remove(bob, a.id)).toBe(false);
    expect(await t.store.connections.remove(alice, a.id)).toBe(true);
    expect(t.store.connections.byId(a.id)).toBeUndefined();
    expect(t.store.connections.listByUser(alice)).toEqual([]);
    expect(() => t.store.connections.credentials(a.id)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it('setDisabled toggles the flag durably', async () => {
    const a = await t.store.connections.create(paper(alice));
    expect(await t.store.connections.setDisabled(a.id, true)).toBe(true);
    await t.reopen();
    expect(t.store.connections.byId(a.id)?.disabled).toBe(true);
    expect(await t.store.connections.setDisabled('con_missing', true)).toBe(false);
  });
});
