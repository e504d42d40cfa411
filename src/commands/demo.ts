/**
 * The first-run demo of `serve --paper`: user `demo`, a paper connection with two accounts
 * and a read+trade API key, printed once and saved 0600.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PaperBroker } from '../http/routes/common.js';
import { randomBase62 } from '../store/crypto.js';
import type { Store } from '../store/index.js';

/** What the first run prints once and saves 0600. */
export interface DemoCredentials {
  webUrl: string;
  docsUrl: string;
  /** `password` null once it was changed (passwordChangedAt): the store drops it then. */
  login: { name: string; password: string | null; passwordChangedAt?: string };
  apiKey: string;
  connectionId: string;
  createdAt: string;
}

export const DEMO_USER = 'demo';
export { DEMO_CREDENTIALS_FILE } from '../store/index.js';
import { DEMO_CREDENTIALS_FILE } from '../store/index.js';

/**
 * First run only: creates user `demo`, a paper login with two accounts, the paper
 * connection and a read+trade API key. Returns the credentials to print, or null when the
 * demo user already exists.
 */
export async function bootstrapDemo(opts: { store: Store; dataDir: string; paper: PaperBroker; webUrl: string }): Promise<DemoCredentials | null> {
  const { store, paper } = opts;
  if (store.users.byName(DEMO_USER)) return null;
  const password = randomBase62(20);
  const user = await store.users.create({ name: DEMO_USER, password });
  const login = { name: `demo-${randomBase62(6).toLowerCase()}`, password: randomBase62(24), accounts: ['DEMO1', 'DEMO2'] };
  await paper.openLogin(login);
  const connection = await store.connections.create({
    userId: user.id,
    name: 'Paper (embedded)',
    broker: 'paper',
    environment: 'paper',
    restUrl: paper.restUrl,
    wsUrl: paper.wsUrl,
    credentials: { name: login.name, password: login.password },
  });
  const { key } = await store.apiKeys.create({ userId: user.id, name: 'demo', scopes: ['read', 'trade'] });
  const creds: DemoCredentials = {
    webUrl: opts.webUrl,
    docsUrl: `${opts.webUrl}/api-docs`,
    login: { name: DEMO_USER, password },
    apiKey: key,
    connectionId: connection.id,
    createdAt: new Date().toISOString(),
  };
  const file = join(opts.dataDir, DEMO_CREDENTIALS_FILE);
  writeFileSync(file, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return creds;
}
