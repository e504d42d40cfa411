/**
 * `tradegate serve` deletes idempotency records older than 24 h (DESIGN §3): once at start-up and
 * then on an interval, so the LMDB file does not grow without bound. Needs dist/ (npm test builds it).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../src/paths.js';
import { IDEMPOTENCY_TTL_MS } from '../../../src/tuning.js';
import { openStore } from '../../../src/store/index.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const response = { fingerprint: 'f', status: 201, headers: {}, body: '{}' };

it('sweeps expired idempotency records at start-up and keeps live ones', async () => {
  dir = mkdtempSync(join(tmpdir(), 'tradegate-sweep-'));
  const past = Date.now() - IDEMPOTENCY_TTL_MS - 60 * 60_000;
  const old = await openStore({ dataDir: dir, clock: () => past });
  await old.idempotency.put('user:u', 'expired-key', response);
  await old.close();
  const fresh = await openStore({ dataDir: dir });
  await fresh.idempotency.put('user:u', 'live-key', response);
  await fresh.close();

  const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin/tradegate.js'), 'serve', '--port', '0', '--data-dir', dir, '--log-level', 'silent'], {
    cwd: PACKAGE_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  expect(await exited).toBe(0);

  // Read with the old clock: a record still in the file would read as live, so absence means deleted.
  const check = await openStore({ dataDir: dir, clock: () => past });
  try {
    expect(await check.idempotency.get('user:u', 'expired-key')).toBeUndefined();
    expect((await check.idempotency.get('user:u', 'live-key'))?.status).toBe(201);
  } finally {
    await check.close();
  }
});
