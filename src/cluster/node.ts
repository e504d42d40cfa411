/**
 * One cluster node's moving parts, wired together (README "Running a cluster"): the event
 * feed, the node lease, connection ownership, the gateway the HTTP front calls, and the
 * shared rate limiters. `serve --cluster` starts one and hands its gateway, limiters and event
 * ids to the HTTP front; everything else of the node (routes, pipeline, store interface) is
 * the single-node code.
 */
import { hostname } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { connectionSpecFor } from '../actors/connection-spec.js';
import type { Supervisor } from '../actors/supervisor.js';
import { AppError } from '../domain/problems.js';
import { ConfigError, type Config } from '../config.js';
import type { Logger } from '../log.js';
import { openBucket, type NatsStore } from '../store/nats/index.js';
import { whileStarting } from '../store/nats/startup.js';
import { CLUSTER } from '../tuning.js';
import { EventFeed } from './events.js';
import { ClusterGateway } from './gateway.js';
import type { NatsLogin } from './nats-login.js';
import { NodeLease, parseHolder, type LeaseTiming } from './node-lease.js';
import { Ownership } from './ownership.js';
import { SharedLogLimiter } from './rate-limit.js';

/** Options of startClusterNode. */
export interface ClusterNodeOptions {
  nc: NatsConnection;
  store: NatsStore;
  supervisor: Supervisor;
  nodeId: string;
  /** Names this process (see NodeLease); the store's idempotency markers carry it. */
  boot: string;
  prefix: string;
  replicas: number;
  rateLimitPerMin: number;
  webhookRateLimitPerMin: number;
  /** RECONNECT_MIN_INTERVAL_S: manual reconnects of one connection, cluster-wide. */
  reconnectMinIntervalS?: number;
  logger: Logger;
  /** Lease timing (tests); production uses CLUSTER. */
  timing?: Partial<LeaseTiming>;
}

/** A running cluster node. */
export interface ClusterNode {
  readonly nodeId: string;
  readonly gateway: ClusterGateway;
  readonly limiters: { key: SharedLogLimiter; webhook: SharedLogLimiter };
  /** The newest cluster-wide event id applied here (the HTTP front's SSE ids). */
  readonly eventIds: { position(): number };
  /** Whether this node reaches NATS (see NodeLease `onReach`), for /readyz and the health stream. */
  readonly reach: ClusterReach;
  /** Whether the node process a record names (`holderName`) still holds its lease, by this node's view. */
  isAlive(holder: string): boolean;
  /** Graceful leave: stops the actors, frees their connections for other nodes, drops the lease. */
  close(): Promise<void>;
}

/** Whether a node reaches the cluster's NATS, and its changes. */
export interface ClusterReach {
  reachable(): boolean;
  /** Called with false when the node stops reaching NATS, and with true once it reaches it again and its event feed has caught up. */
  onChange(listener: (reachable: boolean) => void): () => void;
}

/** The node id when none is configured: host name and process id, as a KV-safe token. */
export function defaultNodeId(): string {
  return `${hostname().replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 48)}-${process.pid}`;
}

/** JetStream replicas: configured, else 3 when three or more servers are listed, else 1. */
export function clusterReplicas(config: Config, servers: string[]): number {
  return config.clusterReplicas ?? (servers.length >= 3 ? 3 : 1);
}

/** Connects to the NATS servers of a cluster with its login (nats-login.ts), retrying for ever once connected. */
export async function connectNats(login: NatsLogin, nodeId: string): Promise<NatsConnection> {
  try {
    return await connect({
      ...login.options,
      servers: login.servers,
      name: `tradegate-${nodeId}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 10_000,
      timeout: CLUSTER.kvTimeoutMs * 2,
      // Once running, a refused login (a password changed on the server, a login that timed out on a
      // slow link) is tried again for ever like a lost server: nats.js gives up for good after two
      // (re-probe: every node alive, serving 503, never back after the password was restored).
      ignoreAuthErrorAbort: true,
    });
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    const text = `${err.message} ${err.cause instanceof Error ? err.cause.message : ''}`;
    // A login that did not finish in time is a slow link, not a wrong login: waited out like one (re-probe).
    if (/authentication timeout/i.test(text)) {
      throw Object.assign(new Error(`NATS did not finish the login in time (${err.message}): a slow link or a busy server`), { name: 'ConnectionError' });
    }
    // Not waited out like an unreachable server: the same login is refused again.
    if (err.name === 'AuthorizationError' || /authori[sz]ation violation|authentication/i.test(text)) {
      throw new ConfigError(
        `NATS refused the login (${login.method === 'none' ? 'none given' : login.method}): ${err.message}. ` +
          'Give the login NATS expects: NATS_USER with NATS_PASSWORD_FILE, NATS_TOKEN_FILE or NATS_NKEY (README "Running a cluster")',
      );
    }
    // TLS that cannot work as set: said at once, naming the settings (re-probe: retried for 60 s as "NATS not ready").
    if (/certificate|self.signed|key values mismatch|does not support 'tls'|tls handshake|ssl/i.test(text)) {
      throw new ConfigError(
        `NATS TLS failed: ${err.message}. Check NATS_CA (the CA that signed the servers' certificates), NATS_CERT with NATS_KEY (the node's certificate, when the servers verify clients) and tls:// in the server URLs (README "Running a cluster")`,
      );
    }
    throw err;
  }
}

