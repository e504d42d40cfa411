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

  it('keeps order and every entry when the clock stands still or steps back', async () => {
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'a', request: null, outcome: null });
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'b', request: null, outcome: null });
    t.now.value = T0 - 5000;
    t.store.journal.append({ userId: 'u', accountId: null, kind: 'c', request: null, outcome: null });
    await t.store.flushed();
    expect((await t.store.journal.list({ userId: 'u', limit: 10 })).map((e) => e.kind)).toEqual(['c', 'b', 'a']);
  });
});
