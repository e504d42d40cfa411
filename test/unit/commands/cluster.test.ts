/**
 * `tradegate cluster import`, in-process, from a real LMDB data dir (its own data.key) into a
 * real nats-server under another data key: every record arrives with its id and owner, keys
 * and tokens keep working, secrets are sealed again under the cluster key, stored answers and
 * the journal come along; a second run changes nothing; a conflict is reported, not overwritten.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, expect, test, vi } from 'vitest';
import { run } from '../../../src/commands/cluster.js';
import { NO_GUARDS } from '../../../src/domain/guards.js';
import { run as runKeys } from '../../../src/commands/keys.js';
import { run as runUsers } from '../../../src/commands/users.js';
import { openStore } from '../../../src/store/index.js';
import { openNatsStore, type NatsStore } from '../../../src/store/nats/index.js';
import { useCommandOutput, useDataDir } from '../../support/cli.js';
import { startNats, type NatsServer } from '../../support/nats.js';
import { TEST_DATA_KEY } from '../../support/store.js';

const { out, err } = useCommandOutput();
const secrets = { apiKey: '', revokedKey: '', token: '', tokenId: '', connectionId: '', userId: '', strategyId: '' };
const data = useDataDir(async (store) => {
  const alice = await store.users.create({ name: 'alice', password: 'correct horse battery' });
  secrets.userId = alice.id;
  secrets.apiKey = (await store.apiKeys.create({ userId: alice.id, name: 'bot', scopes: ['read', 'trade'] })).key;
  store.apiKeys.touch(store.apiKeys.parseKey(secrets.apiKey)!.id, Date.UTC(2026, 0, 5));
  await store.apiKeys.setGuards(alice.id, store.apiKeys.parseKey(secrets.apiKey)!.id, { maxOrderQty: 1 });
  const revoked = await store.apiKeys.create({ userId: alice.id, name: 'old', scopes: ['read'] });
  secrets.revokedKey = revoked.key;
  await store.apiKeys.revoke(alice.id, revoked.record.id);
  const strategy = await store.strategies.create(alice.id, { name: 'es-scalp', description: '', symbol: 'ES1!', qty: 2 });
  secrets.strategyId = strategy.id;
  const conn = await store.connections.create({
    userId: alice.id, name: 'paper', broker: 'paper', environment: 'paper', restUrl: 'http://127.0.0.1:1/v1', wsUrl: 'ws://127.0.0.1:1/v1/websocket',
    credentials: { name: 'alice-broker', password: 'broker-secret-9' },
  });
  secrets.connectionId = conn.id;
  const token = await store.webhookTokens.create({ userId: alice.id, name: 'tv', accountId: '1001', strategyId: strategy.id });
  secrets.token = token.token;
  secrets.tokenId = token.record.id;
  // An account with guards, locked by the kill switch: the lock must stay in force in the cluster.
  await store.guards.setConfig(alice.id, '1001', { ...NO_GUARDS, maxPositionPerContract: 3, dailyLossLimit: 500 });
  await store.guards.setLock(alice.id, '1001', { guard: 'kill_switch', since: Date.UTC(2026, 0, 5), until: null, detail: 'kill switch (api-key)' });
  await store.idempotency.put(`user:${alice.id}`, 'order-1', { fingerprint: 'f'.repeat(64), status: 201, headers: { 'Content-Type': 'application/json' }, body: '{"orderId":"7"}\n', createdAt: Date.now() });
  // Older than 24 h when the import runs: not moved.
  await store.idempotency.put(`user:${alice.id}`, 'order-0', { fingerprint: 'f'.repeat(64), status: 201, headers: {}, body: '{}', createdAt: Date.now() - 25 * 3600_000 });
  store.journal.append({ userId: alice.id, accountId: '1001', kind: 'place-order', request: { qty: 1 }, outcome: { orderId: '7' } });
  store.journal.append({ userId: alice.id, accountId: '1001', kind: 'cancel-order', request: { orderId: '7' }, outcome: { ok: true } });
  await store.flushed();
});

let nats: NatsServer & { stopAndRemove(): Promise<void> };
let nc: NatsConnection;
const opened: NatsStore[] = [];
const dirs: string[] = [];
beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc?.close();
  await nats?.stopAndRemove();
});
afterEach(async () => {
  vi.unstubAllEnvs();
  for (const s of opened.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The cluster's store under its own key, as a node opens it (a fresh prefix per test). */
async function cluster(prefix: string): Promise<NatsStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tg-cluster-'));
  dirs.push(dir);
  const store = await openNatsStore({ nc, prefix, dataDir: dir, dataKey: TEST_DATA_KEY });
  opened.push(store);
  return store;
}

const importInto = (prefix: string, ...extra: string[]) => {
  vi.stubEnv('TRADEGATE_DATA_KEY', TEST_DATA_KEY);
  vi.stubEnv('TRADEGATE_CLUSTER_PREFIX', prefix);
  return run(['import', '--data-dir', data.dir, '--cluster', nats.url, ...extra]);
};

