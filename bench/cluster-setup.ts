/**
 * The systems `bench cluster` compares, all trading at one `tradegate sim` process: a
 * single-node `tradegate serve` on LMDB, one `serve --cluster` node, and three of them, the
 * cluster ones on a nats-server of their own. Each deployment gets its own users, keys and
 * paper connections, written straight into its store (LMDB is multi-process; the NATS store is
 * what `tradegate … --cluster` commands write to).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openStore, type Store } from '../src/store/index.js';
import { openNatsStore } from '../src/store/nats/index.js';
import { freePort, paperControl, Service, waitFor } from './service.js';

/** The data key every node of the bench cluster shares (a bench-only value, not a secret). */
const BENCH_DATA_KEY = 'be'.repeat(32);

/** A `tradegate sim` process (the shared paper broker). */
export class SimBroker {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  /** Starts the paper broker with its price walk off. */
  static async start(): Promise<SimBroker> {
    const port = await freePort();
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'tradegate.js'), 'sim', '--port', String(port), '--price-step-ms', '0', '--log-level', 'warn'], {
      cwd: PACKAGE_ROOT,
      stdio: 'ignore',
    });
    const sim = new SimBroker(child, `http://127.0.0.1:${port}`);
    await waitFor('the paper broker', 20_000, async () => ((await fetch(`${sim.url}/control/prices`).catch(() => undefined))?.ok ? true : undefined));
    return sim;
  }

  /** Calls the control API (`/control/...`). */
  control<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    return paperControl<T>(this.url, method, path, body);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

/** One user of a deployment: its broker account, connection and API keys. */
export interface BenchUser {
  accountId: string;
  connectionId: string;
  keys: string[];
}

/** A user with a login at a paper broker, its connection and API keys (read and trade). */
export interface PaperUser {
  userId: string;
  brokerUser: string;
  /** The login's password at the paper broker. */
  brokerPassword: string;
  accountId: string;
  connectionId: string;
  keys: { id: string; key: string }[];
}

