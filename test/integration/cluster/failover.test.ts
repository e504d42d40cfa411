/**
 * Node loss with real processes: three `serve --cluster` nodes, one nats-server, one paper
 * broker process and 21 users, each with its own connection and a client that keeps placing
 * idempotent orders (retrying each key until it is acknowledged, on whichever node answers).
 * Once rebalancing has spread the connections, the node running the most of them is killed
 * with SIGKILL, three times (restarted in between); every connection it ran is a trial. Each must report CONNECTED on another node
 * within 10 s, SSE subscribers on the surviving nodes must see RECONNECTING then CONNECTED,
 * and at the end the paper broker must hold exactly one order per acknowledged key: 0 lost,
 * 0 duplicated.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clOrdIdFor } from '../../../src/domain/order-plan.js';
import {
  addClusterUser,
  brokerOrders,
  connectedOn,
  openClusterRecords,
  ownersOf,
  spread,
  startClusterNode,
  type ClusterNodeProcess,
  type ClusterRecords,
  type ClusterUser,
} from '../../support/cluster.js';
import { http } from '../../support/http.js';
import { startNats, type NatsServer } from '../../support/nats.js';
import { startSimProcess, type SimProcess } from '../../support/processes.js';
import { openHealthStream, type HealthStream } from '../../support/sse.js';

const USERS = 21;
const KILLS = 3;
const IDS = ['node1', 'node2', 'node3'];
/** Orders in this test are not about the rate limit: each client may retry freely. */
const NODE_ENV = { RATE_LIMIT_PER_MIN: '100000' };

let nats: NatsServer & { stopAndRemove(): Promise<void> };
let sim: SimProcess;
let records: ClusterRecords;
let nc: NatsConnection;
let users: ClusterUser[] = [];
const nodes = new Map<string, ClusterNodeProcess>();
/** Health streams per node id, one per user. */
const streams = new Map<string, Map<string, HealthStream>>();

/**
 * Opens a stream per user on the node. A node just restarted answers 503 CLUSTER_UNAVAILABLE while
 * it catches up with the cluster store ("use another node or retry"): retried for up to 15 s.
 */
