/**
 * The cluster gateway and event feed over a real nats-server, with scripted supervisors in
 * place of actor threads: requests reach the node that runs the connection by request/reply,
 * errors cross as data, no responders is a retryable 503 and silence a 504; statuses and
 * accounts of every connection are known on every node, with the stream sequence as their
 * event id, and events of a previous owner are dropped; a connection started again on the node
 * still stopping it (a lease lapse, then a quick restore) starts only once the stop is done.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ActorEvent, ActorRequest } from '../../../src/actors/protocol.js';
import type { Supervisor } from '../../../src/actors/supervisor.js';
import { EventFeed } from '../../../src/cluster/events.js';
import { ClusterGateway } from '../../../src/cluster/gateway.js';
import type { ConnectionSpec } from '../../../src/domain/connections.js';
import { AppError } from '../../../src/domain/problems.js';
import { createLogger } from '../../../src/log.js';
import { randomBase62 } from '../../../src/store/crypto.js';
import { startNats, type NatsServer } from '../../support/nats.js';

const logger = createLogger('silent');

/** A supervisor that answers requests through `answer` and reports what the test emits. */
function scriptedSupervisor(answer: (id: string, req: ActorRequest) => Promise<unknown>) {
  const listeners = new Set<(e: ActorEvent) => void>();
  const emit = (e: ActorEvent) => listeners.forEach((l) => l(e));
  const added: { id: string; resume: boolean }[] = [];
  const sup = {
    added,
    emit,
    async addConnection(spec: ConnectionSpec, opts?: { resume?: boolean }) {
      added.push({ id: spec.connectionId, resume: opts?.resume ?? false });
      emit({ type: 'status', connectionId: spec.connectionId, status: 'CONNECTED', reason: opts?.resume ? 'reconnect' : 'connect', ts: 1 });
    },
    async removeConnection(id: string) {
      emit({ type: 'status', connectionId: id, status: 'DISABLED', reason: 'disabled', ts: 2 });
    },
    request: (id: string, req: ActorRequest) => answer(id, req),
    status: () => undefined,
    accounts: () => [],
    onEvent(l: (e: ActorEvent) => void) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    async close() {},
  };
  return sup as unknown as Supervisor & { added: typeof added; emit: typeof emit };
}

const spec = (id: string): ConnectionSpec => ({
  connectionId: id, userId: 'u1', broker: 'paper', environment: 'paper', restUrl: 'http://x/v1', wsUrl: 'ws://x', credentials: { name: 'n', password: 'p' },
  budget: { perMinute: 1, perHour: 1 },
});

let nats: NatsServer & { stopAndRemove(): Promise<void> };
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await nats?.stopAndRemove();
});

interface Node {
  nc: NatsConnection;
  feed: EventFeed;
  gateway: ClusterGateway;
  sup: ReturnType<typeof scriptedSupervisor>;
  /** How often the gateway waited for its records mirror to catch up. */
  records: { current: number };
}

const open: Node[] = [];
afterEach(async () => {
  for (const n of open.splice(0)) {
    n.feed.close();
    await n.gateway.close();
    await n.nc.close();
  }
});

async function node(
  prefix: string,
  name: string,
  answer: (id: string, req: ActorRequest) => Promise<unknown> = async () => [],
  opts: { callTimeoutMs?: number; hangRecords?: boolean; leaseHeld?: () => boolean } = {},
): Promise<Node> {
  const nc = await connect({ servers: nats.url });
  const feed = await EventFeed.start({ js: jetstream(nc), jsm: await jetstreamManager(nc), prefix, replicas: 1, nodeId: name, logger });
  const sup = scriptedSupervisor(answer);
  const records = { current: 0 };
  const recordsCurrent = opts.hangRecords ? () => new Promise<void>(() => undefined) : async () => void records.current++;
  const gateway = new ClusterGateway({ nc, prefix, supervisor: sup, feed, specFor: spec, logger, callTimeoutMs: opts.callTimeoutMs ?? 300, recordsCurrent, manualRestartMinIntervalMs: 30_000, ...(opts.leaseHeld && { leaseHeld: opts.leaseHeld }) });
  const n = { nc, feed, gateway, sup, records };
  open.push(n);
  return n;
}

