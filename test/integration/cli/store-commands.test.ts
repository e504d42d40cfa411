/**
 * The store-backed CLI (`users`, `keys`, `connections`) as real processes against a temp data
 * dir, including while another process (standing in for the server) holds the same LMDB
 * environment open: the CLI must still work and that process must see its writes.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../src/paths.js';
import { openStore } from '../../../src/store/index.js';
import { runCli, type CliResult } from '../../support/processes.js';

const BIN = join(PACKAGE_ROOT, 'bin', 'tradegate.js');
const DIST_STORE = join(PACKAGE_ROOT, 'dist', 'src', 'store', 'index.js');

/** Sources this test runs compiled; dist is rebuilt when any is newer than its output. */
const SOURCES = [
  'src/cli.ts',
  'src/config.ts',
  'src/commands/users.ts',
  'src/commands/keys.ts',
  'src/commands/connections.ts',
  'src/commands/store-command.ts',
  ...readdirSync(join(PACKAGE_ROOT, 'src', 'store'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `src/store/${f}`),
];

function distIsStale(): boolean {
  return SOURCES.some((src) => {
    const out = join(PACKAGE_ROOT, 'dist', src.replace(/\.ts$/, '.js'));
    return !existsSync(out) || statSync(out).mtimeMs < statSync(join(PACKAGE_ROOT, src)).mtimeMs;
  });
}

beforeAll(() => {
  // `npm test` builds first; when run alone after an edit, build here. tsc emits even when
  // unrelated files have type errors, so its exit code is not the verdict: the outputs are.
  if (distIsStale()) spawnSync(process.execPath, [join(PACKAGE_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: PACKAGE_ROOT });
  expect(distIsStale()).toBe(false);
}, 180_000);

let dir: string;
const dirs: string[] = [];
function newDataDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tradegate-cli-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs `tradegate <args> --data-dir <dir>` with optional stdin. */
function cli(args: string[], input?: string, dataDir = dir): Promise<CliResult> {
  return runCli(dataDir, args, input);
}

/**
 * A separate process that opens the store and keeps it open, answering one JSON line per
 * command: what the running server would see.
 */
class Holder {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: AsyncIterator<string>;

  constructor(dataDir: string) {
    const script = `
      import { createInterface } from 'node:readline';
      const { openStore } = await import(${JSON.stringify(pathToFileURL(DIST_STORE).href)});
      const store = await openStore({ dataDir: ${JSON.stringify(dataDir)} });
      const say = (v) => process.stdout.write(JSON.stringify(v ?? null) + '\\n');
      say('ready');
      for await (const line of createInterface({ input: process.stdin })) {
        const [cmd, arg] = line.split(' ');
        if (cmd === 'verify') say(store.apiKeys.verify(arg));
        else if (cmd === 'user') say(store.users.byName(arg));
        else if (cmd === 'idem') { await store.idempotency.put('crash', arg, { fingerprint: 'f', status: 201, headers: {}, body: arg }); say('stored'); }
        else if (cmd === 'close') { await store.close(); say('closed'); process.exit(0); }
      }
    `;
    this.child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: PACKAGE_ROOT });
    this.lines = createInterface({ input: this.child.stdout })[Symbol.asyncIterator]();
  }

  async next(): Promise<unknown> {
    const { value, done } = await this.lines.next();
    if (done) throw new Error('holder process ended');
    return JSON.parse(value) as unknown;
  }

  async ask(command: string): Promise<unknown> {
    this.child.stdin.write(`${command}\n`);
    return this.next();
  }

  kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.kill('SIGKILL');
    });
  }
}

const holders: Holder[] = [];
async function startHolder(dataDir = dir): Promise<Holder> {
  const h = new Holder(dataDir);
  holders.push(h);
  expect(await h.next()).toBe('ready');
  return h;
}
afterEach(async () => {
  await Promise.all(holders.splice(0).map((h) => h.kill()));
});

