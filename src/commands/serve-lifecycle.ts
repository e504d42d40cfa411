/**
 * The life of a `serve` process, single node or cluster node alike: start up (shutting down
 * what started if that fails), then run until SIGTERM/SIGINT and shut down gracefully.
 */
import type { Logger } from '../log.js';

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
