/**
 * Shared plumbing of the store-backed CLI commands (users, keys, connections): argument
 * parsing with clear usage errors, opening the store from `--data-dir`/config, reading
 * secrets from stdin, resolving users and printing tables.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, type Config } from '../config.js';
import { AppError } from '../domain/problems.js';
import { LMDB_DIR, openStore, type Store, type User } from '../store/index.js';

/** A mistake in how the command was called: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** parseArgs in strict mode, with its errors turned into UsageError; always accepts --data-dir and --cluster. */
export function parseCommand<O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options: { ...options, 'data-dir': { type: 'string' }, cluster: { type: 'string' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** The flags every store command shares. */
export interface StoreFlags {
  'data-dir'?: string | undefined;
  cluster?: string | undefined;
}

/**
 * Opens the store the flags and environment name (the data dir's LMDB, or the cluster's NATS
 * store with `--cluster`/TRADEGATE_CLUSTER), runs `fn`, and always closes the store. Only a
 * command that `creates` (users add) starts a new data dir; the others refuse one that has no
 * store (operator probe: `users list --data-dir /typo` printed an empty table, exit 0, and
 * left a new store there for `serve` to start on).
 */
export async function withStore<T>(flags: StoreFlags, fn: (store: Store, config: Config) => Promise<T>, opts: { creates?: boolean } = {}): Promise<T> {
  const config = loadConfig({ 'data-dir': flags['data-dir'], cluster: flags.cluster });
  if (config.cluster) {
    const { withClusterStore } = await import('./cluster-store.js');
    return withClusterStore(config, config.cluster, (store) => fn(store, config));
  }
  if (!opts.creates && !existsSync(join(config.dataDir, LMDB_DIR))) {
    throw new AppError(
      'NOT_FOUND',
      `no tradegate store in ${config.dataDir} (--data-dir, TRADEGATE_DATA_DIR): nothing was read or changed. \`serve\` or \`users add\` creates one`,
    );
  }
  const store = await openStore({ dataDir: config.dataDir, ...(config.dataKey && { dataKey: config.dataKey }), warn: note });
  try {
    return await fn(store, config);
  } finally {
    await store.close();
  }
}

/** Runs a subcommand: usage errors print the usage (exit 2); coded errors print their message (exit 1). */
export async function runCommand(name: string, usage: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`tradegate ${name}: ${err.message}\n\nUsage: ${usage}\n`);
      return 2;
    }
    if (err instanceof AppError) {
      process.stderr.write(`tradegate ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

/** All of stdin as lines (trailing CR removed); for secrets piped in with `--password-stdin`. */
export async function readStdinLines(): Promise<string[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The first line of stdin as a password; an empty one is a usage error. */
export async function readPassword(what = 'password'): Promise<string> {
  const [first] = await readStdinLines();
  if (!first) throw new UsageError(`expected the ${what} on the first line of stdin`);
  return first;
}

/** A user by name, or by id; NOT_FOUND with a clear message otherwise. */
export function resolveUser(store: Store, ref: string | undefined): User {
  if (!ref) throw new UsageError('--user is required');
  const user = store.users.byName(ref) ?? store.users.byId(ref);
  if (!user) throw new AppError('NOT_FOUND', `unknown user '${ref}'`);
  return user;
}

/** Rows as an aligned text table with a header line. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** Writes one line to stdout. */
export function print(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** Writes one line to stderr (notes that must not mix into machine-readable stdout). */
export function note(text: string): void {
  process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
}
