/**
 * The cluster's store for a CLI command (`users`, `keys`, `connections` with `--cluster`):
 * a short-lived NATS connection and the NATS store, closed when the command is done. Writes
 * reach every node's mirror within milliseconds.
 */
import type { Config } from '../config.js';
import { ConfigError } from '../config.js';
import { clusterReplicas, connectNats } from '../cluster/node.js';
import { natsLogin } from '../cluster/nats-login.js';
import { openNatsStore, type NatsStore } from '../store/nats/index.js';

/** Opens the cluster's store, runs `fn`, and closes the store and the connection. */
export async function withClusterStore<T>(config: Config, servers: string[], fn: (store: NatsStore) => Promise<T>): Promise<T> {
  if (!config.dataKey) throw new ConfigError('cluster mode needs TRADEGATE_DATA_KEY (64 hex characters, the same on every node)');
  const nc = await connectNats(natsLogin(servers), `cli-${process.pid}`);
  try {
    const store = await openNatsStore({ nc, dataKey: config.dataKey, prefix: config.clusterPrefix, replicas: clusterReplicas(config, servers), dataDir: config.dataDir });
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
  }
}