/** Waits until `check` holds (events cross NATS asynchronously). */
async function until(check: () => boolean, what: string, withinMs = 3000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Retries while the owner's subscription has not reached the server yet (no responders). */
async function whenServed<T>(call: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof AppError && /no running actor/.test(err.message)) || i > 50) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe('cluster gateway', () => {
  it('forwards requests to the node that runs the connection; coded errors cross as data', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a', async (_id, req) => {
      if (req.type === 'cancel-order') throw new AppError('ORDER_NOT_WORKING', 'already filled', { order: { orderId: '9' } });
      return [{ orderId: '1', served: 'a' }];
    });
    const b = await node(prefix, 'b', async () => {
      throw new Error('b runs nothing');
    });
    await a.gateway.start('con_1', 1, false);
    expect(await whenServed(() => b.gateway.request('con_1', { type: 'working-orders', accountId: '7' }))).toEqual([{ orderId: '1', served: 'a' }]);
    const err = await b.gateway.request('con_1', { type: 'cancel-order', accountId: '7', orderId: '9' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'ORDER_NOT_WORKING', message: 'already filled', extensions: { order: { orderId: '9' } } });
    // The owner itself calls its own supervisor, no hop.
    expect(await a.gateway.request('con_1', { type: 'working-orders', accountId: '7' })).toEqual([{ orderId: '1', served: 'a' }]);
  });

  it('requests go to the owner of the newest epoch only: a previous owner that hangs, still subscribed, gets none (cluster probe: a SIGSTOPped node took a share of the requests for a minute after the takeover; orders 504, alerts and a kill switch lost)', async () => {
    const prefix = `t${randomBase62(8)}`;
    // The old owner hangs: subscribed still, it never answers.
    const hung = await node(prefix, 'hung', () => new Promise(() => undefined));
    const fresh = await node(prefix, 'fresh', async () => ({ served: 'fresh' }), { callTimeoutMs: 300 });
    const asker = await node(prefix, 'asker', async () => {
      throw new Error('asker runs nothing');
    }, { callTimeoutMs: 300 });
    await hung.gateway.start('con_1', 1, false);
    await until(() => asker.feed.epochOf('con_1') === 1, 'the first owner’s events');
    await fresh.gateway.start('con_1', 2, true);
    await until(() => asker.feed.epochOf('con_1') === 2, 'the new owner’s events');
    const answers = await Promise.all(Array.from({ length: 12 }, () => whenServed(() => asker.gateway.request('con_1', { type: 'accounts' })).catch((e: unknown) => (e as Error).message)));
    expect(answers).toEqual(Array.from({ length: 12 }, () => ({ served: 'fresh' })));
    // An alert's turn too: taken on the new owner, not queued on the hung one.
    const turn = await asker.gateway.takeTurn('con_1', 'con_1|7', 'exclusive');
    turn.end();
  });

  it('a node whose lease does not hold right now (frozen past it) sends nothing to its actor, its own calls or forwarded ones: 503, retry (cluster re-probe: what waited for a frozen node was acted on as it resumed)', async () => {
    const prefix = `t${randomBase62(8)}`;
    let held = true;
    const calls: string[] = [];
    const a = await node(prefix, 'a', async (_id, req) => {
      calls.push(req.type);
      return { orderId: '1' };
    }, { leaseHeld: () => held });
    const b = await node(prefix, 'b');
    await a.gateway.start('con_1', 1, false);
    await whenServed(() => b.gateway.request('con_1', { type: 'accounts' }));
    held = false;
    // Its own: neither run nor forwarded.
    expect(await a.gateway.request('con_1', { type: 'place-order', accountId: '7' } as unknown as ActorRequest).catch((e: unknown) => e)).toMatchObject({ code: 'CLUSTER_UNAVAILABLE', message: expect.stringContaining('lease') });
    // Forwarded to it by another node: refused unsent, retryable (the connection is moving).
    expect(await b.gateway.request('con_1', { type: 'place-order', accountId: '7' } as unknown as ActorRequest).catch((e: unknown) => e)).toMatchObject({ code: 'BROKER_UNAVAILABLE', message: expect.stringContaining('lease'), extensions: { nodeChanging: true } });
    expect(calls).toEqual(['accounts']);
  });

  it('a hand-over lets the calls already in the actor finish, forwarded ones too, before it stops the actor; later calls are refused unsent; a lapsed lease stops at once (cluster probe: an order forwarded during a graceful stop answered 504 and was never placed)', async () => {
    const prefix = `t${randomBase62(8)}`;
    const log: string[] = [];
    const a = await node(prefix, 'a', async (_id, req) => {
      await new Promise((r) => setTimeout(r, 300));
      log.push(`answered ${req.type}`);
      return { orderId: '5' };
    }, { callTimeoutMs: 2000 });
    const removeConnection = a.sup.removeConnection.bind(a.sup);
    a.sup.removeConnection = async (id: string) => {
      log.push('actor stopped');
      return removeConnection(id);
    };
    const b = await node(prefix, 'b', async () => {
      throw new Error('b runs nothing');
    }, { callTimeoutMs: 2000 });
    await a.gateway.start('con_h', 1, false);
    await whenServed(() => b.gateway.request('con_h', { type: 'accounts' }));
    log.length = 0;
    const forwarded = b.gateway.request('con_h', { type: 'place-order', accountId: '7' } as unknown as ActorRequest);
    const own = a.gateway.request('con_h', { type: 'flatten', accountId: '7' } as unknown as ActorRequest);
    await new Promise((r) => setTimeout(r, 100));
    const stopped = a.gateway.stop('con_h', false, { drain: true });
    // Refused unsent while it stops: retrying is safe.
    const late = await a.gateway.request('con_h', { type: 'place-order', accountId: '7' } as unknown as ActorRequest).catch((e: unknown) => e);
    expect(late).toMatchObject({ code: 'BROKER_UNAVAILABLE', message: expect.stringMatching(/moving to another node; retry/) });
    expect(await forwarded).toEqual({ orderId: '5' });
    expect(await own).toEqual({ orderId: '5' });
    await stopped;
    expect(log.slice(0, 2).sort()).toEqual(['answered flatten', 'answered place-order']);
    expect(log[2]).toBe('actor stopped');

    // A lease that lapsed: another node may run it already, so the actor stops at once.
    await a.gateway.start('con_h', 2, true);
    log.length = 0;
    const inFlight = a.gateway.request('con_h', { type: 'accounts' }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 50));
    await a.gateway.stop('con_h', false);
    expect(log).toEqual(['actor stopped']);
    await inFlight;
  });

  it('a connection changed on any node (new credentials, a manual reconnect) restarts on the node that runs it, once that node has the stored records (cluster probe: 202, and it stayed FAILED)', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a');
    const b = await node(prefix, 'b');
    await a.gateway.start('con_1', 1, false);
    expect(a.sup.added).toEqual([{ id: 'con_1', resume: false }]);
    // Asked on b: the owner a restarts it (a new add of the running connection), after catching up.
    await whenServed(async () => {
      await b.gateway.addConnection(spec('con_1'));
      if (a.sup.added.length < 2) throw new AppError('BROKER_UNAVAILABLE', 'no running actor yet');
    });
    expect(a.sup.added).toEqual([{ id: 'con_1', resume: false }, { id: 'con_1', resume: false }]);
    expect(a.records.current).toBe(1);
    expect(b.sup.added).toEqual([]);
    // Asked on the owner itself: restarted there, no hop.
    await a.gateway.addConnection(spec('con_1'));
    expect(a.sup.added).toHaveLength(3);
    // Nobody runs it (a new connection): nothing to restart, ownership starts it.
    await b.gateway.addConnection(spec('con_new'));
    expect([...a.sup.added, ...b.sup.added].filter((x) => x.id === 'con_new')).toEqual([]);
  });

  it('manual reconnects of one connection are throttled on its owner, whichever nodes they come through; new credentials always restart (re-probe: three nodes, two logins)', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a');
    const b = await node(prefix, 'b');
    const c = await node(prefix, 'c');
    await a.gateway.start('con_8', 1, false);
    await whenServed(async () => {
      await b.gateway.addConnection(spec('con_8'), { manual: true });
      if (a.sup.added.length < 2) throw new AppError('BROKER_UNAVAILABLE', 'no running actor yet');
    });
    const second = await c.gateway.addConnection(spec('con_8'), { manual: true }).catch((e: unknown) => e);
    expect(second).toMatchObject({ code: 'RATE_LIMITED' });
    expect((second as AppError).retryAfterSeconds).toBeGreaterThan(25);
    expect(await a.gateway.addConnection(spec('con_8'), { manual: true }).catch((e: unknown) => e)).toMatchObject({ code: 'RATE_LIMITED' });
    expect(a.sup.added).toHaveLength(2);
    // New credentials: restarted whatever the interval.
    await c.gateway.addConnection(spec('con_8'));
    expect(a.sup.added).toHaveLength(3);
  });

  it('a restart asked of an owner that dies is done once another node takes the connection over (it starts with what is stored), not at the deadline (re-probe: 15 s, then a 503 asking for an Idempotency-Key)', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a', undefined, { hangRecords: true });
    const b = await node(prefix, 'b', undefined, { callTimeoutMs: 20_000 });
    const c = await node(prefix, 'c');
    await a.gateway.start('con_9', 1, false);
    await until(() => b.gateway.status('con_9')?.status === 'CONNECTED', 'b knows the owner');
    const t = performance.now();
    const restart = b.gateway.addConnection(spec('con_9'));
    await new Promise((r) => setTimeout(r, 100));
    await c.gateway.start('con_9', 2, true);
    await restart;
    expect(performance.now() - t).toBeLessThan(5000);
  });

  it('no node running the connection → 503 BROKER_UNAVAILABLE with Retry-After at once; a silent owner → 504', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a', () => new Promise(() => undefined));
    const b = await node(prefix, 'b');
    const t = performance.now();
    const none = await b.gateway.request('con_x', { type: 'positions', accountId: '7' }).catch((e: unknown) => e);
    expect(none).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1 });
    expect(performance.now() - t).toBeLessThan(250);
    await a.gateway.start('con_2', 1, false);
    const silent = await whenServed(() => b.gateway.request('con_2', { type: 'positions', accountId: '7' }, { timeoutMs: 200 })).catch((e: unknown) => e);
    expect(silent).toMatchObject({ code: 'BROKER_TIMEOUT' });
  });

  it('a forwarded call whose owner dies is answered once another node takes the connection over, not at its deadline: an order 504 (may have been placed), a read 503 (cluster probe: 15.7 s)', async () => {
    const prefix = `t${randomBase62(8)}`;
    // a never answers: it died with the calls in flight.
    const a = await node(prefix, 'a', () => new Promise(() => undefined));
    const b = await node(prefix, 'b');
    const c = await node(prefix, 'c');
    await a.gateway.start('con_7', 1, false);
    await until(() => b.gateway.status('con_7')?.status === 'CONNECTED', 'b knows the owner');
    const order = { type: 'place-order', accountId: '7', symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'buy', qty: 1, orderType: 'market', timeInForce: 'day', clOrdId: 'x' } as ActorRequest;
    const t = performance.now();
    const placed = b.gateway.request('con_7', order, { timeoutMs: 20_000 }).catch((e: unknown) => e);
    const read = b.gateway.request('con_7', { type: 'positions', accountId: '7' }, { timeoutMs: 20_000 }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    // c takes it over (a's lease ended): its resume is announced under epoch 2.
    await c.gateway.start('con_7', 2, true);
    expect(await placed).toMatchObject({ code: 'BROKER_TIMEOUT' });
    expect((await placed as AppError).message).toContain('another node took the connection over');
    expect(await read).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1 });
    expect(performance.now() - t).toBeLessThan(5000);
  });

  it('a connection being stopped answers 503 (it is moving), not its supervisor’s 404', async () => {
    const prefix = `t${randomBase62(8)}`;
    let stopping!: () => void;
    const a = await node(prefix, 'a');
    await a.gateway.start('con_3', 1, false);
    a.sup.removeConnection = () => new Promise<void>((r) => (stopping = r));
    const stop = a.gateway.stop('con_3', false);
    await expect(a.gateway.request('con_3', { type: 'positions', accountId: '7' })).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE' });
    stopping();
    await stop;
  });

  it('starting a connection again on the node still stopping it (a lapse, then a quick restore) waits for the stop', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a');
    const b = await node(prefix, 'b');
    const seen: ActorEvent[] = [];
    b.gateway.onEvent((e) => seen.push(e));
    await a.gateway.start('con_5', 1, false);
    await until(() => seen.some((e) => e.type === 'status' && e.status === 'CONNECTED'), 'CONNECTED on b');
    // A supervisor whose removal takes a while and ends with DISABLED, as the real one does.
    const calls: string[] = [];
    let removed!: () => void;
    const removeOriginal = a.sup.removeConnection.bind(a.sup);
    a.sup.removeConnection = async (id: string) => {
      calls.push('remove');
      await new Promise<void>((r) => (removed = r));
      calls.push('removed');
      await removeOriginal(id);
    };
    const addOriginal = a.sup.addConnection.bind(a.sup);
    a.sup.addConnection = async (s: ConnectionSpec, o?: { resume?: boolean }) => {
      calls.push('add');
      await addOriginal(s, o);
    };
    const stop = a.gateway.stop('con_5', false);
    await until(() => calls.includes('remove'), 'the removal begun');
    const start = a.gateway.start('con_5', 2, true);
    await new Promise((r) => setTimeout(r, 50));
    removed();
    await Promise.all([stop, start]);
    // The new actor is added after the old one is gone, so the old removal cannot take it down…
    expect(calls).toEqual(['remove', 'removed', 'add']);
    // …and the removal's DISABLED, meant for the stopped actor, never reaches the feed under the new epoch.
    await until(() => seen.filter((e) => e.type === 'status' && e.status === 'CONNECTED').length === 2, 'CONNECTED again on b');
    await a.feed.flushed();
    await new Promise((r) => setTimeout(r, 100));
    expect(b.gateway.status('con_5')).toMatchObject({ status: 'CONNECTED' });
    expect(seen.filter((e) => e.type === 'status').map((e) => (e as { status: string }).status)).toEqual(['CONNECTED', 'RECONNECTING', 'CONNECTED']);
    expect(await a.gateway.request('con_5', { type: 'working-orders', accountId: '7' })).toEqual([]);
  });

  it('a start waiting for a stop gives up when the connection is stopped again meanwhile', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a');
    await a.gateway.start('con_6', 1, false);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const removeOriginal = a.sup.removeConnection.bind(a.sup);
    a.sup.removeConnection = async (id: string) => {
      await gate;
      await removeOriginal(id);
    };
    const stop = a.gateway.stop('con_6', false);
    const start = a.gateway.start('con_6', 2, true);
    const again = a.gateway.stop('con_6', false);
    open();
    await Promise.all([stop, start, again]);
    // Only the first start added an actor; nothing runs here now.
    expect(a.sup.added).toEqual([{ id: 'con_6', resume: false }]);
    await expect(a.gateway.request('con_6', { type: 'positions', accountId: '7' })).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  });

  it('an event whose publish answer was lost is stored once: the retry carries the same message id (cluster probe: a status event delivered twice, 2 s late)', async () => {
    const prefix = `t${randomBase62(8)}`;
    const b = await node(prefix, 'b');
    const seen: ActorEvent[] = [];
    b.gateway.onEvent((e) => seen.push(e));
    const nc = await connect({ servers: nats.url });
    const js = jetstream(nc);
    let lose = 1;
    // The stream stores the first publish, but its answer is "lost" (a timeout after the store).
    const lossy = new Proxy(js, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop !== 'publish' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: Parameters<typeof js.publish>) => {
          const ack = await js.publish(...args);
          if (lose-- > 0) throw new Error('TimeoutError: publish answer lost');
          return ack;
        };
      },
    });
    const feed = await EventFeed.start({ js: lossy, jsm: await jetstreamManager(nc), prefix, replicas: 1, nodeId: 'a', logger });
    try {
      feed.publish(1, { type: 'status', connectionId: 'con_9', status: 'CONNECTED', reason: 'connect', ts: 1 });
      feed.publish(1, { type: 'status', connectionId: 'con_9', status: 'RECONNECTING', reason: 'disconnect', ts: 2 });
      await feed.flushed(10_000);
      await until(() => seen.filter((e) => e.connectionId === 'con_9').length >= 2, 'both events on b', 10_000);
      await new Promise((r) => setTimeout(r, 200));
      expect(seen.filter((e) => e.connectionId === 'con_9').map((e) => (e as { status: string }).status)).toEqual(['CONNECTED', 'RECONNECTING']);
      expect(lose).toBeLessThan(0);
    } finally {
      feed.close();
      await nc.close();
    }
  });

  it('every node knows every connection’s status and accounts, with stream sequences as event ids; a previous owner’s events are dropped', async () => {
    const prefix = `t${randomBase62(8)}`;
    const a = await node(prefix, 'a');
    const b = await node(prefix, 'b');
    const seen: [ActorEvent, number | undefined][] = [];
    b.gateway.onEvent((e, id) => seen.push([e, id]));
    await a.gateway.start('con_4', 1, false);
    a.sup.emit({ type: 'accounts', connectionId: 'con_4', accounts: [{ id: '70', name: 'A', connectionId: 'con_4', broker: 'paper', environment: 'paper', active: true }] });
    await until(() => b.gateway.accounts('con_4').length === 1, 'accounts on b');
    expect(b.gateway.status('con_4')).toMatchObject({ status: 'CONNECTED' });
    const ids = seen.map(([, id]) => id!);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(ids[0]).toBeGreaterThan(0);

    // Another node takes over under epoch 2: it announces RECONNECTING first, then its actor reports.
    await a.gateway.stop('con_4', false);
    await b.gateway.start('con_4', 2, true);
    expect(b.sup.added).toEqual([{ id: 'con_4', resume: true }]);
    await until(() => seen.some(([e]) => e.type === 'status' && e.status === 'CONNECTED' && e.reason === 'reconnect'), 'reconnected');
    const statuses = seen.filter(([e]) => e.type === 'status').map(([e]) => (e as { status: string }).status);
    // A silent stop publishes nothing (no DISABLED): the connection moved, it was not removed.
    expect(statuses).toEqual(['CONNECTED', 'RECONNECTING', 'CONNECTED']);
    // A late event of the old owner (epoch 1) changes nothing anywhere.
    a.feed.publish(1, { type: 'status', connectionId: 'con_4', status: 'FAILED', reason: 'fatal-error', ts: 3 });
    await a.feed.flushed();
    await new Promise((r) => setTimeout(r, 100));
    expect(b.gateway.status('con_4')).toMatchObject({ status: 'CONNECTED' });
    expect(seen.some(([e]) => e.type === 'status' && e.status === 'FAILED')).toBe(false);

    // A node started now learns the latest status and accounts from the stream.
    const c = await node(prefix, 'c');
    expect(c.gateway.status('con_4')).toMatchObject({ status: 'CONNECTED', reason: 'reconnect' });
    expect(c.gateway.accounts('con_4').map((x) => x.id)).toEqual(['70']);
    expect(c.feed.position()).toBe(b.feed.position());
    // Removing announces DISABLED.
    await b.gateway.stop('con_4', true);
    await until(() => c.gateway.status('con_4')?.status === 'DISABLED', 'DISABLED on c');
  });
});
