import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempStore, T0, type TempStore } from '../../support/store.js';

let t: TempStore;
beforeEach(async () => {
  t = await tempStore();
});
afterEach(() => t.cleanup());

describe('journal', () => {
  it('appends without awaiting and lists newest first, per user or overall, across reopen', async () => {
    for (let i = 0; i < 5; i++) {
      t.now.value = T0 + i;
      t.store.journal.append({ userId: i % 2 ? 'u2' : 'u1', accountId: '7', kind: 'place-order', request: { i }, outcome: { ok: true } });
    }
    await t.reopen();
    expect((await t.store.journal.list({ limit: 10 })).map((e) => (e.request as { i: number }).i)).toEqual([4, 3, 2, 1, 0]);
    expect((await t.store.journal.list({ userId: 'u1', limit: 10 })).map((e) => (e.request as { i: number }).i)).toEqual([4, 2, 0]);
    expect((await t.store.journal.list({ userId: 'u2', limit: 1 })).map((e) => e.ts)).toEqual([T0 + 3]);
    expect(await t.store.journal.list({ userId: 'u3', limit: 10 })).toEqual([]);
  });

  it('lists the entries of one ref, newest first, only to the user who owns them', async () => {
    for (let i = 0; i < 6; i++) {
      t.now.value = T0 + i;
      const ref = i % 3 === 0 ? 'webhookToken:a' : i % 3 === 1 ? 'webhookToken:b' : undefined;
      t.store.journal.append({ userId: 'u1', accountId: '7', kind: 'webhook-alert', request: { i }, outcome: null, ...(ref ? { ref } : {}) });
    }
    t.store.journal.append({ userId: 'u2', accountId: '8', kind: 'webhook-alert', request: { i: 99 }, outcome: null, ref: 'webhookToken:a' });
    await t.reopen();
    const of = async (userId: string, ref: string, limit = 10) => (await t.store.journal.listByRef({ userId, ref, limit })).map((e) => (e.request as { i: number }).i);
    expect(await of('u1', 'webhookToken:a')).toEqual([3, 0]);
    expect(await of('u1', 'webhookToken:b', 1)).toEqual([4]);
    expect(await of('u2', 'webhookToken:b')).toEqual([]);
    expect(await of('u2', 'webhookToken:a')).toEqual([99]);
    expect(await t.store.journal.list({ userId: 'u1', limit: 10 })).toHaveLength(6);
  });

  it('keeps order and every entry when the clock stands still or steps back', async () => {
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'a', request: null, outcome: null });
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'b', request: null, outcome: null });
    t.now.value = T0 - 5000;
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'c', request: null, outcome: null });
    await t.store.flushed();
    expect((await t.store.journal.list({ userId: 'u', limit: 10 })).map((e) => e.kind)).toEqual(['c', 'b', 'a']);
  });
});
