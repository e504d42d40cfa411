/**
 * Helpers of the reliability tests (DESIGN §14): the paper broker as its own process (so it
 * survives when the service is killed), the service started without `--paper` on a data dir
 * that outlives it, users wired to the external broker through the CLI, an SSE reader and
 * a seeded random source. Builds on serve-harness (http, cliAt); requires dist/.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** A seeded PRNG (the paper broker's), so a failing run can be replayed from its seed. */
export { seededRandom } from '../../src/sim/prices.js';
import { cliAt, http } from './serve-harness.js';

/** A spawned `tradegate` process with its captured output. */
export interface Spawned {
  proc: ChildProcess;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

function spawnTradegate(args: string[], env: Record<string, string> = {}): Spawned {
  const proc = spawn(process.execPath, ['bin/tradegate.js', ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

/** Waits until `re` matches the process output; rejects if it exits first or after `ms`. */
async function awaitOutput(p: Spawned, re: RegExp, ms: number): Promise<RegExpExecArray> {
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

/** One parsed SSE message. */
export type HealthEvent = { type: string; connectionId?: string; status?: string; reason?: string; detail?: string; ts: number };

/** An open SSE health stream that collects events as they arrive. */
export interface HealthStream {
  events: HealthEvent[];
  /** Resolves with the first event at index ≥ `from` that matches, or throws after `ms`. */
  waitFor(match: (e: HealthEvent) => boolean, from: number, ms: number): Promise<{ event: HealthEvent; index: number }>;
  close(): void;
}

/** Opens `GET /api/v1/connection-health/stream` and parses `data:` lines in the background. */
export async function openHealthStream(url: string, apiKey: string): Promise<HealthStream> {
  const abort = new AbortController();
  const res = await fetch(`${url}/api/v1/connection-health/stream`, {
    headers: { 'x-api-key': apiKey, accept: 'text/event-stream' },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`health stream: ${res.status} ${await res.text()}`);
  const events: HealthEvent[] = [];
  const waiters = new Set<() => void>();
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const data = buffer
            .slice(0, cut)
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          buffer = buffer.slice(cut + 2);
          if (data) events.push(JSON.parse(data) as HealthEvent);
        }
        for (const w of waiters) w();
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    events,
    waitFor(match, from, ms) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (let i = from; i < events.length; i++) {
            if (match(events[i]!)) {
              cleanup();
              resolve({ event: events[i]!, index: i });
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no matching health event within ${ms} ms; got ${JSON.stringify(events.slice(from))}`));
        }, ms);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    close: () => abort.abort(),
  };
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
