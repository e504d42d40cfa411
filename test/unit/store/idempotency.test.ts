import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IDEMPOTENCY_TTL_MS } from '../../../src/tuning.js';
import { allFiles, backend, tempStore, T0, type TempStore } from '../../support/store.js';

let t: TempStore;
beforeEach(async () => {
  t = await tempStore();
});
afterEach(async () => {
  vi.useRealTimers();
  await t.cleanup();
});

// NATS KV expires records server-side (bucket max_age); only LMDB sweeps.
const sweeps = backend === 'lmdb';

const response = { fingerprint: 'f'.repeat(64), status: 201, headers: { 'content-type': 'application/json' }, body: '{"orderId":"1"}' };

describe('idempotency', () => {
  it('stores a response durably and returns it for the same scope and key only', async () => {
    await t.store.idempotency.put('user:A', 'key-1', response);
    expect(await t.store.idempotency.get('user:A', 'key-1')).toEqual({ ...response, createdAt: T0 });
    expect(await t.store.idempotency.get('user:B', 'key-1')).toBeUndefined();
    expect(await t.store.idempotency.get('user:A', 'key-2')).toBeUndefined();
    await t.reopen();
    expect((await t.store.idempotency.get('user:A', 'key-1'))?.body).toBe(response.body);
  });

  it('does not store the raw key', async () => {
    const key = 'a-very-distinctive-idempotency-key-4711';
    await t.store.idempotency.put('user:A', key, response);
    await t.store.close();
    const files = allFiles(t.storageDir);
    // Control: the scan reads what the store wrote (the stored fingerprint is not secret).
    expect(files.some((f) => f.bytes.includes(Buffer.from(response.fingerprint)))).toBe(true);
    for (const f of files) expect(f.bytes.includes(Buffer.from(key)), f.path).toBe(false);
  });

  it('treats records older than 24 h (by the injected clock) as absent', async () => {
    await t.store.idempotency.put('s', 'k', response);
    t.now.value = T0 + IDEMPOTENCY_TTL_MS;
    expect(await t.store.idempotency.get('s', 'k')).toBeDefined();
    t.now.value = T0 + IDEMPOTENCY_TTL_MS + 1;
    expect(await t.store.idempotency.get('s', 'k')).toBeUndefined();
  });

  it.runIf(sweeps)('sweep deletes expired records only', async () => {
    await t.store.idempotency.put('s', 'old', response);
    t.now.value = T0 + 60 * 60 * 1000;
    await t.store.idempotency.put('s', 'young', response);
    expect(t.store.idempotency.sweep(T0 + IDEMPOTENCY_TTL_MS)).toBe(0);
    expect(t.store.idempotency.sweep(T0 + IDEMPOTENCY_TTL_MS + 1)).toBe(1);
    await t.store.flushed();
    // Moving the clock back shows what is physically left: only the young record.
    t.now.value = T0;
    expect(await t.store.idempotency.get('s', 'old')).toBeUndefined();
    expect(await t.store.idempotency.get('s', 'young')).toBeDefined();
    expect(t.store.idempotency.sweep(T0 + IDEMPOTENCY_TTL_MS + 1)).toBe(0);
  });

  it.runIf(sweeps)('sweep keeps a fresh record stored again under an expired key', async () => {
    await t.store.idempotency.put('s', 'k', response);
    t.now.value = T0 + IDEMPOTENCY_TTL_MS + 10;
    await t.store.idempotency.put('s', 'k', { ...response, body: 'second' });
    expect(t.store.idempotency.sweep(t.now.value)).toBe(1);
    await t.store.flushed();
    expect((await t.store.idempotency.get('s', 'k'))?.body).toBe('second');
  });

  it.runIf(sweeps)('the sweeper runs sweep on its interval and stops when told', async () => {
    await t.store.idempotency.put('s', 'k1', response);
    t.now.value = T0 + IDEMPOTENCY_TTL_MS + 1;
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const stop = t.store.idempotency.startSweeper(60_000);
    vi.advanceTimersByTime(59_999);
    await t.store.flushed();
    t.now.value = T0;
    expect(await t.store.idempotency.get('s', 'k1')).toBeDefined();
    t.now.value = T0 + IDEMPOTENCY_TTL_MS + 1;
    vi.advanceTimersByTime(1);
    await t.store.flushed();
    t.now.value = T0;
    expect(await t.store.idempotency.get('s', 'k1')).toBeUndefined();
    stop();
    await t.store.idempotency.put('s', 'k2', response);
    t.now.value = T0 + IDEMPOTENCY_TTL_MS + 1;
    vi.advanceTimersByTime(120_000);
    await t.store.flushed();
    t.now.value = T0;
    expect(await t.store.idempotency.get('s', 'k2')).toBeDefined();
  });
});
