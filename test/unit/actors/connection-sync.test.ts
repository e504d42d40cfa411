import { afterEach, describe, expect, it } from 'vitest';
import { startConnectionSync, type ConnectionSync, type ConnectionSyncOptions } from '../../../src/actors/connection-sync.js';
import type { ConnectionSpec } from '../../../src/domain/connections.js';
import { createLogger } from '../../../src/log.js';
import type { ConnectionRecord } from '../../../src/store/connections.js';
import { account } from '../../support/routes.js';

function record(id: string, patch: Partial<ConnectionRecord> = {}): ConnectionRecord {
  return { id, userId: 'u1', name: id, broker: 'paper', environment: 'paper', restUrl: 'http://x/v1', wsUrl: 'ws://x/v1/websocket', createdAt: '2026-01-01T00:00:00.000Z', disabled: false, ...patch };
}

/** A store whose list is a new array after every change, as the record cache hands it out. */
class Records {
  list: readonly ConnectionRecord[] = [];
  set(...records: ConnectionRecord[]): void {
    this.list = records;
  }
  all = (): readonly ConnectionRecord[] => this.list;
}

/** The supervisor's side: which actors run, what was added and removed. */
class Actors {
  readonly running = new Set<string>();
  readonly added: string[] = [];
  readonly removed: string[] = [];
  failNext: Error | undefined;
  gateway: ConnectionSyncOptions['gateway'] = {
    addConnection: async (spec: ConnectionSpec, opts?: { ifStopped?: boolean }) => {
      if (this.failNext) {
        const err = this.failNext;
        this.failNext = undefined;
        throw err;
      }
      if (opts?.ifStopped && this.running.has(spec.connectionId)) return;
      this.running.add(spec.connectionId);
      this.added.push(spec.connectionId);
    },
    removeConnection: async (id: string) => {
      this.running.delete(id);
      this.removed.push(id);
    },
    accounts: (id: string) => (id === 'c2' ? [account('201', 'c2')] : []),
  };
}

let sync: ConnectionSync | undefined;
afterEach(() => sync?.stop());

function setup(extra: Partial<ConnectionSyncOptions<ConnectionRecord>> = {}) {
  const records = new Records();
  const actors = new Actors();
  let now = 0;
  const retired: [string, string[]][] = [];
  sync = startConnectionSync<ConnectionRecord>({
    connections: records,
    gateway: actors.gateway,
    running: () => actors.running,
    specFor: (r) => ({ connectionId: r.id, userId: r.userId }) as ConnectionSpec,
    retired: async (r, accountIds) => void retired.push([r.id, accountIds]),
    logger: createLogger('silent'),
    recheckMs: 3_600_000,
    retryMs: 30_000,
    clock: () => now,
    ...extra,
  });
  return { records, actors, retired, sync, tick: (ms: number) => (now += ms) };
}

describe('connection sync', () => {
  it('starts stored connections without an actor, leaves running and disabled ones alone', async () => {
    const { records, actors, sync } = setup();
    actors.running.add('c1');
    records.set(record('c1'), record('c2'), record('c3', { disabled: true }));
    await sync.syncNow();
    expect(actors.added).toEqual(['c2']);
    expect(actors.removed).toEqual([]);
  });

  it('compares only when the list changed (the record cache hands out the same array until a write)', async () => {
    const { records, actors, sync } = setup();
    records.set(record('c1'));
    await sync.syncNow();
    actors.running.delete('c1'); // stopped behind its back: not looked at until something changes
    await sync.syncNow();
    expect(actors.added).toEqual(['c1']);
    records.set(record('c1'));
    await sync.syncNow();
    expect(actors.added).toEqual(['c1', 'c1']);
  });

  it('stops a disabled connection, and a removed one with its accounts handed to `retired`', async () => {
    const { records, actors, retired, sync } = setup();
    records.set(record('c1'), record('c2'));
    await sync.syncNow();
    records.set(record('c1', { disabled: true }));
    await sync.syncNow();
    expect(actors.removed.sort()).toEqual(['c1', 'c2']);
    expect(retired).toEqual([['c2', ['201']]]);
  });

  it('does not start a connection deleted while it prepared (the list is read again right before the add)', async () => {
    let release!: () => void;
    const prepared = new Promise<void>((r) => (release = r));
    const { records, actors, sync } = setup({ prepare: async () => (await prepared, true) });
    records.set(record('c1'));
    const pass = sync.syncNow();
    records.set();
    release();
    await pass;
    expect(actors.added).toEqual([]);
  });

  it('leaves an actor a route started meanwhile alone (ifStopped)', async () => {
    let release!: () => void;
    const prepared = new Promise<void>((r) => (release = r));
    const { records, actors, sync } = setup({ prepare: async () => (await prepared, true) });
    records.set(record('c1'));
    const pass = sync.syncNow();
    await actors.gateway.addConnection({ connectionId: 'c1' } as ConnectionSpec, { ifStopped: true });
    release();
    await pass;
    expect(actors.added).toEqual(['c1']);
  });

  it('retries a failed start after retryMs even if nothing changes', async () => {
    const { records, actors, sync, tick } = setup();
    actors.failNext = new Error('ACTORS_MAX');
    records.set(record('c1'));
    await sync.syncNow();
    expect(actors.added).toEqual([]);
    tick(29_999);
    await sync.syncNow();
    expect(actors.added).toEqual([]);
    tick(1);
    await sync.syncNow();
    expect(actors.added).toEqual(['c1']);
  });

  it('a start its prepare refuses (paper broker down) is retried too', async () => {
    let ready = false;
    const { records, actors, sync, tick } = setup({ prepare: async () => ready });
    records.set(record('c1'));
    await sync.syncNow();
    ready = true;
    tick(30_000);
    await sync.syncNow();
    expect(actors.added).toEqual(['c1']);
  });
});
