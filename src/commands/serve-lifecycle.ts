/**
 * What every `serve` process runs, single node or cluster node alike: the web app's front
 * (sessions, swept now and then, and the static files), and the process's life — start up
 * (shutting down what started if that fails), then run until SIGTERM/SIGINT and shut down.
 */
import { createSupervisor, type Supervisor } from '../actors/supervisor.js';
import { basePathOf, type Config } from '../config.js';
import { startMetricsListener, type MetricsListener, type NamedThreadUsage, type ServiceMetrics } from '../http/metrics.js';
import { createWebSessions, type WebSessions } from '../http/session-auth.js';
import { loadWebApp, type WebApp } from '../http/static-files.js';
import { printOut, type Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { accountGuardsOf } from '../store/guards.js';
import { StartupAbortedError } from '../store/nats/startup-abort.js';
import { SERVE } from '../tuning.js';
import { settledWithin } from '../wait.js';
import type { EmbeddedPaper } from './serve-paper.js';

/** Web sessions over `store` and the web app's files; `stop` ends the session sweeper. */
/**
 * The actor supervisor over a store (LMDB on one node, NATS in a cluster): every actor starts with
 * its owner's stored guards and locks, the bracket legs it owes are stored back there, and so are
 * the account ids each connection serves (who keeps an id two connections of a user report).
 */
export function storeBackedSupervisor(config: Config, store: Store, logger: Logger): Supervisor {
  return createSupervisor({
    threadsMax: config.actorThreadsMax,
    maxActors: config.actorsMax,
    logger,
    guards: (userId) => accountGuardsOf(store, userId),
    keepOwedLegs: (userId, accountId, legs) => store.guards.setOwedLegs(userId, accountId, legs),
    served: {
      of: (userId) => store.connections.listByUser(userId),
      keep: (connectionId, accountIds) => store.connections.setServedAccounts(connectionId, accountIds),
    },
  });
}

export function startWebFront(config: Config, store: Store, logger: Logger): { sessions: WebSessions; web: WebApp; stop(): void } {
  const sessions = createWebSessions(config, store);
  // Expired sessions are dropped from the store (they already fail lookup) and idle sign-in throttle state from memory.
  const sweeper = setInterval(() => {
    sessions.throttle.sweep(Date.now());
    store.sessions.sweep().catch((err: unknown) => logger.warn({ err }, 'session sweep failed'));
  }, SERVE.sessionSweepMs);
  sweeper.unref();
  const web = loadWebApp({ https: config.baseUrl?.startsWith('https:') === true, basePath: basePathOf(config) });
  if (!web.built) logger.warn('web app not built (dist/web missing): run npm run build');
  return { sessions, web, stop: () => clearInterval(sweeper) };
}

/**
 * Runs the steps of a shutdown in order, each whatever the ones before it did: one that throws is
 * logged and the rest still run. As one chain, a step that threw after a failed start (a damaged
 * store) skipped the paper broker's close, whose thread then kept the process alive for good
 * (operator probe: a fatal error printed, the process still running 20 s later).
 */
export async function shutdownSteps(logger: Logger, steps: [name: string, step: () => unknown][]): Promise<void> {
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (err) {
      logger.error({ err, step: name }, 'shutdown step failed; going on with the rest');
    }
  }
}

/**
 * Runs `start`, waits for `signalled`, runs `shutdown`; returns the exit code. A start that
 * fails shuts down what it had started, for at most FAILED_START_SHUTDOWN_MS, and throws: the
 * caller exits with its message.
 */
export async function serveUntilSignal(
  signalled: Promise<NodeJS.Signals>,
  logger: Logger,
  start: () => Promise<void>,
  shutdown: () => Promise<void>,
): Promise<number> {
  try {
    await start();
  } catch (err) {
    await settledWithin(shutdown().catch(() => undefined), SERVE.failedStartShutdownMs);
    if (err instanceof StartupAbortedError) return stoppedWhileStarting(logger, err);
    throw err;
  }
  const signal = await signalled;
  logger.info({ signal }, 'shutting down');
  await shutdown();
  printOut(logger, 'stopped\n');
  return 0;
}

/** A start told to stop while it waited for NATS (SIGTERM): an orderly exit, code 0. */
export function stoppedWhileStarting(logger: Logger, err: StartupAbortedError): number {
  logger.info({ reason: err.message }, 'stopped during start-up');
  printOut(logger, 'stopped\n');
  return 0;
}

/** Default /metrics port (the Prometheus exporters' convention). */
const DEFAULT_METRICS_PORT = 9464;

/**
 * Starts /metrics. An explicit METRICS_PORT must be free (like PORT); the default port falls
 * back to a free one when taken, so a second instance on one machine still starts.
 */
export async function startMetrics(config: Config, metrics: ServiceMetrics, log: Logger): Promise<MetricsListener> {
  if (config.metricsPort !== undefined) {
    return startMetricsListener(metrics, config.metricsHost, config.metricsPort).catch((err: unknown) => {
      throw new Error(`cannot listen for /metrics on ${config.metricsHost}:${config.metricsPort} (METRICS_PORT): ${err instanceof Error ? err.message : String(err)}`);
    });
  }
  try {
    return await startMetricsListener(metrics, config.metricsHost, DEFAULT_METRICS_PORT);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const listener = await startMetricsListener(metrics, config.metricsHost, 0);
    log.warn({ port: listener.port }, `metrics port ${DEFAULT_METRICS_PORT} is taken; /metrics listens on a free port (set METRICS_PORT to fix one)`);
    return listener;
  }
}

/** The actor workers' and the paper broker's usage, named for /metrics. */
export async function serveThreads(supervisor: Supervisor, paper?: EmbeddedPaper): Promise<NamedThreadUsage[]> {
  const [workers, broker] = await Promise.all([supervisor.stats().catch(() => []), paper?.current.usage().catch(() => undefined)]);
  const out: NamedThreadUsage[] = workers.map((w) => ({ thread: `actor-${w.usage.threadId}`, usage: w.usage }));
  if (broker) out.push({ thread: 'paper-broker', usage: broker });
  return out;
}
