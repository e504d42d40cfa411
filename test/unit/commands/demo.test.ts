import { statSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { bootstrapDemo, DEMO_CREDENTIALS_FILE } from '../../../src/commands/demo.js';
import type { PaperBroker } from '../../../src/http/routes/common.js';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
let opened: { name: string; accounts: string[] }[];
let paper: PaperBroker;
beforeEach(async () => {
  t = await tempStore();
  opened = [];
  paper = { restUrl: 'http://127.0.0.1:7/v1', wsUrl: 'ws://127.0.0.1:7/v1/websocket', openLogin: async (l) => void opened.push(l), closeLogin: async () => undefined };
});
afterEach(() => t.cleanup());

test('first run: user demo, a paper login with two accounts, its connection and a read+trade key, saved 0600', async () => {
  const creds = await bootstrapDemo({ store: t.store, dataDir: t.dir, paper, webUrl: 'http://127.0.0.1:8080' });
  expect(creds).not.toBeNull();
  expect(opened).toEqual([{ name: expect.stringMatching(/^demo-[a-z0-9]{6}$/), password: expect.any(String), accounts: ['DEMO1', 'DEMO2'] }]);
  const user = t.store.users.byName('demo')!;
  const [connection] = t.store.connections.listByUser(user.id);
  expect(connection).toMatchObject({ id: creds!.connectionId, broker: 'paper', restUrl: paper.restUrl, wsUrl: paper.wsUrl });
  expect(t.store.connections.credentials(connection!.id).name).toBe(opened[0]!.name);
  expect(t.store.apiKeys.verify(creds!.apiKey)).toMatchObject({ userId: user.id, scopes: ['read', 'trade'] });
  const file = join(t.dir, DEMO_CREDENTIALS_FILE);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ apiKey: creds!.apiKey, docsUrl: 'http://127.0.0.1:8080/api-docs' });
});

test('later runs leave an existing demo user alone', async () => {
  await bootstrapDemo({ store: t.store, dataDir: t.dir, paper, webUrl: 'http://x' });
  expect(await bootstrapDemo({ store: t.store, dataDir: t.dir, paper, webUrl: 'http://x' })).toBeNull();
  expect(opened).toHaveLength(1);
});
