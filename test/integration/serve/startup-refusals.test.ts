/**
 * What `serve` and the CLI refuse at start, as an operator meets it (operator probe): a port
 * another serve listens on (uWS's default SO_REUSEPORT let a second one start and take half the
 * connections), a store file cut short (SIGBUS, no message) or empty beside a data key (started
 * afresh, replacing every user), a store LMDB reports corrupt (a fatal message, then the process
 * lived on), a paper-logins.json it cannot read (replaced silently), and a read-only CLI command on
 * a mistyped data dir (an empty table, and a new store).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../support/http.js';
import { runCli, spawnTradegate, startServe, type Served } from '../../support/processes.js';

const STORE = 'tradegate.lmdb';
const dirs: string[] = [];
let s: Served;

beforeAll(async () => {
  s = await startServe();
}, 60_000);

afterAll(async () => {
  await s?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tg-refuse-'));
  dirs.push(d);
  return d;
}

/** A data dir with a store holding one user (made by the CLI, as an operator would). */
async function dataDirWithUser(): Promise<string> {
  const dir = tempDir();
  const made = await runCli(dir, ['users', 'add', 'alice']);
  expect(made.code, made.stderr).toBe(0);
  return dir;
}

/** Runs `serve --paper` on `dir` to its end (at most `ms`); its exit code, signal and output. */
async function serveUntilExit(dir: string, port = 0, ms = 20_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  const p = spawnTradegate(['serve', '--paper', '--port', String(port), '--data-dir', dir, '--log-level', 'warn']);
  let signal: NodeJS.Signals | null = null;
  p.proc.once('exit', (_code, sig) => (signal = sig));
  const timer = setTimeout(() => p.proc.kill('SIGKILL'), ms);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, signal, output: p.output() };
}

describe('start-up refusals', () => {
  it('a second serve on a port in use exits 1 naming the port, and the first keeps every request (operator probe: both listened, a valid key got 200 and 401 in turn)', async () => {
    const port = Number(new URL(s.url).port);
    const second = await serveUntilExit(tempDir(), port);
    expect(second.code, second.output).toBe(1);
    expect(second.output).toContain(`cannot listen on 127.0.0.1:${port} (PORT, --port): the port is in use`);
    for (let i = 0; i < 20; i++) expect((await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey })).status).toBe(200);
    // The embedded paper broker's port in use: named as such.
    const paperPort = new URL(s.paperUrl).port;
    const p = spawnTradegate(['serve', '--paper', '--port', '0', '--paper-port', paperPort, '--data-dir', tempDir(), '--log-level', 'warn']);
    expect(await p.exited, p.output()).toBe(1);
    expect(p.output()).toContain(`cannot start the paper broker on 127.0.0.1:${paperPort} (--paper-port, TRADEGATE_PAPER_PORT)`);
  }, 60_000);

  it('a store file cut short is refused with a message by serve and the CLI, not a SIGBUS (operator probe: "Bus error", exit 135)', async () => {
    const dir = await dataDirWithUser();
    const pages = statSync(join(dir, STORE)).size / 4096;
    expect(pages).toBeGreaterThan(2);
    for (const size of [20_000, 2 * 4096]) {
      truncateSync(join(dir, STORE), size);
      const served = await serveUntilExit(dir);
      expect([served.code, served.signal], served.output).toEqual([1, null]);
      expect(served.output).toMatch(/tradegate\.lmdb is damaged \(.*cut short\): LMDB would crash reading it/);
      const listed = await runCli(dir, ['users', 'list']);
      expect(listed.code, listed.stderr).toBe(1);
      expect(listed.stderr).toMatch(/is damaged/);
    }
  }, 60_000);

  it('a store file whose first meta page is overwritten is refused with a message, not a SIGSEGV (ops probe: exit 139, no output)', async () => {
    const dir = await dataDirWithUser();
    const fd = openSync(join(dir, STORE), 'r+');
    writeSync(fd, randomBytes(64), 0, 64, 16);
    closeSync(fd);
    const served = await serveUntilExit(dir);
    expect([served.code, served.signal], served.output).toEqual([1, null]);
    expect(served.output).toMatch(/tradegate\.lmdb is damaged \(one of its two LMDB meta pages is not one any more\)/);
    const listed = await runCli(dir, ['users', 'list']);
    expect(listed.code, listed.stderr).toBe(1);
  }, 60_000);

  it('an empty store file beside the data key is not a first run: refused, and the saved files stay as they were (operator probe: a new demo user, every other user gone)', async () => {
    const dir = await dataDirWithUser();
    writeFileSync(join(dir, STORE), '');
    const served = await serveUntilExit(dir);
    expect(served.code, served.output).toBe(1);
    expect(served.output).toMatch(/tradegate\.lmdb is empty, but .* is not a new data dir \(it holds data\.key\)/);
    expect(existsSync(join(dir, 'demo-credentials.json'))).toBe(false);
    expect(statSync(join(dir, STORE)).size).toBe(0);
  }, 60_000);

  it('a store LMDB finds corrupt stops serve with its message, and the process exits (operator probe: still running 20 s later, the first SIGTERM ignored)', async () => {
    const dir = await dataDirWithUser();
    // Every page after the two meta pages zeroed: the first read of any record finds a page of
    // the wrong type (random bytes can instead name a page past the end: a SIGBUS, README "Known").
    const size = statSync(join(dir, STORE)).size;
    const fd = openSync(join(dir, STORE), 'r+');
    writeSync(fd, Buffer.alloc(size - 2 * 4096), 0, size - 2 * 4096, 2 * 4096);
    closeSync(fd);
    const started = Date.now();
    const served = await serveUntilExit(dir);
    expect([served.code, served.signal], served.output).toEqual([1, null]);
    expect(served.output).toMatch(/tradegate serve: MDB_/);
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 60_000);

  it('serve --paper refuses a paper-logins.json it cannot read, and leaves it as it was (operator probe: replaced silently, the paper accounts came back with new ids)', async () => {
    const dir = await dataDirWithUser();
    writeFileSync(join(dir, 'paper-logins.json'), '{bad');
    const served = await serveUntilExit(dir);
    expect(served.code, served.output).toBe(1);
    expect(served.output).toContain('paper-logins.json cannot be read');
    expect(readFileSync(join(dir, 'paper-logins.json'), 'utf8')).toBe('{bad');
  }, 60_000);

  it('a read-only CLI command on a data dir with no store says so and creates nothing (operator probe: an empty table, exit 0, and a new store)', async () => {
    const missing = join(tempDir(), 'typo');
    for (const args of [['users', 'list'], ['keys', 'list', '--user', 'alice'], ['connections', 'list', '--user', 'alice'], ['keys', 'revoke', 'abcdefghijkl']]) {
      const r = await runCli(missing, args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`no tradegate store in ${missing} (--data-dir, TRADEGATE_DATA_DIR)`);
    }
    expect(existsSync(missing)).toBe(false);
    // users add starts a data dir (before a first serve without --paper).
    expect((await runCli(missing, ['users', 'add', 'alice'])).code).toBe(0);
    expect((await runCli(missing, ['users', 'list'])).stdout).toContain('alice');
  }, 60_000);
});