/** Creates a login with one account at the paper broker, then in `store` the user, its paper connection and `keys` API keys. */
export async function addPaperUser(store: Store, brokerUrl: string, name: string, keys: number): Promise<PaperUser> {
  const brokerUser = `${name}-${randomBytes(3).toString('hex')}`;
  const password = randomBytes(12).toString('base64url');
  const login = await paperControl<{ accounts: { id: number }[] }>(brokerUrl, 'POST', '/users', { name: brokerUser, password, accounts: [{ name: `${brokerUser}-A` }] });
  const user = await store.users.create({ name });
  const connection = await store.connections.create({
    userId: user.id,
    name: 'paper',
    broker: 'paper',
    environment: 'paper',
    restUrl: `${brokerUrl}/v1`,
    wsUrl: `${brokerUrl.replace(/^http/, 'ws')}/v1/websocket`,
    credentials: { name: brokerUser, password },
  });
  const created: PaperUser['keys'] = [];
  for (let k = 0; k < keys; k += 50) {
    const batch = Array.from({ length: Math.min(50, keys - k) }, () => store.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read', 'trade'] }));
    for (const c of await Promise.all(batch)) created.push({ id: c.record.id, key: c.key });
  }
  return { userId: user.id, brokerUser, brokerPassword: password, accountId: String(login.accounts[0]!.id), connectionId: connection.id, keys: created };
}

/** `users` paper users with `keysPerUser` keys each, for one deployment. */
async function populate(store: Store, sim: SimBroker, label: string, users: number, keysPerUser: number): Promise<BenchUser[]> {
  const out: BenchUser[] = [];
  for (let u = 0; u < users; u++) {
    const p = await addPaperUser(store, sim.url, `${label}-${u}`, keysPerUser);
    out.push({ accountId: p.accountId, connectionId: p.connectionId, keys: p.keys.map((k) => k.key) });
  }
  await store.flushed();
  return out;
}

/** Which node each connection's owner record names (null: free), read from the cluster's owners bucket. */
export async function ownersOf(nc: NatsConnection, connectionIds: string[], prefix = 'tradegate'): Promise<Map<string, string | null>> {
  const kv = await new Kvm(nc).open(`${prefix}_owners`);
  const out = new Map<string, string | null>();
  for (const id of connectionIds) {
    const e = await kv.get(`owner.${id}`);
    out.set(id, e?.operation === 'PUT' ? e.json<{ node: string | null }>().node : null);
  }
  return out;
}

/** Waits until every node in `nodeIds` runs at least `atLeast` of the connections (rebalancing spreads a cluster started node by node). */
export async function spread(nc: NatsConnection, connectionIds: string[], nodeIds: string[], atLeast: number, withinMs = 60_000, prefix = 'tradegate'): Promise<void> {
  for (const deadline = Date.now() + withinMs; ; ) {
    const load = new Map<string, number>();
    for (const owner of (await ownersOf(nc, connectionIds, prefix)).values()) if (owner) load.set(owner, (load.get(owner) ?? 0) + 1);
    if (nodeIds.every((id) => (load.get(id) ?? 0) >= atLeast)) return;
    if (Date.now() > deadline) throw new Error(`connections not spread: ${JSON.stringify(Object.fromEntries(load))}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A deployment under test: its HTTP origins (one per node) and its users. */
export interface Deployment {
  readonly label: string;
  readonly nodes: Service[];
  readonly users: BenchUser[];
  stop(): Promise<void>;
}

/** Waits until every node reports every user's connection CONNECTED with its account. */
async function ready(nodes: Service[], users: BenchUser[]): Promise<void> {
  for (const node of nodes) {
    for (const u of users) {
      await waitFor(`connection ${u.connectionId} CONNECTED on ${node.origin}`, 60_000, async () => {
        const res = await node.api<{ data?: { id: string; status: string; accountIds: string[] }[] }>('GET', '/api/v1/connections', u.keys[0]);
        const c = res.status === 200 ? res.body.data?.find((x) => x.id === u.connectionId) : undefined;
        return c?.status === 'CONNECTED' && c.accountIds.includes(u.accountId) ? true : undefined;
      }, 200);
    }
  }
}

/** A single-node `tradegate serve` (LMDB, no embedded broker) trading at the shared sim. */
export async function singleNode(sim: SimBroker, users: number, keysPerUser: number): Promise<Deployment> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tradegate-bench-single-'));
  const store = await openStore({ dataDir });
  let populated: BenchUser[];
  try {
    populated = await populate(store, sim, 'single', users, keysPerUser);
  } finally {
    await store.close();
  }
  // Connections are started when the service starts, so they are written first.
  const node = await Service.start({ serveArgs: [], dataDir });
  await ready([node], populated).catch(async (err: unknown) => {
    await node.stop();
    throw err;
  });
  return { label: 'single node', nodes: [node], users: populated, stop: () => node.stop() };
}

/** `count` `serve --cluster` nodes on one nats-server (URL given), under their own bucket prefix. */
export async function clusterNodes(natsUrl: string, sim: SimBroker, count: number, users: number, keysPerUser: number): Promise<Deployment> {
  const prefix = `bench${count}${Math.random().toString(36).slice(2, 6)}`;
  const nc: NatsConnection = await connect({ servers: natsUrl });
  const dir = await mkdtemp(join(tmpdir(), 'tradegate-bench-records-'));
  let populated: BenchUser[];
  try {
    const store = await openNatsStore({ nc, prefix, dataKey: BENCH_DATA_KEY, dataDir: dir });
    try {
      populated = await populate(store, sim, `c${count}`, users, keysPerUser);
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
    await rm(dir, { recursive: true, force: true });
  }
  const env = { TRADEGATE_DATA_KEY: BENCH_DATA_KEY, TRADEGATE_CLUSTER_PREFIX: prefix, TRADEGATE_CLUSTER: natsUrl };
  const ids = Array.from({ length: count }, (_, i) => `${prefix}-n${i + 1}`);
  const started = await Promise.allSettled(ids.map((id) => Service.start({ serveArgs: ['--node-id', id], env })));
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async (): Promise<void> => void (await Promise.all(nodes.map((n) => n.stop())));
  try {
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    // The first node up runs every connection until rebalancing hands each node its share.
    const watch = await connect({ servers: natsUrl });
    try {
      await spread(watch, populated.map((u) => u.connectionId), ids, Math.floor(users / count), 60_000, prefix);
    } finally {
      await watch.close();
    }
    await ready(nodes, populated);
  } catch (err) {
    await stop();
    throw err;
  }
  return { label: `${count} cluster node${count > 1 ? 's' : ''}`, nodes, users: populated, stop };
}
