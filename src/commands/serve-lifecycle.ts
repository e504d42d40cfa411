/**
 * What every `serve` process runs, single node or cluster node alike: the web app's front
 * (sessions, swept now and then, and the static files), and the process's life — start up
 * (shutting down what started if that fails), then run until SIGTERM/SIGINT and shut down.
 */
import type { Config } from '../config.js';
import { createWebSessions, type WebSessions } from '../http/session-auth.js';
import { loadWebApp, type WebApp } from '../http/static-files.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { SERVE } from '../tuning.js';

/** Web sessions over `store` and the web app's files; `stop` ends the session sweeper. */
export function startWebFront(config: Config, store: Store, logger: Logger): { sessions: WebSessions; web: WebApp; stop(): void } {
  const sessions = createWebSessions(config, store);
  // Expired sessions are dropped from the store (they already fail lookup) and idle sign-in throttle state from memory.
  const sweeper = setInterval(() => {
    sessions.throttle.sweep(Date.now());
    store.sessions.sweep().catch((err: unknown) => logger.warn({ err }, 'session sweep failed'));
  }, SERVE.sessionSweepMs);
  sweeper.unref();
  const web = loadWebApp({ https: config.baseUrl?.startsWith('https:') === true });
  if (!web.built) logger.warn('web app not built (dist/web missing): run npm run build');
  return { sessions, web, stop: () => clearInterval(sweeper) };
}

/** Runs `start`, waits for `signalled`, runs `shutdown`; returns the exit code. */
export async function serveUntilSignal(
  signalled: Promise<NodeJS.Signals>,
  logger: Logger,
  start: () => Promise<void>,
  shutdown: () => Promise<void>,
): Promise<number> {
  try {
    await start();
  } catch (err) {
    await shutdown().catch(() => undefined);
    throw err;
  }
  const signal = await signalled;
  logger.info({ signal }, 'shutting down');
  await shutdown();
  process.stdout.write('stopped\n');
  return 0;
}
