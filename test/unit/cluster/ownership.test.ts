/**
 * Node leases and connection ownership against a real nats-server: every enabled connection
 * runs on exactly one node, spread by fair share; a dead node's connections move after its
 * lease ends; a node cut off from NATS stops its actors before any other node starts them
 * (checked with timestamps); a leaving node hands its connections over at once. Short lease
 * timings keep it quick; production timings are exercised by test/integration/cluster.
 */
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NodeLease, type LeaseTiming } from '../../../src/cluster/node-lease.js';
import { Ownership, type ActorHost, type OwnershipTiming } from '../../../src/cluster/ownership.js';
import { createLogger } from '../../../src/log.js';
import { randomBase62 } from '../../../src/store/crypto.js';
import { startNats, type NatsServer } from '../../support/nats.js';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.js';

const TIMING: LeaseTiming = { leaseMs: 1500, renewMs: 200, renewRetryMs: 100, holderMarginMs: 400, takerMarginMs: 200, kvTimeoutMs: 500, unreachableMs: 600, placementCheckMs: 60_000 };
const SCAN: OwnershipTiming = { scanMs: 100, overShareDelayMs: 300, rebalanceMs: 1000, kvTimeoutMs: 500 };
const logger = createLogger('silent');

interface HostEvent {
  node: string;
  id: string;
  kind: 'start' | 'stop';
  epoch?: number;
  resume?: boolean;
  disabled?: boolean;
  at: number;
}

let nats: NatsServer & { stopAndRemove(): Promise<void> };
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await nats?.stopAndRemove();
});

interface TestNode {
  name: string;
  nc: NatsConnection;
  lease: NodeLease;
  ownership: Ownership;
  running: Set<string>;
  /** Every onReach call, in order. */
  reach: { reachable: boolean; at: number; holding: boolean }[];
  /** Simulates SIGKILL: no more renewals, scans or releases. */
  die(): Promise<void>;
}

