/**
 * The cluster store on a three-server NATS JetStream cluster (replicas 3): what a real
 * deployment runs on. Stopping one NATS server must lose nothing, and every node must keep
 * reading and writing through the other two.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsStore } from '../../../src/store/nats/index.js';
import { startNatsCluster, type NatsCluster } from '../../support/nats.js';
import { msUntil, openNodes, type Nodes } from '../../unit/store/nats/nodes.js';

let cluster: NatsCluster;
let nodes: Nodes;
beforeAll(async () => {
  cluster = await startNatsCluster(3);
  nodes = await openNodes(cluster.urls, 3, { replicas: 3 });
});
afterAll(async () => {
  await nodes?.close();
  await cluster?.stop();
});

/** Retries `op` until it succeeds (a write fails while JetStream elects a new stream leader). */
async function eventually<T>(op: () => Promise<T>, withinMs: number): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  for (;;) {
    try {
      return { value: await op(), ms: performance.now() - start };
    } catch (err) {
      if (performance.now() - start > withinMs) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('cluster store on a 3-server NATS cluster', () => {
  it('keeps the records bucket, the idempotency bucket and the journal on all three servers', async () => {
    const jsm = await jetstreamManager(nodes.connections[0]!);
    for (const stream of [`KV_${nodes.prefix}_records`, `KV_${nodes.prefix}_idempotency`, `${nodes.prefix}_journal`]) {
      const info = await jsm.streams.info(stream);
      expect(info.config.num_replicas).toBe(3);
      expect(info.cluster?.replicas).toHaveLength(2);
    }
  });

  it('loses nothing when the server leading the records stream is killed, and every node keeps serving', { timeout: 240_000 }, async () => {
    const [n1, n2, n3] = nodes.stores as [NatsStore, NatsStore, NatsStore];
    const user = await n1.users.create({ name: 'alice', password: 'pw' });
    const keys = [];
    for (let i = 0; i < 20; i++) keys.push(await n1.apiKeys.create({ userId: user.id, name: `k${i}`, scopes: ['read', 'trade'] }));
    for (const k of keys.slice(0, 5)) expect(await n2.apiKeys.revoke(user.id, k.record.id)).toBe(true);
    const conn = await n3.connections.create({
      userId: user.id,
      name: 'paper',
      broker: 'paper',
      environment: 'paper',
      restUrl: 'http://127.0.0.1:1/v1',
      wsUrl: 'ws://127.0.0.1:1/v1/websocket',
      credentials: { name: 'p', password: 'paper-pass' },
    });
    const { token } = await n2.webhookTokens.create({ userId: user.id, name: 'tv', accountId: '7' });
    for (let i = 0; i < 10; i++) {
      const o = await nodes.stores[i % 3]!.idempotency.claim(`user:${user.id}`, `idem-${i}`, 'f'.repeat(64));
      expect(o.kind === 'claimed' && (await o.claim.commit({ status: 201, headers: {}, body: `order-${i}` }))).toBe(true);
    }
    for (let i = 0; i < 10; i++) nodes.stores[i % 3]!.journal.append({ userId: user.id, accountId: '7', kind: 'place-order', request: { i }, outcome: { ok: true } });
    await Promise.all(nodes.stores.map((s) => s.flushed()));

    // Kill the worst server to lose: the one leading the records stream.
    const jsm = await jetstreamManager(nodes.connections[0]!);
    const leader = (await jsm.streams.info(`KV_${nodes.prefix}_records`)).cluster?.leader;
    const victim = cluster.servers.find((s) => s.name === leader)!;
    expect(victim).toBeDefined();
    await victim.stop('SIGKILL');

    // Every node writes again once JetStream has a new leader.
    const writes = await Promise.all(
      nodes.stores.map((s, i) => eventually(() => s.apiKeys.create({ userId: user.id, name: `after-${i}`, scopes: ['read'] }), 30_000)),
    );
    console.info(`after killing the records leader, writes succeeded again after ${writes.map((w) => w.ms.toFixed(0)).join(' / ')} ms (nodes 1/2/3)`);

    // Nothing is lost, on any node or on a node that starts now.
    // A node starting now may have to wait for the other streams' leader elections too.
    const late = (await eventually(() => nodes.open(cluster.urls.filter((u) => u !== victim.url)), 30_000)).value;
    for (const node of [n1, n2, n3, late]) {
      expect(node.users.byName('alice')?.id).toBe(user.id);
      keys.forEach((k, i) => expect(node.apiKeys.verify(k.key) === null).toBe(i < 5));
      expect(node.connections.credentials(conn.id).password).toBe('paper-pass');
      expect(node.webhookTokens.verify(token)?.accountId).toBe('7');
      // The idempotency bucket and the journal are streams of their own, with their own leader
      // elections: on a loaded 2-core machine these took over 30 s once (fresh-clone CI).
      for (let i = 0; i < 10; i++) expect((await eventually(() => node.idempotency.get(`user:${user.id}`, `idem-${i}`), 60_000)).value?.body).toBe(`order-${i}`);
      const journal = (await eventually(() => node.journal.list({ userId: user.id, limit: 100 }), 60_000)).value;
      expect(journal.map((e) => (e.request as { i: number }).i).sort((a, b) => a - b)).toEqual([...Array(10).keys()]);
    }

    // Writes made after the kill reach every node (even one whose watch sat on the dead server:
    // republished writes fail over with the connection), and revocation takes < 100 ms again.
    for (const { value } of writes) await msUntil(() => nodes.stores.every((s) => s.apiKeys.verify(value.key) !== null), 100);
    expect(await n1.apiKeys.revoke(user.id, writes[2]!.value.record.id)).toBe(true);
    const revokedIn = await msUntil(() => n2.apiKeys.verify(writes[2]!.value.key) === null && n3.apiKeys.verify(writes[2]!.value.key) === null, 100);
    console.info(`a revocation after the kill reached the other nodes in ${revokedIn.toFixed(1)} ms`);

    // Exactly one of 50 concurrent claims still wins.
    const outcomes = (
      await eventually(() => Promise.all(Array.from({ length: 50 }, (_, i) => nodes.stores[i % 3]!.idempotency.claim(`user:${user.id}`, 'after-kill', 'f'.repeat(64)))), 30_000)
    ).value;
    expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);

    // The killed server comes back and catches up.
    await victim.restart();
    const back = (await eventually(() => nodes.open([victim.url]), 30_000)).value;
    await msUntil(() => back.apiKeys.verify(writes[0]!.value.key) !== null, 15_000);
    expect(back.apiKeys.verify(keys[0]!.key)).toBeNull();
  });
});
