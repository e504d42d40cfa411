import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/store/crypto.js';
import { SESSION_TOUCH_MS } from '../../../src/store/sessions.js';
import { allFiles, useTwoUsers } from '../../support/store.js';

const MIN = 60_000;
const policy = { idleMs: 30 * MIN, maxAgeMs: 8 * 60 * MIN };

describe('sessions', () => {
  const w = useTwoUsers();

  it('finds a session by its secret and never stores the secret itself', async () => {
    const { secret, record } = await w.t.store.sessions.create(w.alice, policy);
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(record.id).toMatch(/^ses_/);
    expect(w.t.store.sessions.lookup(secret)).toMatchObject({ id: record.id, userId: w.alice, expiresAt: record.createdAt + policy.maxAgeMs });
    await w.t.store.close();
    // Control: the scan reads what the store wrote (the digest is not secret). A nats-server
    // writes its files on its own schedule, so the control may take a moment to appear.
    const digest = Buffer.from(sha256Hex(secret));
    let files = allFiles(w.t.storageDir);
    for (let i = 0; i < 50 && !files.some((f) => f.bytes.includes(digest)); i++) {
      await new Promise((r) => setTimeout(r, 100));
      files = allFiles(w.t.storageDir);
    }
    expect(files.some((f) => f.bytes.includes(digest)), 'the digest is what is stored').toBe(true);
    for (const f of files) expect(f.bytes.includes(Buffer.from(secret)), f.path).toBe(false);
    await w.t.reopen();
  });

  it('gives every sign-in a new random id', async () => {
    const a = await w.t.store.sessions.create(w.alice, policy);
    const b = await w.t.store.sessions.create(w.alice, policy);
    expect(a.secret).not.toBe(b.secret);
    expect(a.record.id).not.toBe(b.record.id);
  });

  it('rejects unknown and malformed secrets without a lookup', async () => {
    expect(w.t.store.sessions.lookup('nope')).toBeUndefined();
    expect(w.t.store.sessions.lookup('A'.repeat(43))).toBeUndefined();
    expect(w.t.store.sessions.lookup(`${'A'.repeat(42)}!`)).toBeUndefined();
  });

  it('ends a session that sees no request for the idle time, and keeps an active one alive', async () => {
    const idle = await w.t.store.sessions.create(w.alice, policy);
    const active = await w.t.store.sessions.create(w.alice, policy);
    for (let i = 0; i < 4; i++) {
      w.t.now.value += 10 * MIN;
      expect(w.t.store.sessions.lookup(active.secret), `after ${(i + 1) * 10} min`).toBeDefined();
      await w.t.store.flushed();
    }
    // 40 min without a request: past the 30 min idle timeout.
    expect(w.t.store.sessions.lookup(idle.secret)).toBeUndefined();
  });

  it('a page refreshing itself (lookup marked idle) keeps the session it uses but not its idle clock', async () => {
    const watched = await w.t.store.sessions.create(w.alice, policy);
    for (let i = 0; i < 2; i++) {
      w.t.now.value += 10 * MIN;
      expect(w.t.store.sessions.lookup(watched.secret, { idle: true }), `after ${(i + 1) * 10} min`).toBeDefined();
      await w.t.store.flushed();
    }
    w.t.now.value += 11 * MIN;
    // 31 min since anyone used it, however often the page asked meanwhile.
    expect(w.t.store.sessions.lookup(watched.secret, { idle: true })).toBeUndefined();
  });

  it('tells by public id whether a session still holds (what ends its streams): idle, past its deadline, ended, another user’s', async () => {
    const idle = await w.t.store.sessions.create(w.alice, policy);
    const ended = await w.t.store.sessions.create(w.alice, policy);
    const active = await w.t.store.sessions.create(w.alice, policy);
    expect(w.t.store.sessions.live(w.alice, idle.record.id)).toBe(true);
    expect(w.t.store.sessions.live(w.bob, idle.record.id)).toBe(false);
    expect(w.t.store.sessions.live(w.alice, 'ses_unknown')).toBe(false);
    await w.t.store.sessions.revoke(ended.secret);
    expect(w.t.store.sessions.live(w.alice, ended.record.id)).toBe(false);
    for (let i = 0; i < 4; i++) {
      w.t.now.value += 10 * MIN;
      w.t.store.sessions.lookup(active.secret);
      await w.t.store.flushed();
    }
    expect(w.t.store.sessions.live(w.alice, idle.record.id)).toBe(false);
    expect(w.t.store.sessions.live(w.alice, active.record.id)).toBe(true);
    w.t.now.value = active.record.createdAt + policy.maxAgeMs;
    expect(w.t.store.sessions.live(w.alice, active.record.id)).toBe(false);
  });

  it('keeps a user’s most recently used sessions and ends the rest (sign-ins cannot pile them up)', async () => {
    const made = [];
    for (let i = 0; i < 5; i++) {
      made.push(await w.t.store.sessions.create(w.alice, policy));
      w.t.now.value += 2 * MIN;
    }
    // The first one is used again: it is kept over the two that came after it.
    expect(w.t.store.sessions.lookup(made[0]!.secret)).toBeDefined();
    await w.t.store.flushed();
    const bobs = await w.t.store.sessions.create(w.bob, policy);
    const ended = await w.t.store.sessions.keepNewest(w.alice, 3);
    expect(ended.sort()).toEqual([made[1]!.record.id, made[2]!.record.id].sort());
    expect(made.map((m) => w.t.store.sessions.lookup(m.secret) !== undefined)).toEqual([true, false, false, true, true]);
    expect(w.t.store.sessions.lookup(bobs.secret)).toBeDefined();
    expect(await w.t.store.sessions.keepNewest(w.alice, 3)).toEqual([]);
  });

  it('counts idle time from the last request, and writes use at most once a minute (what other processes see)', async () => {
    const s = await w.t.store.sessions.create(w.alice, policy);
    w.t.now.value += SESSION_TOUCH_MS - 1;
    expect(w.t.store.sessions.lookup(s.secret)).toBeDefined();
    await w.t.store.flushed();
    // 30.5 min after the last write but 29.5 min after the last request: still live here.
    w.t.now.value += 29.5 * MIN;
    expect(w.t.store.sessions.live(w.alice, s.record.id)).toBe(true);
    expect(w.t.store.sessions.lookup(s.secret)).toBeDefined();
    await w.t.store.flushed();
    // That request was written (over a minute since the last write); the one before was not.
    const t = w.t.now.value;
    w.t.now.value += 1000;
    w.t.store.sessions.lookup(s.secret);
    await w.t.store.flushed();
    await w.t.reopen();
    expect(w.t.store.sessions.lookup(s.secret)?.lastSeenAt).toBe(t);
  });

  it('ends a session at its absolute deadline however active it is', async () => {
    const s = await w.t.store.sessions.create(w.alice, policy);
    for (let t = 0; t < policy.maxAgeMs - 20 * MIN; t += 20 * MIN) {
      w.t.now.value += 20 * MIN;
      expect(w.t.store.sessions.lookup(s.secret)).toBeDefined();
      await w.t.store.flushed();
    }
    w.t.now.value = s.record.createdAt + policy.maxAgeMs - 1;
    expect(w.t.store.sessions.lookup(s.secret)).toBeDefined();
    w.t.now.value += 1;
    expect(w.t.store.sessions.lookup(s.secret)).toBeUndefined();
  });

  it('revokes one session; a touch racing the revoke cannot bring it back', async () => {
    const s = await w.t.store.sessions.create(w.alice, policy);
    const other = await w.t.store.sessions.create(w.alice, policy);
    w.t.now.value += SESSION_TOUCH_MS;
    w.t.store.sessions.lookup(s.secret); // queues a last-seen write
    expect(await w.t.store.sessions.revoke(s.secret)).toBe(true);
    await w.t.store.flushed();
    expect(w.t.store.sessions.lookup(s.secret)).toBeUndefined();
    expect(w.t.store.sessions.lookup(other.secret)).toBeDefined();
    expect(await w.t.store.sessions.revoke(s.secret)).toBe(false);
  });

  it('a password change ends every session of that user and no one else’s', async () => {
    const a1 = await w.t.store.sessions.create(w.alice, policy);
    const a2 = await w.t.store.sessions.create(w.alice, policy);
    const b = await w.t.store.sessions.create(w.bob, policy);
    await w.t.store.users.setPassword(w.alice, 'a brand new password');
    expect(w.t.store.sessions.lookup(a1.secret)).toBeUndefined();
    expect(w.t.store.sessions.lookup(a2.secret)).toBeUndefined();
    expect(w.t.store.sessions.lookup(b.secret)).toBeDefined();
  });

  it('survives a reopen (sessions are durable) and the sweeper deletes only expired ones', async () => {
    const old = await w.t.store.sessions.create(w.alice, policy);
    const reopened = await w.t.reopen();
    expect(reopened.sessions.lookup(old.secret)).toBeDefined();
    w.t.now.value += 20 * MIN;
    const fresh = await reopened.sessions.create(w.bob, policy);
    const store = reopened;
    w.t.now.value += 15 * MIN; // old: idle 35 min; fresh: 15 min
    expect(await store.sessions.sweep()).toBe(1);
    expect(store.sessions.lookup(fresh.secret)).toBeDefined();
    expect(await store.sessions.revokeAllForUser(w.alice)).toBe(0);
  });
});