async function openStreams(nodeId: string): Promise<void> {
  const node = nodes.get(nodeId)!;
  const byUser = new Map<string, HealthStream>();
  for (const u of users) {
    for (const deadline = Date.now() + 15_000; ; ) {
      try {
        byUser.set(u.name, await openHealthStream(node.url, u.apiKey));
        break;
      } catch (err) {
        if (!String(err).includes('CLUSTER_UNAVAILABLE') || Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
  }
  streams.set(nodeId, byUser);
}

function closeStreams(nodeId: string): void {
  for (const s of streams.get(nodeId)?.values() ?? []) s.close();
  streams.delete(nodeId);
}

beforeAll(async () => {
  nats = await startNats();
  sim = await startSimProcess();
  records = await openClusterRecords([nats.url]);
  nc = await connect({ servers: nats.url });
  users = [];
  for (let i = 0; i < USERS; i++) users.push(await addClusterUser(records.store, sim, `u${i}`));
  const started = await Promise.all(IDS.map((id) => startClusterNode([nats.url], id, NODE_ENV)));
  for (const n of started) nodes.set(n.nodeId, n);
  // The first node up takes every connection; rebalancing then hands a share to each of the others.
  await spread(nc, users.map((u) => u.connectionId), IDS, 5);
  for (const u of users) await connectedOn(started[0]!.url, u.apiKey, 60_000);
  for (const id of IDS) await openStreams(id);
}, 180_000);

afterAll(async () => {
  for (const id of [...streams.keys()]) closeStreams(id);
  await Promise.all([...nodes.values()].map((n) => n.stop()));
  await nc?.close();
  await records?.close();
  await sim?.stop();
  await nats?.stopAndRemove();
});

/** Which node each connection's owner record names right now. */
const owners = () => ownersOf(nc, users.map((u) => u.connectionId));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A client of one user: idempotent orders one after the other, each key retried until acknowledged. */
class OrderClient {
  readonly keys: string[] = [];
  readonly acked = new Map<string, string>();
  /** Acknowledgement times (ms) in order. */
  readonly ackedAt: number[] = [];
  readonly unexpected: string[] = [];
  private running = true;
  private done: Promise<void> | undefined;

  constructor(readonly user: ClusterUser) {}

  start(): void {
    this.done = this.loop();
  }

  /** Finishes the key in flight, then stops. */
  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }

  private async loop(): Promise<void> {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 };
    for (let n = 0; this.running; n++) {
      const key = `${this.user.name}-order-${n}`;
      this.keys.push(key);
      for (let attempt = 0; ; attempt++) {
        const live = [...nodes.values()];
        const node = live[(n + attempt) % live.length]!;
        const r = await http(node.url, 'POST', `/api/v1/accounts/${this.user.accounts[0]}/orders`, {
          key: this.user.apiKey,
          body,
          headers: { 'idempotency-key': key },
          timeoutMs: 30_000,
        }).catch(() => undefined);
        if (r?.status === 201) {
          this.acked.set(key, r.json.orderId as string);
          this.ackedAt.push(Date.now());
          break;
        }
        // Retryable: node gone (no answer), no actor right now (503), unknown outcome (504), the key in flight elsewhere (409).
        if (r && ![409, 503, 504].includes(r.status)) this.unexpected.push(`${r.status} ${r.text}`);
        await sleep(200);
      }
      await sleep(250);
    }
  }
}

describe('node loss', () => {
  it('SIGKILL of the node running the most connections: each moves within 10 s, survivors’ streams see RECONNECTING then CONNECTED, retried orders: 0 lost, 0 duplicated', { timeout: 300_000 }, async () => {
    const clients = users.map((u) => new OrderClient(u));
    for (const c of clients) c.start();
    const trials: { user: string; kill: number; connectedMs: number }[] = [];

    for (let kill = 0; kill < KILLS; kill++) {
      // Let every client acknowledge something first, so each trial spans the kill.
      const before = clients.map((c) => c.acked.size);
      await Promise.all(clients.map(async (c, i) => {
        while (c.acked.size <= before[i]!) await sleep(50);
      }));
      const load = new Map<string, number>();
      for (const owner of (await owners()).values()) if (owner) load.set(owner, (load.get(owner) ?? 0) + 1);
      const victimId = [...load].sort((a, b) => b[1] - a[1])[0]![0];
      const victim = nodes.get(victimId)!;
      const killedAt = Date.now();
      await victim.crash();
      nodes.delete(victimId);
      closeStreams(victimId);
      // The dead node's records still name it: exactly the connections it ran when it died.
      const ownerNow = await owners();
      const movedUsers = users.filter((u) => ownerNow.get(u.connectionId) === victimId);
      expect(movedUsers.length).toBeGreaterThan(0);

      await Promise.all(
        movedUsers.map(async (u) => {
          const connected: number[] = [];
          for (const [nodeId, byUser] of streams) {
            const s = byUser.get(u.name)!;
            const isStatus = (status: string) => (e: { type: string; connectionId?: string; status?: string; ts: number }) =>
              e.type === 'status' && e.connectionId === u.connectionId && e.status === status && e.ts >= killedAt;
            const down = await s.waitFor(isStatus('RECONNECTING'), 0, 20_000);
            const up = await s.waitFor(isStatus('CONNECTED'), down.index + 1, 20_000);
            expect(up.index, `${u.name} on ${nodeId}`).toBeGreaterThan(down.index);
            connected.push(up.event.ts);
          }
          // Both survivors report the same event (one id sequence); the time is the actor's.
          trials.push({ user: u.name, kill, connectedMs: Math.max(...connected) - killedAt });
        }),
      );
      // Every moved connection's client gets an order through on its new node.
      await Promise.all(
        movedUsers.map(async (u) => {
          const c = clients.find((x) => x.user === u)!;
          while (!c.ackedAt.some((t) => t > killedAt)) await sleep(50);
        }),
      );
      const restarted = await startClusterNode([nats.url], victimId, NODE_ENV);
      nodes.set(victimId, restarted);
      await openStreams(victimId);
    }
    await Promise.all(clients.map((c) => c.stop()));

    console.info(
      `${trials.length} trials over ${KILLS} kills; CONNECTED on another node after ${trials.map((t) => t.connectedMs).sort((a, b) => a - b).join(', ')} ms`,
    );
    expect(trials.length).toBeGreaterThanOrEqual(20);
    for (const t of trials) expect(t.connectedMs, `${t.user}, kill ${t.kill}`).toBeLessThanOrEqual(10_000);

    // Against the paper broker's own state: one order per acknowledged key, nothing else.
    for (const c of clients) {
      expect(c.unexpected, c.user.name).toEqual([]);
      expect(c.acked.size, `${c.user.name}: every key acknowledged`).toBe(c.keys.length);
      const orders = await brokerOrders(sim, c.user.brokerUser);
      const byClOrdId = new Map<string, number[]>();
      for (const o of orders) byClOrdId.set(o.clOrdId ?? '', [...(byClOrdId.get(o.clOrdId ?? '') ?? []), o.id]);
      const duplicated = [...byClOrdId].filter(([, ids]) => ids.length > 1);
      expect(duplicated, `${c.user.name}: duplicated orders`).toEqual([]);
      expect(orders, `${c.user.name}: orders at the broker`).toHaveLength(c.keys.length);
      for (const [key, orderId] of c.acked) {
        expect(byClOrdId.get(clOrdIdFor(c.user.userId, key)), `${c.user.name} ${key}`).toEqual([Number(orderId)]);
      }
    }
  });
  it('an account’s guards and kill-switch lock move with its connection: the node that takes it over starts the actor with them', { timeout: 120_000 }, async () => {
    const u = users[0]!;
    const account = u.accounts[0]!;
    const victimId = (await owners()).get(u.connectionId)!;
    const victim = nodes.get(victimId)!;
    const survivor = [...nodes.values()].find((n) => n.nodeId !== victimId)!;
    // Retried while the connection is still starting on its new node (503, as any client would).
    const order = async (qty: number) => {
      for (const deadline = Date.now() + 20_000; ; await sleep(100)) {
        const r = await http(survivor.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: u.apiKey, body: { symbol: 'ES1!', side: 'buy', qty, type: 'limit', price: 4000 } });
        if (r.status !== 503 || Date.now() > deadline) return r;
      }
    };
    expect((await http(survivor.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key: u.apiKey, body: { maxOrderQty: 2 } })).status).toBe(200);
    expect((await http(survivor.url, 'POST', `/api/v1/accounts/${account}/lock`, { key: u.apiKey, body: { flatten: false } })).status).toBe(200);
    for (const deadline = Date.now() + 5000; records.store.guards.get(u.userId, account)?.lock?.guard !== 'kill_switch'; await sleep(25)) {
      if (Date.now() > deadline) throw new Error('the lock was not stored');
    }
    await victim.crash();
    nodes.delete(victimId);
    closeStreams(victimId);
    for (const deadline = Date.now() + 20_000; ; await sleep(100)) {
      const owner = (await owners()).get(u.connectionId);
      if (owner && owner !== victimId) break;
      if (Date.now() > deadline) throw new Error('the connection did not move');
    }
    await connectedOn(survivor.url, u.apiKey, 20_000);
    expect((await order(1)).json).toMatchObject({ code: 'RISK_GUARD', guard: 'kill_switch' });
    expect((await http(survivor.url, 'POST', `/api/v1/accounts/${account}/unlock`, { key: u.apiKey })).status).toBe(200);
    expect((await order(3)).json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_order_qty', limit: 2 });
    expect((await order(1)).status).toBe(201);
  });
});
