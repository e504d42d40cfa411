/**
 * README quick start, verbatim: `npm start` (= serve --paper), then the curl it prints
 * places a paper order with the printed key. A restart keeps the demo user, its key and
 * (with a fresh paper broker) the same account ids; SIGTERM exits 0.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../src/paths.js';
import { http } from '../../support/http.js';

const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'tg-quickstart-'));
const started: ChildProcess[] = [];

/** `npm start` in its own process group, so SIGTERM reaches the service behind npm. */
async function npmStart(until: RegExp): Promise<{ proc: ChildProcess; out: () => string; exited: Promise<number | null> }> {
  const proc = spawn('npm', ['start', '--silent'], {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, PORT: '0', TRADEGATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  started.push(proc);
  let out = '';
  let err = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start printed no ${until}:\n${out}\n${err}`)), 45_000);
    const check = () => {
      if (until.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', check);
    void exited.then((code) => reject(new Error(`npm start exited with ${code}:\n${out}\n${err}`)));
  });
  return { proc, out: () => out, exited };
}

/**
 * SIGTERM to the group. npm itself may die of the signal while the service shuts down
 * gracefully, so success is: npm exits 0 or by SIGTERM, and the service printed `stopped`
 * (it reaches that line only after closing streams, actors, the paper broker and LMDB).
 */
async function stop(p: { proc: ChildProcess; exited: Promise<number | null>; out: () => string }): Promise<boolean> {
  process.kill(-p.proc.pid!, 'SIGTERM');
  const code = await p.exited;
  await new Promise<void>((resolve) => (p.proc.stdout!.readableEnded ? resolve() : p.proc.stdout!.once('end', () => resolve())));
  return (code === 0 || p.proc.signalCode === 'SIGTERM') && /^stopped$/m.test(p.out());
}

afterAll(() => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) process.kill(-p.pid!, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('quick start', () => {
  let firstAccounts: string[] = [];
  let key = '';

  it('npm start prints the URLs, the login and the key once; the printed curl places a paper order', async () => {
    const first = await npmStart(/^ +-d '.*'$/m);
    const out = first.out();
    expect(out).toMatch(/^listening http:\/\/127\.0\.0\.1:\d+$/m);
    expect(out).toMatch(/API docs: +http:\/\/127\.0\.0\.1:\d+\/api-docs$/m);
    expect(out).toMatch(/login: +demo \/ \S+$/m);
    key = /API key: +(tgk_\S+)$/m.exec(out)![1]!;
    firstAccounts = /accounts: +(.*)$/m.exec(out)![1]!.split(', ');
    expect(firstAccounts).toHaveLength(2);

    const creds = join(dataDir, 'demo-credentials.json');
    expect(statSync(creds).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(creds, 'utf8')).apiKey).toBe(key);

    const curl = out.slice(out.indexOf('curl -s')).trim();
    const { stdout } = await run('sh', ['-c', curl]);
    const order = JSON.parse(stdout) as { orderId: string; symbol: string; status: string };
    expect(order.orderId).toMatch(/^\d+$/);
    expect(order.symbol).toMatch(/^ES[HMUZ]\d$/);
    expect(order.status).toBe('filled');

    expect(await stop(first)).toBe(true);
  }, 60_000);

  it('a restart keeps the demo user, its key and the account ids, without printing the key again', async () => {
    const again = await npmStart(/^ {2}data: .*$/m);
    const url = /^listening (\S+)$/m.exec(again.out())![1]!;
    expect(again.out()).not.toContain('First run');
    expect(again.out()).not.toContain(key);
    const accounts = await (async () => {
      for (let i = 0; i < 200; i++) {
        const r = await http(url, 'GET', '/api/v1/accounts', { key });
        if (r.status === 200 && r.json.data.length === 2) return r.json.data.map((a: { id: string }) => a.id) as string[];
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error('accounts not reported after restart');
    })();
    expect(accounts).toEqual(firstAccounts);
    const r = await http(url, 'POST', `/api/v1/accounts/${accounts[0]}/orders`, { key, body: { symbol: 'MES1!', side: 'sell', qty: 1 } });
    expect(r.status, r.text).toBe(201);
    expect(await stop(again)).toBe(true);
  }, 60_000);

  it('tradegate serve --paper exits 0 right after its graceful shutdown (nothing lingers once it says stopped)', async () => {
    const proc = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin/tradegate.js'), 'serve', '--paper', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(proc);
    let out = '';
    let stoppedAt = 0;
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (!stoppedAt && /^stopped$/m.test(out)) stoppedAt = Date.now();
    });
    let exitedAt = 0;
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => ((exitedAt = Date.now()), resolve(code))));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve printed no data line:\n${out}`)), 45_000);
      proc.stdout!.on('data', () => {
        const m = /^listening (\S+)$/m.exec(out);
        if (m && /^ {2}data: /m.test(out)) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
    });
    // Its actor is connected (the shutdown then has an actor and a broker session to close).
    for (let i = 0; i < 200 && (await http(url, 'GET', '/api/v1/accounts', { key })).json?.data?.length !== 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    await new Promise<void>((resolve) => (proc.stdout!.readableEnded ? resolve() : proc.stdout!.once('end', () => resolve())));
    expect(stoppedAt).toBeGreaterThan(0);
    // A stray timer would hold the process after `stopped` (a 2.5 s one did); orchestrators bound a stop.
    expect(exitedAt - stoppedAt).toBeLessThan(1500);
  }, 60_000);
});
