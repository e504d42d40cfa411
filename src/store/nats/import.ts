/**
 * `tradegate cluster import`: a single-node store's rows (store/dump.ts) written into the
 * cluster's buckets. Every record keeps its id, owner and creation time, users their password
 * hash, keys, tokens and live web sessions their digests (so existing API keys, webhook URLs and
 * signed-in browsers keep working); accounts keep their risk guards and locks;
 * sealed secrets (broker credentials, webhook tokens) are opened with the source store's key
 * and sealed again with the cluster's, under the same binding to their record.
 *
 * Each record is written with KV create, so running the import again changes nothing: a
 * record already there is counted `present`, and one whose key holds something else (a user
 * name taken by another user, an id of another owner) is a `conflict`, reported and left
 * alone. The journal is appended once: a marker records that this dump's journal went in.
 */
import type { KV } from '@nats-io/kv';
import { connectionAad } from '../connections.js';
import { sha256Hex } from '../crypto.js';
import type { StoreDump } from '../dump.js';
import type { JournalStore } from '../journal.js';
import { webhookTokenAad } from '../webhook-tokens.js';
import { doneValue } from './idempotency.js';
import { isWrongRevision } from './kv-mirror.js';
import { userKey } from './records.js';
import { toBase64, type NatsStoreContext } from './tables.js';

/** What happened to one kind of record. */
export interface ImportCount {
  added: number;
  present: number;
  conflicts: string[];
}

/** The outcome per record kind. */
export type ImportReport = Record<
  'users' | 'apiKeys' | 'webhookTokens' | 'connections' | 'strategies' | 'guards' | 'sessions' | 'lastUsed' | 'idempotency' | 'journal',
  ImportCount
>;

const count = (): ImportCount => ({ added: 0, present: 0, conflicts: [] });

/** Writes `dump` into the cluster store's buckets (see module comment). */
export async function importDump(
  ctx: NatsStoreContext,
  idempotency: KV,
  journal: JournalStore,
  flushed: () => Promise<void>,
  dump: StoreDump,
): Promise<ImportReport> {
  const report: ImportReport = {
    users: count(),
    apiKeys: count(),
    webhookTokens: count(),
    connections: count(),
    strategies: count(),
    guards: count(),
    sessions: count(),
    lastUsed: count(),
    idempotency: count(),
    journal: count(),
  };
  const { mirror, sealer } = ctx;
  const reseal = (sealed: Uint8Array, aad: string): string => toBase64(sealer.seal(dump.openSecret(sealed, aad), aad));

  /** Creates `key`; an existing value counts as present when `same` says it is this record. */
  async function put<T>(c: ImportCount, key: string, value: T, same: (existing: T) => boolean, what: string): Promise<void> {
    if (await mirror.create(key, value)) c.added++;
    else if (same(mirror.get<T>(key)!)) c.present++;
    else c.conflicts.push(what);
  }

  for (const u of dump.users) {
    await put(report.users, userKey(u.name), u, (e) => e.id === u.id, `user '${u.name}' exists in the cluster with another id`);
  }
  const owned = <T extends { id: string; userId: string }>(c: ImportCount, kind: string, row: T, also: (e: T) => boolean = () => true) =>
    put(c, `${kind}.${row.id}`, row, (e) => e.userId === row.userId && also(e), `${kind} ${row.id} exists in the cluster with another owner or secret`);
  for (const k of dump.apiKeys) await owned(report.apiKeys, 'apiKey', k, (e) => e.digest === k.digest);
  for (const t of dump.webhookTokens) {
    await owned(report.webhookTokens, 'webhookToken', { ...t, sealedToken: reseal(t.sealedToken, webhookTokenAad(t.id)) }, (e) => e.digest === t.digest);
  }
  for (const c of dump.connections) {
    await owned(report.connections, 'connection', { ...c, sealedCredentials: reseal(c.sealedCredentials, connectionAad(c.id)) });
  }
  for (const s of dump.strategies) await owned(report.strategies, 'strategy', s);
  // An account's guards and its lock (a kill switch or a day's loss lock stays in force after the move).
  for (const g of dump.guards) {
    await put(report.guards, `guards.${g.userId}.${g.accountId}`, g, (e) => JSON.stringify(e) === JSON.stringify(g), `guards of account ${g.accountId} differ in the cluster`);
  }
  // Signed-in browsers stay signed in: a session lives under its digest, as the NATS session store keeps it.
  for (const r of dump.sessions) await put(report.sessions, `session.${r.digest}`, r, (e) => e.userId === r.userId, `session ${r.id} exists in the cluster with another owner`);
  for (const l of dump.lastUsed) await put(report.lastUsed, `lastUsed.${l.kind}.${l.id}`, l.at, () => true, '');

  for (const { hash, record } of dump.idempotency) {
    try {
      await idempotency.create(hash, doneValue(record.fingerprint, record, record.createdAt));
      report.idempotency.added++;
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
      report.idempotency.present++;
    }
  }

  const entries = dump.journal;
  const marker = `meta.journalImport.${sha256Hex(JSON.stringify([entries.length, entries[0]?.ts, entries.at(-1)?.ts, entries[0]?.userId])).slice(0, 32)}`;
  if (entries.length > 0 && mirror.get(marker) === undefined) {
    const failedBefore = ctx.failedWrites();
    for (const e of entries) journal.append(e);
    await flushed();
    const failed = ctx.failedWrites() - failedBefore;
    // Without the marker a later run appends the journal again; better twice than lost.
    if (failed > 0) report.journal.conflicts.push(`${failed} journal entries were not written (see the log); run the import again`);
    else await mirror.create(marker, { entries: entries.length, at: ctx.clock() });
    report.journal.added = entries.length - failed;
  } else report.journal.present = entries.length;
  return report;
}
