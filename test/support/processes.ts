/**
 * tradegate as real processes, the way users run it: `serve --paper` on a temp data dir (as
 * `npm start`), `serve` without a paper broker on a data dir that outlives it, `tradegate sim`
 * on its own, and the CLI against a data dir (LMDB is multi-process). Reads what they print.
 * Requires dist/ (built by `npm test`, or `npx tsc -p tsconfig.json`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { http } from './http.js';

/** A spawned `tradegate` process with its captured output. */
export interface Spawned {
  proc: ChildProcess;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** Starts `node bin/tradegate.js ARGS` with its output captured. */
export function spawnTradegate(args: string[], env: Record<string, string> = {}): Spawned {
  const proc = spawn(process.execPath, ['bin/tradegate.js', ...args], {
    cwd: PACKAGE_ROOT,
    // Tests run servers side by side: /metrics on a free port unless a test names one.
    env: { ...process.env, METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

/** Waits until `re` matches the process output; rejects if it exits first or after `ms`. */
export async function awaitOutput(p: Spawned, re: RegExp, ms: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${re} within ${ms} ms:\n${p.output()}`)), ms);
    const check = () => {
      const m = re.exec(p.output());
      if (!m) return;
      clearTimeout(timer);
      p.proc.stdout!.off('data', check);
      resolve(m);
    };
    p.proc.stdout!.on('data', check);
    check();
    void p.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`process exited with ${code}:\n${p.output()}`));
    });
  });
}

/** `serve --paper` after its first-run banner: where it listens, the demo key and accounts. */
export interface Served extends Spawned {
  url: string;
  /** `http://127.0.0.1:PORT/metrics` */
  metricsUrl: string;
  paperUrl: string;
  controlUrl: string;
  apiKey: string;
  /** The demo user's web login as printed at first start. */
  login: { name: string; password: string };
  accounts: string[];
  dataDir: string;
  /** SIGTERM, resolves with the exit code (and removes the data dir). */
  stop(): Promise<number | null>;
}

/** Starts `serve --paper` in a fresh data dir and waits for its first-run banner (`logLevel` defaults to warn). */
export async function startServe(env: Record<string, string> = {}, opts: { logLevel?: string } = {}): Promise<Served> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tg-e2e-'));
  const p = spawnTradegate(['serve', '--paper', '--port', '0', '--data-dir', dataDir, '--log-level', opts.logLevel ?? 'warn'], env);
  await awaitOutput(p, /^ {2}Try:$/m, 40_000);
  const banner = p.output();
  const pick = (re: RegExp) => {
    const m = re.exec(banner);
    if (!m) throw new Error(`banner lacks ${re}:\n${banner}`);
    return m[1]!;
  };
  const paperUrl = pick(/^ {2}paper broker: (\S+)$/m);
  const served: Served = {
    ...p,
    url: pick(/^listening (\S+)$/m),
    metricsUrl: pick(/^ {2}metrics: +(\S+)$/m),
    paperUrl,
    controlUrl: `${paperUrl}/control`,
    apiKey: pick(/^ {2}API key: +(tgk_\S+)$/m),
    login: { name: 'demo', password: pick(/^ {2}login: +demo \/ (\S+)$/m) },
    accounts: pick(/^ {2}accounts: +(.*)$/m).split(', ').filter((s) => /^\d+$/.test(s)),
    dataDir,
    async stop() {
      if (p.proc.exitCode === null) p.proc.kill('SIGTERM');
      const code = await p.exited;
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
  if (served.accounts.length < 2) {
    await served.stop();
    throw new Error(`demo accounts not reported:\n${banner}`);
  }
  return served;
}

/** `tradegate sim` running on its own. */
export interface SimProcess extends Spawned {
  /** Base URL for `connections add --paper-url`. */
  baseUrl: string;
  controlUrl: string;
  stop(): Promise<void>;
}

/** Starts the paper broker as a separate process with the price walk off. */
export async function startSimProcess(): Promise<SimProcess> {
  const p = spawnTradegate(['sim', '--port', '0', '--price-step-ms', '0', '--log-level', 'warn']);
  const m = await awaitOutput(p, /^ {2}control +(http:\/\/\S+)\/control/m, 20_000);
  const baseUrl = m[1]!;
  return {
    ...p,
    baseUrl,
    controlUrl: `${baseUrl}/control`,
    async stop() {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGTERM');
      await p.exited;
    },
  };
}

/** `tradegate serve` (no embedded broker) on a data dir that outlives the process. */
export interface ServiceProcess extends Spawned {
  url: string;
  /** Graceful stop (SIGTERM); resolves with the exit code. */
  stop(): Promise<number | null>;
  /** kill -9, as a crash. */
  crash(): Promise<void>;
}

/** Starts `serve --port 0` on `dataDir` and waits until it listens. */
export async function startService(dataDir: string, env: Record<string, string> = {}, logLevel = 'info'): Promise<ServiceProcess> {
  const p = spawnTradegate(['serve', '--port', '0', '--data-dir', dataDir, '--log-level', logLevel], env);
  const m = await awaitOutput(p, /^listening (\S+)$/m, 40_000);
  return {
    ...p,
    url: m[1]!,
    async stop() {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGTERM');
      return p.exited;
    },
    async crash() {
      p.proc.kill('SIGKILL');
      await p.exited;
    },
  };
}

/** Runs a `tradegate` CLI command against the served data dir (LMDB is multi-process). */
export function cli(s: Served, args: string[]): Promise<string> {
  return cliAt(s.dataDir, args);
}

/** What one CLI run printed and how it ended. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `tradegate ARGS --data-dir DIR` to its end, feeding `stdin` (empty by default). The
 * data dir and data key come from the arguments only, never from the caller's environment;
 * `extraEnv` adds settings (e.g. the quotas the served process runs with).
 */
export function runCli(dataDir: string, args: string[], stdin = '', extraEnv: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...extraEnv };
    delete env.TRADEGATE_DATA_DIR;
    delete env.TRADEGATE_DATA_KEY;
    const child = spawn(process.execPath, ['bin/tradegate.js', ...args, '--data-dir', dataDir], { cwd: PACKAGE_ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

/** Like runCli, for commands that must succeed: their stdout, or an Error with stderr. */
export async function cliAt(dataDir: string, args: string[], stdin?: string): Promise<string> {
  const r = await runCli(dataDir, args, stdin);
  if (r.code !== 0) throw new Error(`tradegate ${args.join(' ')} → ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Creates an API key with the CLI; returns its id and secret. */
export async function createKey(s: Served, user: string, scopes: string, name = 'k'): Promise<{ id: string; key: string }> {
  const out = JSON.parse(await cli(s, ['keys', 'create', '--user', user, '--name', name, '--scopes', scopes, '--json'])) as { id: string; key: string };
  return { id: out.id, key: out.key };
}

/** A service user with an API key and a paper connection at the external broker. */
export interface WiredUser {
  userId: string;
  name: string;
  apiKey: string;
  brokerUser: string;
  brokerPassword: string;
  connectionId: string;
  /** Broker account ids (strings, as the API shows them). */
  accounts: string[];
}

/** Creates the user, its key, a broker login with `accounts` and the connection (CLI + control API). */
export async function wireUser(dataDir: string, sim: SimProcess, name: string, accounts = ['A1']): Promise<WiredUser> {
  const brokerUser = `${name}-${randomBytes(4).toString('hex')}`;
  const brokerPassword = randomBytes(18).toString('base64url');
  const login = await http(sim.controlUrl, 'POST', '/users', {
    body: { name: brokerUser, password: brokerPassword, accounts: accounts.map((a) => ({ name: `${brokerUser}-${a}` })) },
  });
  if (login.status !== 201) throw new Error(`broker login: ${login.status} ${login.text}`);
  const user = JSON.parse(await cliAt(dataDir, ['users', 'add', name, '--json'])) as { id: string };
  const key = JSON.parse(await cliAt(dataDir, ['keys', 'create', '--user', name, '--name', 'k', '--scopes', 'read,trade', '--json'])) as { key: string };
  const conn = JSON.parse(
    await cliAt(
      dataDir,
      ['connections', 'add', '--user', name, '--paper', '--paper-url', sim.baseUrl, '--paper-user', brokerUser, '--password-stdin', '--json'],
      `${brokerPassword}\n`,
    ),
  ) as { id: string };
  return {
    userId: user.id,
    name,
    apiKey: key.key,
    brokerUser,
    brokerPassword,
    connectionId: conn.id,
    accounts: (login.json.accounts as { id: number }[]).map((a) => String(a.id)),
  };
}

/** Polls until the user's connection reports CONNECTED with its accounts (or throws after `ms`). */
export async function awaitConnected(url: string, apiKey: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await http(url, 'GET', '/api/v1/connections', { key: apiKey, timeoutMs: 5_000 }).catch(() => undefined);
    const list = (r?.json?.data ?? []) as { status: string; accountIds: string[] }[];
    if (list.length > 0 && list.every((c) => c.status === 'CONNECTED' && c.accountIds.length > 0)) return;
    if (Date.now() > deadline) throw new Error(`connection not CONNECTED within ${ms} ms: ${r?.text}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/**
 * Secret-looking strings in `text`: every listed secret that occurs, plus every standalone
 * 43-character base64url run (the shape of a paper-broker access token: 32 random bytes).
 */
export function secretsIn(text: string, secrets: string[]): string[] {
  const found = secrets.filter((s) => s.length >= 8 && text.includes(s));
  const tokenShaped = text.match(/(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g) ?? [];
  return [...found, ...tokenShaped];
}
