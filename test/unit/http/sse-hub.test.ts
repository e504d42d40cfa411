import { afterEach, describe, expect, it, vi } from 'vitest';
import { HealthHub, type SseSink } from '../../../src/http/sse-hub.js';

/** A sink whose backpressure the test controls. */
class FakeSink implements SseSink {
  chunks: string[] = [];
  accepting = true;
  ended = false;
  closed = false;
  write(chunk: string): boolean {
    this.chunks.push(chunk);
    return this.accepting;
  }
  end(): void {
    this.ended = true;
  }
  close(): void {
    this.closed = true;
  }
  /** What the transport would call when writable again (set at the first congestion). */
  writable: (() => boolean) | undefined;
  whenWritable(drain: () => boolean): void {
    if (this.writable) throw new Error('registered twice');
    this.writable = drain;
  }
}

const hubs: HealthHub[] = [];
const makeHub = (opts: Partial<ConstructorParameters<typeof HealthHub>[0]> = {}) => {
  const hub = new HealthHub({ clock: () => 1_000, heartbeatMs: 60_000, ...opts });
  hubs.push(hub);
  return hub;
};
afterEach(() => {
  for (const h of hubs.splice(0)) h.shutdown();
});

const status = (ts: number, detail?: string) => ({ type: 'status' as const, connectionId: 'c1', status: 'CONNECTED' as const, ts, reason: 'connect' as const, ...(detail ? { detail } : {}) });

