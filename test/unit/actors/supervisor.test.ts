import { afterEach, describe, expect, it } from 'vitest';
import type { ActorEvent } from '../../../src/actors/protocol.js';
import type { ServedRecord } from '../../../src/actors/account-claims.js';
import { createSupervisor, hashId, type Supervisor, type SupervisorOptions } from '../../../src/actors/supervisor.js';
import type { ConnectionSpec, StatusEvent } from '../../../src/domain/connections.js';
import { createLogger } from '../../../src/log.js';
import { distPath } from '../../../src/paths.js';
import { rejected } from '../../support/errors.js';
import { guardConfig, type AccountGuards } from '../../../src/domain/guards.js';

/** Worker threads run the scripted host (test/support/fake-actor-host.ts), compiled. */
const HOST = distPath('test/support/fake-actor-host.js');

const spec = (connectionId: string): ConnectionSpec => ({
  connectionId, userId: 'u1', broker: 'paper', environment: 'paper', restUrl: 'http://127.0.0.1:1/v1', wsUrl: 'ws://127.0.0.1:1/v1/websocket',
  credentials: { name: 'n', password: 'p' }, budget: { perMinute: 1, perHour: 1 },
});

let sup: Supervisor | undefined;
const events: ActorEvent[] = [];
afterEach(async () => {
  await sup?.close();
  sup = undefined;
  events.length = 0;
});

function start(opts: { threadsMax?: number; callTimeoutMs?: number; maxInFlightPerConnection?: number; guards?: (userId: string) => Record<string, AccountGuards>; served?: SupervisorOptions['served'] } = {}): Supervisor {
  sup = createSupervisor({ threadsMax: opts.threadsMax ?? 4, logger: createLogger('silent'), workerFile: HOST, ...opts });
  sup.onEvent((e) => events.push(e));
  return sup;
}

/** Resolves with the first event (already seen or coming) that matches. */
function next(s: Supervisor, match: (e: ActorEvent) => boolean): Promise<ActorEvent> {
  const seen = events.find(match);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve) => {
    const off = s.onEvent((e) => {
      if (!match(e)) return;
      off();
      resolve(e);
    });
  });
}
const status = (id: string, s: StatusEvent['status']) => (e: ActorEvent) => e.type === 'status' && e.connectionId === id && e.status === s;

