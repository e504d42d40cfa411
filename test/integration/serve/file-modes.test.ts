/**
 * Every data file is private (0600) on disk, also in a pre-existing directory others can
 * enter, and the service warns about such a directory. Real `serve --paper` and a real CLI
 * command, real files.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { awaitOutput, runCli, spawnTradegate } from '../../support/processes.js';

const root = mkdtempSync(join(tmpdir(), 'tg-modes-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function modes(dir: string): Record<string, string> {
  return Object.fromEntries(readdirSync(dir).map((f) => [f, (statSync(join(dir, f)).mode & 0o777).toString(8)]));
}

describe('data file modes', () => {
  it('serve --paper in a 0755 directory creates every file 0600 and warns about the directory', async () => {
    const dataDir = join(root, 'served');
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const p = spawnTradegate(['serve', '--paper', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'], { TRADEGATE_DATA_KEY: '' });
    try {
      await awaitOutput(p, /^ {2}Try:$/m, 40_000);
      expect(p.output()).toMatch(/data directory .* has mode 0755/);
      const files = modes(dataDir);
      expect(Object.keys(files).sort()).toEqual(
        expect.arrayContaining(['data.key', 'demo-credentials.json', 'paper-logins.json', 'tradegate.lmdb', 'tradegate.lmdb-lock']),
      );
      for (const [name, mode] of Object.entries(files)) expect({ name, mode }).toEqual({ name, mode: '600' });
    } finally {
      p.proc.kill('SIGTERM');
      await p.exited;
    }
  });

  it('a CLI command fixes files an older version left 0644 and warns on stderr', async () => {
    const dataDir = join(root, 'cli');
    mkdirSync(dataDir, { mode: 0o750 });
    chmodSync(dataDir, 0o750);
    expect((await runCli(dataDir, ['users', 'add', 'alice'])).code).toBe(0);
    chmodSync(join(dataDir, 'tradegate.lmdb'), 0o644);
    chmodSync(join(dataDir, 'tradegate.lmdb-lock'), 0o644);
    const r = await runCli(dataDir, ['users', 'list']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/data directory .* has mode 0750: other users can reach it/);
    expect(modes(dataDir)).toEqual({ 'data.key': '600', 'tradegate.lmdb': '600', 'tradegate.lmdb-lock': '600' });
  });

  it('a fresh data dir is 0700 and draws no warning', async () => {
    const dataDir = join(root, 'fresh');
    const r = await runCli(dataDir, ['users', 'add', 'bob']);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/data directory/);
    expect((statSync(dataDir).mode & 0o777).toString(8)).toBe('700');
  });
});