describe('HealthHub', () => {
  it('delivers one serialized string to every stream of the user, and nothing to other users', () => {
    const hub = makeHub();
    const a = new FakeSink();
    const b = new FakeSink();
    const other = new FakeSink();
    hub.subscribe('u1', 'k1', a);
    hub.subscribe('u1', 'k2', b);
    hub.subscribe('u2', 'k3', other);
    hub.publish('u1', status(5));
    expect(a.chunks).toEqual(['id: 1001\ndata: {"type":"status","connectionId":"c1","status":"CONNECTED","ts":5,"reason":"connect"}\n\n']);
    // Same string instance: serialized once per user, not per subscriber.
    expect(Object.is(a.chunks[0], b.chunks[0])).toBe(true);
    expect(other.chunks).toEqual([]);
    expect(hub.subscriberCount()).toBe(3);
  });

  it('a guard event goes out as {type, accountId, guard, action, ts, detail}: no connection id, no lock', () => {
    const hub = makeHub();
    const a = new FakeSink();
    hub.subscribe('u1', 'k1', a);
    const lock = { guard: 'kill_switch' as const, since: 7, until: null, detail: 'away' };
    hub.publish('u1', { type: 'guard', connectionId: 'c1', accountId: '7', guard: 'kill_switch', action: 'locked', ts: 7, detail: 'away', lock });
    expect(a.chunks).toEqual(['id: 1001\ndata: {"type":"guard","accountId":"7","guard":"kill_switch","action":"locked","ts":7,"detail":"away"}\n\n']);
  });

  it('numbers events per user from the hub start and sends heartbeats carrying the current id', () => {
    const hub = makeHub();
    const a = new FakeSink();
    hub.subscribe('u1', 'k1', a);
    hub.publish('u1', status(5));
    hub.publish('u1', status(6));
    hub.heartbeat();
    expect(a.chunks[2]).toBe('id: 1002\ndata: {"type":"heartbeat","ts":1000}\n\n');
    expect(hub.currentId('u2')).toBe(1000);
  });

  it('numbers from the first id it is given, not the clock: an id of an earlier run started at a later clock time is no resume', () => {
    // The earlier run started at clock 2,000 and handed out 2,001..2,005; the clock was set back to 1,000.
    const hub = makeHub({ firstId: 2_000 + 2 ** 32 });
    const a = new FakeSink();
    hub.subscribe('u1', 'k1', a);
    hub.publish('u1', status(5));
    expect(a.chunks[0]).toMatch(/^id: 4294969297\n/);
    expect(hub.resume('u1', 2_003)).toBeUndefined();
    expect(hub.resume('u1', 2_000 + 2 ** 32)).toHaveLength(1);
  });

  it('runs heartbeats on its own timer, every heartbeatMs', () => {
    vi.useFakeTimers();
    try {
      const hub = makeHub({ heartbeatMs: 15_000 });
      const a = new FakeSink();
      hub.subscribe('u1', 'k1', a);
      vi.advanceTimersByTime(14_999);
      expect(a.chunks).toHaveLength(0);
      vi.advanceTimersByTime(1);
      expect(a.chunks).toEqual([expect.stringContaining('"type":"heartbeat"')]);
      vi.advanceTimersByTime(15_000);
      expect(a.chunks).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('resumes from the ring, including events published while nobody listened', () => {
    const hub = makeHub({ ringSize: 2 });
    hub.publish('u1', status(1));
    hub.publish('u1', status(2));
    hub.publish('u1', status(3));
    expect(hub.resume('u1', 1002)).toEqual([expect.stringContaining('"ts":3')]);
    expect(hub.resume('u1', 1000)).toBeUndefined();
    expect(hub.resume('u1', 999)).toBeUndefined();
  });

  it('with cluster ids: keeps the ids it is given, so a stream resumes from an id another node sent', () => {
    const position = { value: 40 };
    const hub = makeHub({ externalIds: { position: () => position.value } });
    const sink = new FakeSink();
    hub.subscribe('u1', 'k1', sink);
    position.value = 43;
    hub.publish('u1', status(1), 43);
    // A repeat (or an older id) is a duplicate delivery, not a new event.
    hub.publish('u1', status(1), 43);
    position.value = 47;
    hub.publish('u1', status(2), 47);
    expect(sink.chunks.map((c) => /^id: (\d+)/.exec(c)?.[1])).toEqual(['43', '47']);
    // Snapshots and heartbeats carry the node's position in the stream, not a per-user counter.
    position.value = 52;
    expect(hub.currentId('u1')).toBe(52);
    expect(hub.resume('u1', 43)).toEqual([expect.stringContaining('"ts":2')]);
    expect(hub.resume('u1', 52)).toEqual([]);
    // Before this hub started following (40), or ahead of what it has applied: fresh snapshots.
    expect(hub.resume('u1', 39)).toBeUndefined();
    expect(hub.resume('u1', 60)).toBeUndefined();
  });

  it('queues while congested, flushes on drain, and cuts a consumer past the byte bound', () => {
    const hub = makeHub({ maxBufferedBytes: 1000 });
    const slow = new FakeSink();
    const sub = hub.subscribe('u1', 'k1', slow);
    hub.publish('u1', status(0));
    expect(slow.writable).toBeUndefined();
    slow.chunks.length = 0;
    slow.accepting = false;
    hub.publish('u1', status(1));
    expect(slow.chunks).toHaveLength(1);
    hub.publish('u1', status(2));
    expect(slow.chunks).toHaveLength(1);
    // The drain callback is registered only once the stream congested.
    expect(slow.writable).toBeDefined();
    slow.accepting = true;
    expect(slow.writable!()).toBe(true);
    expect(slow.chunks).toHaveLength(2);
    expect(sub.drain()).toBe(true);
    slow.accepting = false;
    hub.publish('u1', status(3, 'x'.repeat(600)));
    hub.publish('u1', status(4, 'x'.repeat(600)));
    expect(slow.closed).toBe(false);
    hub.publish('u1', status(5, 'x'.repeat(600)));
    expect(slow.closed).toBe(true);
    expect(hub.subscriberCount()).toBe(0);
    expect(hub.streamsOf('k1')).toBe(0);
    hub.publish('u1', status(6));
    expect(slow.chunks).toHaveLength(3);
  });

  it('counts streams per principal and forgets a stream on unsubscribe (idempotent)', () => {
    const hub = makeHub();
    const s1 = hub.subscribe('u1', 'k1', new FakeSink());
    hub.subscribe('u1', 'k1', new FakeSink());
    expect(hub.streamsOf('k1')).toBe(2);
    s1.unsubscribe();
    s1.unsubscribe();
    expect(hub.streamsOf('k1')).toBe(1);
    expect(hub.subscriberCount()).toBe(1);
  });

  it('closeAll ends every stream gracefully, after a closing message (a shutdown is told apart from a dropped network)', () => {
    const hub = makeHub();
    const a = new FakeSink();
    const b = new FakeSink();
    hub.subscribe('u1', 'k1', a);
    hub.subscribe('u2', 'k2', b);
    hub.closeAll();
    expect(a.ended && b.ended).toBe(true);
    for (const sink of [a, b]) expect(sink.chunks.at(-1)).toMatch(/^id: \d+\ndata: \{"type":"closing","ts":\d+,"detail":"tradegate is shutting down: reconnect with Last-Event-ID once it is back"\}\n\n$/);
    expect(hub.subscriberCount()).toBe(0);
  });

  it('fans one event out to 10,000 subscribers of one user with one serialization', () => {
    const hub = makeHub();
    const sinks = Array.from({ length: 10_000 }, () => new FakeSink());
    sinks.forEach((s, i) => hub.subscribe('u1', `k${i}`, s));
    hub.publish('u1', status(9));
    const first = sinks[0]!.chunks[0];
    expect(sinks.every((s) => s.chunks.length === 1 && Object.is(s.chunks[0], first))).toBe(true);
  });
});

describe('HealthHub.closeStreams', () => {
  it('ends the streams of one principal after a revoked message, and only those', () => {
    const hub = makeHub();
    const [k1a, k1b, k2] = [new FakeSink(), new FakeSink(), new FakeSink()];
    hub.subscribe('u1', 'k1', k1a);
    hub.subscribe('u1', 'k1', k1b);
    hub.subscribe('u1', 'k2', k2);
    expect(hub.closeStreams({ principalId: 'k1' }, 'key-revoked')).toBe(2);
    for (const sink of [k1a, k1b]) {
      expect(sink.ended).toBe(true);
      const last = JSON.parse(sink.chunks[sink.chunks.length - 1]!.split('data: ')[1]!);
      expect(last).toEqual({ type: 'revoked', reason: 'key-revoked', ts: 1_000, detail: 'The API key of this stream was revoked' });
    }
    expect(k2.ended).toBe(false);
    expect([hub.streamsOf('k1'), hub.streamsOf('k2'), hub.subscriberCount()]).toEqual([0, 1, 1]);
    hub.publish('u1', status(2_000));
    expect(k1a.chunks).toHaveLength(1);
  });

  it('ends every stream of a user, and lists the principals with open streams', () => {
    const hub = makeHub();
    const [a, b, other] = [new FakeSink(), new FakeSink(), new FakeSink()];
    hub.subscribe('u1', 'k1', a);
    hub.subscribe('u1', 'session:s1', b);
    hub.subscribe('u2', 'k9', other);
    expect(hub.principals().sort((x, y) => x.principalId.localeCompare(y.principalId))).toEqual([
      { principalId: 'k1', userId: 'u1' },
      { principalId: 'k9', userId: 'u2' },
      { principalId: 'session:s1', userId: 'u1' },
    ]);
    expect(hub.closeStreams({ userId: 'u1' }, 'password-changed', 'changed elsewhere')).toBe(2);
    expect(b.chunks[0]).toContain('"detail":"changed elsewhere"');
    expect(other.ended).toBe(false);
    expect(hub.closeStreams({ userId: 'nobody' }, 'user-deleted')).toBe(0);
  });
});

describe('HealthHub.closeStreams for a password change', () => {
  it('ends only the streams a web session opened, not the user’s API-key streams', () => {
    const hub = makeHub();
    const [session, key] = [new FakeSink(), new FakeSink()];
    hub.subscribe('u1', 'session:s1', session);
    hub.subscribe('u1', 'k1', key);
    expect(hub.closeStreams({ userId: 'u1', sessionsOnly: true }, 'password-changed')).toBe(1);
    expect([session.ended, key.ended]).toEqual([true, false]);
  });
});
