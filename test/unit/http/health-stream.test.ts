import { describe, expect, it } from 'vitest';
import type { ActorEvent } from '../../../src/actors/protocol.js';
import type { StatusEvent } from '../../../src/domain/connections.js';
import { AppError } from '../../../src/domain/problems.js';
import { bridgeActorEvents, openHealthStream, type HealthStreamDeps } from '../../../src/http/health-stream.js';
import { ResponseHandle } from '../../../src/http/respond.js';
import type { AuthContext } from '../../../src/http/route-types.js';
import { HealthHub } from '../../../src/http/sse-hub.js';
import type { PublishedMessage } from '../../../src/http/sse.js';
import { createLogger } from '../../../src/log.js';
import { FakeResponse } from '../../support/uws.js';

/** A gateway that only emits, and a store whose owners the test moves. */
function bridgeWorld() {
  const listeners = new Set<(e: ActorEvent) => void>();
  const gateway = {
    onEvent(l: (e: ActorEvent) => void) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
  const owners = new Map<string, string>([['c1', 'alice']]);
  let reads = 0;
  const store = {
    connections: {
      byId(id: string) {
        reads++;
        const userId = owners.get(id);
        return userId ? { userId } : undefined;
      },
    },
  };
  const published: { userId: string; event: PublishedMessage }[] = [];
  const hub = { publish: (userId: string, event: PublishedMessage) => published.push({ userId, event }) };
  const stop = bridgeActorEvents(gateway, store, hub);
  const emit = (e: ActorEvent) => {
    for (const l of listeners) l(e);
  };
  const status = (connectionId: string, s: StatusEvent['status'], reason: StatusEvent['reason']): StatusEvent => ({
    type: 'status', connectionId, status: s, reason, ts: 1,
  });
  return { emit, status, owners, published, stop, reads: () => reads, listeners };
}

describe('bridgeActorEvents', () => {
  it('publishes status and bracket alerts to the owner, not account lists, reading the owner once', () => {
    const b = bridgeWorld();
    b.emit(b.status('c1', 'CONNECTED', 'connect'));
    b.emit({ type: 'bracket-alert', connectionId: 'c1', accountId: '7', orderId: '9', ts: 2, detail: 'unprotected' });
    b.emit({ type: 'accounts', connectionId: 'c1', accounts: [] });
    b.emit(b.status('c1', 'RECONNECTING', 'disconnect'));
    expect(b.published.map((p) => [p.userId, p.event.type])).toEqual([
      ['alice', 'status'],
      ['alice', 'bracket-alert'],
      ['alice', 'status'],
    ]);
    expect(b.reads()).toBe(1);
  });

  it('publishes guard events to the owner', () => {
    const b = bridgeWorld();
    b.emit({ type: 'guard', connectionId: 'c1', accountId: '7', guard: 'daily_loss', action: 'locked', ts: 3, detail: 'P&L -1000', lock: null });
    expect(b.published).toMatchObject([{ userId: 'alice', event: { type: 'guard', guard: 'daily_loss', action: 'locked' } }]);
  });

  it('drops events of a connection nobody owns (yet)', () => {
    const b = bridgeWorld();
    b.emit(b.status('ghost', 'CONNECTED', 'connect'));
    expect(b.published).toEqual([]);
  });

  it('forgets the owner when the connection is removed: it comes back under its new user', () => {
    const b = bridgeWorld();
    b.emit(b.status('c1', 'CONNECTED', 'connect'));
    b.emit(b.status('c1', 'DISABLED', 'disabled'));
    b.owners.set('c1', 'bob');
    // Whatever the next event of that id is (here a resumed actor's RECONNECTING), the owner is read again.
    b.emit(b.status('c1', 'RECONNECTING', 'disconnect'));
    expect(b.published.map((p) => [p.userId, (p.event as StatusEvent).status])).toEqual([
      ['alice', 'CONNECTED'],
      ['alice', 'DISABLED'],
      ['bob', 'RECONNECTING'],
    ]);
    expect(b.reads()).toBe(2);
  });

  it('re-reads the owner when a connection is started afresh under another user, without a removal first', () => {
    const b = bridgeWorld();
    b.emit(b.status('c1', 'CONNECTED', 'connect'));
    b.owners.set('c1', 'bob');
    // A reconnect of the running actor keeps reporting to the cached owner …
    b.emit(b.status('c1', 'RECONNECTING', 'disconnect'));
    // … a fresh start (re-added actor) asks the store again.
    b.emit(b.status('c1', 'CONNECTING', 'connect'));
    b.emit(b.status('c1', 'CONNECTED', 'connect'));
    expect(b.published.map((p) => p.userId)).toEqual(['alice', 'alice', 'bob', 'bob']);
  });

  it('unsubscribes', () => {
    const b = bridgeWorld();
    b.stop();
    expect(b.listeners.size).toBe(0);
  });
});

describe('openHealthStream', () => {
  const alice: AuthContext = { userId: 'alice', principalId: 'key-a', scopes: ['read'], kind: 'api-key' };
  function streamWorld(maxStreamsPerKey = 2) {
    const hub = new HealthHub({ clock: () => 5, heartbeatMs: 60_000, log: createLogger('silent') });
    const statuses = new Map<string, StatusEvent>([['c1', { type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'connect', ts: 3 }]]);
    const deps: HealthStreamDeps = {
      hub,
      store: { connections: { listByUser: (u) => (u === 'alice' ? [{ id: 'c1' }, { id: 'c2' }, { id: 'c3', disabled: true }] : []) } },
      gateway: { status: (id) => statuses.get(id) },
      maxStreamsPerKey,
      clock: () => 5,
    };
    const open = (headers: Record<string, string> = {}, lastEventIdParam?: string) => {
      const res = new FakeResponse();
      openHealthStream(deps, new ResponseHandle(res.res), alice, headers, { 'X-Request-Id': 'r1' }, lastEventIdParam);
      return res;
    };
    return { hub, open };
  }
  const data = (res: FakeResponse) =>
    res.written
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)));

  it('opens with retry, the request’s headers and one snapshot per owned connection', () => {
    const res = streamWorld().open();
    expect(res.status).toBe('200 OK');
    expect(res.header('Content-Type')).toBe('text/event-stream; charset=utf-8');
    expect(res.header('X-Request-Id')).toBe('r1');
    expect(res.written.join('')).toMatch(/^retry: 3000\n\n/);
    expect(data(res)).toEqual([
      { type: 'snapshot', connectionId: 'c1', status: 'CONNECTED', ts: 3, reason: 'connect' },
      { type: 'snapshot', connectionId: 'c2', status: 'CONNECTING', ts: 5 },
      { type: 'snapshot', connectionId: 'c3', status: 'DISABLED', ts: 5, reason: 'disabled' },
    ]);
  });

  it('delivers what the hub publishes afterwards, and resumes after Last-Event-ID', () => {
    const w = streamWorld();
    const res = w.open();
    w.hub.publish('alice', { type: 'status', connectionId: 'c1', status: 'RECONNECTING', reason: 'disconnect', ts: 6 });
    expect(data(res).at(-1)).toMatchObject({ type: 'status', status: 'RECONNECTING' });
    const lastId = Number(/id: (\d+)\n/.exec(res.written.filter((chunk) => chunk.startsWith('id: ')).at(-1)!)![1]);
    w.hub.publish('alice', { type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'reconnect', ts: 7 });
    const resumed = w.open({ 'last-event-id': String(lastId) });
    expect(data(resumed)).toEqual([{ type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'reconnect', ts: 7 }]);
  });

  it('resumes after `?lastEventId=` too (EventSource polyfills send it on a reconnect instead of the header)', () => {
    const w = streamWorld();
    w.open();
    w.hub.publish('alice', { type: 'status', connectionId: 'c1', status: 'RECONNECTING', reason: 'disconnect', ts: 6 });
    const lastId = w.hub.currentId('alice');
    w.hub.publish('alice', { type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'reconnect', ts: 7 });
    expect(data(w.open({}, String(lastId)))).toEqual([{ type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'reconnect', ts: 7 }]);
  });

  it('says when a resume cannot be exact: a gap message before the fresh snapshots, so a client knows guard and alert messages were missed', () => {
    const w = streamWorld(20);
    const first = w.hub.currentId('alice');
    // Far more messages than the stream keeps.
    for (let i = 0; i < 2000; i++) w.hub.publish('alice', { type: 'guard', connectionId: 'c1', accountId: '7', guard: 'kill_switch', action: i % 2 ? 'unlocked' : 'locked', ts: 6, detail: 'k' });
    const resumed = data(w.open({ 'last-event-id': String(first + 1) }));
    expect(resumed[0]).toMatchObject({ type: 'gap', lastEventId: String(first + 1), detail: expect.stringMatching(/no longer kept/) });
    expect(resumed.slice(1).map((m) => m.type)).toEqual(['snapshot', 'snapshot', 'snapshot']);
    // A first open (no id) has no gap to report; a garbled id is one the client had.
    expect(data(w.open()).map((m) => m.type)).toEqual(['snapshot', 'snapshot', 'snapshot']);
    for (const garbled of ['abc', '-5', '12345678901234567']) {
      expect(data(w.open({ 'last-event-id': garbled }))[0], garbled).toMatchObject({ type: 'gap', lastEventId: garbled });
      expect(data(w.open({}, garbled))[0], garbled).toMatchObject({ type: 'gap', lastEventId: garbled });
    }
  });

  it('a stream opened without a resume gets the bracket alerts of the last 15 minutes first, then the snapshots (ops probe: an alert published before any dashboard was back after a restart reached no one)', () => {
    let now = 1_000_000;
    const hub = new HealthHub({ clock: () => now, heartbeatMs: 60_000, log: createLogger('silent') });
    const deps: HealthStreamDeps = {
      hub,
      store: { connections: { listByUser: (u) => (u === 'alice' ? [{ id: 'c1' }] : []) } },
      gateway: { status: () => undefined },
      maxStreamsPerKey: 20,
      clock: () => now,
    };
    const open = (headers: Record<string, string> = {}) => {
      const res = new FakeResponse();
      openHealthStream(deps, new ResponseHandle(res.res), alice, headers, {}, undefined);
      return res;
    };
    const alert = (orderId: string) => hub.publish('alice', { type: 'bracket-alert', connectionId: 'c1', accountId: '7', orderId, ts: now, detail: 'position unprotected' });
    alert('old');
    now += 16 * 60_000;
    alert('41');
    hub.publish('alice', { type: 'guard', connectionId: 'c1', accountId: '7', guard: 'kill_switch', action: 'locked', ts: now, detail: 'k' });
    alert('42');
    const fresh = open();
    expect(data(fresh).map((m) => [m.type, m.orderId, m.replayed])).toEqual([['bracket-alert', '41', true], ['bracket-alert', '42', true], ['snapshot', undefined, undefined]]);
    // The last id the client sees is the current one: a reconnect resumes after the snapshot, repeating nothing.
    const ids = [...fresh.written.join('').matchAll(/id: (\d+)\n/g)].map((m) => Number(m[1]));
    expect(ids.at(-1)).toBe(hub.currentId('alice'));
    expect(data(open({ 'last-event-id': String(ids.at(-1)) }))).toEqual([]);
    // After a gap too, behind the gap message.
    expect(data(open({ 'last-event-id': 'from-before-a-restart' })).map((m) => m.type)).toEqual(['gap', 'bracket-alert', 'bracket-alert', 'snapshot']);
    hub.closeAll();
  });

  it('refuses a stream past the per-key cap before writing anything', () => {
    const w = streamWorld(1);
    w.open();
    let err: unknown;
    const res = new FakeResponse();
    try {
      openHealthStream(
        { hub: w.hub, store: { connections: { listByUser: () => [] } }, gateway: { status: () => undefined }, maxStreamsPerKey: 1, clock: () => 5 },
        new ResponseHandle(res.res),
        alice,
        {},
        {},
      );
    } catch (e) {
      err = e;
    }
    expect((err as AppError).code).toBe('TOO_MANY_STREAMS');
    expect(res.written).toEqual([]);
    expect(res.status).toBe('');
  });
});
