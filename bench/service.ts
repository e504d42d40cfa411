/**
 * The system under test: a real `tradegate serve --paper` child process with its own temp
 * data dir and ports, plus the helpers a scenario needs around it (API calls, the paper
 * broker's control API, API keys in bulk, the server's RSS). One service per scenario, so
 * scenarios never see each other's orders, keys or connections.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PACKAGE_ROOT } from '../src/paths.js';
import { cpuSnapshot, type CpuSnapshot } from './cpu.js';

/** An HTTP answer with its parsed body. */
export interface ApiAnswer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

/** Finds a free TCP port on loopback (bind to 0, read, close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Polls `probe` every `everyMs` until it returns a value (not undefined) or the deadline passes. */
export async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      lastError = err;
    }
    await sleep(everyMs);
  }
  const why = lastError instanceof Error ? `: ${lastError.message}` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}

/** Calls a paper broker's control API (`<brokerUrl>/control/...`); throws on a non-2xx answer. */
export async function paperControl<T = unknown>(brokerUrl: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${brokerUrl}/control${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`control ${method} ${path}: HTTP ${res.status} ${text.slice(0, 200)}`);
  return (text ? JSON.parse(text) : null) as T;
}

/** Reads a process's resident set size (kB) from /proc; 0 where /proc is unavailable. */
export async function rssKB(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** A `.cpuprofile` written by a service thread (open in Chrome DevTools → Performance). */
export interface ProfileFile {
  /** The scenario whose service wrote it. */
  scenario: string;
  /** front, actor-<threadId>, paper-broker (or thread-<id> for a thread that was not named). */
  thread: string;
  file: string;
}

/** `--cpu-prof` file names: CPU.<date>.<time>.<pid>.<threadId>.<seq>.cpuprofile */
const CPU_PROFILE = /^CPU\.\d+\.\d+\.(\d+)\.(\d+)\.\d+\.cpuprofile$/;

/** How to start a service (Service.start). */
interface StartOptions {
  logLevel?: string;
  startTimeoutMs?: number;
  serveArgs?: string[];
  env?: Record<string, string>;
  dataDir?: string;
}

/** A start that failed because a port it picked was taken before the service listened. */
class PortTaken extends Error {}

/** A running `tradegate serve --paper`. */
export class Service {
  private static readonly live = new Set<Service>();
  /** Set by `bench --profile`: every service writes a CPU profile per thread into `dir/<scenario>`. */
  static profiling: { dir: string; scenario: string } | undefined;
  /** Profiles written so far (renamed after their threads). */
  static readonly profiles: ProfileFile[] = [];
  private lastCpu: CpuSnapshot | undefined;

  /** Stops every service still running (the bench was interrupted). */
  static async stopAll(): Promise<void> {
    await Promise.all([...Service.live].map((s) => s.stop()));
  }

  private exited: { code: number | null; signal: string | null } | undefined;
  private readonly exit: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    readonly dataDir: string,
    readonly port: number,
    readonly paperPort: number,
    readonly metricsPort: number,
    private readonly logFile: string,
    private readonly profile: { dir: string; scenario: string } | undefined,
  ) {
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exited = { code, signal };
        resolve();
      }),
    );
  }

  /** `http://127.0.0.1:PORT` of the service. */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The service's /metrics (its own listener). */
  get metricsUrl(): string {
    return `http://127.0.0.1:${this.metricsPort}/metrics`;
  }

  /** CPU by thread now (see cpu.ts); remembered for naming the threads' profiles. */
  async cpu(): Promise<CpuSnapshot> {
    this.lastCpu = await cpuSnapshot(this.metricsUrl, this.pid);
    return this.lastCpu;
  }

  /** The embedded paper broker's addresses. */
  get paper(): { url: string; restUrl: string; wsUrl: string } {
    const url = `http://127.0.0.1:${this.paperPort}`;
    return { url, restUrl: `${url}/v1`, wsUrl: `ws://127.0.0.1:${this.paperPort}/v1/websocket` };
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /**
   * Starts the service on fresh ports and a fresh data dir and waits until it is ready.
   * `serveArgs` replace `--paper --paper-port P` (e.g. a cluster node, or a service using an
   * external paper broker); `dataDir` reuses a prepared one.
   */
  static async start(opts: StartOptions = {}): Promise<Service> {
    // A free port can be taken between picking it and the service's listen (another process of the
    // run): that start is tried again on new ports, its data dir kept.
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await Service.startOnce(opts, attempt < 3);
      } catch (err) {
        if (!(err instanceof PortTaken)) throw err;
      }
    }
  }

  private static async startOnce(opts: StartOptions, mayRetry: boolean): Promise<Service> {
    const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'tradegate-bench-')));
    const port = await freePort();
    const paperPort = opts.serveArgs ? 0 : await freePort();
    const metricsPort = await freePort();
    const logFile = join(dataDir, 'server.log');
    const log = createWriteStream(logFile);
    const profile = Service.profiling && { dir: join(Service.profiling.dir, Service.profiling.scenario), scenario: Service.profiling.scenario };
    if (profile) await mkdir(profile.dir, { recursive: true });
    const args = [
      // One V8 CPU profile per thread (worker threads inherit the flags), written at exit.
      ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile.dir}`] : []),
      // As `npm start` and the bin's shebang run it (README "Performance": SSE memory).
      '--max-semi-space-size=2',
      join(PACKAGE_ROOT, 'bin', 'tradegate.js'),
      'serve',
      ...(opts.serveArgs ?? ['--paper', '--paper-port', String(paperPort)]),
      '--host', '127.0.0.1',
      '--port', String(port),
      '--data-dir', dataDir,
      '--metrics-port', String(metricsPort),
      '--log-level', opts.logLevel ?? 'warn',
    ];
    const child = spawn(process.execPath, args, { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    const service = new Service(child, dataDir, port, paperPort, metricsPort, logFile, profile);
    Service.live.add(service);
    try {
      await Promise.race([
        service.exit,
        waitFor('the service to answer /readyz', opts.startTimeoutMs ?? 30_000, async () => {
          const res = await fetch(`${service.origin}/readyz`).catch(() => undefined);
          return res?.status === 200 || service.exited ? true : undefined;
        }),
      ]);
      if (service.exited) throw new Error(`service exited (${JSON.stringify(service.exited)})`);
    } catch (err) {
      const tail = await service.logTail();
      if (mayRetry && /EADDRINUSE/.test(tail)) {
        // Keep a data dir the caller prepared (the retry uses it); a fresh one goes.
        await service.stop(opts.dataDir === undefined);
        throw new PortTaken(tail);
      }
      await service.stop();
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tail}`);
    }
    return service;
  }

  /** The last lines of the server's output (for error messages). */
  async logTail(lines = 20): Promise<string> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  }

  /** The first-run demo credentials (`data/demo-credentials.json`). */
  async demo(): Promise<{ apiKey: string; connectionId: string }> {
    return waitFor('demo-credentials.json', 20_000, async () => {
      const text = await readFile(join(this.dataDir, 'demo-credentials.json'), 'utf8').catch(() => undefined);
      return text ? (JSON.parse(text) as { apiKey: string; connectionId: string }) : undefined;
    });
  }

  /** Calls the service's API with an API key; rejects after `timeoutMs` (default 15 s) without an answer. */
  async api<T = unknown>(
    method: string,
    path: string,
    key: string | undefined,
    body?: unknown,
    headers: Record<string, string> = {},
    timeoutMs = 15_000,
  ): Promise<ApiAnswer<T>> {
    const h: Record<string, string> = { accept: 'application/json', ...headers };
    if (key) h['x-api-key'] = key;
    if (body !== undefined) h['content-type'] = 'application/json';
    const res = await fetch(`${this.origin}${path}`, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }

  /** Calls the paper broker's control API (`/control/...`). */
  control<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    return paperControl<T>(this.paper.url, method, path, body);
  }

  /** Resident set size of the service process (all its threads), kB. */
  rssKB(): Promise<number> {
    return rssKB(this.pid);
  }

  /** Stops the process (SIGTERM, then SIGKILL after 5 s) and removes the data dir (unless told to keep it). */
  async stop(removeData = true): Promise<void> {
    Service.live.delete(this);
    // Thread names for the profiles: the threads still running are the ones that write them.
    if (this.profile && !this.exited) await this.cpu().catch(() => undefined);
    if (!this.exited && this.child.pid) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      await this.exit;
      clearTimeout(timer);
    }
    if (this.profile) await this.nameProfiles(this.profile);
    if (removeData) await rm(this.dataDir, { recursive: true, force: true });
  }

  /** Renames this process's `--cpu-prof` files after their threads (`<scenario>-<thread>.cpuprofile`). */
  private async nameProfiles(profile: { dir: string; scenario: string }): Promise<void> {
    const names = this.lastCpu?.threadIds ?? {};
    for (const file of await readdir(profile.dir).catch(() => [] as string[])) {
      const m = CPU_PROFILE.exec(file);
      if (!m || Number(m[1]) !== this.pid) continue;
      const thread = names[m[2]!] ?? `thread-${m[2]}`;
      let target = join(profile.dir, `${profile.scenario}-${thread}.cpuprofile`);
      if (Service.profiles.some((p) => p.file === target)) target = join(profile.dir, `${profile.scenario}-${thread}-${m[2]}.cpuprofile`);
      await rename(join(profile.dir, file), target);
      Service.profiles.push({ scenario: profile.scenario, thread, file: target });
    }
  }
}
