import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
beforeEach(async () => {
  t = await tempStore();
});
afterEach(() => t.cleanup());

describe('users', () => {
  it('creates a user and finds it by id and by name, without exposing a password hash', async () => {
    const u = await t.store.users.create({ name: 'alice.b-1_x', password: 's3cret pass' });
    expect(u).toEqual({ id: u.id, name: 'alice.b-1_x', createdAt: new Date(t.now.value).toISOString() });
    expect(t.store.users.byId(u.id)).toEqual(u);
    expect(t.store.users.byName('alice.b-1_x')).toEqual(u);
    expect(t.store.users.list()).toEqual([u]);
    expect(JSON.stringify(t.store.users.list())).not.toMatch(/scrypt|s3cret/);
  });

  it('refuses a taken name with CONFLICT, also when two creations race', async () => {
    await t.store.users.create({ name: 'alice' });
    await expect(t.store.users.create({ name: 'alice' })).rejects.toMatchObject({ code: 'CONFLICT' });
    // Unique regardless of case: `Alice` beside `alice` would look like one user.
    await expect(t.store.users.create({ name: 'ALICE' })).rejects.toMatchObject({ code: 'CONFLICT', message: "user 'alice' already exists" });
    const results = await Promise.allSettled([t.store.users.create({ name: 'bob' }), t.store.users.create({ name: 'bob' })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(t.store.users.list().filter((u) => u.name === 'bob')).toHaveLength(1);
  });

  it('validates names: 1..64 of [A-Za-z0-9_.-]', async () => {
    for (const name of ['', 'a'.repeat(65), 'has space', 'slash/', 'ünï']) {
      await expect(t.store.users.create({ name })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    }
    await expect(t.store.users.create({ name: 'a'.repeat(64) })).resolves.toMatchObject({ name: 'a'.repeat(64) });
  });

  it('verifyPassword accepts the right password only; unknown users and users without a password get null', async () => {
    const u = await t.store.users.create({ name: 'alice', password: 'right' });
    await t.store.users.create({ name: 'nopass' });
    expect(await t.store.users.verifyPassword('alice', 'right')).toEqual(u);
    expect(await t.store.users.verifyPassword('alice', 'wrong')).toBeNull();
    expect(await t.store.users.verifyPassword('ghost', 'right')).toBeNull();
    expect(await t.store.users.verifyPassword('nopass', '')).toBeNull();
  });

  it('finds a user by name in any case, as names are unique regardless of case (attack probe: DEMO was refused the password of demo)', async () => {
    const u = await t.store.users.create({ name: 'Alice', password: 'right' });
    expect(t.store.users.byName('alice')).toEqual(u);
    expect(t.store.users.byName('ALICE')).toEqual(u);
    expect(await t.store.users.verifyPassword('aLiCe', 'right')).toEqual(u);
    expect(await t.store.users.verifyPassword('alice', 'wrong')).toBeNull();
    expect(t.store.users.byName('alic')).toBeUndefined();
    expect(t.store.users.byName('al ice')).toBeUndefined();
  });

  it('no password holds a NUL: scrypt ignores trailing ones, so twelve NULs signed in as an empty password and "abc" + nine NULs as "abc" (fuzz probe)', async () => {
    await expect(t.store.users.create({ name: 'nul', password: '\0'.repeat(12) })).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: 'password must not contain NUL (U+0000)' });
    const u = await t.store.users.create({ name: 'alice', password: 'abc' });
    await expect(t.store.users.setPassword(u.id, `abc${'\0'.repeat(9)}`)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    // A NUL given at sign-in never matches (it would match the password without it).
    expect(await t.store.users.verifyPassword('alice', 'abc')).toEqual(u);
    expect(await t.store.users.verifyPassword('alice', 'abc\0')).toBeNull();
  });

  it('setPassword replaces the password durably', async () => {
    const u = await t.store.users.create({ name: 'alice' });
    await t.store.users.setPassword(u.id, 'new-one');
    await t.reopen();
    expect(await t.store.users.verifyPassword('alice', 'new-one')).toEqual(u);
    await expect(t.store.users.setPassword('usr_missing', 'x')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
