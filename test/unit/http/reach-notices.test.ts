/**
 * What a cluster node's health streams say while the node cannot reach NATS (reach-notices.ts):
 * RECONNECTING for what showed CONNECTED, in open streams, new snapshots and resumes, and
 * CONNECTED again afterwards; nothing for connections that were not CONNECTED.
 */
import { describe, expect, it } from 'vitest';
import type { StatusEvent } from '../../../src/domain/connections.js';
import { openHealthStream, type HealthStreamDeps } from '../../../src/http/health-stream.js';
import { CUT_OFF_DETAIL, REACHED_AGAIN_DETAIL, ReachNotices } from '../../../src/http/reach-notices.js';
import { ResponseHandle } from '../../../src/http/respond.js';
import type { AuthContext } from '../../../src/http/route-types.js';
import { HealthHub } from '../../../src/http/sse-hub.js';
import { createLogger } from '../../../src/log.js';
import { FakeResponse } from '../../support/uws.js';

const alice: AuthContext = { userId: 'alice', principalId: 'key-a', scopes: ['read'], kind: 'api-key' };

function world() {
  let now = 100;
  const clock = () => now;
  let reachable = true;
  const listeners = new Set<(r: boolean) => void>();
  const reach = {
    reachable: () => reachable,
    onChange(l: (r: boolean) => void) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
  const setReach = (r: boolean) => {
    reachable = r;
    for (const l of listeners) l(r);
  };
  const connections = [
    { id: 'c1', userId: 'alice' },
    { id: 'c2', userId: 'alice' },
    { id: 'c3', userId: 'alice', disabled: true },
    { id: 'b1', userId: 'bob' },
  ];
  const statuses = new Map<string, StatusEvent>([
    ['c1', { type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'connect', ts: 3 }],
    ['c2', { type: 'status', connectionId: 'c2', status: 'AUTH_EXPIRED', reason: 'auth-expired', ts: 3 }],
    ['b1', { type: 'status', connectionId: 'b1', status: 'CONNECTED', reason: 'connect', ts: 3 }],
  ]);
  const gateway = { status: (id: string) => statuses.get(id) };
  const hub = new HealthHub({ clock, heartbeatMs: 60_000, log: createLogger('silent') });
  const store = {
    connections: {
      all: () => connections,
      byId: (id: string) => connections.find((c) => c.id === id),
      listByUser: (u: string) => connections.filter((c) => c.userId === u),
    },
  };
  const notices = new ReachNotices(reach, store, gateway, hub, clock);
  const deps: HealthStreamDeps = {
    hub,
    store,
    gateway: notices,
    maxStreamsPerKey: 10,
    clock,
    resumeNotices: (userId, ids) => notices.resumeNotices(userId, ids),
  };
  const open = (headers: Record<string, string> = {}) => {
    const res = new FakeResponse();
    openHealthStream(deps, new ResponseHandle(res.res), alice, headers, {});
    return res;
  };
  return { setReach, statuses, hub, open, notices, tick: (ms: number) => (now += ms) };
}

const messages = (res: FakeResponse) =>
  res.written
    .join('')
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)));

describe('cluster reach notices on the health stream', () => {
  it('an open stream hears RECONNECTING for its CONNECTED connections when the node is cut off, and CONNECTED when it is back', () => {
    const w = world();
    const res = w.open();
    const opened = messages(res).length;
    w.tick(50);
    w.setReach(false);
    w.tick(1000);
    w.setReach(true);
    expect(messages(res).slice(opened)).toEqual([
      { type: 'status', connectionId: 'c1', status: 'RECONNECTING', reason: 'disconnect', ts: 150, detail: CUT_OFF_DETAIL },
      { type: 'status', connectionId: 'c1', status: 'CONNECTED', reason: 'reconnect', ts: 1150, detail: REACHED_AGAIN_DETAIL },
    ]);
  });

  it('says nothing on the way back for a connection that is no longer CONNECTED (it reports its own news)', () => {
    const w = world();
    const res = w.open();
    const opened = messages(res).length;
    w.setReach(false);
    w.statuses.set('c1', { type: 'status', connectionId: 'c1', status: 'RECONNECTING', reason: 'disconnect', ts: 4, detail: 'owner node changed' });
    w.setReach(true);
    expect(messages(res).slice(opened).map((m) => m.status)).toEqual(['RECONNECTING']);
  });

  it('a stream opened or resumed while cut off starts with the same news; once back, snapshots are the real status', () => {
    const w = world();
    const first = w.open();
    w.setReach(false);
    const fresh = messages(w.open()).filter((m) => m.type === 'snapshot');
    expect(fresh.find((m) => m.connectionId === 'c1')).toMatchObject({ status: 'RECONNECTING', detail: CUT_OFF_DETAIL });
    expect(fresh.find((m) => m.connectionId === 'c2')).toMatchObject({ status: 'AUTH_EXPIRED' });
    const lastId = Number(/id: (\d+)/.exec(first.written.join(''))![1]);
    const resumed = messages(w.open({ 'last-event-id': String(lastId) }));
    expect(resumed).toEqual([{ type: 'status', connectionId: 'c1', status: 'RECONNECTING', reason: 'disconnect', ts: 100, detail: CUT_OFF_DETAIL }]);
    w.setReach(true);
    expect(messages(w.open()).find((m) => m.connectionId === 'c1')).toMatchObject({ type: 'snapshot', status: 'CONNECTED' });
    expect(messages(w.open({ 'last-event-id': String(lastId) })).filter((m) => m.type === 'status' && m.status === 'RECONNECTING')).toEqual([]);
  });

  it('the notices stay out of the resume ring: they are this node’s, not events of the cluster stream', () => {
    const w = world();
    const res = w.open();
    const lastId = Number(/id: (\d+)/.exec(res.written.join(''))![1]);
    w.setReach(false);
    w.setReach(true);
    expect(w.hub.resume('alice', lastId)).toEqual([]);
  });
});
