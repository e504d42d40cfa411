/**
 * Checks of the data dir's LMDB file before LMDB maps it. LMDB reads its file through a memory
 * map: a page past the end of a truncated file is a SIGBUS, which kills the process with no
 * message (operator probe: serve and `users list` printed only "Bus error", exit 135, so a
 * service manager restarted it in a loop). An empty file beside a data key is not a first run
 * either: started as one, it created a new demo user and overwrote the saved credentials, and
 * every other user, key and token was gone.
 *
 * What is read: LMDB's two meta pages (page 0 and page 1; mdb.c `MDB_meta`), the newer of them
 * (the larger txnid with the magic) names the page size and the root pages of LMDB's two core
 * trees. A sound file is a whole number of pages holding both roots. Not a full check: a page
 * elsewhere may still be gone; what LMDB itself reports (MDB_CORRUPTED, MDB_BAD_TXN) stops
 * `serve` with its message.
 */
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';

const MDB_MAGIC = 0xbeefc0de;
/** The page header before a meta page's MDB_meta (pgno, txnid, pad, flags, lower, upper). */
const PAGE_HEADER = 24;
/** Offsets inside MDB_meta: magic u32, version u32, address u64, mapsize u64, then two MDB_db of 48 bytes. */
const META = { magic: 0, dbs: 24, dbSize: 48, txnid: 128, end: 136 } as const;
/** Inside MDB_db: md_pad (the page size, in the free-page tree's copy), md_root. */
const DB = { pad: 0, root: 40 } as const;
/** LMDB's "no page" (an empty tree has no root). */
const P_INVALID = 0xffff_ffff_ffff_ffffn;

/** Files only an existing data dir holds (the store writes them on its first run). */
const EXISTING_DIR_MARKERS = ['data.key', 'demo-credentials.json', 'paper-logins.json'];

/** The data dir's store file is missing where it should not be, empty, or damaged. */
export class StoreFileError extends Error {
  override name = 'StoreFileError';
}

interface Meta {
  pageSize: number;
  txnid: bigint;
  roots: bigint[];
}

/**
 * Throws StoreFileError when `dataDir/file` cannot be the store this data dir had: missing or
 * empty beside the files of an existing data dir, or cut short. A data dir without any of them is
 * a first run (nothing to check).
 */
export function checkStoreFile(dataDir: string, file: string): void {
  const path = join(dataDir, file);
  const size = existsSync(path) ? statSync(path).size : undefined;
  if (size === undefined || size === 0) {
    const marker = EXISTING_DIR_MARKERS.find((name) => existsSync(join(dataDir, name)));
    if (!marker) return;
    throw new StoreFileError(
      `${path} is ${size === undefined ? 'missing' : 'empty'}, but ${dataDir} is not a new data dir (it holds ${marker}): starting afresh would replace its users, keys and tokens. ` +
        'Restore the store file from a backup, or move the data dir away to start with a new one',
    );
  }
  const metas = readMetas(path, size);
  const damaged = (what: string) =>
    new StoreFileError(`${path} is damaged (${what}): LMDB would crash reading it. Restore it from a backup, or move the data dir away to start with a new one`);
  if (metas.length === 0) throw damaged(`${size} bytes, no LMDB meta page in it`);
  // LMDB reads both and takes the newer; one of them damaged crashed it with no message (ops probe:
  // random bytes over the start of the file, then SIGSEGV in serve and every CLI command).
  if (metas.length === 1 || metas[0]!.pageSize !== metas[1]!.pageSize) throw damaged(`one of its two LMDB meta pages is not one any more`);
  const meta = metas.reduce((a, b) => (b.txnid > a.txnid ? b : a));
  if (size % meta.pageSize !== 0) throw damaged(`${size} bytes, not a whole number of ${meta.pageSize}-byte pages: cut short`);
  const pages = BigInt(size / meta.pageSize);
  const beyond = meta.roots.find((root) => root !== P_INVALID && root >= pages);
  if (beyond !== undefined) throw damaged(`${pages} pages, but its data starts at page ${beyond}: cut short`);
}

/** The meta pages at page 0 and page 1 that carry LMDB's magic. */
function readMetas(path: string, size: number): Meta[] {
  const fd = openSync(path, 'r');
  try {
    const first = readMeta(fd, 0, size);
    // Page 0 damaged: where page 1 starts is not known from it; LMDB's default page size is the OS page (4 KiB here).
    const second = readMeta(fd, first?.pageSize ?? 4096, size);
    return [first, second].filter((m): m is Meta => m !== undefined);
  } finally {
    closeSync(fd);
  }
}

function readMeta(fd: number, offset: number, size: number): Meta | undefined {
  if (offset + PAGE_HEADER + META.end > size) return undefined;
  const buf = Buffer.alloc(META.end);
  readSync(fd, buf, 0, META.end, offset + PAGE_HEADER);
  if (buf.readUInt32LE(META.magic) !== MDB_MAGIC) return undefined;
  const pageSize = buf.readUInt32LE(META.dbs + DB.pad);
  // A power of two between LMDB's smallest and largest page sizes, else not a meta page.
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) return undefined;
  const roots = [0, 1].map((i) => buf.readBigUInt64LE(META.dbs + i * META.dbSize + DB.root));
  return { pageSize, txnid: buf.readBigUInt64LE(META.txnid), roots };
}
