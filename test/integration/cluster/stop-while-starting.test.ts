/**
 * A `serve --cluster` node told to stop (SIGTERM) while it still waits for NATS stops at once,
 * with exit code 0, instead of finishing the up-to-60 s start-up wait first: a container
 * orchestrator stopping a node whose NATS is down must not have to kill it.
 *
 * Real processes: the node, and for the second case a three-server NATS cluster with two servers
 * down, so that the node connects but its store keeps waiting to create replicated buckets.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePorts, startNatsCluster, type NatsCluster } from '../../support/nats.js';
import { awaitOutput, spawnTradegate, type Spawned } from '../../support/processes.js';
import { TEST_DATA_KEY } from '../../support/store.js';

const spawned: Spawned[] = [];
const clusters: NatsCluster[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const p of spawned.splice(0)) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  for (const c of clusters.splice(0)) await c.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function node(url: string, env: Record<string, string> = {}): Spawned {
  const dataDir = mkdtempSync(join(tmpdir(), 'tg-stop-starting-'));
  dirs.push(dataDir);
  const p = spawnTradegate(['serve', '--cluster', url, '--node-id', 'waiting', '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], { TRADEGATE_DATA_KEY: TEST_DATA_KEY, ...env });
  spawned.push(p);
  return p;
}

/** SIGTERM, then how long until the process exited, and its code. */
async function stopTimed(p: Spawned): Promise<{ ms: number; code: number | null }> {
  const t0 = performance.now();
  p.proc.kill('SIGTERM');
  const code = await Promise.race([p.exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 15_000))]);
  if (code === 'late') throw new Error(`still running 15 s after SIGTERM:\n${p.output()}`);
  return { ms: performance.now() - t0, code };
}

describe('a cluster node stopped while it waits for NATS', () => {
  it('stops at once when no NATS server is reachable yet', async () => {
    const [port] = await freePorts(1);
    const p = node(`nats://127.0.0.1:${port}`);
    await awaitOutput(p, /connecting to NATS: NATS not ready; retrying/, 20_000);
    const { ms, code } = await stopTimed(p);
    expect(code).toBe(0);
    // The retry pause is up to 2 s and a connection attempt to a closed port fails at once.
    expect(ms).toBeLessThan(3_000);
    expect(p.output()).toMatch(/^stopped$/m);
    expect(p.output()).toContain('stopped during start-up');
  }, 40_000);

  it('stops at once when NATS answers but its JetStream has no quorum yet (the store is opening)', async () => {
    // Two of three servers down: the node connects, and its store waits for JetStream (no meta
    // leader) or for its buckets, inside the node's start.
    const nats = await startNatsCluster(3);
    clusters.push(nats);
    await Promise.all([nats.servers[1]!.stop(), nats.servers[2]!.stop()]);
    const p = node(nats.urls[0]!, { TRADEGATE_CLUSTER_REPLICAS: '3' });
    await awaitOutput(p, /"component":"nats-store".*(reaching JetStream|opening KV bucket \S+): NATS not ready; retrying/, 30_000);
    const { ms, code } = await stopTimed(p);
    expect(code).toBe(0);
    // At most the JetStream call in flight (its 2 s deadline) and the shutdown.
    expect(ms).toBeLessThan(5_000);
    expect(p.output()).toMatch(/^stopped$/m);
  }, 90_000);
});
