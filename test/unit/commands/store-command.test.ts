import { afterEach, beforeEach, expect, test } from 'vitest';
import { parseCommand, resolveUser, runCommand, table, UsageError } from '../../../src/commands/store-command.js';
import { AppError } from '../../../src/domain/problems.js';
import { useCommandOutput } from '../../support/cli.js';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
const { err: stderr } = useCommandOutput();
beforeEach(async () => {
  t = await tempStore();
});
afterEach(() => t.cleanup());

test('parseCommand is strict, always takes --data-dir, and turns parse errors into usage errors', () => {
  expect(parseCommand(['add', 'bob', '--data-dir', '/tmp/x'], { json: { type: 'boolean' } })).toMatchObject({ positionals: ['add', 'bob'], values: { 'data-dir': '/tmp/x' } });
  expect(() => parseCommand(['--nope'], {})).toThrow(UsageError);
});

test('runCommand: a usage error prints the usage (exit 2), a coded error its message (exit 1), anything else propagates', async () => {
  expect(await runCommand('keys', 'tradegate keys …', async () => 0)).toBe(0);
  expect(await runCommand('keys', 'tradegate keys …', async () => { throw new UsageError('--user is required'); })).toBe(2);
  expect(stderr.join('')).toBe('tradegate keys: --user is required\n\nUsage: tradegate keys …\n');
  expect(await runCommand('keys', 'u', async () => { throw new AppError('NOT_FOUND', "unknown user 'x'"); })).toBe(1);
  await expect(runCommand('keys', 'u', async () => { throw new TypeError('bug'); })).rejects.toThrow('bug');
});

test('resolveUser takes a name or an id', async () => {
  const bob = await t.store.users.create({ name: 'bob' });
  expect(resolveUser(t.store, 'bob').id).toBe(bob.id);
  expect(resolveUser(t.store, bob.id).name).toBe('bob');
  expect(() => resolveUser(t.store, 'nobody')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  expect(() => resolveUser(t.store, undefined)).toThrow(UsageError);
});

test('table aligns columns under the header and leaves no trailing blanks', () => {
  expect(table(['ID', 'NAME'], [['1', 'alice'], ['22', 'b']])).toBe('ID  NAME\n1   alice\n22  b\n');
});
