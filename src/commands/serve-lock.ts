/**
 * One single-node `serve` per data dir. Two would each start an actor on every connection and
 * each hold its own in-flight Idempotency-Keys in memory: one key sent to both placed two broker
 * orders (ops probe), and both would fit legs, re-place survivors and follow up webhooks. The CLI
 * commands may still share the data dir with a running `serve` (LMDB is multi-process).
 *
 * Node has no flock, so the lock is a file (`serve.lock`: pid, host, start time) created with
 * O_EXCL and touched every few seconds. A holder on this host holds it while its process lives,
 * however late its heartbeat (a stopped or swapped-out process is still a server): it is taken
 * over at once when that process is gone (SIGKILL, also while its parent has yet to reap it), was
 * started after the lock (its pid reused), or is this very process (a container restarted with
 * the same pid). A holder on another host
 * (two containers on one volume) is known only by its heartbeat: a lock not touched for `staleMs`
 * is taken over, and a holder that finds its lock taken stops (`onLost`).
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
  /** A lock from another host not touched for this long is taken over (ms). */
  staleMs?: number;
  /** Called once when the holder finds its lock taken by another serve: it must stop. */
  onLost?(holder: string): void;
}

const TWO_SERVERS = 'Two servers on one data dir would each place orders: an Idempotency-Key in flight is known only to the process that holds it';

/** The data dir is held by another running `serve`. */
export class DataDirInUseError extends Error {
  constructor(dataDir: string, holder: LockInfo | { damagedAgeMs: number }) {
    super(
      'damagedAgeMs' in holder
        ? `the data dir ${dataDir} has a serve.lock that is empty or damaged, written ${Math.round(holder.damagedAgeMs / 1000)} s ago (another serve starting?): ` +
            'try again in 15 s, or remove it if no serve runs on this data dir'
        : `the data dir ${dataDir} is in use by another tradegate serve (pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}): ` +
            `stop it first, or give this one another --data-dir (TRADEGATE_DATA_DIR). ${TWO_SERVERS}`,
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

/**
 * What /proc says of the process `pid`: its state letter and when it started (ms since the
 * epoch; its start time is in clock ticks since boot, 100 per second on Linux). Undefined where
 * /proc cannot say.
 */
function procStat(pid: number): { state: string; startedMs: number | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const boot = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'));
    const startedMs = boot && Number.isFinite(ticks) ? Number(boot[1]) * 1000 + ticks * 10 : undefined;
    return { state: fields[0] ?? '', startedMs };
  } catch {
    return undefined;
  }
}

/** Whether the lock's holder on this host is still the process that wrote it. */
function holderLives(info: LockInfo): boolean {
  if (info.pid === process.pid || !alive(info.pid)) return false;
  const stat = procStat(info.pid);
  if (stat === undefined) return true;
  // A killed process its parent has not reaped yet (Z) or is reaping (X) still answers kill 0,
  // but it holds nothing: a restart right after a SIGKILL was refused "in use" until then.
  if (stat.state === 'Z' || stat.state === 'X') return false;
  // A process started after the lock was written is another one under a reused pid (after a reboot).
  return stat.startedMs === undefined || stat.startedMs <= Date.parse(info.startedAt) + 1_000;
}

/** The lock as found: its holder when it still holds it, or the stale lock to replace. */
function look(path: string, staleMs: number): { holder?: LockInfo | { damagedAgeMs: number }; stale?: { nonce: string | undefined; mtimeMs: number } } {
  const found = readLock(path);
  if (!found) return {};
  const stale = { nonce: found.info?.nonce, mtimeMs: found.mtimeMs };
  const { info } = found;
  const ageMs = Date.now() - found.mtimeMs;
  if (info && info.host === hostname()) return holderLives(info) ? { holder: info } : { stale };
  if (ageMs >= staleMs) return { stale };
  return { holder: info ?? { damagedAgeMs: ageMs } };
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
  let lost = false;
  const beat = setInterval(() => {
    try {
      if (ours()) utimesSync(path, new Date(), new Date());
      else if (!lost) {
        const now = readLock(path)?.info;
        if (!now) return; // removed by hand: nothing to defend, nobody else holds it
        lost = true;
        opts.onLost?.(`pid ${now.pid} on ${now.host}, started ${now.startedAt}`);
      }
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
