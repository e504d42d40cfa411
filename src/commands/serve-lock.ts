/**
 * One single-node `serve` per data dir. Two would each start an actor on every connection and
 * each hold its own in-flight Idempotency-Keys in memory: one key sent to both placed two broker
 * orders (ops probe), and both would fit legs, re-place survivors and follow up webhooks. The CLI
 * commands may still share the data dir with a running `serve` (LMDB is multi-process).
 *
 * Node has no flock, so the lock is a file (`serve.lock`: pid, host, start time) created with
 * O_EXCL and touched every few seconds. It is held while it is fresh, unless its holder is on
 * this host and gone (SIGKILL: a restart takes it over at once) or is this very process (a
 * container restarted with the same pid). A holder on another host (two containers on one volume)
 * is known only by its heartbeat: a lock not touched for `staleMs` is taken over.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const SERVE_LOCK_FILE = 'serve.lock';

/** What the lock file holds. */
interface LockInfo {
  pid: number;
  host: string;
  startedAt: string;
  /** Tells this process's lock from one another process wrote over it. */
  nonce: string;
}

export interface ServeLockOptions {
  /** How often the holder touches the lock (ms). */
  beatMs?: number;
  /** A lock not touched for this long is taken over (ms). */
  staleMs?: number;
}

/** The data dir is held by another running `serve`. */
export class DataDirInUseError extends Error {
  constructor(dataDir: string, holder: LockInfo) {
    super(
      `the data dir ${dataDir} is in use by another tradegate serve (pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}): ` +
        'stop it first, or give this one another --data-dir (TRADEGATE_DATA_DIR). Two servers on one data dir would each place orders: ' +
        'an Idempotency-Key in flight is known only to the process that holds it',
    );
    this.name = 'DataDirInUseError';
  }
}

export interface ServeLock {
  /** Stops the heartbeat and removes the lock if it is still this process's. */
  release(): void;
}

const BEAT_MS = 5_000;
const STALE_MS = 15_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readLock(path: string): { info: LockInfo | undefined; mtimeMs: number } | undefined {
  try {
    const mtimeMs = statSync(path).mtimeMs;
    let info: LockInfo | undefined;
    try {
      info = JSON.parse(readFileSync(path, 'utf8')) as LockInfo;
    } catch {
      info = undefined; // being written, or damaged: judged by its age alone
    }
    return { info, mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The lock as found: its holder when it still holds it, or the stale lock to replace. */
function look(path: string, staleMs: number): { holder?: LockInfo; stale?: { nonce: string | undefined; mtimeMs: number } } {
  const found = readLock(path);
  if (!found) return {};
  const stale = { nonce: found.info?.nonce, mtimeMs: found.mtimeMs };
  if (Date.now() - found.mtimeMs >= staleMs) return { stale };
  const { info } = found;
  if (!info) return { holder: { pid: 0, host: 'unknown', startedAt: new Date(found.mtimeMs).toISOString(), nonce: '' } };
  if (info.host === hostname() && (info.pid === process.pid || !alive(info.pid))) return { stale };
  return { holder: info };
}

/** Takes the data dir's serve lock, or throws DataDirInUseError naming its holder. */
export function acquireServeLock(dataDir: string, opts: ServeLockOptions = {}): ServeLock {
  const path = join(dataDir, SERVE_LOCK_FILE);
  const staleMs = opts.staleMs ?? STALE_MS;
  const mine: LockInfo = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), nonce: randomUUID() };
  const text = `${JSON.stringify(mine)}\n`;
  for (let attempt = 0; ; attempt++) {
    const { holder, stale } = look(path, staleMs);
    if (holder) throw new DataDirInUseError(dataDir, holder);
    // Only the stale lock just judged is removed: another serve's fresh one written since stays,
    // and our exclusive create below then fails and looks again.
    const now = stale && readLock(path);
    if (now && now.mtimeMs === stale.mtimeMs && now.info?.nonce === stale.nonce) {
      try {
        unlinkSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    try {
      writeFileSync(path, text, { flag: 'wx', mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw err;
    }
  }
  const ours = (): boolean => readLock(path)?.info?.nonce === mine.nonce;
  const beat = setInterval(() => {
    try {
      if (ours()) utimesSync(path, new Date(), new Date());
    } catch {
      // the data dir went away; nothing to keep
    }
  }, opts.beatMs ?? BEAT_MS);
  beat.unref();
  return {
    release() {
      clearInterval(beat);
      try {
        if (ours()) unlinkSync(path);
      } catch {
        // already gone
      }
    },
  };
}
