import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Kvm, type KV } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../../../src/store/crypto.js';
import { KvMirror } from '../../../../src/store/nats/kv-mirror.js';
import { startNats, type NatsServer } from '../../../support/nats.js';

let server: NatsServer & { stopAndRemove(): Promise<void> };
let nc: NatsConnection;
let kv: KV;
const mirrors: KvMirror[] = [];
beforeAll(async () => {
  server = await startNats();
  nc = await connect({ servers: server.url });
});
afterAll(async () => {
  await nc.close();
  await server.stopAndRemove();
});
beforeEach(async () => {
  kv = await new Kvm(nc).create(`m${randomBase62(10)}`, { history: 1 });
});
afterEach(async () => {
  for (const m of mirrors.splice(0)) m.close();
  await kv.destroy();
});

/**
 * The same bucket, but its watch delivers every entry `lagMs` late: what a node sees when the
 * watch is behind its own writes (a busy connection, a consumer being recreated).
 */
function lagging(bucket: KV, lagMs: number): KV {
  return new Proxy(bucket, {
    get(target, prop) {
      if (prop === 'watch') {
        return async (opts: Parameters<KV['watch']>[0]) => {
          const inner = await target.watch(opts);
          const delayed = (async function* () {
            for await (const e of inner) {
              await new Promise((r) => setTimeout(r, lagMs));
              yield e;
            }
          })();
          return Object.assign(delayed, { stop: () => inner.stop() });
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The same bucket, but its first watch goes silent after the initial values: a stuck consumer. */
function stallingFirstWatch(bucket: KV): { kv: KV; watches: () => number } {
  let watches = 0;
  const kv = new Proxy(bucket, {
    get(target, prop) {
      if (prop === 'watch') {
        return async (opts: Parameters<KV['watch']>[0]) => {
          const last = (await target.status()).streamInfo.state.last_seq;
          const inner = await target.watch(opts);
          if (++watches > 1) return inner;
          const silent = (async function* () {
            for await (const e of inner) if (e.revision <= last) yield e;
          })();
          return Object.assign(silent, { stop: () => inner.stop() });
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { kv, watches: () => watches };
}

async function mirror(bucket: KV, stallCheckMs?: number): Promise<KvMirror> {
  const m = new KvMirror(bucket, 'test', { stallCheckMs });
  mirrors.push(m);
  await m.start();
  return m;
}

describe('KvMirror', () => {
  it('loads what the bucket holds before start resolves, deletes included', async () => {
    await kv.put('a.1', JSON.stringify({ v: 1 }));
    await kv.put('a.2', JSON.stringify({ v: 2 }));
    await kv.delete('a.2');
    const m = await mirror(kv);
    expect(m.get('a.1')).toEqual({ v: 1 });
    expect(m.get('a.2')).toBeUndefined();
    expect(m.values('a.')).toEqual([{ v: 1 }]);
  });

  it('applies its own writes at once, however far behind its watch is', async () => {
    const m = await mirror(lagging(kv, 300));
    expect(await m.create('k', { n: 1 })).toBe(true);
    expect(m.get('k')).toEqual({ n: 1 });
    expect(await m.mutate('k', (cur) => ({ next: { n: (cur as { n: number }).n + 1 }, result: 'done' }))).toBe('done');
    expect(m.get('k')).toEqual({ n: 2 });
  });

  it('a deleted key does not come back when the lagging watch delivers its older value', async () => {
    const m = await mirror(lagging(kv, 50));
    expect(await m.create('gone', { n: 1 })).toBe(true);
    await m.mutate('gone', () => ({ next: null, result: undefined }));
    expect(m.get('gone')).toBeUndefined();
    // Over the next 150 ms the watch delivers the creation (old) and then the delete marker.
    const deadline = Date.now() + 150;
    while (Date.now() < deadline) {
      expect(m.get('gone')).toBeUndefined();
      await new Promise((r) => setTimeout(r, 5));
    }
  });

  it('an older value from the lagging watch never replaces a newer local write', async () => {
    const m = await mirror(lagging(kv, 50));
    await m.create('k', { n: 0 });
    for (let i = 1; i <= 5; i++) await m.mutate('k', () => ({ next: { n: i }, result: undefined }));
    const deadline = Date.now() + 400;
    while (Date.now() < deadline) {
      expect(m.get('k')).toEqual({ n: 5 });
      await new Promise((r) => setTimeout(r, 5));
    }
  });

  it('mutate finds a key another writer created that its watch has not delivered yet', async () => {
    const behind = await mirror(lagging(kv, 500));
    await kv.create('fresh', JSON.stringify({ owner: 'x' }));
    expect(behind.get('fresh')).toBeUndefined();
    expect(await behind.mutate('fresh', (cur) => (cur ? { next: { ...(cur as object), seen: true }, result: true } : { next: undefined, result: false }))).toBe(true);
    expect(behind.get('fresh')).toEqual({ owner: 'x', seen: true });
  });

  it('mutate retries on a fresh value when another writer changed the key in between', async () => {
    const behind = await mirror(lagging(kv, 500));
    await behind.create('c', { n: 0 });
    // Someone else increments twice; this mirror's copy is stale.
    let rev = (await kv.get('c'))!.revision;
    rev = await kv.update('c', JSON.stringify({ n: 1 }), rev);
    await kv.update('c', JSON.stringify({ n: 2 }), rev);
    const seen: number[] = [];
    await behind.mutate('c', (cur) => {
      seen.push((cur as { n: number }).n);
      return { next: { n: (cur as { n: number }).n + 1 }, result: undefined };
    });
    expect(seen).toEqual([0, 2]);
    expect(JSON.parse((await kv.get('c'))!.string())).toEqual({ n: 3 });
  });

  it('create is false for a live key and true again after a delete', async () => {
    const m = await mirror(kv);
    expect(await m.create('u', { a: 1 })).toBe(true);
    expect(await m.create('u', { a: 2 })).toBe(false);
    expect(m.get('u')).toEqual({ a: 1 });
    await m.mutate('u', () => ({ next: null, result: undefined }));
    expect(await m.create('u', { a: 3 })).toBe(true);
    expect(m.get('u')).toEqual({ a: 3 });
  });

  it('tells listeners about every change with the previous value', async () => {
    const m = new KvMirror(kv, 'test');
    mirrors.push(m);
    const changes: unknown[] = [];
    m.onChange((key, value, previous) => changes.push([key, value, previous]));
    await kv.put('p', JSON.stringify(1));
    await m.start();
    await m.mutate('p', () => ({ next: 2, result: undefined }));
    await m.mutate('p', () => ({ next: null, result: undefined }));
    expect(changes).toEqual([
      ['p', 1, undefined],
      ['p', 2, 1],
      ['p', undefined, 2],
    ]);
  });

  it('replaces a watch that stopped delivering, resuming after the last revision it saw', async () => {
    await kv.put('before', JSON.stringify(1));
    const stalling = stallingFirstWatch(kv);
    const m = await mirror(stalling.kv, 100);
    expect(m.get('before')).toBe(1);
    await kv.put('after', JSON.stringify(2));
    await kv.put('before', JSON.stringify(3));
    const deadline = Date.now() + 3000;
    while ((m.get('after') === undefined || m.get('before') !== 3) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(m.get('after')).toBe(2);
    expect(m.get('before')).toBe(3);
    expect(stalling.watches()).toBe(2);
  });

  it('applies writes republished on the core subject while its watch is silent', async () => {
    const name = `r${randomBase62(10)}`;
    const rkv = await new Kvm(nc).create(name, { history: 1, republish: { src: `$KV.${name}.>`, dest: `rp.${name}.>` } });
    try {
      const stalling = stallingFirstWatch(rkv);
      const m = new KvMirror(stalling.kv, name, { republish: { nc, subject: `rp.${name}` }, stallCheckMs: 60_000 });
      mirrors.push(m);
      await m.start();
      await rkv.put('a.b', JSON.stringify({ v: 1 }));
      await rkv.delete('a.b');
      await rkv.put('c', JSON.stringify('x'));
      const deadline = Date.now() + 1000;
      while (m.get('c') === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
      expect(m.get('c')).toBe('x');
      expect(m.get('a.b')).toBeUndefined();
      expect(stalling.watches()).toBe(1);
    } finally {
      await rkv.destroy();
    }
  });

  it('a write the core subject lost is brought by the watch, restarted when it stopped moving', async () => {
    const name = `r${randomBase62(10)}`;
    const rkv = await new Kvm(nc).create(name, { history: 1, republish: { src: `$KV.${name}.>`, dest: `rp.${name}.>` } });
    try {
      // A connection whose subscription drops the republished write of key `lost`.
      const lossy = new Proxy(nc, {
        get(target, prop) {
          if (prop === 'subscribe') {
            return (subject: string, o: { callback: (err: Error | null, msg: { subject: string }) => void }) =>
              target.subscribe(subject, { callback: (err, msg) => (msg.subject.endsWith('.lost') ? undefined : o.callback(err, msg)) });
          }
          const v = Reflect.get(target, prop, target) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const stalling = stallingFirstWatch(rkv);
      const m = new KvMirror(stalling.kv, name, { republish: { nc: lossy, subject: `rp.${name}` }, stallCheckMs: 100 });
      mirrors.push(m);
      await m.start();
      await rkv.put('lost', JSON.stringify(1));
      await rkv.put('after', JSON.stringify(2));
      const deadline = Date.now() + 3000;
      while (m.get('lost') === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      expect(m.get('after')).toBe(2);
      expect(m.get('lost')).toBe(1);
      expect(stalling.watches()).toBe(2);
    } finally {
      await rkv.destroy();
    }
  });

  it('ignores a value that is not JSON instead of stopping, and reads throw once closed', async () => {
    const m = await mirror(kv);
    await kv.put('bad', 'not json {');
    await kv.put('good', JSON.stringify('ok'));
    const deadline = Date.now() + 1000;
    while (m.get('good') === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    expect(m.get('good')).toBe('ok');
    expect(m.get('bad')).toBeUndefined();
    m.close();
    expect(() => m.get('good')).toThrow(/closed/);
  });
});