/** Starts the node's cluster parts over an open store (see module comment). */
export async function startClusterNode(opts: ClusterNodeOptions): Promise<ClusterNode> {
  const { nc, store, prefix, replicas, logger } = opts;
  const js = jetstream(nc, { timeout: CLUSTER.kvTimeoutMs });
  const jsm = await whileStarting('reaching JetStream', () => jetstreamManager(nc, { timeout: CLUSTER.kvTimeoutMs }), { logger });
  const kvm = new Kvm(js);
  const log = logger;

  const feed = await EventFeed.start({ js, jsm, prefix, replicas, nodeId: opts.nodeId, logger: log });
  const gateway = new ClusterGateway({
    nc,
    prefix,
    supervisor: opts.supervisor,
    feed,
    logger: log,
    specFor(connectionId) {
      const record = store.connections.byId(connectionId);
      if (!record) throw new AppError('NOT_FOUND', `connection ${connectionId} not found`);
      return connectionSpecFor(record, store.connections.credentials(connectionId));
    },
    recordsCurrent: () => store.recordsCurrent(),
    ...(opts.reconnectMinIntervalS !== undefined && { manualRestartMinIntervalMs: opts.reconnectMinIntervalS * 1000 }),
    // The lease starts after the gateway (it needs the ownership, which needs the gateway).
    leaseHeld: () => leaseHeld(),
  });
  let leaseHeld = (): boolean => false;
  let ownership: Ownership | undefined;
  const reachListeners = new Set<(reachable: boolean) => void>();
  let reached = true;
  const tellReach = (reachable: boolean): void => {
    if (reachable === reached) return;
    reached = reachable;
    for (const l of [...reachListeners]) {
      try {
        l(reachable);
      } catch (err) {
        log.error({ err }, 'cluster reach listener threw');
      }
    }
  };
  const lease = await NodeLease.start({
    nc,
    kvm,
    prefix,
    replicas,
    nodeId: opts.nodeId,
    boot: opts.boot,
    logger: log,
    ...(opts.timing && { timing: opts.timing }),
    onLapse: () => void ownership?.stopAll(),
    onRestore: () => ownership?.scanSoon(),
    // Back: first the events of the outage (a connection that moved meanwhile reports its move
    // before this node says it is reachable again), and the records written meanwhile (a key
    // revoked on another node must not be accepted here a moment after), then the news. Until
    // then the node refuses requests (503 CLUSTER_UNAVAILABLE, the HTTP pipeline asks `reach`).
    onReach: (reachable) => {
      if (!reachable) tellReach(false);
      else void Promise.all([feed.synced(), store.recordsCurrent()]).then(() => lease.reachable && tellReach(true));
    },
  });
  leaseHeld = () => lease.holdsNow();
  ownership = await Ownership.start({
    nc,
    kvm,
    prefix,
    replicas,
    lease,
    host: gateway,
    logger: log,
    enabled: () => store.connections.all().flatMap((c) => (c.disabled ? [] : [c.id])),
    exists: (connectionId) => store.connections.byId(connectionId) !== undefined,
    epochSeen: (connectionId) => feed.epochOf(connectionId),
  });
  gateway.attach(ownership);

  const rateKv = await openBucket(kvm, `${prefix}_ratelimit`, { history: 1, ttl: 60_000, replicas, timeout: CLUSTER.kvTimeoutMs }, log);
  const limiters = {
    key: new SharedLogLimiter(rateKv, 'key', opts.rateLimitPerMin, { logger: log }),
    webhook: new SharedLogLimiter(rateKv, 'webhook', opts.webhookRateLimitPerMin, { logger: log }),
  };

  let closing: Promise<void> | undefined;
  return {
    nodeId: opts.nodeId,
    gateway,
    limiters,
    eventIds: { position: () => feed.position() },
    reach: {
      reachable: () => reached,
      onChange(listener) {
        reachListeners.add(listener);
        return () => reachListeners.delete(listener);
      },
    },
    isAlive(name) {
      const holder = parseHolder(name);
      // A record written by something else than a node (a CLI) lives until it expires.
      return holder === undefined || lease.isAlive(holder);
    },
    close() {
      closing ??= (async () => {
        await ownership.releaseAll();
        await lease.release();
        await gateway.close();
        await feed.flushed();
        feed.close();
      })();
      return closing;
    },
  };
}