describe('tradegate --help', () => {
  it('is the package bin and lists every command with its summary (exit 0)', () => {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(pkg.bin).toEqual({ tradegate: 'bin/tradegate.js' });
    const r = spawnSync(process.execPath, [BIN, '--help'], { cwd: PACKAGE_ROOT, encoding: 'utf8' });
    expect(r.status).toBe(0);
    for (const command of ['serve', 'sim', 'users', 'keys', 'connections', 'bench']) expect(r.stdout).toMatch(new RegExp(`^  ${command}\\s+\\S`, 'm'));
  });

  it('runs the same when the compiled module is started directly (node dist/src/cli.js)', () => {
    const compiled = join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');
    const help = spawnSync(process.execPath, [compiled, '--help'], { cwd: PACKAGE_ROOT, encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^  serve\s+\S/m);
    const unknown = spawnSync(process.execPath, [compiled, 'nope'], { cwd: PACKAGE_ROOT, encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'nope'");
  });
});

describe('tradegate users', () => {
  beforeAll(() => {
    dir = newDataDir();
  });

  it('adds users (password from stdin) and lists them; a taken or malformed name fails with a message', async () => {
    const a = await cli(['users', 'add', 'alice']);
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(/created user alice \(usr_[A-Za-z0-9]{12}\)/);
    const b = await cli(['users', 'add', 'bob', '--password-stdin'], 'bob-password-1\n');
    expect(b.code).toBe(0);
    expect(b.stdout + b.stderr).not.toContain('bob-password-1');

    const list = await cli(['users', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+ID\s+CREATED\nalice\s+usr_\w+\s+\S+\nbob\s+usr_\w+/);

    const dup = await cli(['users', 'add', 'alice']);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain("user 'alice' already exists");
    const bad = await cli(['users', 'add', 'no spaces']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/user name must be/);
    const noPw = await cli(['users', 'add', 'carol', '--password-stdin'], '');
    expect(noPw.code).toBe(2);
    // Too short for the web app's password rule, and a name that differs from a taken one only in case.
    const short = await cli(['users', 'add', 'carol', '--password-stdin'], 'x\n');
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/at least 12 characters/);
    expect((await cli(['users', 'list'])).stdout).not.toContain('carol');
    const lookalike = await cli(['users', 'add', 'Alice']);
    expect(lookalike.code).toBe(1);
    expect(lookalike.stderr).toContain("user 'alice' already exists");
  });

  it('rejects unknown subcommands and options with the usage (exit 2)', async () => {
    const [r, o] = await Promise.all([cli(['users', 'frobnicate']), cli(['users', 'list', '--bogus'])]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown subcommand 'frobnicate'[\s\S]*Usage: tradegate users/);
    expect(o.code).toBe(2);
    expect(o.stderr).toContain('--bogus');
  });
});

describe('tradegate keys, while another process holds the store open', () => {
  beforeAll(async () => {
    dir = newDataDir();
    expect((await cli(['users', 'add', 'alice'])).code).toBe(0);
  });

  it('creates a key shown once, lists it by prefix only, revokes it, and the other process sees each step', async () => {
    const holder = await startHolder();
    expect(await holder.ask('user alice')).toMatchObject({ name: 'alice' });

    const created = await cli(['keys', 'create', '--user', 'alice', '--name', 'bot', '--scopes', 'read,trade', '--json']);
    expect(created.code).toBe(0);
    const out = JSON.parse(created.stdout) as { id: string; key: string; name: string; scopes: string[]; user: string };
    expect(Object.keys(out).sort()).toEqual(['id', 'key', 'name', 'scopes', 'user']);
    expect(out).toMatchObject({ name: 'bot', scopes: ['read', 'trade'], user: 'alice' });
    expect(out.key).toMatch(new RegExp(`^tgk_${out.id}_[A-Za-z0-9]{32}$`));

    // The running process authenticates the new key without reopening anything.
    expect(await holder.ask(`verify ${out.key}`)).toMatchObject({ id: out.id, name: 'bot', scopes: ['read', 'trade'], revokedAt: null });

    const list = await cli(['keys', 'list', '--user', 'alice']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`tgk_${out.id}`);
    expect(list.stdout).toMatch(/bot\s+read,trade/);
    expect(list.stdout).not.toContain(out.key);
    expect(list.stdout).not.toContain(out.key.slice(-32));

    const revoked = await cli(['keys', 'revoke', out.id]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain(`revoked key ${out.id}`);
    expect(await holder.ask(`verify ${out.key}`)).toBeNull();
    expect((await cli(['keys', 'list', '--user', 'alice'])).stdout).toMatch(/revoked \d{4}-/);
    expect((await cli(['keys', 'revoke', `tgk_${out.id}`])).stdout).toContain('already revoked');
    // --json as the other subcommands take it (clients probe: plain text).
    expect(JSON.parse((await cli(['keys', 'revoke', out.id, '--json'])).stdout)).toEqual({ id: out.id, revoked: true, already: true });
  });

  it('prints the plain key alone on stdout without --json', async () => {
    const r = await cli(['keys', 'create', '--user', 'alice', '--name', 'plain', '--scopes', 'read']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^tgk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}\n$/);
    expect(r.stderr).toMatch(/shown only this once/);
  });

  it('refuses a key name with a terminal escape, a right-to-left override or tag characters, as the API does (re-probe: stored and printed as is)', async () => {
    for (const name of ['\u001b[31mred', 'Main\u202eyrros', `EVAL1${String.fromCodePoint(0xe0041)}`]) {
      const r = await cli(['keys', 'create', '--user', 'alice', '--name', name, '--scopes', 'read']);
      expect(r.code, JSON.stringify(name)).not.toBe(0);
      expect(r.stderr).toContain('key name must show something, and must not contain control, invisible or bidirectional-override characters');
      expect(r.stdout).not.toContain('\u001b');
    }
  });

  it('fails clearly on an unknown user, bad scopes, or an unknown key id', async () => {
    // Independent failures, run side by side to keep the file quick.
    const [u, s, k] = await Promise.all([
      cli(['keys', 'create', '--user', 'nobody', '--name', 'x', '--scopes', 'read']),
      cli(['keys', 'create', '--user', 'alice', '--name', 'x', '--scopes', 'read,admin']),
      cli(['keys', 'revoke', 'AAAAAAAAAAAA']),
    ]);
    expect(u.code).toBe(1);
    expect(u.stderr).toContain("unknown user 'nobody'");
    expect(s.code).toBe(2);
    expect(s.stderr).toContain("invalid scope(s) 'admin'");
    expect(k.code).toBe(1);
    expect(k.stderr).toContain("no API key with id 'AAAAAAAAAAAA'");
  });
});

describe('tradegate connections', () => {
  beforeAll(async () => {
    dir = newDataDir();
    expect((await cli(['users', 'add', 'alice'])).code).toBe(0);
  });

  it('adds a paper connection with derived URLs and a Tradovate demo one; passwords never echo or land in clear', async () => {
    const p = await cli(
      ['connections', 'add', '--user', 'alice', '--paper', '--paper-url', 'http://127.0.0.1:8091/', '--paper-user', 'ptrader', '--password-stdin', '--json'],
      'paper-secret-77\n',
    );
    expect(p.code).toBe(0);
    expect(JSON.parse(p.stdout)).toMatchObject({
      name: 'paper-ptrader',
      broker: 'paper',
      environment: 'paper',
      restUrl: 'http://127.0.0.1:8091/v1',
      wsUrl: 'ws://127.0.0.1:8091/v1/websocket',
      user: 'alice',
    });
    const t = await cli(['connections', 'add', '--user', 'alice', '--tradovate-demo', '--broker-user', 'jdoe', '--name', 'demo'], 'tradovate-secret-88\n');
    expect(t.code).toBe(0);
    const list = await cli(['connections', 'list', '--user', 'alice']);
    expect(list.stdout).toMatch(/paper-ptrader\s+paper\s+paper\s+http:\/\/127\.0\.0\.1:8091\/v1/);
    expect(list.stdout).toMatch(/demo\s+tradovate\s+demo\s+https:\/\/demo\.tradovateapi\.com\/v1/);
    for (const r of [p, t, list]) expect(r.stdout + r.stderr).not.toMatch(/paper-secret-77|tradovate-secret-88/);

    const store = await openStore({ dataDir: dir });
    try {
      const conns = store.connections.listByUser(store.users.byName('alice')!.id);
      expect(conns.map((c) => store.connections.credentials(c.id).password).sort()).toEqual(['paper-secret-77', 'tradovate-secret-88']);
    } finally {
      await store.close();
    }
  });

  it('refuses a second connection of the user to the same broker login (exit 1, naming the first)', async () => {
    const again = await cli(['connections', 'add', '--user', 'alice', '--tradovate-demo', '--broker-user', 'JDOE'], 'another\n');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already logs in as this tradovate demo user/);
    const list = await cli(['connections', 'list', '--user', 'alice', '--json']);
    expect((JSON.parse(list.stdout) as { broker: string }[]).filter((c) => c.broker === 'tradovate')).toHaveLength(1);
    // The same user name on the live environment is another login.
    expect((await cli(['connections', 'add', '--user', 'alice', '--tradovate-live', '--broker-user', 'jdoe'], 'pw\n')).code).toBe(0);
  });

  it('requires exactly one broker choice, its details, and a Tradovate password on stdin', async () => {
    const [none, noUser, noPw] = await Promise.all([
      cli(['connections', 'add', '--user', 'alice']),
      cli(['connections', 'add', '--user', 'alice', '--paper', '--paper-url', 'http://127.0.0.1:1']),
      cli(['connections', 'add', '--user', 'alice', '--tradovate-live', '--broker-user', 'jdoe'], ''),
    ]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('choose exactly one of --paper, --tradovate-demo, --tradovate-live');
    expect(noUser.code).toBe(2);
    expect(noUser.stderr).toContain('--paper-user');
    expect(noPw.code).toBe(2);
    expect(noPw.stderr).toContain('broker password on the first line of stdin');
  });
});

describe('store durability across processes', () => {
  it('a write the holder acknowledged survives kill -9 of the holder', async () => {
    dir = newDataDir();
    const holder = await startHolder();
    expect(await holder.ask('idem order-key-1')).toBe('stored');
    await holder.kill();
    const store = await openStore({ dataDir: dir, clock: () => Date.now() });
    try {
      expect(store.idempotency.get('crash', 'order-key-1')).toMatchObject({ status: 201, body: 'order-key-1' });
    } finally {
      await store.close();
    }
  });
});

describe('tradegate connections add and keys create under the per-user quotas', () => {
  it('refuses past QUOTA_CONNECTIONS and QUOTA_API_KEYS with the setting named, exit 1', async () => {
    const quotaDir = newDataDir();
    const settings = { QUOTA_CONNECTIONS: '1', QUOTA_API_KEYS: '1' };
    expect((await runCli(quotaDir, ['users', 'add', 'q'])).code).toBe(0);
    const add = () => runCli(quotaDir, ['connections', 'add', '--user', 'q', '--paper', '--paper-url', 'http://127.0.0.1:9', '--paper-user', 'x', '--password-stdin'], 'pw\n', settings);
    expect((await add()).code).toBe(0);
    const second = await add();
    expect([second.code, second.stderr]).toEqual([1, expect.stringContaining('At most 1 broker connections per user (QUOTA_CONNECTIONS)')]);
    const key = () => runCli(quotaDir, ['keys', 'create', '--user', 'q', '--name', 'k', '--scopes', 'read'], '', settings);
    expect((await key()).code).toBe(0);
    expect((await key()).stderr).toContain('At most 1 API keys (not revoked) per user (QUOTA_API_KEYS)');
  });
});