describe('supervisor', () => {
  it('hashId spreads connection ids deterministically', () => {
    expect(hashId('con_abc')).toBe(hashId('con_abc'));
    const slots = new Set(Array.from({ length: 64 }, (_, i) => hashId(`con_${i}`) % 4));
    expect(slots.size).toBe(4);
  });

  it('resumes a connection that ran elsewhere: RECONNECTING until the actor reports, and the host is told to resume', async () => {
    const s = start();
    const back = next(s, status('c9', 'CONNECTED'));
    const adding = s.addConnection(spec('c9'), { resume: true });
    expect(s.status('c9')).toMatchObject({ status: 'RECONNECTING', reason: 'disconnect' });
    await adding;
    expect(await back).toMatchObject({ reason: 'reconnect' });
    expect(await s.request('c9', { type: 'trade-history', accountId: 'x' })).toEqual([{ connectionId: 'c9', resume: true }]);
  });

  it('starts an actor, remembers its status and accounts, and relays requests and coded errors', async () => {
    const s = start();
    expect(s.status('c1')).toBeUndefined();
    const up = next(s, status('c1', 'CONNECTED'));
    await s.addConnection(spec('c1'));
    await up;
    expect(s.status('c1')?.status).toBe('CONNECTED');
    await next(s, (e) => e.type === 'accounts');
    expect(s.accounts('c1').map((a) => a.id)).toEqual(['acc-c1']);
    expect(await s.request('c1', { type: 'accounts' })).toEqual([]);
    const coded = await rejected(s.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: 'x' }));
    expect(coded).toMatchObject({ code: 'NOT_FOUND', message: 'no order x' });
    expect((await rejected(s.request('nope', { type: 'accounts' }))).code).toBe('NOT_FOUND');
  });

  it('answers a working-orders page again from the front until the actor announces a change; never while not CONNECTED', async () => {
    const s = start();
    const up = next(s, status('c1', 'CONNECTED'));
    await s.addConnection(spec('c1'));
    await up;
    const read = () => s.request('c1', { type: 'working-orders-page', accountId: 'acc-c1', after: 0, limit: 10 });
    const kept = () => s.keptPage!('c1', 'acc-c1', 0, 10);
    expect(kept()).toBeUndefined();
    const first = await read();
    expect(first.json).toBe('[1]');
    // The front answers it synchronously from now on (GET working-orders), or through request.
    expect(kept()).toBe(first);
    expect(await read()).toBe(first);
    // Another page is another entry.
    expect((await s.request('c1', { type: 'working-orders-page', accountId: 'acc-c1', after: 0, limit: 5 })).json).toBe('[2]');
    // The actor's working orders change: announced on the event port, ahead of the guard event awaited here.
    const unlocked = next(s, (e) => e.type === 'guard' && e.action === 'unlocked');
    await s.request('c1', { type: 'unlock', accountId: 'acc-c1' });
    await unlocked;
    expect(kept()).toBeUndefined();
    const fresh = await read();
    expect(fresh.json).toBe('[3]');
    expect(await read()).toBe(fresh);
    // Not CONNECTED: every read goes to the actor (which answers 503 in real life).
    const down = next(s, status('c1', 'RECONNECTING'));
    await s.request('c1', { type: 'cancel-order', accountId: 'acc-c1', orderId: '1' });
    await down;
    expect(kept()).toBeUndefined();
    expect((await read()).json).toBe('[4]');
    expect((await read()).json).toBe('[5]');
    // Back: a page is kept again, and only pages read since.
    events.length = 0;
    const back = next(s, status('c1', 'CONNECTED'));
    await s.request('c1', { type: 'flatten', accountId: 'acc-c1' });
    await back;
    const again = await read();
    expect(again.json).toBe('[6]');
    expect(await read()).toBe(again);
    expect(kept()).toBe(again);
    // A removed connection has no pages.
    await s.removeConnection('c1');
    expect(kept()).toBeUndefined();
  });

  it('caps requests in flight per connection with an immediate 503 and Retry-After 1; a deadline frees the slot', async () => {
    // The deadline is the calls' own: a supervisor-wide 300 ms would also bound the worker's
    // start, which takes longer than that on a loaded machine.
    const s = start({ maxInFlightPerConnection: 2 });
    await s.addConnection(spec('c1'));
    const held = [s.request('c1', { type: 'positions', accountId: 'a' }, { timeoutMs: 300 }), s.request('c1', { type: 'positions', accountId: 'a' }, { timeoutMs: 300 })];
    const refused = await rejected(s.request('c1', { type: 'accounts' }));
    expect(refused).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1 });
    for (const h of held) expect((await rejected(h)).code).toBe('BROKER_TIMEOUT');
    expect(await s.request('c1', { type: 'accounts' })).toEqual([]);
  });

  it('announces DISABLED once on removal, drops the removed actor’s late events, and forgets the connection', async () => {
    // One shared worker, so it stays up after c1 leaves and its events keep flowing.
    const s = start({ threadsMax: 1 });
    await s.addConnection(spec('c1'));
    await s.addConnection(spec('c2'));
    await s.removeConnection('c1');
    await s.removeConnection('c1');
    // The worker posted c1's late event before c3's CONNECTED, on the same port.
    const later = next(s, status('c3', 'CONNECTED'));
    await s.addConnection(spec('c3'));
    await later;
    const c1 = events.filter((e): e is StatusEvent => e.type === 'status' && e.connectionId === 'c1').map((e) => e.status);
    expect(c1).toEqual(['CONNECTED', 'DISABLED']);
    expect(s.status('c1')?.status).toBe('DISABLED');
    expect((await rejected(s.request('c1', { type: 'accounts' }))).code).toBe('NOT_FOUND');
  });

  it('a worker that dies mid-call fails the call, reports RECONNECTING, and is replaced with its actors resumed', async () => {
    const s = start();
    await s.addConnection(spec('c1'));
    const first = s.workerOf('c1');
    const dead = await rejected(s.request('c1', { type: 'working-orders', accountId: 'a' }));
    expect(dead.code).toBe('BROKER_UNAVAILABLE');
    expect(await next(s, status('c1', 'RECONNECTING'))).toMatchObject({ reason: 'disconnect', detail: 'actor worker exited (code 7)' });
    const back = await next(s, (e) => e.type === 'status' && e.connectionId === 'c1' && e.status === 'CONNECTED' && e.reason === 'reconnect');
    expect(back).toBeDefined();
    expect(s.workerOf('c1')).not.toBe(first);
    expect(await s.request('c1', { type: 'trade-history', accountId: 'a' })).toEqual([{ connectionId: 'c1', resume: true }]);
  });

  it('actors start with their owner’s stored guards, and a restarted worker gets the guards and lock in force since', async () => {
    const asked: string[] = [];
    const s = start({ guards: (userId) => (asked.push(userId), { acc: { config: guardConfig({ maxOrderQty: 5 }), lock: null } }) });
    await s.addConnection(spec('c1'));
    expect(asked).toEqual(['u1']);
    await s.request('c1', { type: 'set-guards', accountId: 'acc', config: guardConfig({ maxOrderQty: 2 }) });
    await s.request('c1', { type: 'lock', accountId: 'other', flatten: false, detail: 'lunch' });
    await next(s, (e) => e.type === 'guard');
    await rejected(s.request('c1', { type: 'working-orders', accountId: 'a' }));
    await next(s, (e) => e.type === 'status' && e.connectionId === 'c1' && e.status === 'CONNECTED' && e.reason === 'reconnect');
    const [resumed] = (await s.request('c1', { type: 'trade-history', accountId: 'a' })) as unknown as { guards: Record<string, AccountGuards> }[];
    expect(resumed!.guards.acc).toEqual({ config: guardConfig({ maxOrderQty: 2 }), lock: null });
    expect(resumed!.guards.other).toMatchObject({ config: guardConfig({}), lock: { guard: 'kill_switch', detail: 'lunch' } });
  });

  it('past threadsMax connections share workers', async () => {
    const s = start({ threadsMax: 1 });
    await s.addConnection(spec('c1'));
    await s.addConnection(spec('c2'));
    expect(s.workerCount()).toBe(1);
    expect(s.workerOf('c1')).toBe(s.workerOf('c2'));
    expect((await s.stats())[0]!.actors).toBe(2);
  });

  describe('an account id two connections of one user report (DESIGN §4: the newer connection is refused)', () => {
    /** A connection whose (scripted) actor reports account `accountId`, stored at `createdAt`. */
    const reporting = (connectionId: string, accountId: string, createdAt: string, userId = 'u1'): ConnectionSpec => ({
      ...spec(connectionId), userId, createdAt, credentials: { name: `account:${accountId}`, password: 'p' },
    });
    const ids = (s: Supervisor, id: string) => s.accounts(id).map((a) => a.id);

    it('refuses the newer one: FAILED naming the account and the other connection, no accounts, requests 409, its actor stopped', async () => {
      const s = start({ threadsMax: 1 });
      await s.addConnection(reporting('old', '777', '2026-01-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'old');
      const failed = next(s, status('new', 'FAILED'));
      await s.addConnection(reporting('new', '777', '2026-02-01T00:00:00.000Z'));
      expect(await failed).toMatchObject({ reason: 'fatal-error', detail: expect.stringContaining('account 777 is also an account of connection old') });
      expect(s.status('new')?.status).toBe('FAILED');
      expect(ids(s, 'new')).toEqual([]);
      expect(ids(s, 'old')).toEqual(['777']);
      expect(await rejected(s.request('new', { type: 'accounts' }))).toMatchObject({ code: 'CONNECTION_FAILED', extensions: { connectionId: 'new' } });
      // Still listed as running (a sync does not start it again), and its actor is gone from the worker.
      expect(s.running()).toContain('new');
      expect((await s.stats())[0]!.actors).toBe(1);
      // Another user's connection may report the same id.
      await s.addConnection(reporting('bobs', '777', '2026-03-01T00:00:00.000Z', 'u2'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'bobs');
      expect(ids(s, 'bobs')).toEqual(['777']);
      expect(s.status('bobs')?.status).toBe('CONNECTED');
    });

    it('the older keeps the account whichever reported first, and the refused one starts again once the older is removed', async () => {
      const s = start();
      await s.addConnection(reporting('new', '777', '2026-02-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'new');
      expect(ids(s, 'new')).toEqual(['777']);
      const failed = next(s, status('new', 'FAILED'));
      await s.addConnection(reporting('old', '777', '2026-01-01T00:00:00.000Z'));
      await failed;
      expect(ids(s, 'new')).toEqual([]);
      expect(events).toContainEqual({ type: 'accounts', connectionId: 'new', accounts: [] });
      expect(ids(s, 'old')).toEqual(['777']);
      // Re-adding the refused one while the older runs (a reconnect by hand): refused again.
      events.length = 0;
      await s.addConnection(reporting('new', '777', '2026-02-01T00:00:00.000Z'));
      await next(s, status('new', 'FAILED'));
      // The older removed (or disabled): the refused one starts and reports its account.
      events.length = 0;
      await s.removeConnection('old');
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'new' && e.accounts.length === 1);
      expect(s.status('new')?.status).toBe('CONNECTED');
      expect(ids(s, 'new')).toEqual(['777']);
      expect(await s.request('new', { type: 'accounts' })).toEqual([]);
    });
  });

  describe('an account id a connection served first stays its own (stored claims)', () => {
    /** Stored connections with what each served, as the store keeps them. */
    function servedStore(rows: (ServedRecord & { userId: string })[]) {
      const byId = new Map(rows.map((r) => [r.id, { ...r }]));
      return {
        rows: byId,
        served: {
          of: (userId: string) => [...byId.values()].filter((r) => r.userId === userId),
          keep: async (id: string, accountIds: string[]) => {
            const r = byId.get(id);
            if (r) r.servedAccountIds = accountIds;
          },
        },
      };
    }
    const reporting = (connectionId: string, accountId: string, createdAt: string): ConnectionSpec => ({
      ...spec(connectionId), createdAt, credentials: { name: `account:${accountId}`, password: 'p' },
    });
    const ids = (s: Supervisor, id: string) => s.accounts(id).map((a) => a.id);

    it('a connection reporting an id another one served is refused at once, even while that one is not running (re-probe: the newer served it until the older reported, orders reached the wrong broker)', async () => {
      const store = servedStore([
        { id: 'old', userId: 'u1', createdAt: '2026-01-01T00:00:00.000Z', servedAccountIds: ['777'] },
        { id: 'new', userId: 'u1', createdAt: '2026-02-01T00:00:00.000Z' },
      ]);
      const s = start({ served: store.served });
      const failed = next(s, status('new', 'FAILED'));
      await s.addConnection(reporting('new', '777', '2026-02-01T00:00:00.000Z'));
      expect(await failed).toMatchObject({ detail: expect.stringContaining('account 777 is also an account of connection old, which served it first') });
      expect(events.filter((e) => e.type === 'accounts' && e.connectionId === 'new' && e.accounts.length > 0)).toEqual([]);
      expect(ids(s, 'new')).toEqual([]);
      expect(store.rows.get('new')!.servedAccountIds).toBeUndefined();
      // The owner disabled (its actor stopped, its record kept): still its id, the other stays refused.
      await s.addConnection(reporting('old', '777', '2026-01-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'old');
      await s.removeConnection('old');
      await new Promise((r) => setTimeout(r, 100));
      expect(s.status('new')?.status).toBe('FAILED');
      // Deleted (its record gone, as the CLI does while it is not running): the refused one starts and keeps the id.
      store.rows.delete('old');
      events.length = 0;
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'new' && e.accounts.length === 1);
      expect(store.rows.get('new')!.servedAccountIds).toEqual(['777']);
    });

    it('a connection refused over one id keeps its claims on its others: they pass to no other connection (re-probe: its open position’s account went to another broker)', async () => {
      const store = servedStore([
        { id: 'A', userId: 'u1', createdAt: '2026-01-01T00:00:00.000Z', servedAccountIds: ['424242'] },
        { id: 'B', userId: 'u1', createdAt: '2026-02-01T00:00:00.000Z' },
        { id: 'C', userId: 'u1', createdAt: '2026-03-01T00:00:00.000Z', servedAccountIds: ['777'] },
      ]);
      const s = start({ served: store.served });
      await s.addConnection(reporting('C', '777', '2026-03-01T00:00:00.000Z'));
      await s.addConnection(reporting('A', '424242', '2026-01-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'A' && e.accounts.length === 1);
      const bRefused = next(s, status('B', 'FAILED'));
      await s.addConnection(reporting('B', '424242', '2026-02-01T00:00:00.000Z'));
      expect(await bRefused).toMatchObject({ detail: expect.stringContaining('connection A, which served it first') });
      // A's broker now reports C's 777 too: A is refused over it, and 424242 stays A's, served by no one.
      events.length = 0;
      await s.addConnection(reporting('A', '424242,777', '2026-01-01T00:00:00.000Z'));
      expect(await next(s, status('A', 'FAILED'))).toMatchObject({ detail: expect.stringContaining('account 777 is also an account of connection C') });
      await new Promise((r) => setTimeout(r, 2_500));
      expect(s.status('B')?.status).toBe('FAILED');
      expect(ids(s, 'B')).toEqual([]);
      expect(store.rows.get('A')!.servedAccountIds).toEqual(['424242']);
      // C deleted: A starts again and serves both; B stays refused.
      store.rows.delete('C');
      events.length = 0;
      await s.removeConnection('C');
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'A' && e.accounts.length === 2);
      expect(ids(s, 'A')).toEqual(['424242', '777']);
      expect(s.status('B')?.status).toBe('FAILED');
    });

    it('the one that served first keeps the id though it is newer; the other starts again once the owner no longer reports it', async () => {
      const store = servedStore([
        { id: 'old', userId: 'u1', createdAt: '2026-01-01T00:00:00.000Z' },
        { id: 'new', userId: 'u1', createdAt: '2026-02-01T00:00:00.000Z', servedAccountIds: ['777'] },
      ]);
      const s = start({ served: store.served });
      await s.addConnection(reporting('new', '777', '2026-02-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'new');
      const failed = next(s, status('old', 'FAILED'));
      await s.addConnection(reporting('old', '777', '2026-01-01T00:00:00.000Z'));
      expect(await failed).toMatchObject({ detail: expect.stringContaining('connection new, which served it first') });
      expect(ids(s, 'new')).toEqual(['777']);
      // The owner given other credentials: it reports another account, and the refused one starts again.
      events.length = 0;
      await s.addConnection(reporting('new', '888', '2026-02-01T00:00:00.000Z'));
      await next(s, (e) => e.type === 'accounts' && e.connectionId === 'old' && e.accounts.length === 1);
      expect(ids(s, 'old')).toEqual(['777']);
      expect(ids(s, 'new')).toEqual(['888']);
      expect(store.rows.get('old')!.servedAccountIds).toEqual(['777']);
      expect(store.rows.get('new')!.servedAccountIds).toEqual(['888']);
    });
  });

  it('refuses everything once closed', async () => {
    const s = start();
    await s.addConnection(spec('c1'));
    await s.close();
    expect((await rejected(s.request('c1', { type: 'accounts' }))).code).toBe('SHUTTING_DOWN');
    expect((await rejected(s.addConnection(spec('c2')))).code).toBe('SHUTTING_DOWN');
    expect(s.workerCount()).toBe(0);
  });
});
