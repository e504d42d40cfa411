/**
 * The embedded paper broker's side of `serve --paper`: paper logins at the simulator, the
 * connection specs the actors are started with, and the first-run demo (user `demo`, a
 * paper connection with two accounts, an API key printed once and saved 0600).
 *
 * The simulator keeps its state in memory, so every start re-creates the paper logins the
 * store knows, in creation order, with the same credentials and account names. A fresh
 * simulator numbers accounts the same way each time, so ids normally survive a restart;
 * if they do not (e.g. logins were created at the simulator by hand), tokens bound to an
 * old id report `Account is inactive` until rebound.
 */
import { readFileSync, writeFileSync, renameSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import type { BrokerCredentials, ConnectionSpec } from './domain/connections.js';
import type { Logger } from './log.js';
import { randomBase62 } from './store/crypto.js';
import type { Store } from './store/index.js';
import type { ConnectionRecord } from './store/connections.js';

/** Where the embedded paper broker listens (`controlUrl` ends in `/control`). */
export interface PaperEndpoints {
  controlUrl: string;
  restUrl: string;
  wsUrl: string;
}

/** Broker budgets (DESIGN §3): paper is generous so `bench` can push it. */
export const BUDGETS = {
  paper: { perMinute: 1_000_000, perHour: 60_000_000 },
  tradovate: { perMinute: 80, perHour: 5_000 },
} as const;

/** Creates a login with accounts at the paper broker (control API, loopback only). */
export async function createPaperLogin(
  controlUrl: string,
  login: { name: string; password: string; accounts: string[] },
): Promise<unknown> {
  const res = await fetch(`${controlUrl.replace(/\/+$/, '')}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: login.name, password: login.password, accounts: login.accounts.map((name) => ({ name })) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`paper broker refused login '${login.name}': HTTP ${res.status} ${text.slice(0, 200)}`);
  return text ? (JSON.parse(text) as unknown) : null;
}

/** The spec an actor is started with; paper connections follow the embedded broker's current address. */
export function connectionSpecFor(record: ConnectionRecord, credentials: BrokerCredentials, paper?: PaperEndpoints): ConnectionSpec {
  const usePaper = record.broker === 'paper' && paper !== undefined;
  return {
    connectionId: record.id,
    userId: record.userId,
    broker: record.broker,
    environment: record.environment,
    restUrl: usePaper ? paper.restUrl : record.restUrl,
    wsUrl: usePaper ? paper.wsUrl : record.wsUrl,
    credentials,
    budget: record.broker === 'paper' ? { ...BUDGETS.paper } : { ...BUDGETS.tradovate },
  };
}

const LOGINS_FILE = 'paper-logins.json';

/** login name → account names; no secrets (passwords stay sealed in the store). */
type PaperLogins = Record<string, string[]>;

function readLogins(dataDir: string): PaperLogins {
  try {
    return JSON.parse(readFileSync(join(dataDir, LOGINS_FILE), 'utf8')) as PaperLogins;
  } catch {
    return {};
  }
}

/** Remembers a paper login's account names so the next start can re-create them. */
export function rememberPaperLogin(dataDir: string, login: string, accounts: string[]): void {
  const all = { ...readLogins(dataDir), [login]: accounts };
  const tmp = join(dataDir, `${LOGINS_FILE}.tmp`);
  writeFileSync(tmp, JSON.stringify(all, null, 2), { mode: 0o600 });
  renameSync(tmp, join(dataDir, LOGINS_FILE));
}

/** Re-creates every enabled paper connection's login at a fresh paper broker, oldest first. */
export async function restorePaperLogins(store: Store, dataDir: string, paper: PaperEndpoints, log?: Logger): Promise<void> {
  const known = readLogins(dataDir);
  const records = store.connections
    .all()
    .filter((c) => c.broker === 'paper' && !c.disabled)
    .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  for (const record of records) {
    const creds = store.connections.credentials(record.id);
    const accounts = known[creds.name] ?? [`${creds.name.toUpperCase()}-1`];
    try {
      await createPaperLogin(paper.controlUrl, { name: creds.name, password: creds.password, accounts });
    } catch (err) {
      log?.warn({ connectionId: record.id, err: err instanceof Error ? err.message : String(err) }, 'paper login not restored');
    }
  }
}

/** What the first run prints once and saves 0600. */
export interface DemoCredentials {
  webUrl: string;
  docsUrl: string;
  login: { name: string; password: string };
  apiKey: string;
  connectionId: string;
  createdAt: string;
}

export const DEMO_USER = 'demo';
export const DEMO_CREDENTIALS_FILE = 'demo-credentials.json';

/**
 * First run only: creates user `demo`, a paper login with two accounts, the paper
 * connection and a read+trade API key. Returns the credentials to print, or null when the
 * demo user already exists.
 */
export async function bootstrapDemo(opts: {
  store: Store;
  dataDir: string;
  paper: PaperEndpoints;
  webUrl: string;
}): Promise<DemoCredentials | null> {
  const { store, paper } = opts;
  if (store.users.byName(DEMO_USER)) return null;
  const password = randomBase62(20);
  const user = await store.users.create({ name: DEMO_USER, password });
  const login = { name: `demo-${randomBase62(6).toLowerCase()}`, password: randomBase62(24), accounts: ['DEMO1', 'DEMO2'] };
  await createPaperLogin(paper.controlUrl, login);
  rememberPaperLogin(opts.dataDir, login.name, login.accounts);
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
