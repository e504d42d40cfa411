/** Test helper: several cluster-mode stores ("nodes"), each over its own NATS connection, sharing one bucket prefix. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { randomBase62 } from '../../../../src/store/crypto.js';
import { openNatsStore, type NatsStore, type NatsStoreOptions } from '../../../../src/store/nats/index.js';
import { TEST_DATA_KEY } from '../../../support/store.js';

export interface Nodes {
  stores: NatsStore[];
  connections: NatsConnection[];
  prefix: string;
  /** Opens one more node on the same prefix (e.g. to check what a fresh node sees). */
  open(servers?: string[], opts?: Partial<NatsStoreOptions>): Promise<NatsStore>;
  close(): Promise<void>;
}

/**
 * Opens `count` nodes. With several server URLs, node i prefers server i (its list is rotated),
 * so the nodes talk to different servers and fail over to the others.
 */
export async function openNodes(urls: string[], count: number, opts: Partial<NatsStoreOptions> = {}): Promise<Nodes> {
  const dir = mkdtempSync(join(tmpdir(), 'tradegate-nodes-'));
  const prefix = opts.prefix ?? `t${randomBase62(12)}`;
  const connections: NatsConnection[] = [];
  const stores: NatsStore[] = [];
  const open = async (servers = urls, extra: Partial<NatsStoreOptions> = {}): Promise<NatsStore> => {
    // No randomisation: node i keeps preferring its own server (and reconnects fast in tests).
    const nc = await connect({ servers, noRandomize: true, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    connections.push(nc);
    const store = await openNatsStore({ nc, prefix, dataDir: dir, dataKey: TEST_DATA_KEY, ...opts, ...extra });
    stores.push(store);
    return store;
  };
  const nodes: Nodes = {
    stores,
    connections,
    prefix,
    open,
    async close() {
      await Promise.all(stores.map((s) => s.close()));
      await Promise.all(connections.map((c) => c.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (let i = 0; i < count; i++) await open([...urls.slice(i % urls.length), ...urls.slice(0, i % urls.length)]);
  } catch (err) {
    await nodes.close();
    throw err;
  }
  return nodes;
}

/** Resolves with the ms it took until `check` holds (checked every millisecond); rejects after `withinMs`. */
export async function msUntil(check: () => boolean, withinMs: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (check()) return performance.now() - start;
    if (performance.now() - start > withinMs) throw new Error(`condition not met within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
}
