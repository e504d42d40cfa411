import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { run } from '../../../src/commands/users.js';
import { openStore } from '../../../src/store/index.js';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
let out: string[];
let err: string[];
beforeEach(async () => {
  t = await tempStore();
  await t.store.close();
  out = [];
  err = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((c) => (out.push(String(c)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((c) => (err.push(String(c)), true));
});
afterEach(async () => {
  vi.restoreAllMocks();
  t.store = await openStore({ dataDir: t.dir });
  await t.cleanup();
});

const users = (...args: string[]) => run([...args, '--data-dir', t.dir]);

test('add creates a user without a password unless one is piped in, and list shows it', async () => {
  expect(await users('add', 'carol')).toBe(0);
  expect(out.join('')).toMatch(/^created user carol \(usr_\w+\), no password \(web sign-in disabled\)\n$/);
  out.length = 0;
  expect(await users('list', '--json')).toBe(0);
  expect(JSON.parse(out.join('')).map((u: { name: string }) => u.name)).toEqual(['carol']);
});

test('usage mistakes exit 2; a taken name exits 1 with the store’s reason', async () => {
  expect(await users('add')).toBe(2);
  expect(await users('add', 'a', 'b')).toBe(2);
  expect(await users('list', 'extra')).toBe(2);
  expect(await users('remove', 'carol')).toBe(2);
  await users('add', 'dave');
  expect(await users('add', 'dave')).toBe(1);
  expect(err.join('')).toMatch(/^tradegate users: .*dave/m);
});
