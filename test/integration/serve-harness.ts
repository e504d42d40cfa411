/**
 * Runs `node bin/tradegate.js serve --paper --port 0` in a temp data dir, the way a user
 * runs `npm start`, and reads what it prints (URL, paper broker, demo key, account ids).
 * Requires dist/ (built by `npm test`, or `npx tsc -p tsconfig.json`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

export interface Served {
  url: string;
  paperUrl: string;
  controlUrl: string;
  apiKey: string;
  accounts: string[];
  dataDir: string;
  stdout(): string;
  stderr(): string;
  proc: ChildProcess;
  /** SIGTERM, resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts the service and waits for its first-run banner (`logLevel` defaults to warn). */
export async function startServe(env: Record<string, string> = {}, opts: { logLevel?: string } = {}): Promise<Served> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tg-e2e-'));
  const proc = spawn(
    process.execPath,
    ['bin/tradegate.js', 'serve', '--paper', '--port', '0', '--data-dir', dataDir, '--log-level', opts.logLevel ?? 'warn'],
    { cwd: PACKAGE_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));

  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not print its banner in time:\n${out}\n${err}`)), 40_000);
    const check = () => {
      if (/^ {2}accounts: .*$/m.test(out) && /^ {2}Try:$/m.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    };
    proc.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}:\n${out}\n${err}`));
    });
  });
  const pick = (re: RegExp) => {
    const m = re.exec(banner);
    if (!m) throw new Error(`banner lacks ${re}:\n${banner}`);
    return m[1]!;
  };
  const url = pick(/^listening (\S+)$/m);
  const paperUrl = pick(/^ {2}paper broker: (\S+)$/m);
  const served: Served = {
    url,
    paperUrl,
    controlUrl: `${paperUrl}/control`,
    apiKey: pick(/^ {2}API key: +(tgk_\S+)$/m),
    accounts: pick(/^ {2}accounts: +(.*)$/m).split(', ').filter((s) => /^\d+$/.test(s)),
    dataDir,
    proc,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const code = await exited;
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

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** One HTTP request; JSON bodies are serialized unless `raw` is given. */
export async function http(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers['x-api-key'] = opts.key;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(opts.timeoutMs !== undefined ? { signal: AbortSignal.timeout(opts.timeoutMs) } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Like `http`, from a chosen loopback source address (127.0.0.0/8 all reaches the server):
 * tests that send many bad credentials on purpose spread them over addresses so the
 * per-IP failed-auth limiter (30/min) does not block the cells that follow.
 */
export function httpFrom(
  localAddress: string,
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers['x-api-key'] = opts.key;
  const body = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (opts.raw === undefined && body !== undefined) headers['content-type'] ??= 'application/json';
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, headers, localAddress, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve({ status: res.statusCode ?? 0, headers: h, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The paper broker's state (control API). */
export async function simState(s: Served): Promise<any> {
  return (await http(s.controlUrl, 'GET', '/state')).json;
}

/** A control API call that must succeed. */
export async function control(s: Served, path: string, body: unknown = {}): Promise<any> {
  const r = await http(s.controlUrl, 'POST', path, { body });
  if (r.status >= 300) throw new Error(`control ${path} → ${r.status} ${r.text}`);
  return r.json;
}

/** Polls `probe` until it returns a truthy value (events arrive asynchronously over the broker link). */
export async function eventually<T>(probe: () => Promise<T | undefined | false>, what: string, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs a `tradegate` CLI command against the served data dir (LMDB is multi-process). */
export function cli(s: Served, args: string[]): Promise<string> {
  return cliAt(s.dataDir, args);
}

/** Runs a `tradegate` CLI command against `dataDir`, feeding `stdin` when given; throws on a non-zero exit. */
export async function cliAt(dataDir: string, args: string[], stdin?: string): Promise<string> {
  const proc = spawn(process.execPath, ['bin/tradegate.js', ...args, '--data-dir', dataDir], {
    cwd: PACKAGE_ROOT,
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  if (stdin !== undefined) proc.stdin!.end(stdin);
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  if (code !== 0) throw new Error(`tradegate ${args.join(' ')} → ${code}: ${err}`);
  return out;
}

/** Creates an API key with the CLI; returns its id and secret. */
export async function createKey(s: Served, user: string, scopes: string, name = 'k'): Promise<{ id: string; key: string }> {
  const out = JSON.parse(await cli(s, ['keys', 'create', '--user', user, '--name', name, '--scopes', scopes, '--json'])) as { id: string; key: string };
  return { id: out.id, key: out.key };
}
