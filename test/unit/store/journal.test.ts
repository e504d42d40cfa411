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

  it('pages one ref by position: the next page starts below the last entry shown, so entries added meanwhile neither repeat nor shift it', async () => {
    for (let i = 0; i < 5; i++) {
      t.now.value = T0 + i;
      t.store.journal.append({ userId: 'u1', accountId: '7', kind: 'webhook-alert', request: { i }, outcome: null, ref: 'webhookToken:a' });
    }
    // Two entries in one millisecond are two positions.
    t.store.journal.append({ userId: 'u1', accountId: '7', kind: 'webhook-alert', request: { i: 5 }, outcome: null, ref: 'webhookToken:a' });
    const page = async (before?: string) => {
      const got = await t.store.journal.listByRef({ userId: 'u1', ref: 'webhookToken:a', limit: 2, ...(before !== undefined && { before }) });
      return { ids: got.map((e) => (e.request as { i: number }).i), last: got[got.length - 1]?.position };
    };
    const first = await page();
    expect(first.ids).toEqual([5, 4]);
    t.now.value = T0 + 10;
    t.store.journal.append({ userId: 'u1', accountId: '7', kind: 'webhook-alert', request: { i: 6 }, outcome: null, ref: 'webhookToken:a' });
    const second = await page(first.last);
    expect(second.ids).toEqual([3, 2]);
    const third = await page(second.last);
    expect(third.ids).toEqual([1, 0]);
    expect((await page(third.last)).ids).toEqual([]);
    // Positions survive a reopen (a cursor handed out before a restart still pages on).
    await t.reopen();
    expect((await page(first.last)).ids).toEqual([3, 2]);
  });

  it('lists one ref of every user appended since a time, newest first (the start-up\'s read of the last day, not the whole journal)', async () => {
    for (let i = 0; i < 6; i++) {
      t.now.value = T0 + i * 1000;
      t.store.journal.append({ userId: i % 2 ? 'u1' : 'u2', accountId: '7', kind: 'pending', request: { i }, outcome: null, ref: 'late' });
      t.store.journal.append({ userId: 'u1', accountId: '7', kind: 'webhook-alert', request: { i: 100 + i }, outcome: null, ref: 'webhookToken:a' });
    }
    await t.reopen();
    const since = async (ms: number) => (await t.store.journal.listByRef({ userId: undefined, ref: 'late', limit: 10, since: ms })).map((e) => (e.request as { i: number }).i);
    expect(await since(T0 + 3000)).toEqual([5, 4, 3]);
    expect(await since(T0 + 2500)).toEqual([5, 4, 3]);
    expect(await since(T0)).toEqual([5, 4, 3, 2, 1, 0]);
    expect(await since(T0 + 6000)).toEqual([]);
  });

  it('refuses a position it never gave out as an invalid cursor', async () => {
    for (const before of ['', 'abc', '1.2', '-1', '1..2', 'x'.repeat(80)]) {
      await expect(t.store.journal.listByRef({ userId: 'u1', ref: 'webhookToken:a', limit: 2, before }), before).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    }
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

describe('journal retention (the LMDB journal sweeps itself; the cluster stream has the same limits)', () => {
  it('deletes entries past the retention, then each user’s oldest past the cap, indexes included; the rest stays listed', async () => {
    const { openStore } = await import('../../../src/store/index.js');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'tg-journal-'));
    const now = { value: T0 };
    const store = await openStore({ dataDir: dir, clock: () => now.value });
    try {
      const a = await store.users.create({ name: 'a' });
      const b = await store.users.create({ name: 'b' });
      // a: 3 old entries (a token's alerts), 6 new; b: 2 new.
      for (let i = 0; i < 3; i++) {
        now.value = T0 + i;
        store.journal.append({ userId: a.id, accountId: '7', kind: 'webhook-alert', request: { i }, outcome: null, ref: 'webhookToken:t' });
      }
      for (let i = 3; i < 9; i++) {
        now.value = T0 + 100_000 + i;
        store.journal.append({ userId: a.id, accountId: '7', kind: 'webhook-alert', request: { i }, outcome: null, ref: 'webhookToken:t' });
      }
      for (let i = 0; i < 2; i++) store.journal.append({ userId: b.id, accountId: '8', kind: 'place-order', request: { i: 100 + i }, outcome: null });
      const ids = async (userId: string) => (await store.journal.list({ userId, limit: 100 })).map((e) => (e.request as { i: number }).i);
      // Retention 50 s at T0 + 100 s: a's first three go; the cap of 4 then takes a's two oldest left.
      expect(await store.journal.sweep({ now: T0 + 100_000, retentionMs: 50_000, maxPerUser: 4 })).toBe(5);
      expect(await ids(a.id)).toEqual([8, 7, 6, 5]);
      expect(await ids(b.id)).toEqual([101, 100]);
      expect((await store.journal.listByRef({ userId: a.id, ref: 'webhookToken:t', limit: 100 })).map((e) => (e.request as { i: number }).i)).toEqual([8, 7, 6, 5]);
      expect((await store.journal.list({ limit: 100 })).length).toBe(6);
      // A batch limit leaves the rest for the next sweep, which finds it (a user over the cap stays due).
      for (let i = 9; i < 15; i++) store.journal.append({ userId: a.id, accountId: '7', kind: 'webhook-alert', request: { i }, outcome: null });
      expect(await store.journal.sweep({ now: T0 + 100_000, retentionMs: 50_000, maxPerUser: 4, batch: 4 })).toBe(4);
      expect(await store.journal.sweep({ now: T0 + 100_000, retentionMs: 50_000, maxPerUser: 4, batch: 4 })).toBe(2);
      expect(await ids(a.id)).toEqual([14, 13, 12, 11]);
      expect(await store.journal.sweep({ now: T0 + 100_000, retentionMs: 50_000, maxPerUser: 4 })).toBe(0);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
