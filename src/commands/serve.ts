/**
 * `tradegate serve [--paper]` (`npm start` = `serve --paper`): opens the store, optionally
 * starts the embedded paper broker in a worker, bootstraps the demo on first run, starts
 * one actor per enabled connection and the HTTP front, then runs until SIGTERM/SIGINT.
 *
 * Shutdown order matters: stop accepting and let requests in flight finish (their answers
 * may still need the actors and the idempotency store), then close streams and actors,
 * then the paper broker, and flush LMDB last.
 *
 * `serve --cluster nats://…` runs a cluster node instead (serve-cluster.ts).
 */
import { makeDirs } from '../store/file-modes.js';
import { parseArgs } from 'node:util';
import { connectionSpecFor } from '../actors/connection-spec.js';
import type { ActorGateway } from '../actors/protocol.js';
import { startConnectionSync, type ConnectionSync } from '../actors/connection-sync.js';
import type { Supervisor } from '../actors/supervisor.js';
import { CONFIG_FLAGS, loadConfig, type Config } from '../config.js';
import { buildRoutes } from '../http/routes/index.js';
import type { RouteDeps } from '../http/routes/common.js';
import { resumeLateOutcomes } from '../http/routes/signals.js';
import { alertsGoingOn } from '../http/routes/webhooks.js';
import { measuredGateway, ServiceMetrics, type MetricsListener } from '../http/metrics.js';
import { startHttpServer, type HttpServer } from '../http/server.js';
import { createLogger, logOutputStopping, printOut, type Logger } from '../log.js';
import type { PaperEndpoints } from '../sim/control-client.js';
import { openStore, type LmdbStore, type ConnectionRecord } from '../store/index.js';
import { accountsLeaving } from '../store/connections.js';
import type { ConnectionSpec } from '../domain/connections.js';
import { JOURNAL, SERVE } from '../tuning.js';
import { bootstrapDemo, DEMO_CREDENTIALS_FILE, type DemoCredentials } from './demo.js';
import { serveThreads as serviceThreads, serveUntilSignal, shutdownSteps, startMetrics, startWebFront, storeBackedSupervisor } from './serve-lifecycle.js';
import { startEmbeddedPaper, type EmbeddedPaper } from './serve-paper.js';
import { acquireServeLock } from './serve-lock.js';
import { settledWithin } from '../wait.js';

const BOOLEAN_FLAGS = new Set(['paper']);