/** One cluster: nodes sharing a bucket prefix, the enabled connections, and every start/stop in order. */
function cluster() {
  const prefix = `t${randomBase62(10)}`;
  const enabled: string[] = [];
  /** Connections stored but disabled (enabled ones are stored too). */
  const disabled = new Set<string>();
  /** The highest epoch the event feed has seen per connection (tests set it). */
  const epochSeen = new Map<string, number>();
  const log: HostEvent[] = [];
  const nodes: TestNode[] = [];
  const proxies: TcpProxy[] = [];

  async function startNode(name: string, opts: { viaProxy?: boolean; scan?: OwnershipTiming; lease?: LeaseTiming; ownershipAfterMs?: number } = {}): Promise<TestNode & { proxy?: TcpProxy }> {
    let proxy: TcpProxy | undefined;
    if (opts.viaProxy) proxies.push((proxy = await startTcpProxy(nats.port)));
    const nc = await connect({ servers: `nats://127.0.0.1:${proxy?.port ?? nats.port}`, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    const kvm = new Kvm(jetstream(nc, { timeout: 500 }));
    const running = new Set<string>();
    const host: ActorHost = {
      async start(id, epoch, resume) {
        log.push({ node: name, id, kind: 'start', epoch, resume, at: Date.now() });
        running.add(id);
      },
      async stop(id, disabled) {
        running.delete(id);
        log.push({ node: name, id, kind: 'stop', disabled, at: Date.now() });
      },
    };
    let ownership: Ownership | undefined;
    const reach: TestNode['reach'] = [];
    const lease: NodeLease = await NodeLease.start({
      nc, kvm, prefix, replicas: 1, nodeId: name, logger, timing: opts.lease ?? TIMING,
      onLapse: () => void ownership?.stopAll(),
      onRestore: () => ownership?.scanSoon(),
      onReach: (reachable) => reach.push({ reachable, at: Date.now(), holding: lease.holding }),
    });
    // A node still starting: its lease is live, but it takes nothing yet.
    if (opts.ownershipAfterMs) await new Promise((r) => setTimeout(r, opts.ownershipAfterMs));
    ownership = await Ownership.start({ nc, kvm, prefix, replicas: 1, lease, host, logger, enabled: () => [...enabled],
      exists: (id) => enabled.includes(id) || disabled.has(id),
      epochSeen: (id) => epochSeen.get(id) ?? 0,
      timing: opts.scan ?? SCAN,
    });
    const node = {
      name, nc, lease, ownership, running, proxy, reach,
      async die() {
        lease.close();
        ownership!.close();
        await nc.close();
      },
    };
    nodes.push(node);
    return node;
  }

  return {
    enabled,
    disabled,
    epochSeen,
    log,
    nodes,
    startNode,
    /** Which nodes run each connection right now. */
    runners(): Map<string, string[]> {
      const out = new Map<string, string[]>(enabled.map((id) => [id, []]));
      for (const n of nodes) for (const id of n.running) out.get(id)?.push(n.name);
      return out;
    },
    async close() {
      for (const n of nodes) {
        n.lease.close();
        n.ownership.close();
        await n.nc.close().catch(() => undefined);
      }
      for (const p of proxies) await p.close();
    },
  };
}

type Cluster = ReturnType<typeof cluster>;
let c: Cluster | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

async function until(check: () => boolean, withinMs: number, what: string): Promise<number> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - start;
}

const everyOnce = (cl: Cluster) => [...cl.runners().values()].every((r) => r.length === 1);

describe('connection ownership', () => {
  it('runs every enabled connection on exactly one node, spread by fair share', async () => {
    c = cluster();
    await Promise.all(['a', 'b', 'c'].map((n) => c!.startNode(n)));
    c.enabled.push(...Array.from({ length: 6 }, (_, i) => `con_${i}`));
    await until(() => everyOnce(c!), 5000, 'every connection running once');
    // Each node took its share (6 / 3), none more.
    expect(c.nodes.map((n) => n.running.size)).toEqual([2, 2, 2]);
    expect(c.log.every((e) => e.kind === 'start' && e.epoch === 1 && e.resume === false)).toBe(true);
    // A connection added later is picked up; one disabled is stopped with DISABLED where it ran.
    c.enabled.push('con_new');
    await until(() => everyOnce(c!), 3000, 'the new connection running');
    const gone = c.enabled.shift()!;
    await until(() => c!.log.some((e) => e.id === gone && e.kind === 'stop'), 3000, 'the disabled connection stopped');
    expect(c.log.find((e) => e.id === gone && e.kind === 'stop')?.disabled).toBe(true);
    // Its owner record goes after the actor stopped.
    await until(() => !c!.nodes.some((n) => n.ownership.ownerOf(gone)), 3000, 'the owner record deleted');
  });

  it('spreads the actors of a cluster started node by node: a busy node hands its excess to newcomers', async () => {
    c = cluster();
    c.enabled.push(...Array.from({ length: 6 }, (_, i) => `con_${i}`));
    const a = await c.startNode('a');
    await until(() => a.running.size === 6, 5000, 'a running everything');
    await c.startNode('b');
    await c.startNode('c');
    await until(() => c!.nodes.every((n) => n.running.size === 2), 8000, 'two each');
    expect(everyOnce(c)).toBe(true);
    // Moved under a new epoch, as a resumed connection; none ran on two nodes at once.
    const moves = c.log.filter((e) => e.kind === 'start' && e.node !== 'a');
    expect(moves).toHaveLength(4);
    for (const m of moves) {
      const stop = c.log.find((e) => e.kind === 'stop' && e.node === 'a' && e.id === m.id)!;
      expect(stop.at).toBeLessThanOrEqual(m.at);
      expect(m).toMatchObject({ epoch: 2, resume: true });
    }
  });

  it('hands connections to a joining node once it has been live a rebalance period, not while it is still starting (cluster re-probe: the freed ones went back to the giver, or on to a third node, two moves for one join)', async () => {
    c = cluster();
    c.enabled.push(...Array.from({ length: 4 }, (_, i) => `con_${i}`));
    const a = await c.startNode('a');
    await until(() => a.running.size === 4, 5000, 'a running everything');
    // Every actor of a has run past the rebalance period: it would hand over at once.
    await new Promise((r) => setTimeout(r, SCAN.rebalanceMs));
    const joined = Date.now();
    const b = await c.startNode('b', { ownershipAfterMs: 700 });
    await until(() => a.running.size === 2 && b.running.size === 2, 8000, 'two each');
    await new Promise((r) => setTimeout(r, 2 * SCAN.rebalanceMs));
    expect(a.running.size).toBe(2);
    // One move per connection handed over, all to b, none taken back by a, none before b settled.
    const stops = c.log.filter((e) => e.kind === 'stop');
    expect(stops.map((e) => e.node)).toEqual(['a', 'a']);
    expect(c.log.filter((e) => e.kind === 'start' && e.node === 'a')).toHaveLength(4);
    expect(c.log.filter((e) => e.kind === 'start' && e.node === 'b').map((e) => e.id).sort()).toEqual(stops.map((e) => e.id).sort());
    for (const e of stops) expect(e.at - joined).toBeGreaterThanOrEqual(SCAN.rebalanceMs - 50);
  });

  it('hands its whole excess over in one go, not part now and the rest one rebalance period later', async () => {
    c = cluster();
    const rebalanceMs = 2000;
    // A lease that survives a busy machine: a lapse would stop a's actors for another reason.
    const timing = { scan: { ...SCAN, rebalanceMs }, lease: { ...TIMING, leaseMs: 6000, holderMarginMs: 1000, takerMarginMs: 500, kvTimeoutMs: 2000 } };
    const a = await c.startNode('a', timing);
    // a takes three connections, and three more half a rebalance period later.
    c.enabled.push('con_1', 'con_2', 'con_3');
    await until(() => a.running.size === 3, 5000, 'a running the first three');
    await new Promise((r) => setTimeout(r, rebalanceMs / 2));
    c.enabled.push('con_4', 'con_5', 'con_6');
    await until(() => a.running.size === 6, 5000, 'a running all six');
    await c.startNode('b', timing);
    await c.startNode('c', timing);
    await until(() => c!.nodes.every((n) => n.running.size === 2), 4 * rebalanceMs, 'two each');
    expect(everyOnce(c)).toBe(true);
    // Four moves, each joiner's two in one handover (before the fix: the three older ones, then
    // one more 2 s later). The joiners may get theirs a rebalance period apart: a node gets
    // connections only once it has been live that long (be85bb1), and c starts after b.
    const handedOver = c.log.filter((e) => e.node === 'a' && e.kind === 'stop');
    expect(handedOver).toHaveLength(4);
    for (const joiner of ['b', 'c']) {
      const times = c.log.filter((e) => e.node === joiner && e.kind === 'start').map((e) => e.at);
      expect(times, joiner).toHaveLength(2);
      expect(Math.max(...times) - Math.min(...times), joiner).toBeLessThan(rebalanceMs / 2);
    }
    // Only actors that have run rebalanceMs moved: the oldest three, and one of the later three once it had.
    const startedAt = new Map(c.log.filter((e) => e.node === 'a' && e.kind === 'start').map((e) => [e.id, e.at]));
    for (const e of handedOver) expect(e.at - startedAt.get(e.id)!).toBeGreaterThanOrEqual(rebalanceMs - 50);
  });

  it('evens out one connection per node too (share 1)', async () => {
    c = cluster();
    c.enabled.push('con_a', 'con_b', 'con_c');
    const a = await c.startNode('a');
    await until(() => a.running.size === 3, 5000, 'a running everything');
    await c.startNode('b');
    await c.startNode('c');
    await until(() => c!.nodes.every((n) => n.running.size === 1), 8000, 'one each');
    expect(everyOnce(c)).toBe(true);
  });

  it('moves a dead node’s connections to the others once its lease has ended, resuming them under a new epoch', async () => {
    c = cluster();
    // Both nodes up before the connections appear: they split them, and nothing is rebalanced during the test.
    const [a] = [await c.startNode('a'), await c.startNode('b')];
    c.enabled.push('con_1', 'con_2', 'con_3', 'con_4');
    await until(() => everyOnce(c!), 5000, 'every connection running once');
    const orphans = [...a!.running];
    expect(orphans.length).toBeGreaterThan(0);
    const killedAt = Date.now();
    await a!.die();
    a!.running.clear();
    const ms = await until(() => everyOnce(c!), 6000, 'the dead node’s connections running elsewhere');
    // Not before the lease (renewed at most renewMs before the kill) plus the taker's margin ended.
    expect(ms).toBeGreaterThanOrEqual(TIMING.leaseMs + TIMING.takerMarginMs - TIMING.renewMs - 50);
    for (const id of orphans) {
      const start = c.log.find((e) => e.id === id && e.kind === 'start' && e.node === 'b' && e.at > killedAt);
      expect(start).toMatchObject({ epoch: 2, resume: true });
    }
  });

  it('a node cut off from NATS stops its actors before any other node starts them', async () => {
    c = cluster();
    const a = await c.startNode('a', { viaProxy: true });
    await c.startNode('b');
    c.enabled.push('con_1', 'con_2', 'con_3', 'con_4');
    await until(() => everyOnce(c!), 5000, 'every connection running once');
    const moved = [...a.running];
    expect(moved.length).toBeGreaterThan(0);
    a.proxy!.pause();
    await until(() => moved.every((id) => c!.log.some((e) => e.id === id && e.kind === 'start' && e.node === 'b')), 8000, 'the connections running on b');
    for (const id of moved) {
      const stoppedOnA = c.log.find((e) => e.id === id && e.node === 'a' && e.kind === 'stop');
      const startedOnB = c.log.find((e) => e.id === id && e.node === 'b' && e.kind === 'start');
      expect(stoppedOnA?.disabled).toBe(false);
      // The ordering the lease exists for, with the margin between the two rules to spare.
      expect(stoppedOnA!.at).toBeLessThan(startedOnB!.at);
      expect(startedOnB!.at - stoppedOnA!.at).toBeGreaterThanOrEqual(TIMING.holderMarginMs + TIMING.takerMarginMs - 150);
    }
    // Back on the network, a learns it lost them: it never starts one from its stale record. It may
    // be handed some by rebalancing (b now runs all four), but only after b stopped them, under a newer epoch.
    a.proxy!.resume();
    const resumedAt = Date.now();
    await until(() => a.lease.holding, 5000, 'a renewing again');
    for (let i = 0; i < 15; i++) {
      // Never on two nodes at once (a handover may leave it on none for a moment).
      expect([...c.runners().values()].every((r) => r.length <= 1)).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const start of c.log.filter((e) => e.node === 'a' && e.kind === 'start' && e.at >= resumedAt)) {
      const onB = c.log.filter((e) => e.node === 'b' && e.id === start.id);
      const bStart = onB.find((e) => e.kind === 'start')!;
      const bStop = onB.find((e) => e.kind === 'stop' && e.at >= bStart.at);
      expect(bStop && bStop.at <= start.at, `${start.id} stopped on b before a started it`).toBe(true);
      expect(start.epoch!).toBeGreaterThan(bStart.epoch!);
    }
  });

  it('a node cut off from NATS says so after unreachableMs, while it still holds its lease, and again once a renewal gets through', async () => {
    c = cluster();
    const a = await c.startNode('a', { viaProxy: true });
    await new Promise((r) => setTimeout(r, 1000));
    expect(a.lease.reachable).toBe(true);
    expect(a.reach).toEqual([]);
    a.proxy!.pause();
    const pausedAt = Date.now();
    await until(() => a.reach.length > 0, 3000, 'a saying it is cut off');
    const [off] = a.reach;
    expect(off).toMatchObject({ reachable: false, holding: true });
    // The last acknowledged renewal was sent at most renewMs before the cut.
    expect(off!.at - pausedAt).toBeGreaterThanOrEqual(TIMING.unreachableMs - TIMING.renewMs - 50);
    expect(a.lease.reachable).toBe(false);
    a.proxy!.resume();
    await until(() => a.reach.length > 1, 5000, 'a saying it is back');
    expect(a.reach[1]).toMatchObject({ reachable: true });
    expect(a.lease.reachable).toBe(true);
  });

  it('a node frozen past its lease knows at once that it does not hold it, before its lapse timer runs (cluster re-probe: a SIGSTOPped node acts on what waited for it)', async () => {
    c = cluster();
    const a = await c.startNode('a');
    await until(() => a.lease.holdsNow(), 3000, 'the lease held');
    // The event loop frozen past the lease, as SIGSTOP or a VM pause does.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, TIMING.leaseMs + 200);
    expect(a.lease.holding).toBe(true);
    expect(a.lease.holdsNow()).toBe(false);
  });

  it('a leaving node hands its connections over at once', async () => {
    c = cluster();
    c.enabled.push('con_1', 'con_2');
    const a = await c.startNode('a');
    await until(() => everyOnce(c!), 5000, 'running');
    await c.startNode('b');
    const before = [...a.running];
    await a.ownership.releaseAll();
    await a.lease.release();
    const ms = await until(() => before.every((id) => c!.nodes[1]!.running.has(id)), 3000, 'b running a’s connections');
    expect(ms).toBeLessThan(TIMING.leaseMs);
    expect(c.log.filter((e) => e.node === 'b' && e.kind === 'start').every((e) => e.resume === true && e.epoch === 2)).toBe(true);
  });

  it('a connection disabled and enabled again resumes above the epoch it had, wherever it moved before (cluster probe: taken again at epoch 1, its events were dropped everywhere and it read DISABLED for good)', async () => {
    c = cluster();
    c.enabled.push('con_1');
    const a = await c.startNode('a');
    await until(() => everyOnce(c!), 5000, 'running on a');
    // One move first: b takes it from a leaving a, under epoch 2.
    const b = await c.startNode('b');
    await a.ownership.releaseAll();
    await a.lease.release();
    await until(() => b.running.has('con_1'), 3000, 'b running it');
    expect(c.log.filter((e) => e.kind === 'start').map((e) => e.epoch)).toEqual([1, 2]);
    // Disabled: stopped (DISABLED); the record stays, free.
    c.enabled.splice(0, 1);
    c.disabled.add('con_1');
    await until(() => c!.log.some((e) => e.kind === 'stop' && e.disabled === true), 3000, 'stopped as disabled');
    await until(() => b.ownership.ownerOf('con_1')?.node === null, 3000, 'the record freed');
    expect(b.ownership.ownerOf('con_1')).toMatchObject({ node: null, epoch: 2 });
    c.disabled.delete('con_1');
    c.enabled.push('con_1');
    await until(() => b.running.has('con_1'), 3000, 'running again');
    expect(c.log.filter((e) => e.kind === 'start').at(-1)).toMatchObject({ epoch: 3 });
  });

  it('a new owner counts on from the highest epoch the events showed, even where the record is gone; a deleted connection’s record goes', async () => {
    c = cluster();
    c.epochSeen.set('con_1', 7);
    c.enabled.push('con_1');
    const a = await c.startNode('a');
    await until(() => a.running.has('con_1'), 5000, 'running');
    expect(c.log.find((e) => e.kind === 'start')).toMatchObject({ epoch: 8 });
    c.enabled.splice(0, 1);
    await until(() => c!.log.some((e) => e.kind === 'stop' && e.disabled === true), 3000, 'stopped');
    await until(() => a.ownership.ownerOf('con_1') === undefined, 3000, 'the record deleted');
  });

  it('refuses a second process under a node id that is still renewed', async () => {
    c = cluster();
    await c.startNode('a');
    await expect(c.startNode('a')).rejects.toThrow(/node id 'a' is in use by a running node/);
  });
});
