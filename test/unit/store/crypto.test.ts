import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSealer,
  hashPassword,
  loadDataKey,
  randomBase62,
  sha256Hex,
  timingSafeEqual,
  verifyPasswordHash,
} from '../../../src/store/crypto.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tradegate-crypto-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('data key', () => {
  it('creates a 32-byte key file with mode 0600 on first use and reuses it afterwards', () => {
    const dir = tempDir();
    const first = loadDataKey(dir);
    expect(first).toHaveLength(32);
    expect(statSync(join(dir, 'data.key')).mode & 0o777).toBe(0o600);
    expect(loadDataKey(dir).equals(first)).toBe(true);
  });

  it('uses the configured hex key instead of a file', () => {
    const dir = tempDir();
    const hex = 'ab'.repeat(32);
    expect(loadDataKey(dir, hex).toString('hex')).toBe(hex);
    expect(() => readFileSync(join(dir, 'data.key'))).toThrow();
  });

  it('refuses a malformed configured key or a truncated key file', () => {
    const dir = tempDir();
    expect(() => loadDataKey(dir, 'abc')).toThrow(/64 hex/);
    writeFileSync(join(dir, 'data.key'), Buffer.alloc(5));
    expect(() => loadDataKey(dir)).toThrow(/32 bytes/);
  });
});

describe('sealer (AES-256-GCM)', () => {
  const sealer = createSealer(Buffer.alloc(32, 7));

  it('round-trips and never contains the plaintext', () => {
    const sealed = sealer.seal('hunter2-secret', 'connection:1');
    expect(sealed[0]).toBe(1);
    expect(sealed.includes(Buffer.from('hunter2-secret'))).toBe(false);
    expect(sealer.open(sealed, 'connection:1')).toBe('hunter2-secret');
  });

  it('uses a fresh IV each time', () => {
    expect(sealer.seal('x', 'a').equals(sealer.seal('x', 'a'))).toBe(false);
  });

  it('rejects a ciphertext moved to another record (AAD), tampered, or under another key', () => {
    const sealed = sealer.seal('token', 'webhook-token:A');
    expect(() => sealer.open(sealed, 'webhook-token:B')).toThrow();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => sealer.open(tampered, 'webhook-token:A')).toThrow();
    expect(() => createSealer(Buffer.alloc(32, 8)).open(sealed, 'webhook-token:A')).toThrow();
    expect(() => sealer.open(Buffer.from([2, 0, 0]), 'webhook-token:A')).toThrow(/format/);
  });
});

describe('helpers', () => {
  it('randomBase62 yields the requested length from the base62 alphabet', () => {
    for (const n of [1, 12, 32, 100]) expect(randomBase62(n)).toMatch(new RegExp(`^[A-Za-z0-9]{${n}}$`));
    expect(randomBase62(32)).not.toBe(randomBase62(32));
  });

  it('sha256Hex matches a known vector', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('timingSafeEqual compares equal-length digests and rejects different lengths without throwing', () => {
    expect(timingSafeEqual(sha256Hex('a'), sha256Hex('a'))).toBe(true);
    expect(timingSafeEqual(sha256Hex('a'), sha256Hex('b'))).toBe(false);
    expect(timingSafeEqual('ab', 'abc')).toBe(false);
  });
});

describe('password hashing (scrypt)', () => {
  it('verifies the right password only, and salts each hash', async () => {
    const [a, b] = await Promise.all([hashPassword('correct horse'), hashPassword('correct horse')]);
    expect(a).toMatch(/^scrypt\$/);
    expect(a).not.toBe(b);
    expect(a.includes('correct horse')).toBe(false);
    expect(await verifyPasswordHash('correct horse', a)).toBe(true);
    expect(await verifyPasswordHash('correct horsf', a)).toBe(false);
    expect(await verifyPasswordHash('x', 'not-a-hash')).toBe(false);
  });
});
