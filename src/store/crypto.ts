/**
 * Secrets at rest: the data key, AES-256-GCM sealing, digests, constant-time comparison,
 * random base62 strings and scrypt password hashes. Nothing here logs or stores plaintext.
 */
import { createCipheriv, createDecipheriv, hash, randomBytes, scrypt, timingSafeEqual as nodeTimingSafeEqual } from 'node:crypto';
import { chmodSync, closeSync, existsSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { makeDirs } from './file-modes.js';
import { join } from 'node:path';

export const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random string of `length` base62 characters from the CSPRNG, without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const bytes = randomBytes(Math.max(16, (length - out.length) * 2));
    for (const b of bytes) {
      // 248 = 62 × 4: bytes at or above it would favour the first characters.
      if (b < 248) out += BASE62[b % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** SHA-256 of a UTF-8 string or bytes, as lower-case hex (one-shot `crypto.hash`: ~0.5 µs, `createHash` ~1.8 µs here). */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/** SHA-256 of a UTF-8 string or bytes, as 32 raw bytes. */
export function sha256(data: string | Uint8Array): Buffer {
  return hash('sha256', data, 'buffer');
}

/**
 * Constant-time equality of two hex digests. Strings of different lengths are unequal
 * (their length is not secret: every digest we compare is 64 hex chars).
 */
export function timingSafeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  if (x.length !== y.length) return false;
  return nodeTimingSafeEqual(x, y);
}

// ---------------------------------------------------------------------------
// Data key

export const DATA_KEY_FILE = 'data.key';

/**
 * Returns the 32-byte data key: `dataKey` (64 hex chars, from config) when given, otherwise
 * the key file `<dataDir>/data.key`, created with mode 0600 on first use (unless `create` is false).
 */
export function loadDataKey(dataDir: string, dataKey?: string, opts: { create?: boolean } = {}): Buffer {
  if (dataKey !== undefined) {
    if (!/^[0-9a-fA-F]{64}$/.test(dataKey)) throw new Error('dataKey must be 64 hex characters (32 bytes)');
    return Buffer.from(dataKey, 'hex');
  }
  makeDirs(dataDir);
  const file = join(dataDir, DATA_KEY_FILE);
  if (!existsSync(file)) {
    if (opts.create === false) {
      throw new Error(`${file} is missing but this data dir holds data sealed with a key: restore the file or set TRADEGATE_DATA_KEY`);
    }
    createKeyFile(file);
  }
  const key = readFileSync(file);
  if (key.length !== 32) throw new Error(`${file} must hold exactly 32 bytes (found ${key.length})`);
  return key;
}

/**
 * The server and a CLI command may both start on a fresh data dir at once. The key is
 * written completely to a private temp file and then hard-linked into place: link() fails
 * with EEXIST if another process won, so nobody ever reads a half-written key file.
 */
function createKeyFile(file: string): void {
  const tmp = `${file}.${process.pid}.${randomBase62(8)}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, randomBytes(32));
  } finally {
    closeSync(fd);
  }
  chmodSync(tmp, 0o600); // the umask may have narrowed the mode, never widened it; be explicit
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
}

// ---------------------------------------------------------------------------
// Sealing: version byte | 12-byte IV | 16-byte GCM tag | ciphertext

const SEAL_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Seals and opens small secrets with AES-256-GCM under one data key. */
export interface Sealer {
  /** Encrypts `plaintext`; `aad` binds the ciphertext to its record (e.g. `connection:<id>`). */
  seal(plaintext: string, aad: string): Buffer;
  /** Decrypts what `seal` produced with the same `aad`; throws when tampered or misbound. */
  open(sealed: Uint8Array, aad: string): string;
}

/** A Sealer over a 32-byte key. */
export function createSealer(key: Buffer): Sealer {
  if (key.length !== 32) throw new Error('data key must be 32 bytes');
  return {
    seal(plaintext, aad) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(aad, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return Buffer.concat([Buffer.from([SEAL_VERSION]), iv, cipher.getAuthTag(), body]);
    },
    open(sealed, aad) {
      const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
      if (buf.length < 1 + IV_BYTES + TAG_BYTES || buf[0] !== SEAL_VERSION) throw new Error('sealed value has an unknown format');
      const iv = buf.subarray(1, 1 + IV_BYTES);
      const tag = buf.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
      const decipher = createDecipheriv('aes-256-gcm', key, iv);
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(buf.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    },
  };
}

// ---------------------------------------------------------------------------
// Passwords: scrypt, salted, parameters stored with the hash so they can be raised later.

// One of OWASP's equivalent scrypt settings, "N=2^14, r=8, p=5": the 16 MiB variant, the
// kindest to a small shared box. node:crypto.scrypt runs on the libuv pool, off the event loop.
const SCRYPT = { N: 2 ** 14, r: 8, p: 5, keyLen: 32, saltLen: 16 };

function scryptAsync(password: string, salt: Buffer, N: number, r: number, p: number, keyLen: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLen, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** Hashes a password as `scrypt$N$r$p$<salt b64>$<hash b64>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SCRYPT.saltLen);
  const key = await scryptAsync(password, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keyLen);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** Checks a password against `hashPassword` output in constant time; false for malformed hashes. */
export async function verifyPasswordHash(password: string, stored: string): Promise<boolean> {
  const [kind, n, r, p, salt, hash] = stored.split('$');
  if (kind !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scryptAsync(password, Buffer.from(salt, 'base64'), Number(n), Number(r), Number(p), expected.length);
  return actual.length === expected.length && nodeTimingSafeEqual(actual, expected);
}

let dummyHash: Promise<string> | undefined;

/** A valid hash of a random password (made once, lazily): checked when a user is unknown, so timing does not reveal names. */
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBase62(24));
  return dummyHash;
}
