/**
 * Idempotency over real HTTP and the real LMDB store: concurrent duplicates run the handler
 * once, replays are byte-identical, another body is 422, and unknown outcomes are not stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { deferred, startEngine, type EngineHarness } from '../../support/engine.js';

let h: EngineHarness;

beforeAll(async () => {
  h = await startEngine({ rateLimitPerMin: 1000 });
});
afterAll(async () => {
  await h.stop();
});

const place = (key: string | undefined, body: unknown, path = '/api/v1/accounts/7/orders') =>
  fetch(h.url(path), {
    method: 'POST',
    headers: { 'X-API-Key': h.keys.rw, 'Content-Type': 'application/json', ...(key !== undefined ? { 'Idempotency-Key': key } : {}) },
    body: JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, headers: r.headers, body: await r.text() }));

describe('idempotency', () => {
  it('runs the handler once for 50 concurrent identical POSTs; the others are 409 or identical replays', async () => {
    const before = h.state.orderCalls;
    const gate = deferred();
    h.state.hold = gate.promise;
    const pending = Array.from({ length: 50 }, () => place('concurrent-1', { symbol: 'ES', qty: 1 }));
    // Let every request reach the server while the first is held in the handler.
    while (h.state.orderCalls === before) await new Promise((r) => setImmediate(r));
    gate.resolve();
    const results = await Promise.all(pending);
    delete h.state.hold;
    expect(h.state.orderCalls - before).toBe(1);
    const created = results.filter((r) => r.status === 201);
    const conflicts = results.filter((r) => r.status === 409);
    expect(created.length + conflicts.length).toBe(50);
    expect(created.length).toBeGreaterThanOrEqual(1);
    const first = created.find((r) => r.headers.get('idempotent-replayed') === null);
    expect(first).toBeDefined();
    for (const r of created) expect(r.body).toBe(first!.body);
    for (const r of conflicts) {
      expect(r.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(r.body)).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_USE' });
    }
  });

  it('a request that goes on past its 504 holds its key (409 IN_USE) until its outcome is known, then stores that outcome for its retries; an outcome not stored frees the key', async () => {
    const path = '/api/v1/accounts/7/goes-on';
    const body = { symbol: 'ES', qty: 1 };
    for (const [outcome, expected] of [
      [{ status: 200, body: { flattened: true } }, { status: 200, body: '{"flattened":true}' }],
      [new AppError('BROKER_REJECTED', 'the broker refused it'), { status: 422 }],
      [undefined, undefined],
      [new AppError('BROKER_TIMEOUT', 'still not known'), undefined],
    ] as const) {
      const key = `goes-on-${Math.random()}`;
      const done = deferred();
      h.state.goesOn = done.promise.then(() => outcome);
      const calls = h.state.goesOnCalls ?? 0;
      const first = await place(key, body, path);
      expect(first.status).toBe(504);
      const meanwhile = await place(key, body, path);
      expect(meanwhile.status).toBe(409);
      expect(JSON.parse(meanwhile.body)).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_USE' });
      done.resolve();
      await h.store.flushed();
      const retry = await eventuallyNot409(() => place(key, body, path));
      if (expected) {
        expect(retry.status).toBe(expected.status);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        if ('body' in expected) expect(retry.body).toBe(expected.body);
        expect(h.state.goesOnCalls).toBe(calls + 1);
      } else {
        // Freed: the retry runs it again.
        expect(retry.status).toBe(504);
        expect(h.state.goesOnCalls).toBe(calls + 2);
      }
    }
    delete h.state.goesOn;
  });

  it('replays status and body byte-for-byte with Idempotent-Replayed, on either prefix, without calling the handler', async () => {
    const first = await place('replay-1', { symbol: 'NQ', qty: 2 });
    expect(first.status).toBe(201);
    const calls = h.state.orderCalls;
    const again = await place('replay-1', { qty: 2, symbol: 'NQ' }, '/v1/accounts/7/orders');
    expect(again.status).toBe(201);
    expect(again.body).toBe(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe('application/json');
    expect(h.state.orderCalls).toBe(calls);
  });

  it('answers 422 IDEMPOTENCY_KEY_REUSED for the same key with another body or another path parameter', async () => {
    await place('reuse-1', { symbol: 'ES', qty: 1 });
    const otherBody = await place('reuse-1', { symbol: 'ES', qty: 3 });
    expect(otherBody.status).toBe(422);
    expect(JSON.parse(otherBody.body)).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    const otherAccount = await place('reuse-1', { symbol: 'ES', qty: 1 }, '/api/v1/accounts/8/orders');
    expect(otherAccount.status).toBe(422);
  });

  it('scopes keys per user: another user reusing a key gets a fresh execution', async () => {
    await place('shared-key', { symbol: 'ES', qty: 1 });
    const calls = h.state.orderCalls;
    const res = await fetch(h.url('/api/v1/accounts/7/orders'), {
      method: 'POST',
      headers: { 'X-API-Key': h.keys.other, 'Content-Type': 'application/json', 'Idempotency-Key': 'shared-key' },
      body: JSON.stringify({ symbol: 'ES', qty: 1 }),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(h.state.orderCalls).toBe(calls + 1);
  });

  it('commits the record durably before answering: it is in the store when the response arrives', async () => {
    const res = await place('durable-1', { symbol: 'CL', qty: 1 });
    const rec = h.store.idempotency.get(h.userId, 'durable-1');
    expect(rec).toMatchObject({ status: 201, body: res.body });
  });

  it('does not store 504/503 (outcome unknown, retry must run again) but stores a 422 broker rejection', async () => {
    const body = { symbol: 'ES', qty: 1 };
    for (const code of ['BROKER_TIMEOUT', 'BROKER_UNAVAILABLE'] as const) {
      h.state.failCode = code;
      const calls = h.state.failCalls;
      const a = await place(`unknown-${code}`, body, '/v1/accounts/7/fail');
      const b = await place(`unknown-${code}`, body, '/v1/accounts/7/fail');
      expect([a.status, b.status]).toEqual(code === 'BROKER_TIMEOUT' ? [504, 504] : [503, 503]);
      expect(h.state.failCalls).toBe(calls + 2);
      expect(b.headers.get('idempotent-replayed')).toBeNull();
    }
    expect((await place('unknown-BROKER_UNAVAILABLE', body, '/v1/accounts/7/fail')).headers.get('retry-after')).toBe('2');
    h.state.failCode = 'BROKER_REJECTED';
    const calls = h.state.failCalls;
    const a = await place('rejected-1', body, '/v1/accounts/7/fail');
    const b = await place('rejected-1', body, '/v1/accounts/7/fail');
    expect(a.status).toBe(422);
    expect(b.body).toBe(a.body);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(h.state.failCalls).toBe(calls + 1);
  });

  it("never stores the actor's 422 for a retry whose body is not the key's order at the broker: the right body still reconciles (re-probe: one wrong retry blocked the key for 24 h)", async () => {
    h.state.failCode = 'IDEMPOTENCY_KEY_REUSED';
    const calls = h.state.failCalls;
    const wrong = await place('mismatch-1', { symbol: 'ES', qty: 2 }, '/v1/accounts/7/fail');
    expect(wrong.status).toBe(422);
    h.state.failCode = 'BROKER_REJECTED';
    const right = await place('mismatch-1', { symbol: 'ES', qty: 1 }, '/v1/accounts/7/fail');
    expect(right.headers.get('idempotent-replayed')).toBeNull();
    expect(h.state.failCalls).toBe(calls + 2);
  });

  it('never stores validation failures: the same key works once the body is fixed', async () => {
    const bad = await place('corrected-1', { symbol: 'ES', qty: 0 });
    expect(bad.status).toBe(400);
    const good = await place('corrected-1', { symbol: 'ES', qty: 1 });
    expect(good.status).toBe(201);
  });

  it('takes the webhook key from the payload id and dedupes alerts', async () => {
    const send = (payload: unknown) =>
      fetch(h.url(`/api/v1/webhooks/${h.webhookToken}`), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(payload) });
    const first = await send({ action: 'buy', id: 'alert-1' });
    expect(await first.json()).toMatchObject({ key: 'alert-1' });
    const dup = await send({ action: 'buy', id: 'alert-1' });
    expect(dup.headers.get('idempotent-replayed')).toBe('true');
    // TradingView's own order ids hold spaces ("Close entry(s) order Long"): such an id dedupes too.
    const spaced = await send({ action: 'buy', id: 'Close entry(s) order Long' });
    expect(await spaced.json()).toMatchObject({ key: 'Close entry(s) order Long' });
    const spacedAgain = await send({ action: 'buy', id: 'Close entry(s) order Long' });
    expect(spacedAgain.headers.get('idempotent-replayed')).toBe('true');
    const bad = await send({ action: 'buy', id: 'line\nbreak' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY', detail: 'id must be 1 to 255 characters, none of them control characters' });
  });
});

/** `op` again while it answers 409 (the outcome is being stored), up to 2 s. */
async function eventuallyNot409<T extends { status: number }>(op: () => Promise<T>): Promise<T> {
  const until = Date.now() + 2_000;
  for (;;) {
    const r = await op();
    if (r.status !== 409 || Date.now() > until) return r;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
