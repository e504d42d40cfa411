/**
 * Keeps the running actors in step with the stored connections when another process changes
 * them: `tradegate connections add|remove|disable|enable` writes to the LMDB file the server
 * holds open (README "Command line"). Changes made through this process's routes start and
 * stop their actors themselves; this catches the rest, on a single node (a cluster's ownership
 * scan does the same from its KV mirror, cluster/ownership.ts).
 *
 * It reuses what makes a key revoked by the CLI fail on the server's next request: the store's
 * record cache (store/record-cache.ts) notices a write by any process with one small LMDB read,
 * and hands back the same connection list object until one happens. Every
 * CONNECTION_SYNC.recheckMs this re-reads the list; only when it is a new one (or a start
 * failed earlier and CONNECTION_SYNC.retryMs passed) it compares it with the running actors:
 * an enabled connection without an actor is started, an actor whose connection is gone or
 * disabled is stopped (the health stream reports DISABLED).
 *
 * Races with the routes are settled where they meet the supervisor, not by locks: a start
 * checks the stored list again right before it adds the actor (synchronously, so a route that
 * deleted the connection in between is seen) and never restarts a running actor (`ifStopped`);
 * DELETE removes the record before the actor, so a stopped but stored connection is always
 * one to start.
 */
import type { ConnectionSpec } from '../domain/connections.js';
import type { Logger } from '../log.js';
import { CONNECTION_SYNC } from '../tuning.js';
import type { ActorGateway } from './protocol.js';

/** What the sync reads of a stored connection (a store ConnectionRecord is one). */
export interface SyncedConnection {
  id: string;
  disabled: boolean;
}

/** What the sync needs; the hooks carry what serve adds (paper logins, webhook tokens). */
export interface ConnectionSyncOptions<ConnectionRecord extends SyncedConnection = SyncedConnection> {
  /** The stored connections, through the record cache (the same array while nothing changed). */
  connections: { all(): readonly ConnectionRecord[] };
  gateway: Pick<ActorGateway, 'addConnection' | 'removeConnection' | 'accounts'>;
  /** Ids of the connections with an actor now (Supervisor.running). */
  running(): Iterable<string>;
  /** The actor spec of a stored connection (opens its credentials). */
  specFor(record: ConnectionRecord): ConnectionSpec;
  /** Runs before a start; false skips it for now (retried later). The embedded paper broker opens the login here. */
  prepare?(record: ConnectionRecord): Promise<boolean>;
  /** Called once for every connection a comparison sees (what is needed after its record is gone is read here). */
  noticed?(record: ConnectionRecord): void;
  /**
   * The accounts a connection whose record is gone takes with it, read before its actor stops (what
   * it reported when not given: accounts the one it refused then takes over must not count).
   */
  leaving?(record: ConnectionRecord): string[];
  /** After the actor of a connection whose record is gone was stopped, with `leaving`'s accounts. */
  retired?(record: ConnectionRecord, accountIds: string[]): Promise<void>;
  logger: Logger;
  recheckMs?: number;
  retryMs?: number;
  clock?: () => number;
}

/** The running sync. */
export interface ConnectionSync {
  /** Compares stored and running now (tests; the timer calls it too). */
  syncNow(): Promise<void>;
  stop(): void;
}

/** Starts the periodic sync; the first comparison runs after one interval (and retries what serve could not start at start-up). */
export function startConnectionSync<ConnectionRecord extends SyncedConnection>(opts: ConnectionSyncOptions<ConnectionRecord>): ConnectionSync {
  const log = opts.logger.child({ component: 'connection-sync' });
  const clock = opts.clock ?? Date.now;
  const recheckMs = opts.recheckMs ?? CONNECTION_SYNC.recheckMs;
  const retryMs = opts.retryMs ?? CONNECTION_SYNC.retryMs;
  /** The list the last comparison ran on (none yet: the first tick compares). */
  let seen: readonly ConnectionRecord[] | undefined;
  /** Connections seen in the last comparison (a removed record's owner and name are needed after it is gone). */
  let known = new Map<string, ConnectionRecord>();
  /** When a start failed (retried after retryMs even if nothing changes). */
  let failedAt: number | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const enabledNow = (id: string): ConnectionRecord | undefined => opts.connections.all().find((r) => r.id === id && !r.disabled);

  async function start(record: ConnectionRecord): Promise<boolean> {
    try {
      if (opts.prepare && !(await opts.prepare(record))) return false;
      // Checked again after the await and in the same turn as the add: a route may have deleted it meanwhile.
      const current = enabledNow(record.id);
      if (!current || stopped) return true;
      await opts.gateway.addConnection(opts.specFor(current), { ifStopped: true });
      log.info({ connectionId: record.id }, 'stored connection without an actor started');
      return true;
    } catch (err) {
      log.warn({ connectionId: record.id, err: err instanceof Error ? err.message : String(err) }, 'stored connection without an actor not started; retried later');
      return false;
    }
  }

  async function retire(id: string, record: ConnectionRecord | undefined, gone: boolean): Promise<void> {
    const accountIds = gone && record && opts.leaving ? opts.leaving(record) : opts.gateway.accounts(id).map((a) => a.id);
    await opts.gateway.removeConnection(id);
    log.info({ connectionId: id, gone }, gone ? 'actor of a removed connection stopped' : 'actor of a disabled connection stopped');
    if (gone && record && opts.retired) await opts.retired(record, accountIds).catch((err: unknown) => log.warn({ err, connectionId: id }, 'cleaning up after a removed connection failed'));
  }

  async function compare(records: readonly ConnectionRecord[]): Promise<void> {
    const stored = new Map(records.map((r) => [r.id, r]));
    const active = new Set(opts.running());
    const work: Promise<boolean>[] = [];
    for (const r of records) if (!r.disabled && !active.has(r.id)) work.push(start(r));
    for (const id of active) {
      const r = stored.get(id);
      if (r && !r.disabled) continue;
      work.push(retire(id, r ?? known.get(id), !r).then(() => true));
    }
    for (const r of records) {
      if (known.has(r.id) || !opts.noticed) continue;
      try {
        opts.noticed(r);
      } catch (err) {
        log.warn({ err, connectionId: r.id }, 'reading a connection failed');
      }
    }
    known = new Map([...known, ...stored]);
    for (const id of known.keys()) if (!stored.has(id) && !active.has(id)) known.delete(id);
    const results = await Promise.all(work);
    failedAt = results.every(Boolean) ? undefined : clock();
  }

  async function pass(): Promise<void> {
    const records = opts.connections.all();
    const retry = failedAt !== undefined && clock() - failedAt >= retryMs;
    if (records === seen && !retry) return;
    seen = records;
    await compare(records);
  }

  function syncNow(): Promise<void> {
    // One comparison at a time: a tick during one waits for it (the next tick looks again).
    if (running) return running;
    const current = pass()
      .catch((err: unknown) => log.error({ err }, 'connection sync failed'))
      .finally(() => {
        if (running === current) running = undefined;
      });
    running = current;
    return current;
  }

  const timer = setInterval(() => {
    if (!stopped) void syncNow();
  }, recheckMs);
  timer.unref();
  return {
    syncNow,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
