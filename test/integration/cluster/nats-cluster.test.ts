/**
 * Cluster mode on a three-server NATS cluster (JetStream replicas 3), what production runs:
 * three `serve --cluster` nodes, a paper broker process and clients that keep placing
 * idempotent orders and reading through every node. One NATS server is stopped gracefully
 * (SIGTERM, as a service manager does), later another one is killed (SIGKILL), in each case
 * the one leading a lease copy. Nothing may be lost (records, stored answers, orders), no
 * actor may stop (the other lease copy keeps renewing through an election), and every node
 * keeps serving: a crash makes requests that need the streams it led wait for JetStream's
 * leader election (4–9 s on 2.9; 503 with Retry-After meanwhile), a graceful stop does not.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clOrdIdFor } from '../../../src/domain/order-plan.js';
import {
  addClusterUser,
  brokerOrders,
  connectedOn,
  openClusterRecords,
  spread,
  startClusterNode,
  type ClusterNodeProcess,
  type ClusterRecords,
  type ClusterUser,
} from '../../support/cluster.js';
import { http } from '../../support/http.js';
import { startNatsCluster, type NatsCluster } from '../../support/nats.js';
import { startSimProcess, type SimProcess } from '../../support/processes.js';
import { openHealthStream, type HealthStream } from '../../support/sse.js';

let nats: NatsCluster;
let sim: SimProcess;
let records: ClusterRecords;
let nc: NatsConnection;
let users: ClusterUser[];
let nodes: ClusterNodeProcess[] = [];
const NODE_ENV = { RATE_LIMIT_PER_MIN: '100000' };

beforeAll(async () => {
  nats = await startNatsCluster(3);
  sim = await startSimProcess();
  records = await openClusterRecords(nats.urls);
  nc = await connect({ servers: nats.urls, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  users = [];
  for (let i = 0; i < 6; i++) users.push(await addClusterUser(records.store, sim, `r${i}`));
  // Each node lists the servers starting from its own. Should one fail to start, the others are stopped too (afterAll).
  const started = await Promise.allSettled([0, 1, 2].map((i) => startClusterNode([...nats.urls.slice(i), ...nats.urls.slice(0, i)], `node${i + 1}`, NODE_ENV)));
  nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  for (const r of started) if (r.status === 'rejected') throw r.reason;
  // Settled: every node runs its share (6 / 3). Any less and rebalancing still has a move to make,
  // which would land during the test and look like an actor moved by the NATS server's loss.
  await spread(nc, users.map((u) => u.connectionId), ['node1', 'node2', 'node3'], 2);
  for (const u of users) await connectedOn(nodes[0]!.url, u.apiKey, 60_000);
}, 180_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await nc?.close();
  await records?.close();
  await sim?.stop();
  await nats?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Which NATS server leads a stream (after an election, once one is elected). */
async function leaderOf(stream: string): Promise<string> {
  const jsm = await jetstreamManager(nc, { timeout: 2000 });
  for (;;) {
    const leader = (await jsm.streams.info(stream).catch(() => undefined))?.cluster?.leader;
    if (leader) return leader;
    await sleep(100);
  }
}

/** Clients placing idempotent orders and reading, on every node in turn; every answer is recorded with its time. */
class Traffic {
  readonly acked = new Map<string, { user: ClusterUser; orderId: string }>();
  readonly keys: { user: ClusterUser; key: string }[] = [];
  /** Every request: when it was answered, and whether it succeeded. */
  readonly results: { at: number; ok: boolean; status: number }[] = [];
  readonly unexpected: string[] = [];
  private running = true;
  private loops: Promise<void>[] = [];

