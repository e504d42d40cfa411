import { expect, test } from 'vitest';
import { run } from '../../../src/commands/users.js';
import { useCommandOutput, useDataDir } from '../../support/cli.js';

const { out, err } = useCommandOutput();
const data = useDataDir();

const users = (...args: string[]) => run([...args, '--data-dir', data.dir]);

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
