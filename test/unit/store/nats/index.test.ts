import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startNats, type NatsServer } from '../../../support/nats.js';
import { allFiles } from '../../../support/store.js';
import { msUntil, openNodes, type Nodes } from './nodes.js';

let server: NatsServer & { stopAndRemove(): Promise<void> };
let nodes: Nodes;
beforeAll(async () => {
  server = await startNats();
});
afterAll(() => server.stopAndRemove());
beforeEach(async () => {
  nodes = await openNodes([server.url], 3);
});
afterEach(() => nodes.close());

const paper = (userId: string) => ({
  userId,
  name: 'paper',
  broker: 'paper' as const,
  environment: 'paper' as const,
  restUrl: 'http://127.0.0.1:1/v1',
  wsUrl: 'ws://127.0.0.1:1/v1/websocket',
  credentials: { name: 'p', password: 'paper-pass' },
});

describe('cluster store: what one node writes, the others see', () => {
  it('a key created on one node verifies on the others within 100 ms, and a revocation reaches them within 100 ms', async () => {
    const [n1, n2, n3] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0], typeof nodes.stores[0]];
    const user = await n1.users.create({ name: 'alice' });
    const created: number[] = [];
    const revoked: number[] = [];
    for (let i = 0; i < 30; i++) {
      const { record, key } = await n1.apiKeys.create({ userId: user.id, name: `k${i}`, scopes: ['read'] });
      created.push(await msUntil(() => n2.apiKeys.verify(key) !== null && n3.apiKeys.verify(key) !== null, 100));
      expect(await n3.apiKeys.revoke(user.id, record.id)).toBe(true);
      // Read-your-writes on the writing node: no wait at all.
      expect(n3.apiKeys.verify(key)).toBeNull();
      revoked.push(await msUntil(() => n1.apiKeys.verify(key) === null && n2.apiKeys.verify(key) === null, 100));
    }
    const max = (xs: number[]) => Math.max(...xs).toFixed(1);
    console.info(`cross-node visibility over 30 trials: create max ${max(created)} ms, revoke max ${max(revoked)} ms`);
  });

  it('users, connections, tokens and strategies written on one node are readable on another', async () => {
    const [n1, n2] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const user = await n1.users.create({ name: 'bob', password: 'pw-1' });
    const conn = await n1.connections.create(paper(user.id));
    const { record: tok, token } = await n1.webhookTokens.create({ userId: user.id, name: 'tv', accountId: '7' });
    const strat = await n1.strategies.create(user.id, { name: 's', description: 'd', qty: 2 });
    await msUntil(() => n2.strategies.getForUser(user.id, strat.id) !== undefined, 100);
    expect(n2.users.byName('bob')).toEqual(user);
    expect(n2.users.byId(user.id)).toEqual(user);
    expect(await n2.users.verifyPassword('bob', 'pw-1')).toEqual(user);
    expect(n2.connections.getForUser(user.id, conn.id)).toEqual(conn);
    expect(n2.connections.credentials(conn.id).password).toBe('paper-pass');
    expect(n2.webhookTokens.verify(token)).toEqual(tok);
    expect(n2.webhookTokens.reveal(user.id, tok.id)).toBe(token);
    expect(n2.strategies.listByUser(user.id)).toEqual([strat]);
  });
});

describe('cluster store: concurrent writers', () => {
  it('of one user name created on three nodes at once, exactly one creation wins', async () => {
    for (let round = 0; round < 10; round++) {
      const results = await Promise.allSettled(nodes.stores.map((s) => s.users.create({ name: `carol${round}` })));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(['CONFLICT', 'CONFLICT']);
    }
  });

  it('two nodes updating one strategy at once lose neither update (revision-checked retries)', async () => {
    const [n1, n2] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const user = await n1.users.create({ name: 'dave' });
    for (let round = 0; round < 10; round++) {
      const s = await n1.strategies.create(user.id, { name: `s${round}`, description: '' });
      await msUntil(() => n2.strategies.getForUser(user.id, s.id) !== undefined, 100);
      await Promise.all([n1.strategies.update(user.id, s.id, { qty: 5 }), n2.strategies.update(user.id, s.id, { symbol: 'ES' })]);
      // A lost update would leave one field missing for good.
      const both = (n: typeof n1) => n.strategies.getForUser(user.id, s.id)?.qty === 5 && n.strategies.getForUser(user.id, s.id)?.symbol === 'ES';
      await msUntil(() => both(n1) && both(n2), 100);
    }
  });

  it('the same key revoked on two nodes at once is revoked once', async () => {
    const [n1, n2] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const user = await n1.users.create({ name: 'erin' });
    for (let round = 0; round < 10; round++) {
      const { record, key } = await n1.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read'] });
      await msUntil(() => n2.apiKeys.verify(key) !== null, 100);
      const results = await Promise.all([n1.apiKeys.revokeById(record.id), n2.apiKeys.revokeById(record.id)]);
      expect(results.filter(Boolean)).toHaveLength(1);
    }
  });

});

