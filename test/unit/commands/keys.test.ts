import { expect, test } from 'vitest';
import { run } from '../../../src/commands/keys.js';
import { openStore } from '../../../src/store/index.js';
import { useCommandOutput, useDataDir } from '../../support/cli.js';

const { out, err } = useCommandOutput();
const data = useDataDir((store) => store.users.create({ name: 'alice' }));

const keys = (...args: string[]) => run([...args, '--data-dir', data.dir]);

test('create prints the key alone on stdout (notes on stderr); it verifies with the scopes asked for', async () => {
  expect(await keys('create', '--user', 'alice', '--name', 'bot', '--scopes', 'trade,read,trade')).toBe(0);
  const key = out.join('').trim();
  expect(key).toMatch(/^tgk_[A-Za-z0-9]+_[A-Za-z0-9]+$/);
  expect(err.join('')).toContain('shown only this once');
  const store = await openStore({ dataDir: data.dir });
  try {
    expect(store.apiKeys.verify(key)).toMatchObject({ name: 'bot', scopes: ['trade', 'read'] });
  } finally {
    await store.close();
  }
});

test('list never shows the secret; revoke takes the id, the tgk_<id> prefix or the whole key, once', async () => {
  await keys('create', '--user', 'alice', '--name', 'bot', '--scopes', 'read', '--json');
  const { id, key } = JSON.parse(out.join('')) as { id: string; key: string };
  out.length = 0;
  expect(await keys('list', '--user', 'alice')).toBe(0);
  expect(out.join('')).toContain(`tgk_${id}`);
  expect(out.join('')).not.toContain(key);
  out.length = 0;
  expect(await keys('revoke', key)).toBe(0);
  expect(await keys('revoke', `tgk_${id}`)).toBe(0);
  expect(out.join('')).toBe(`revoked key ${id}\nkey ${id} was already revoked\n`);
});

test('usage mistakes exit 2 with the usage; an unknown user or key exits 1', async () => {
  expect(await keys('create', '--user', 'alice', '--name', 'x', '--scopes', 'admin')).toBe(2);
  expect(err.join('')).toMatch(/invalid scope\(s\) 'admin'/);
  expect(await keys('create', '--user', 'alice', '--scopes', 'read')).toBe(2);
  expect(await keys('revoke', 'not a key')).toBe(2);
  expect(await keys('frobnicate')).toBe(2);
  expect(await keys('create', '--user', 'nobody', '--name', 'x', '--scopes', 'read')).toBe(1);
  expect(await keys('revoke', 'AAAAAAAAAAAA')).toBe(1);
});
