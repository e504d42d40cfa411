/**
 * Every file in the data dir is private to the service's user (0600): the LMDB environment
 * holds key digests, password hashes and the order journal, and LMDB creates its data and
 * lock files with the process umask (0644 under the usual 022). The directory itself is
 * created 0700; a pre-existing directory that others may enter is reported, not changed
 * (it may be a mount point whose owner chose its mode).
 */
import { chmodSync, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates `dir` and its missing parents (mode for those it creates), as `mkdirSync(dir, {recursive:
 * true})` would, but one level at a time: Node 20's recursive mkdir loops for good, at 100 % CPU,
 * on a path whose parent exists and refuses it with ENOENT, as /proc does (clients probe: `serve
 * --data-dir /proc/x` spun forever and could only be killed). Throws that error instead.
 */
export function makeDirs(dir: string, mode?: number): void {
  const missing: string[] = [];
  let at = resolve(dir);
  while (!existsSync(at)) {
    missing.push(at);
    const parent = dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path, mode === undefined ? undefined : { mode });
    } catch (err) {
      // Made meanwhile by another process: as good as made here.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  // There already, as something else than a directory (recursive mkdir says EEXIST too).
  if (missing.length === 0 && !statSync(at).isDirectory()) throw Object.assign(new Error(`EEXIST: file already exists, mkdir '${dir}'`), { code: 'EEXIST', path: dir });
}

/** Mode of every data file. */
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Runs `create` (a synchronous call that creates files, such as LMDB's open) with the umask
 * set to 077, so nothing it creates is ever readable by others, not even for an instant.
 * process.umask cannot be set in a worker thread; there `create` runs under the inherited umask
 * and the chmod that follows still applies.
 */
export function withPrivateUmask<T>(create: () => T): T {
  let previous: number | undefined;
  try {
    previous = process.umask(0o077);
  } catch {
    previous = undefined;
  }
  try {
    return create();
  } finally {
    if (previous !== undefined) process.umask(previous);
  }
}

/** Sets 0600 on each existing file of `paths` (files made by older versions, or under another umask). */
export function makePrivate(...paths: string[]): void {
  for (const path of paths) {
    if (existsSync(path) && (statSync(path).mode & 0o777) !== PRIVATE_FILE_MODE) chmodSync(path, PRIVATE_FILE_MODE);
  }
}

/** A warning when `dir` can be entered or listed by its group or by others; undefined otherwise. */
export function sharedDirWarning(dir: string): string | undefined {
  const mode = statSync(dir).mode & 0o777;
  if ((mode & 0o077) === 0) return undefined;
  return `data directory ${dir} has mode ${mode.toString(8).padStart(4, '0')}: other users can reach it; the files inside are 0600, but run chmod 700 on it`;
}