test('moves every record; keys, tokens, passwords and sessions keep working; secrets open under the cluster key; a rerun adds nothing', async () => {
  // A browser signed in now (the data dir's own fixture clock is in the past).
  const lmdb = await openStore({ dataDir: data.dir });
  const session = (await lmdb.sessions.create(secrets.userId, { idleMs: 3_600_000, maxAgeMs: 12 * 3_600_000 })).secret;
  await lmdb.close();
  expect(await importInto('imp1', '--json')).toBe(0);
  const report = JSON.parse(out.join('')) as Record<string, { added: number; present: number; conflicts: string[] }>;
  expect(report.users).toEqual({ added: 1, present: 0, conflicts: [] });
  expect(report.apiKeys!.added).toBe(2);
  expect(report.idempotency!.added).toBe(1);
  expect(report.journal!.added).toBe(2);
  expect(report.guards).toEqual({ added: 1, present: 0, conflicts: [] });

  const store = await cluster('imp1');
  expect(store.users.byName('alice')?.id).toBe(secrets.userId);
  expect(await store.users.verifyPassword('alice', 'correct horse battery')).toBeTruthy();
  expect(store.apiKeys.verify(secrets.apiKey)).toMatchObject({ userId: secrets.userId, name: 'bot', lastUsedAt: '2026-01-05T00:00:00.000Z' });
  expect(store.apiKeys.verify(secrets.revokedKey)).toBeNull();
  expect(store.connections.credentials(secrets.connectionId)).toEqual({ name: 'alice-broker', password: 'broker-secret-9' });
  expect(store.webhookTokens.verify(secrets.token)).toMatchObject({ id: secrets.tokenId, accountId: '1001', strategyId: secrets.strategyId });
  expect(store.webhookTokens.reveal(secrets.userId, secrets.tokenId)).toBe(secrets.token);
  expect(store.strategies.getForUser(secrets.userId, secrets.strategyId)).toMatchObject({ name: 'es-scalp' });
  expect(store.apiKeys.verify(secrets.apiKey)?.guards).toEqual({ maxOrderQty: 1 });
  expect(store.guards.get(secrets.userId, '1001')).toMatchObject({
    config: { maxPositionPerContract: 3, dailyLossLimit: 500, maxOrderQty: null },
    lock: { guard: 'kill_switch', until: null, detail: 'kill switch (api-key)' },
  });
  expect(store.sessions.lookup(session)).toMatchObject({ userId: secrets.userId });
  expect(await store.idempotency.get(`user:${secrets.userId}`, 'order-1')).toMatchObject({ status: 201, body: '{"orderId":"7"}\n' });
  expect((await store.journal.list({ userId: secrets.userId, limit: 10 })).map((e) => e.kind)).toEqual(['cancel-order', 'place-order']);

  out.length = 0;
  expect(await importInto('imp1', '--json')).toBe(0);
  const again = JSON.parse(out.join('')) as Record<string, { added: number; present: number }>;
  expect(Object.values(again).every((c) => c.added === 0)).toBe(true);
  expect(again.users!.present).toBe(1);
  expect(again.guards!.present).toBe(1);
  expect(again.journal!.present).toBe(2);
  expect((await store.journal.list({ userId: secrets.userId, limit: 10 })).length).toBe(2);
});

test('a user name taken in the cluster by another user is a conflict: reported, exit 1, left alone', async () => {
  const store = await cluster('imp2');
  const other = await store.users.create({ name: 'alice' });
  expect(await importInto('imp2')).toBe(1);
  expect(out.join('')).toMatch(/RECORDS +ADDED +ALREADY THERE +CONFLICTS/);
  expect(err.join('')).toContain("conflict: user 'alice' exists in the cluster with another id");
  await new Promise((r) => setTimeout(r, 50));
  expect(store.users.byName('alice')?.id).toBe(other.id);
});

test('the store commands (users, keys, connections) write to the cluster with --cluster or TRADEGATE_CLUSTER', async () => {
  vi.stubEnv('TRADEGATE_DATA_KEY', TEST_DATA_KEY);
  vi.stubEnv('TRADEGATE_CLUSTER_PREFIX', 'cli1');
  expect(await runUsers(['add', 'carol', '--cluster', nats.url])).toBe(0);
  vi.stubEnv('TRADEGATE_CLUSTER', nats.url);
  out.length = 0;
  expect(await runKeys(['create', '--user', 'carol', '--name', 'bot', '--scopes', 'read', '--json'])).toBe(0);
  const { key } = JSON.parse(out.join('')) as { key: string };
  const store = await cluster('cli1');
  expect(store.apiKeys.verify(key)).toMatchObject({ name: 'bot', userId: store.users.byName('carol')!.id });
});

test('usage: a subcommand, a data dir holding a store, and a cluster are required', async () => {
  vi.stubEnv('TRADEGATE_DATA_KEY', TEST_DATA_KEY);
  expect(await run(['export'])).toBe(2);
  expect(await run(['import', '--cluster', nats.url])).toBe(2);
  const empty = mkdtempSync(join(tmpdir(), 'tg-empty-'));
  dirs.push(empty);
  expect(await run(['import', '--data-dir', empty, '--cluster', nats.url])).toBe(2);
  expect(err.join('')).toContain('holds no tradegate store');
  expect(await run(['import', '--data-dir', data.dir])).toBe(2);
});