describe('cluster store: NATS restarts', () => {
  it('keeps following writes after the NATS server restarts', async () => {
    const [n1, n2] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const user = await n1.users.create({ name: 'hank' });
    await server.stop();
    await server.restart();
    // Writes wait for the clients to reconnect; then the watches resume where they were.
    const write = async () => {
      for (;;) {
        try {
          return await n1.apiKeys.create({ userId: user.id, name: 'after', scopes: ['read'] });
        } catch {
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const { key } = await write();
    const ms = await msUntil(() => n2.apiKeys.verify(key) !== null, 15_000);
    console.info(`after a NATS restart, the other node saw a new key ${ms.toFixed(0)} ms after it was written`);
    expect(n2.users.byName('hank')?.id).toBe(user.id);
  });
});

describe('cluster store: the data key', () => {
  it('refuses a node whose data key differs from the one the records were sealed with', async () => {
    await nodes.stores[0]!.users.create({ name: 'ivan' });
    await expect(nodes.open(undefined, { dataKey: 'ab'.repeat(32) })).rejects.toThrow(/data key does not match/);
    // The right key still opens, and sees the data.
    expect((await nodes.open()).users.byName('ivan')?.name).toBe('ivan');
  });

  it('of two nodes starting a fresh cluster at once with different keys, exactly one opens', async () => {
    const fresh = await openNodes([server.url], 0);
    try {
      const results = await Promise.allSettled([fresh.open(undefined, { dataKey: '12'.repeat(32) }), fresh.open(undefined, { dataKey: '34'.repeat(32) })]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(String((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)).toMatch(/data key does not match/);
    } finally {
      await fresh.close();
    }
  });

  it('refuses a malformed data key', async () => {
    await expect(nodes.open(undefined, { dataKey: 'not-hex' })).rejects.toThrow(/64 hex/);
  });
});

describe('cluster store: secrets at rest and bucket settings', () => {
  it("writes no API key, webhook token, broker password or user password in plain text into JetStream's files", async () => {
    const n1 = nodes.stores[0]!;
    const user = await n1.users.create({ name: 'judy', password: 'user-password-Xy9' });
    const { key } = await n1.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read', 'trade'] });
    const { token } = await n1.webhookTokens.create({ userId: user.id, name: 'w', accountId: '1' });
    await n1.connections.create({ ...paper(user.id), credentials: { name: 'jdoe', password: 'broker-password-Q7w', sec: 'api-secret-Z3k' } });
    await nodes.close();
    // Stopping the server makes it write everything out.
    await server.stop();
    await server.restart();
    nodes = await openNodes([server.url], 1);
    const secrets = [key, key.slice(key.lastIndexOf('_') + 1), token, token.slice(token.lastIndexOf('_') + 1), 'broker-password-Q7w', 'api-secret-Z3k', 'user-password-Xy9'];
    const files = allFiles(server.storeDir);
    // Control: the scan sees record contents (the key id is stored in clear, by design).
    expect(files.some((f) => f.bytes.includes(Buffer.from(key.slice(4, 16))))).toBe(true);
    for (const f of files) {
      for (const secret of secrets) expect(f.bytes.includes(Buffer.from(secret)), `${secret} in ${f.path}`).toBe(false);
    }
  });

  it('keeps idempotency records in a bucket whose server-side ttl is 24 h, and refuses one with another ttl', async () => {
    const status = await (await new Kvm(nodes.connections[0]!).open(`${nodes.prefix}_idempotency`)).status();
    expect(status.ttl).toBe(24 * 60 * 60 * 1000);
    expect(status.streamInfo.config.max_age).toBe(24 * 60 * 60 * 1000 * 1_000_000);
    const other = await openNodes([server.url], 0);
    try {
      await new Kvm(nodes.connections[0]!).create(`${other.prefix}_idempotency`, { history: 1, ttl: 3_600_000 });
      await expect(other.open()).rejects.toThrow(/ttl 3600000 ms, expected 86400000 ms/);
    } finally {
      await other.close();
    }
  });
});

describe('cluster store: the journal is bounded', () => {
  it('its stream keeps 90 days and 100,000 entries per user subject, also a stream made before the limits existed', async () => {
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const { JOURNAL } = await import('../../../../src/tuning.js');
    const jsm = await jetstreamManager(nodes.connections[0]!);
    const stream = `${nodes.prefix}_journal`;
    const expected = { max_age: JOURNAL.retentionMs * 1_000_000, max_msgs_per_subject: JOURNAL.maxEntriesPerUser };
    expect((await jsm.streams.info(stream)).config).toMatchObject(expected);
    await jsm.streams.update(stream, { max_age: 0, max_msgs_per_subject: -1 });
    await nodes.open();
    expect((await jsm.streams.info(stream)).config).toMatchObject(expected);
  });
});
