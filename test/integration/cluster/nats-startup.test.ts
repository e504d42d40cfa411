/**
 * A node started while its NATS cluster cannot create replicated buckets yet (no JetStream quorum:
 * two of three servers down, as when nodes and NATS start together, or the cluster is still busy
 * with other nodes' streams) waits for NATS instead of exiting on the first JetStream timeout,
 * and opens its store once the cluster can answer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNatsStore, type NatsStore } from '../../../src/store/nats/index.js';
import { startNatsCluster, type NatsCluster } from '../../support/nats.js';
import { TEST_DATA_KEY } from '../../support/store.js';

let cluster: NatsCluster;
let nc: NatsConnection | undefined;
let store: NatsStore | undefined;
const dir = mkdtempSync(join(tmpdir(), 'tg-nats-startup-'));

beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);

afterAll(async () => {
  await store?.close();
  await nc?.close();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('cluster store start-up while NATS has no JetStream quorum', () => {
  it('waits (no exit on the first timeout), then opens once the servers are back, and works', async () => {
    await Promise.all([cluster.servers[1]!.stop(), cluster.servers[2]!.stop()]);
    nc = await connect({ servers: [cluster.urls[0]!], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    let settled: 'opened' | Error | undefined;
    const opening = openNatsStore({ nc, dataKey: TEST_DATA_KEY, dataDir: dir, prefix: `st${process.pid}`, replicas: 3 }).then(
      (s) => ((settled = 'opened'), s),
      (err: unknown) => {
        settled = err instanceof Error ? err : new Error(String(err));
        throw err;
      },
    );
    opening.catch(() => undefined);
    // Longer than one JetStream call's deadline (2 s): before, the first timeout ended the start.
    await new Promise((r) => setTimeout(r, 6000));
    expect(settled).toBeUndefined();

    await Promise.all([cluster.servers[1]!.restart(), cluster.servers[2]!.restart()]);
    store = await opening;
    expect(settled).toBe('opened');
    const user = await store.users.create({ name: 'after-quorum' });
    expect(store.users.byName('after-quorum')?.id).toBe(user.id);
  }, 90_000);
});
