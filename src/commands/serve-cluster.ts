/**
 * `tradegate serve --cluster nats://host:4222[,…] [--node-id NAME]`: one node of a cluster
 * (README "Running a cluster"). The same HTTP front and web app as a single node, over the NATS store,
 * with the cluster's gateway (actors on whichever node owns each connection), shared rate
 * limits and cluster-wide health event ids. No embedded paper broker: a cluster shares one
 * broker, so paper connections point at a `tradegate sim` every node reaches.
 *
 * Shutdown: stop accepting and finish requests in flight, hand this node's connections to
 * the others (stop the actors, free their owner records), then close the store and NATS.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { clusterReplicas, connectNats, defaultNodeId, startClusterNode, type ClusterNode } from '../cluster/node.js';
import { holderName } from '../cluster/node-lease.js';
import { natsLogin } from '../cluster/nats-login.js';
import { ConfigError, type Config } from '../config.js';
import { measuredGateway, ServiceMetrics, type MetricsListener } from '../http/metrics.js';
import { buildRoutes } from '../http/routes/index.js';
import type { RouteDeps } from '../http/routes/common.js';
import { resumeLateOutcomes } from '../http/routes/signals.js';
import { alertsGoingOn } from '../http/routes/webhooks.js';
import { settledWithin } from '../wait.js';
import { startHttpServer, type HttpServer } from '../http/server.js';
import { createLogger, printOut } from '../log.js';
import { randomBase62 } from '../store/crypto.js';
import { openNatsStore, type NatsStore } from '../store/nats/index.js';
import { StartupAbortedError, stopStartupWaitsOn } from '../store/nats/startup-abort.js';
import { isUnreachableNats, serializesRevisionChecks, whileStarting } from '../store/nats/startup.js';
import { CLUSTER, SERVE } from '../tuning.js';
import { serveThreads, serveUntilSignal, shutdownSteps, startMetrics, startWebFront, stoppedWhileStarting, storeBackedSupervisor } from './serve-lifecycle.js';

/** Runs one cluster node until `signalled`; returns the exit code after a graceful shutdown. */
export async function runClusterNode(config: Config, servers: string[], signalled: Promise<NodeJS.Signals>): Promise<number> {
  if (config.paper) throw new ConfigError('--paper cannot be combined with --cluster: run `tradegate sim` once and add paper connections that point at it');
  const dataKey = config.dataKey;
  if (!dataKey) throw new ConfigError('cluster mode needs TRADEGATE_DATA_KEY (64 hex characters, the same on every node)');
  const nodeId = config.nodeId ?? defaultNodeId();
  const boot = randomBase62(10);
  const replicas = clusterReplicas(config, servers);
  const logger = createLogger(config.logLevel).child({ node: nodeId });
  // A signal during start-up ends every wait for NATS at once (this one and the store's and node's below).
  const stop = new AbortController();
  void signalled.then(() => stop.abort());
  stopStartupWaitsOn(stop.signal);
  // Started before NATS (or with it): wait for a server to accept, as for the buckets below.
  const login = natsLogin(servers);
  let nc: NatsConnection;
  try {
    nc = await whileStarting('connecting to NATS', () => connectNats(login, nodeId), { logger, transient: isUnreachableNats });
  } catch (err) {
    if (!(err instanceof StartupAbortedError)) throw err;
    return stoppedWhileStarting(logger, err);
  }
  watchNatsLogin(nc, login.method, logger);
  // NATS holds every shared record (users, key digests, sessions): one open to any client lets whoever reaches it mint a key.
  if (nc.info?.auth_required !== true) {
    logger.warn(
      { natsLogin: login.method },
      'NATS accepts clients without a login: whoever reaches it can read and write every record of this cluster (users, API keys, sessions). ' +
        'Require one in nats-server.conf and give it to the nodes (README "Running a cluster")',
    );
  } else logger.info({ natsLogin: login.method, tls: nc.info?.tls_required === true || login.options.tls !== undefined }, 'logged in to NATS');
  if (replicas > 1 && !serializesRevisionChecks(nc.info?.version)) {
    logger.warn(
      { natsVersion: nc.info?.version },
      'nats-server before 2.9.21 may accept two concurrent revision-checked writes of one key on replicated buckets (nats-io/nats-server#4320): ' +
        'the cluster-wide rate limit can then admit more than its limit under bursts; upgrade NATS (README "Running a cluster")',
    );
  }
  let store: NatsStore | undefined;
  let node: ClusterNode | undefined;
  let server: HttpServer | undefined;
  let front: ReturnType<typeof startWebFront> | undefined;
  let metricsListener: MetricsListener | undefined;
  let routeDeps: RouteDeps | undefined;

  const shutdown = () =>
    shutdownSteps(logger, [
      ['metrics listener', () => metricsListener?.close()],
      // Requests still being answered, and alerts answered 504 that go on, before the node's actors close.
      [
        'http server',
        async () => {
          const t0 = Date.now();
          await server?.close({ graceMs: SERVE.shutdownGraceMs });
          // Once every request is answered (some of them 504 "it goes on" meanwhile), no alert is added any more.
          if (routeDeps) await settledWithin(alertsGoingOn(routeDeps), Math.max(0, SERVE.shutdownGraceMs - (Date.now() - t0)));
        },
      ],
      ['cluster node', () => node?.close()],
      ['web front', () => front?.stop()],
      ['store', () => store?.close()],
      ['nats', () => nc.drain().catch(() => undefined)],
    ]);

  return serveUntilSignal(signalled, logger, async () => {
    const shared = await openNatsStore({
      nc,
      dataKey,
      prefix: config.clusterPrefix,
      replicas,
      dataDir: config.dataDir,
      logger,
      nodeId: holderName({ node: nodeId, boot }),
      holderAlive: (holder) => node?.isAlive(holder) ?? true,
      inFlightLeaseMs: CLUSTER.idempotencyMarkerMs,
      deadHolderHoldMs: CLUSTER.ownerChangeHoldMs,
    });
    store = shared;
    // Before the node takes its lease: loading the web app compresses every asset synchronously
    // (~1 s of blocked event loop on a busy 2-core machine), time in which a leased node could
    // not renew and, with the rest of its start, could lapse and stop the actors it just took.
    front = startWebFront(config, store, logger);
    // Every actor starts with its owner's stored guards and locks, on whichever node takes it.
    const supervisor = storeBackedSupervisor(config, shared, logger);
    node = await startClusterNode({
      nc,
      store,
      supervisor,
      nodeId,
      boot,
      prefix: config.clusterPrefix,
      replicas,
      rateLimitPerMin: config.rateLimitPerMin,
      webhookRateLimitPerMin: config.webhookRateLimitPerMin,
      reconnectMinIntervalS: config.reconnectMinIntervalS,
      logger,
    });
    let listenUrl: string | undefined;
    const metrics = new ServiceMetrics();
    const gateway = measuredGateway(node.gateway, metrics);
    // Revoking a key, signing out or changing a password ends the matching streams on this node at once
    // (the other nodes' stream guards see the shared record change within their recheck).
    const streams = { closeStreams: (...args: Parameters<HttpServer['sse']['closeStreams']>) => server?.sse.closeStreams(...args) ?? 0 };
    routeDeps = { config, store, gateway, sessions: front.sessions, listenUrl: () => listenUrl, streams, nodeId };
    const routes = buildRoutes(routeDeps);
    server = await startHttpServer({
      config,
      store,
      gateway,
      metrics,
      threads: () => serveThreads(supervisor),
      routes,
      logger,
      sessionAuth: front.sessions.authenticate,
      web: front.web,
      limiters: node.limiters,
      eventIds: node.eventIds,
      ownEvents: node.gateway.ownEvents,
      reach: node.reach,
    });
    metricsListener = await startMetrics(config, metrics, logger);
    listenUrl = server.url;
    // Webhook alerts this node answered 504 before it stopped: their outcome is still looked up (by this node only).
    void resumeLateOutcomes(routeDeps, logger, server.idempotencyGate).catch((err: unknown) => logger.warn({ err }, 'webhook 504 follow-ups not resumed'));
    printOut(
      logger,
      [`listening ${server.url}`, `  API docs:     ${server.url}/api-docs`, `  metrics:      ${metricsListener.url}`, `  cluster node: ${nodeId} (${login.servers.join(',')}, replicas ${replicas})`, ''].join('\n'),
    );
  }, shutdown);
}

/**
 * Says why a running node cannot get back to NATS when it is its login: the connection keeps
 * trying (connectNats), and without this the log showed only closed connections (re-probe).
 */
function watchNatsLogin(nc: NatsConnection, method: string, logger: ReturnType<typeof createLogger>): void {
  void (async () => {
    let last = 0;
    for await (const s of nc.status()) {
      if (s.type !== 'error' || !/authori[sz]ation|authentication/i.test(String(s.error))) continue;
      // At most one line every 10 s: a refused login is tried again every 250 ms.
      if (Date.now() - last < 10_000) continue;
      last = Date.now();
      logger.error({ natsLogin: method, err: s.error }, 'NATS refuses this node\'s login: it keeps trying, and serves 503 until NATS takes it (a password changed on the server?)');
    }
  })().catch(() => undefined);
}
