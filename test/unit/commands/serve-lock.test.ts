import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { acquireServeLock, DataDirInUseError, SERVE_LOCK_FILE } from '../../../src/commands/serve-lock.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-lock-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const lockPath = () => join(dir, SERVE_LOCK_FILE);
const writeHolder = (pid: number, host = hostname(), ageMs = 0, startedAt = new Date().toISOString()) => {
  writeFileSync(lockPath(), JSON.stringify({ pid, host, startedAt, nonce: 'other' }));
  const at = new Date(Date.now() - ageMs);
  utimesSync(lockPath(), at, at);
};

describe('one serve per data dir', () => {
  it('a second serve on a data dir another live serve holds is refused, naming the holder', () => {
    writeHolder(process.ppid); // a live process on this host
    expect(() => acquireServeLock(dir)).toThrow(DataDirInUseError);
    expect(() => acquireServeLock(dir)).toThrow(`is in use by another tradegate serve (pid ${process.ppid} on ${hostname()}`);
  });

  it('a live holder on this host keeps its lock however late its heartbeat (re-probe: SIGSTOP for 16 s, and a second serve took over)', () => {
    writeHolder(process.ppid, hostname(), 60_000);
    expect(() => acquireServeLock(dir, { staleMs: 15_000 })).toThrow(DataDirInUseError);
  });

  it('a holder pid that now names a process started after the lock (a reboot reused it) is no holder', () => {
    writeHolder(process.ppid, hostname(), 0, '2020-01-01T00:00:00.000Z');
    acquireServeLock(dir).release();
  });

  it('an empty or damaged lock says so, and is taken over once stale', () => {
    writeFileSync(lockPath(), '');
    expect(() => acquireServeLock(dir)).toThrow('has a serve.lock that is empty or damaged');
    const old = new Date(Date.now() - 20_000);
    utimesSync(lockPath(), old, old);
    acquireServeLock(dir).release();
  });

  it('a holder that finds its lock taken by another serve is told to stop', async () => {
    const lost: string[] = [];
    const lock = acquireServeLock(dir, { beatMs: 20, onLost: (h) => lost.push(h) });
    writeHolder(4242, 'other-container');
    await new Promise((r) => setTimeout(r, 80));
    expect(lost).toEqual([expect.stringContaining('pid 4242 on other-container')]);
    lock.release();
  });

  it('a lock written by this very process (a container restarted with the same pid) is taken over', () => {
    writeHolder(process.pid);
    acquireServeLock(dir).release();
  });

  it('a lock whose holder on this host is gone (SIGKILL) is taken over at once', () => {
    writeHolder(2 ** 22 + 12345); // above pid_max: no such process
    const lock = acquireServeLock(dir);
    expect(JSON.parse(readFileSync(lockPath(), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    lock.release();
    expect(existsSync(lockPath())).toBe(false);
  });

  it('a holder killed but not yet reaped by its parent (a zombie) is gone: a restart right after a SIGKILL is not refused', async () => {
    // `sleep 0` exits at once; the shell then becomes `sleep 30`, which never waits for it.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const zombie = Number((await once(parent.stdout!, 'data'))[0].toString().trim());
      const state = async () => readFileSync(`/proc/${zombie}/stat`, 'utf8').split(') ')[1]![0];
      for (let i = 0; i < 100 && (await state()) !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20));
      expect(await state()).toBe('Z');
      writeHolder(zombie);
      acquireServeLock(dir).release();
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('a holder on another host is known by its heartbeat: held while fresh, taken over once stale', () => {
    writeHolder(1, 'other-container', 1_000);
    expect(() => acquireServeLock(dir, { staleMs: 15_000 })).toThrow('pid 1 on other-container');
    writeHolder(1, 'other-container', 20_000);
    acquireServeLock(dir, { staleMs: 15_000 }).release();
  });

  it('the holder keeps its lock fresh, and release leaves a lock another serve wrote since alone', async () => {
    const lock = acquireServeLock(dir, { beatMs: 20 });
    const old = new Date(Date.now() - 60_000);
    utimesSync(lockPath(), old, old);
    await new Promise((r) => setTimeout(r, 80));
    expect(Date.now() - statSync(lockPath()).mtimeMs).toBeLessThan(1_000);
    writeHolder(process.ppid, 'other-container');
    lock.release();
    expect(JSON.parse(readFileSync(lockPath(), 'utf8'))).toMatchObject({ host: 'other-container' });
  });
});
