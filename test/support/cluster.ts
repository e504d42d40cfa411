/**
 * Test support for cluster mode as users run it: `tradegate serve --cluster` processes on
 * loopback (each with its own data dir, one data key), the records they share written through
 * a NATS store opened in the test process (what `tradegate users/keys/connections --cluster`
 * do), broker logins at a `tradegate sim` process, and the nodes' JSON log lines.
 * Requires dist/ (built by `npm test`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { openNatsStore, type NatsStore } from '../../src/store/nats/index.js';
import { http } from './http.js';

import { addPaperUser } from '../../bench/cluster-setup.js';

export { ownersOf, spread } from '../../bench/cluster-setup.js';
import { awaitOutput, spawnTradegate, type SimProcess, type Spawned } from './processes.js';
import { TEST_DATA_KEY } from './store.js';

/** One `serve --cluster` process. */
export interface ClusterNodeProcess extends Spawned {
  readonly nodeId: string;
  readonly url: string;
  /** Its JSON log lines so far (pino). */
  logs(): { time: number; msg: string; [k: string]: unknown }[];
  /** SIGKILL, as a crash. */
  crash(): Promise<void>;
  /** SIGTERM (graceful leave). */
  stop(): Promise<number | null>;
}

/** Starts `tradegate serve --cluster SERVERS --node-id ID` and waits until it listens. */
export async function startClusterNode(servers: string[], nodeId: string, env: Record<string, string> = {}): Promise<ClusterNodeProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), `tg-node-${nodeId}-`));
  const p = spawnTradegate(['serve', '--cluster', servers.join(','), '--node-id', nodeId, '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], {
    TRADEGATE_DATA_KEY: TEST_DATA_KEY,
    // Actors share a couple of worker threads: many connections on a small machine.
    ACTOR_THREADS_MAX: '2',
    ...env,
  });
  void p.exited.then(() => rmSync(dataDir, { recursive: true, force: true }));
  // A node that never comes up must not linger (retrying NATS for ever, loading the machine).
  const m = await awaitOutput(p, /^listening (\S+)$/m, 60_000).catch(async (err: unknown) => {
    if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await p.exited;
    throw err;
  });
  return {
    ...p,
    nodeId,
    url: m[1]!,
    logs() {
      const out: { time: number; msg: string }[] = [];
      for (const line of p.output().split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const rec = JSON.parse(line) as { time: string | number; msg: string };
          out.push({ ...rec, time: typeof rec.time === 'number' ? rec.time : Date.parse(rec.time) });
        } catch {
          // a line cut in the middle of a write
        }
      }
      return out;
    },
    async crash() {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
      await p.exited;
    },
    async stop() {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGTERM');
      return p.exited;
    },
  };
}

/** The cluster's records, written from the test process (as the CLI with --cluster does). */
export interface ClusterRecords {
  store: NatsStore;
  close(): Promise<void>;
}

/** Opens the cluster's NATS store from the test process. */
export async function openClusterRecords(servers: string[]): Promise<ClusterRecords> {
  const nc: NatsConnection = await connect({ servers, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  const dir = mkdtempSync(join(tmpdir(), 'tg-records-'));
  const store = await openNatsStore({ nc, dataKey: TEST_DATA_KEY, dataDir: dir, replicas: servers.length >= 3 ? 3 : 1 });
  return {
    store,
    async close() {
      await store.close();
      await nc.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A user with a key and a paper connection at the sim, set up through the cluster's records. */
export interface ClusterUser {
  name: string;
  userId: string;
  apiKey: string;
  keyId: string;
  connectionId: string;
  brokerUser: string;
  brokerPassword: string;
  /** Broker account ids. */
  accounts: string[];
}

/** Creates a broker login at the sim, then the user, its key and its connection in the cluster store. */
export async function addClusterUser(store: NatsStore, sim: SimProcess, name: string): Promise<ClusterUser> {
  const u = await addPaperUser(store, sim.baseUrl, name, 1);
  return { name, userId: u.userId, apiKey: u.keys[0]!.key, keyId: u.keys[0]!.id, connectionId: u.connectionId, brokerUser: u.brokerUser, brokerPassword: u.brokerPassword, accounts: [u.accountId] };
}

/** Polls node `url` until the user's connection is CONNECTED with its accounts; resolves with the ms it took. */
export async function connectedOn(url: string, apiKey: string, withinMs: number): Promise<number> {
  const start = Date.now();
  for (;;) {
    const r = await http(url, 'GET', '/api/v1/connections', { key: apiKey, timeoutMs: 5000 }).catch(() => undefined);
    const list = (r?.json?.data ?? []) as { status: string; accountIds: string[] }[];
    if (list.length > 0 && list.every((c) => c.status === 'CONNECTED' && c.accountIds.length > 0)) return Date.now() - start;
    if (Date.now() - start > withinMs) throw new Error(`not CONNECTED on ${url} within ${withinMs} ms: ${r?.text}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** Orders the paper broker holds for a login, by clOrdId. */
export async function brokerOrders(sim: SimProcess, brokerUser: string): Promise<{ id: number; clOrdId?: string; accountId: number }[]> {
  const state = await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(brokerUser)}`);
  if (state.status !== 200) throw new Error(`sim state: ${state.status} ${state.text}`);
  return state.json.orders as { id: number; clOrdId?: string; accountId: number }[];
}
