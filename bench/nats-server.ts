/**
 * Real nats-server processes (Debian's nats-server 2.9 on CI) on free loopback ports, each
 * with its own temp JetStream storage dir, for the tests (test/support/nats.ts) and
 * `bench cluster`. `startNats()` gives one server with JetStream; `startNatsCluster(3)` gives
 * a JetStream cluster whose servers route to each other.
 * Readiness is awaited by connecting and asking JetStream for the account info (which only
 * answers once the cluster's meta group has a leader), never by sleeping.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

/** One nats-server process. */
export interface NatsServer {
  readonly name: string;
  /** `nats://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** The JetStream storage dir (scanned by tests that look for plaintext secrets). */
  readonly storeDir: string;
  /** Whether the process is running. */
  readonly running: boolean;
  /** Stops the process (SIGTERM lets it flush; SIGKILL simulates a crash) and waits for its exit. */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Starts a stopped server again on the same ports and storage, and waits until it is ready. */
  restart(): Promise<void>;
}

/** A set of servers started together; `stop` ends them all and removes their storage. */
export interface NatsCluster {
  readonly servers: NatsServer[];
  /** Every server's URL (what a client's server list should hold). */
  readonly urls: string[];
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;
const live = new Set<ChildProcess>();

// A test worker that dies must not leave servers behind: kill them on the way out.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * `count` distinct loopback ports that were free a moment ago: the kernel picks them for
 * throwaway listeners, all held open together so no two are the same.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Server>((resolve, reject) => {
          const srv = createServer();
          srv.once('error', reject);
          srv.listen(0, '127.0.0.1', () => resolve(srv));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

interface ServerPlan {
  name: string;
  port: number;
  clusterPort?: number;
  routes: number[];
  dir: string;
  /** More of nats-server's config (authorization, tls), merged over the plan's own. */
  extra?: Record<string, unknown>;
  /** How the readiness check logs in (and its TLS) on a server that requires it. */
  login?: Partial<ConnectionOptions>;
}

/** nats-server's config syntax accepts JSON, so the config is written as JSON. */
function configFor(plan: ServerPlan, clusterName: string | undefined): string {
  const config: Record<string, unknown> = {
    server_name: plan.name,
    listen: `127.0.0.1:${plan.port}`,
    jetstream: { store_dir: join(plan.dir, 'jetstream'), max_memory_store: 64 * 1024 * 1024, max_file_store: 1024 * 1024 * 1024 },
  };
  Object.assign(config, plan.extra);
  if (plan.clusterPort !== undefined) {
    config.cluster = {
      name: clusterName,
      listen: `127.0.0.1:${plan.clusterPort}`,
      routes: plan.routes.map((p) => `nats://127.0.0.1:${p}`),
    };
  }
  return JSON.stringify(config, null, 2);
}

/** Connects to one server and waits until its JetStream answers. */
async function waitReady(url: string, child: ChildProcess, output: () => string, login: Partial<ConnectionOptions> = {}): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let nc: NatsConnection | undefined;
  let lastErr: unknown;
  try {
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`nats-server exited during start (${child.exitCode ?? child.signalCode}):\n${output()}`);
      }
      try {
        nc ??= await connect({ ...login, servers: url, reconnect: false, timeout: 1000 });
        const jsm = await jetstreamManager(nc, { timeout: 1000 });
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        lastErr = err;
        if (nc?.isClosed()) nc = undefined;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error(`nats-server at ${url} not ready after ${READY_TIMEOUT_MS} ms: ${String(lastErr)}\n${output()}`);
  } finally {
    await nc?.close();
  }
}

function server(plan: ServerPlan, clusterName: string | undefined): NatsServer {
  const configFile = join(plan.dir, 'nats.conf');
  mkdirSync(plan.dir, { recursive: true });
  writeFileSync(configFile, configFor(plan, clusterName));
  let child: ChildProcess | undefined;
  let log = '';

  const launch = (): ChildProcess => {
    log = '';
    const c = spawn('nats-server', ['-c', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(c);
    const keep = (chunk: Buffer): void => {
      // Only the tail matters for a failure message.
      log = (log + chunk.toString()).slice(-8000);
    };
    c.stdout?.on('data', keep);
    c.stderr?.on('data', keep);
    c.once('exit', () => live.delete(c));
    return c;
  };

  const self: NatsServer = {
    name: plan.name,
    url: `nats://127.0.0.1:${plan.port}`,
    port: plan.port,
    storeDir: join(plan.dir, 'jetstream'),
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async stop(signal = 'SIGTERM') {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill(signal);
      await exited;
    },
    async restart() {
      if (self.running) throw new Error(`${plan.name} is still running`);
      child = launch();
      await waitReady(self.url, child, () => log, plan.login);
    },
  };
  child = launch();
  return Object.assign(self, { ready: waitReady(self.url, child, () => log, plan.login) });
}

async function startAll(plans: ServerPlan[], clusterName: string | undefined, root: string): Promise<NatsCluster> {
  const servers = plans.map((p) => server(p, clusterName));
  const cluster: NatsCluster = {
    servers,
    urls: servers.map((s) => s.url),
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
      rmSync(root, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(servers.map((s) => (s as NatsServer & { ready: Promise<void> }).ready));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

/**
 * Runs `start` again (with fresh ports) when a port it was given was taken before nats-server bound
 * it: a free port is only free when it is looked at, and tests on the same machine take ports too
 * (a fresh-clone CI run failed once: "bind: address already in use" on a cluster route port).
 */
async function withPortRetries<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !/address already in use/.test(String(err))) throw err;
    }
  }
}

/**
 * Starts one nats-server with JetStream on a free loopback port; `extra` adds to its config (an
 * `authorization` or `tls` block), `login` is how the readiness check then connects.
 */
export async function startNats(opts: { extra?: Record<string, unknown>; login?: Partial<ConnectionOptions> } = {}): Promise<NatsServer & { stopAndRemove(): Promise<void> }> {
  return withPortRetries(async () => {
    const root = mkdtempSync(join(tmpdir(), 'tradegate-nats-'));
    const cluster = await startAll([{ name: 'n1', port: (await freePorts(1))[0]!, routes: [], dir: join(root, 'n1'), ...opts }], undefined, root);
    return Object.assign(cluster.servers[0]!, { stopAndRemove: () => cluster.stop() });
  });
}

/** Starts `size` nats-servers forming one JetStream cluster (every server routes to every other). */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  return withPortRetries(async () => {
    const root = mkdtempSync(join(tmpdir(), 'tradegate-nats-cluster-'));
    const ports = await freePorts(size * 2);
    const clusterPorts = ports.slice(size);
    const plans: ServerPlan[] = Array.from({ length: size }, (_, i) => ({
      name: `n${i + 1}`,
      port: ports[i]!,
      clusterPort: clusterPorts[i]!,
      routes: clusterPorts.filter((_, j) => j !== i),
      dir: join(root, `n${i + 1}`),
    }));
    return startAll(plans, `tg${Math.random().toString(36).slice(2, 8)}`, root);
  });
}