function parseFlags(argv: string[]): Record<string, string | boolean | undefined> {
  const options = Object.fromEntries(CONFIG_FLAGS.map((f) => [f, { type: BOOLEAN_FLAGS.has(f) ? ('boolean' as const) : ('string' as const) }]));
  const { values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  return values as Record<string, string | boolean | undefined>;
}

/** Starts an actor for every enabled connection in the store. */
async function startConnections(store: LmdbStore, gateway: ActorGateway, paper: PaperEndpoints | undefined, log: Logger): Promise<void> {
  for (const record of store.connections.all()) {
    if (record.disabled) continue;
    try {
      await gateway.addConnection(specOf(store, record, paper));
    } catch (err) {
      log.error({ connectionId: record.id, err: err instanceof Error ? err.message : String(err) }, 'connection not started');
    }
  }
}

/**
 * A connection's actor spec, with the broker rate-limit hold an earlier run recorded: a serve
 * restarted inside Tradovate's lockout waits it out instead of logging in (which extends it).
 */
function specOf(store: LmdbStore, record: ConnectionRecord, paper: PaperEndpoints | undefined): ConnectionSpec {
  const spec = connectionSpecFor(record, store.connections.credentials(record.id), paper);
  const until = store.brokerHolds.until(record.id);
  return until === undefined ? spec : { ...spec, rateLimitedUntil: until };
}

/** Keeps each connection's broker rate-limit hold in the store while it lasts (see specOf). */
function recordBrokerHolds(store: LmdbStore, gateway: ActorGateway, log: Logger): void {
  gateway.onEvent((e) => {
    if (e.type !== 'status') return;
    const write = e.status === 'FAILED' && e.retryAt !== undefined ? store.brokerHolds.set(e.connectionId, e.retryAt) : e.status === 'CONNECTED' ? store.brokerHolds.clear(e.connectionId) : undefined;
    write?.catch((err: unknown) => log.error({ err, connectionId: e.connectionId }, 'broker hold not recorded'));
  });
}

/**
 * Starts and stops actors for connections another process (the CLI) adds, removes, disables or
 * enables while this one runs. A paper connection's login is opened at the embedded broker first
 * (as at start-up); a removed one's webhook tokens become inactive with the reason, as after
 * DELETE /connections/{id}, and its paper login is closed.
 */
function syncConnections(store: LmdbStore, supervisor: Supervisor, gateway: ActorGateway, paper: EmbeddedPaper | undefined, log: Logger): ConnectionSync {
  /** Paper login of each paper connection seen (its credentials are gone with its record). */
  const logins = new Map<string, string>();
  return startConnectionSync({
    connections: store.connections,
    gateway,
    running: () => supervisor.running(),
    specFor: (record) => specOf(store, record, paper?.endpoints),
    // Started whether or not its login could be opened (as at a start): its actor then says why it
    // cannot log in (FAILED), where it stayed CONNECTING with no word (docs probe: added without a password).
    prepare: async (record) => {
      if (record.broker === 'paper' && paper) await paper.broker.ensureLogin(record.id);
      return true;
    },
    noticed(record) {
      if (record.broker === 'paper' && paper) logins.set(record.id, store.connections.credentials(record.id).name);
    },
    // Accounts another of the user's connections still serves or claims keep their tokens, as a DELETE through the
    // API leaves them (re-probe: removed with the CLI, it made the other connection's account's token refuse its exits).
    leaving: (record) => accountsLeaving(record, store.connections.listByUser(record.userId), (id) => gateway.accounts(id).map((a) => a.id)),
    async retired(record, accountIds) {
      await store.webhookTokens.deactivateForAccounts(record.userId, accountIds, `its connection ${record.id} was deleted`);
      const login = logins.get(record.id);
      logins.delete(record.id);
      if (login && paper) await paper.broker.closeLogin(login);
    },
    logger: log,
  });
}

/** Resolves with the connection's account ids once it reports some, or [] after `ms`. */
function awaitAccounts(gateway: ActorGateway, connectionId: string, ms: number): Promise<string[]> {
  const now = gateway.accounts(connectionId);
  if (now.length) return Promise.resolve(now.map((a) => a.id));
  return new Promise((resolve) => {
    const done = (ids: string[]) => {
      clearTimeout(timer);
      off();
      resolve(ids);
    };
    const timer = setTimeout(() => done([]), ms);
    const off = gateway.onEvent((e) => {
      if (e.type === 'accounts' && e.connectionId === connectionId && e.accounts.length) done(e.accounts.map((a) => a.id));
    });
  });
}

function banner(config: Config, url: string, paperUrl: string | undefined, webBuilt: boolean, metricsUrl?: string): string {
  const lines = [`listening ${url}`, `  web app:      ${url}/${webBuilt ? '' : '  (not built: run npm run build)'}`, `  API docs:     ${url}/api-docs`];
  if (metricsUrl) lines.push(`  metrics:      ${metricsUrl}`);
  if (config.baseUrl) lines.push(`  public URL:   ${config.baseUrl}`);
  // Listening on every interface (the container image does), the URL above names no reachable host.
  else if (/^https?:\/\/(0\.0\.0\.0|\[::\])(:|\/|$)/.test(url)) lines.push(`  warning:      no --base-url (TRADEGATE_BASE_URL): webhook URLs will name ${url}, which TradingView cannot reach`);
  if (paperUrl) lines.push(`  paper broker: ${paperUrl}`);
  lines.push(`  data:         ${config.dataDir}`);
  return `${lines.join('\n')}\n`;
}

function demoBanner(creds: DemoCredentials, accountIds: string[], url: string, dataDir: string): string {
  const account = accountIds[0] ?? '<accountId from GET /api/v1/accounts>';
  return [
    '',
    'First run: created user "demo" with a paper connection (two accounts) and an API key.',
    `  Open ${url}/ and sign in with:`,
    `  login:     demo / ${creds.login.password}`,
    `  API key:   ${creds.apiKey}`,
    `  accounts:  ${accountIds.length ? accountIds.join(', ') : '(still connecting; GET /api/v1/accounts)'}`,
    `  The password and key are shown only now; both are also saved (mode 0600) in ${dataDir}/${DEMO_CREDENTIALS_FILE}.`,
    '  Try:',
    `    curl -s -X POST ${url}/api/v1/accounts/${account}/orders \\`,
    `      -H 'X-API-Key: ${creds.apiKey}' -H 'Content-Type: application/json' \\`,
    `      -d '{"symbol":"ES1!","side":"buy","qty":1,"type":"market"}'`,
    '',
  ].join('\n');
}

/** Waits for SIGTERM or SIGINT. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: number | undefined;
    // Kept for the whole shutdown: the same signal twice at once (`npm start` passes Ctrl-C or
    // SIGTERM on to the service, which the terminal or the service manager signalled as well) must
    // not cut the graceful shutdown short. Another one later is someone asking again: it stops now.
    const on = (sig: NodeJS.Signals) => {
      if (first === undefined) {
        first = Date.now();
        // A log pipe nobody reads must not keep the stopping process alive (log.ts).
        logOutputStopping();
        resolve(sig);
      } else if (Date.now() - first > SERVE.repeatSignalForcesMs) {
        process.stderr.write(`${sig} again during shutdown: stopping now, without finishing it\n`);
        process.exit(130);
      }
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}

/** `tradegate serve`: returns the exit code after a graceful shutdown. */
export async function run(argv: string[]): Promise<number> {
  const config = loadConfig(parseFlags(argv));
  // Listen for signals from the start: a SIGTERM during start-up still ends in an orderly
  // shutdown (once start-up finishes) instead of the default abrupt exit.
  const signalled = untilSignal();
  if (config.cluster) return (await import('./serve-cluster.js')).runClusterNode(config, config.cluster, signalled);
  const logger = createLogger(config.logLevel);
  // One serve per data dir (serve-lock.ts): a second would place orders beside the first.
  makeDirs(config.dataDir, 0o700);
  // A holder that finds its lock taken (another host's serve judged it stale) stops: two must never trade.
  const lock = acquireServeLock(config.dataDir, {
    onLost: (holder) => {
      logger.fatal({ holder }, 'another serve took over this data dir: stopping');
      process.kill(process.pid, 'SIGTERM');
    },
  });
  const store = await openStore({ dataDir: config.dataDir, ...(config.dataKey ? { dataKey: config.dataKey } : {}), logger });
  // Records past 24 h already read as absent; the sweeper deletes them so the file stays bounded.
  store.idempotency.sweep();
  const stopSweeper = store.idempotency.startSweeper(SERVE.idempotencySweepMs);
  // The journal is bounded too (JOURNAL in tuning.ts): a leaked webhook URL's refused alerts could fill the disk.
  // A full batch deleted means more is due: swept again at once until caught up.
  const sweepJournal = (): void =>
    void store.journal
      .sweep()
      .then((n) => n >= JOURNAL.sweepBatch && setImmediate(sweepJournal))
      .catch((err: unknown) => logger.error({ err }, 'journal sweep failed'));
  sweepJournal();
  const journalSweeper = setInterval(sweepJournal, JOURNAL.sweepMs);
  journalSweeper.unref();
  const { sessions, web, stop: stopWebFront } = startWebFront(config, store, logger);
  let paper: EmbeddedPaper | undefined;
  let gateway: ActorGateway | undefined;
  let server: HttpServer | undefined;
  let metricsListener: MetricsListener | undefined;
  let sync: ConnectionSync | undefined;
  let routeDeps: RouteDeps | undefined;

  const shutdown = () =>
    shutdownSteps(logger, [
      ['connection sync', () => sync?.stop()],
      ['metrics listener', () => metricsListener?.close()],
      // Requests still being answered, and alerts answered 504 that go on, before the actors close.
      [
        'http server',
        async () => {
          const t0 = Date.now();
          await server?.close({ graceMs: SERVE.shutdownGraceMs });
          // Once every request is answered (some of them 504 "it goes on" meanwhile), no alert is added any more.
          if (routeDeps) await settledWithin(alertsGoingOn(routeDeps), Math.max(0, SERVE.shutdownGraceMs - (Date.now() - t0)));
        },
      ],
      ['actors', () => gateway?.close()],
      ['paper broker', () => paper?.close()],
      [
        'sweepers',
        () => {
          stopSweeper();
          clearInterval(journalSweeper);
          stopWebFront();
        },
      ],
      ['store flush', () => store.flushed()],
      ['store', () => store.close()],
      ['serve lock', () => lock.release()],
    ]);

  return serveUntilSignal(signalled, logger, async () => {
    if (config.paper) {
      paper = await startEmbeddedPaper({ store, dataDir: config.dataDir, port: config.paperPort, logLevel: config.logLevel, logger });
    }
    const supervisor = storeBackedSupervisor(config, store, logger);
    const metrics = new ServiceMetrics();
    gateway = measuredGateway(supervisor, metrics);
    recordBrokerHolds(store, gateway, logger);
    let listenUrl: string | undefined;
    const streams = { closeStreams: (...args: Parameters<HttpServer['sse']['closeStreams']>) => server?.sse.closeStreams(...args) ?? 0 };
    routeDeps = { config, store, gateway, sessions, ...(paper ? { paper: paper.broker } : {}), listenUrl: () => listenUrl, streams };
    const routes = buildRoutes(routeDeps);
    const embedded = paper;
    server = await startHttpServer({
      config, store, gateway, routes, logger, sessionAuth: sessions.authenticate, web, metrics, threads: () => serviceThreads(supervisor, embedded),
      firstEventId: await store.claimStreamIdBase(Date.now()),
    });
    metricsListener = await startMetrics(config, metrics, logger);
    listenUrl = server.url;
    const publicUrl = (config.baseUrl ?? server.url).replace(/\/+$/, '');

    const demo = paper ? await bootstrapDemo({ store, dataDir: config.dataDir, paper: paper.broker, webUrl: publicUrl }) : null;
    await startConnections(store, gateway, paper?.endpoints, logger);
    sync = syncConnections(store, supervisor, gateway, paper, logger);
    // Webhook alerts answered 504 shortly before a restart: their outcome is still looked up.
    void resumeLateOutcomes(routeDeps, logger, server.idempotencyGate).catch((err: unknown) => logger.warn({ err }, 'webhook 504 follow-ups not resumed'));
    printOut(logger, banner(config, server.url, paper?.url, web.built, metricsListener.url));
    if (demo) {
      const accountIds = await awaitAccounts(gateway, demo.connectionId, SERVE.demoAccountsWaitMs);
      printOut(logger, demoBanner(demo, accountIds, publicUrl, config.dataDir));
    }
  }, shutdown);
}