  start(): void {
    this.loops = users.flatMap((u, i) => [this.orders(u, i), this.reads(u, i)]);
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private record(status: number, ok: boolean): void {
    this.results.push({ at: Date.now(), ok, status });
  }

  private async orders(user: ClusterUser, offset: number): Promise<void> {
    for (let n = 0; this.running; n++) {
      const key = `${user.name}-${n}`;
      this.keys.push({ user, key });
      for (let attempt = 0; ; attempt++) {
        const node = nodes[(offset + n + attempt) % nodes.length]!;
        const r = await http(node.url, 'POST', `/api/v1/accounts/${user.accounts[0]}/orders`, {
          key: user.apiKey,
          body: { symbol: 'ES1!', side: 'sell', qty: 1, type: 'limit', price: 9000 },
          headers: { 'idempotency-key': key },
          timeoutMs: 30_000,
        }).catch(() => undefined);
        this.record(r?.status ?? 0, r?.status === 201);
        if (r?.status === 201) {
          this.acked.set(key, { user, orderId: r.json.orderId as string });
          break;
        }
        if (r && ![409, 503, 504].includes(r.status)) this.unexpected.push(`${r.status} ${r.text}`);
        await sleep(200);
      }
      await sleep(200);
    }
  }

  private async reads(user: ClusterUser, offset: number): Promise<void> {
    for (let n = 0; this.running; n++) {
      const node = nodes[(offset + n) % nodes.length]!;
      const r = await http(node.url, 'GET', `/api/v1/accounts/${user.accounts[0]}/working-orders`, { key: user.apiKey, timeoutMs: 30_000 }).catch(() => undefined);
      this.record(r?.status ?? 0, r?.status === 200);
      if (r && ![200, 503, 504].includes(r.status)) this.unexpected.push(`${r.status} ${r.text}`);
      await sleep(200);
    }
  }

  /** The longest stretch (ms) after `from` during which no request succeeded. */
  longestOutage(from: number): number {
    let last = from;
    let worst = 0;
    for (const r of this.results.filter((x) => x.at >= from).sort((a, b) => a.at - b.at)) {
      if (!r.ok) continue;
      worst = Math.max(worst, r.at - last);
      last = r.at;
    }
    return worst;
  }
}

describe('three-server NATS cluster (replicas 3)', () => {
  it('keeps the records, the answers and the orders, never stops an actor, and keeps serving when a NATS server stops or dies', { timeout: 240_000 }, async () => {
    // An answer stored before anything fails, to replay afterwards.
    const first = users[0]!;
    const storedBody = { symbol: 'ES1!', side: 'sell', qty: 2, type: 'limit', price: 9100 };
    const stored = await http(nodes[0]!.url, 'POST', `/api/v1/accounts/${first.accounts[0]}/orders`, { key: first.apiKey, body: storedBody, headers: { 'idempotency-key': 'before' } });
    expect(stored.status).toBe(201);
    const streams: HealthStream[] = await Promise.all(nodes.map((n) => openHealthStream(n.url, first.apiKey)));
    const traffic = new Traffic();
    traffic.start();
    await sleep(2000);

    const outages: Record<string, number> = {};
    const led: Record<string, string[]> = {};
    for (const [how, signal] of [['stopped', 'SIGTERM'], ['killed', 'SIGKILL']] as const) {
      // The nodes keep the two lease copies' leaders on different servers (checked every few seconds).
      let leader = await leaderOf('KV_tradegate_nodes');
      for (const until = Date.now() + 20_000; leader === (await leaderOf('KV_tradegate_nodes2')); leader = await leaderOf('KV_tradegate_nodes')) {
        if (Date.now() > until) throw new Error('the lease copies stay led by one server');
        await sleep(250);
      }
      const server = nats.servers.find((s) => s.name === leader)!;
      const jsm = await jetstreamManager(nc);
      led[how] = [];
      for await (const si of jsm.streams.list()) if (si.cluster?.leader === leader) led[how].push(si.config.name);
      const at = Date.now();
      await server.stop(signal);
      // Long enough for JetStream to elect new leaders (4–9 s after a crash) and for the clients to see it through.
      await sleep(10_000);
      outages[how] = traffic.longestOutage(at);
      await server.restart();
    }
    await traffic.stop();
    console.info(
      `requests: ${traffic.results.length}, failed and retried: ${traffic.results.filter((r) => !r.ok).length}; longest stretch without a successful request: ` +
        `${outages.stopped} ms after a graceful stop, ${outages.killed} ms after a crash (of the leader of ${led.killed!.join(', ')})`,
    );

    // No actor stopped: no node's lease lapsed and no stream saw the connection leave CONNECTED.
    for (const n of nodes) expect(n.logs().filter((l) => l.msg.startsWith('lease lapsed')), n.nodeId).toEqual([]);
    for (const s of streams) expect(s.events.filter((e) => e.type === 'status' && e.status !== 'CONNECTED')).toEqual([]);
    // Health events still reach every node after the NATS servers' losses: the broker drops the connection.
    const from = streams.map((s) => s.events.length);
    expect((await http(sim.controlUrl, 'POST', '/connections/drop', { body: { user: first.brokerUser } })).status).toBe(200);
    // Up to 30 s: a node whose NATS server was just killed and restarted resumes its event feed
    // after reconnecting, which on a loaded CI machine once took over 10 s (fresh-clone CI; the
    // same test passed alone in 30 s). A feed that never resumes still fails here.
    await Promise.all(
      streams.map(async (s, i) => {
        const down = await s.waitFor((e) => e.type === 'status' && e.status === 'RECONNECTING', from[i]!, 30_000);
        await s.waitFor((e) => e.type === 'status' && e.status === 'CONNECTED', down.index + 1, 30_000);
      }),
    );
    for (const s of streams) s.close();
    // Every node kept serving; a graceful stop is invisible, a crash costs at most the election.
    expect(traffic.unexpected).toEqual([]);
    expect(outages.stopped!).toBeLessThan(3000);
    expect(outages.killed!).toBeLessThan(12_000);

    // Nothing lost: every key still verifies on every node, the stored answer replays byte for byte…
    for (const n of nodes) {
      for (const u of users) expect((await http(n.url, 'GET', '/api/v1/me', { key: u.apiKey })).status).toBe(200);
      const replay = await http(n.url, 'POST', `/api/v1/accounts/${first.accounts[0]}/orders`, { key: first.apiKey, body: storedBody, headers: { 'idempotency-key': 'before' } });
      expect(replay.text).toBe(stored.text);
    }
    // …and the broker holds exactly one order per acknowledged key (plus the one placed first).
    expect(traffic.acked.size).toBe(traffic.keys.length);
    for (const u of users) {
      const orders = await brokerOrders(sim, u.brokerUser);
      const mine = [...traffic.acked].filter(([, a]) => a.user === u);
      expect(orders).toHaveLength(mine.length + (u === first ? 1 : 0));
      const byClOrdId = new Map(orders.map((o) => [o.clOrdId, o.id]));
      expect(byClOrdId.size).toBe(orders.length);
      for (const [key, a] of mine) expect(String(byClOrdId.get(clOrdIdFor(u.userId, key)))).toBe(a.orderId);
    }
  });
});
