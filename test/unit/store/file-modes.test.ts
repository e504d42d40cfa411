import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDirs, makePrivate, sharedDirWarning, withPrivateUmask } from '../../../src/store/file-modes.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'tg-fm-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const modeOf = (p: string) => statSync(p).mode & 0o777;

describe('file modes', () => {
  it('creates files private under withPrivateUmask and restores the umask after', () => {
    const dir = tempDir();
    const before = process.umask();
    withPrivateUmask(() => writeFileSync(join(dir, 'f'), 'x'));
    expect(modeOf(join(dir, 'f'))).toBe(0o600);
    expect(process.umask()).toBe(before);
  });

  it('restores the umask when the creation throws', () => {
    const before = process.umask();
    expect(() => withPrivateUmask(() => { throw new Error('boom'); })).toThrow('boom');
    expect(process.umask()).toBe(before);
  });

  it('makePrivate narrows existing files and skips missing ones', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a'), 'x');
    chmodSync(join(dir, 'a'), 0o644);
    makePrivate(join(dir, 'a'), join(dir, 'missing'));
    expect(modeOf(join(dir, 'a'))).toBe(0o600);
  });

  it('warns for group- or world-accessible directories only', () => {
    const dir = tempDir();
    chmodSync(dir, 0o700);
    expect(sharedDirWarning(dir)).toBeUndefined();
    chmodSync(dir, 0o710);
    expect(sharedDirWarning(dir)).toMatch(/mode 0710/);
    chmodSync(dir, 0o701);
    expect(sharedDirWarning(dir)).toMatch(/mode 0701/);
  });
});

describe('makeDirs', () => {
  it('creates missing parents with the mode, leaves an existing directory alone, and refuses a file as EEXIST and a path under one as ENOTDIR', () => {
    const root = mkdtempSync(join(tmpdir(), 'tg-dirs-'));
    try {
      const deep = join(root, 'a', 'b', 'c');
      makeDirs(deep, 0o700);
      expect(statSync(deep).isDirectory()).toBe(true);
      expect(statSync(join(root, 'a')).mode & 0o777).toBe(0o700 & ~process.umask());
      makeDirs(deep, 0o700);
      writeFileSync(join(root, 'f'), '');
      expect(() => makeDirs(join(root, 'f'))).toThrow(expect.objectContaining({ code: 'EEXIST' }));
      expect(() => makeDirs(join(root, 'f', 'x'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it.runIf(process.platform === 'linux')('a path under /proc is an error at once, not the endless loop of recursive mkdir (clients probe: serve --data-dir /proc/x spun at 100 % CPU and ignored SIGTERM)', () => {
    expect(() => makeDirs('/proc/tradegate-nope/deeper', 0o700)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
