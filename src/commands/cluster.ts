/**
 * `tradegate cluster import --data-dir DIR [--cluster nats://…]`: moves a single-node data
 * dir (LMDB) into a cluster's NATS store (README "Running a cluster"). The source is opened
 * with its own key (its `data.key` file, else TRADEGATE_DATA_KEY); the cluster with
 * TRADEGATE_DATA_KEY. Safe to run again: records already there are left as they are.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../config.js';
import { DATA_KEY_FILE } from '../store/crypto.js';
import { LMDB_DIR, openStore } from '../store/index.js';
import type { ImportReport } from '../store/nats/import.js';
import { withClusterStore } from './cluster-store.js';
import { note, parseCommand, print, runCommand, table, UsageError } from './store-command.js';

const USAGE = 'tradegate cluster import --data-dir DIR [--cluster nats://host:4222[,…]] [--json]   (TRADEGATE_DATA_KEY: the cluster\'s data key)';

function summary(report: ImportReport): string {
  const rows = Object.entries(report).map(([kind, c]) => [kind, String(c.added), String(c.present), String(c.conflicts.length)]);
  return table(['RECORDS', 'ADDED', 'ALREADY THERE', 'CONFLICTS'], rows);
}

/** Entry point of `tradegate cluster`. */
export function run(argv: string[]): Promise<number> {
  return runCommand('cluster', USAGE, async () => {
    const { values, positionals } = parseCommand(argv, { json: { type: 'boolean' } });
    const [sub, ...rest] = positionals;
    if (sub !== 'import') throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'missing subcommand');
    if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);
    if (!values['data-dir']) throw new UsageError('--data-dir is required (the single-node data dir to import)');
    const config = loadConfig({ 'data-dir': values['data-dir'], cluster: values.cluster });
    if (!config.cluster) throw new UsageError('--cluster (or TRADEGATE_CLUSTER) is required');
    if (!existsSync(join(config.dataDir, LMDB_DIR))) throw new UsageError(`${config.dataDir} holds no tradegate store (${LMDB_DIR})`);
    // The data dir's own key file wins: TRADEGATE_DATA_KEY is the cluster's key.
    const ownKey = existsSync(join(config.dataDir, DATA_KEY_FILE));
    const source = await openStore({ dataDir: config.dataDir, ...(!ownKey && config.dataKey && { dataKey: config.dataKey }) });
    let report: ImportReport;
    try {
      const dump = source.dump();
      report = await withClusterStore(config, config.cluster, (store) => store.importDump(dump));
    } finally {
      await source.close();
    }
    const conflicts = Object.values(report).flatMap((c) => c.conflicts);
    if (values.json) print(JSON.stringify(report));
    else {
      print(summary(report));
      for (const c of conflicts) note(`conflict: ${c}`);
    }
    return conflicts.length > 0 ? 1 : 0;
  });
}
