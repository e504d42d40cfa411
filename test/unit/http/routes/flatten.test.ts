import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FlattenRequest, FlattenResult } from '../../../../src/actors/protocol.js';
import { AppError } from '../../../../src/domain/problems.js';
import { GoesOnError } from '../../../../src/http/route-types.js';
import { flattenResponseSchema } from '../../../../src/http/schemas.js';
import { call, callError, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
  w.gateway.responder.flatten = (req: FlattenRequest) => ({
    cancelledOrderIds: ['7'],
    positions: req.symbol ? [{ symbol: req.symbol, closedQty: 1, status: 'liquidated' }] : [],
    brokerMs: 2,
  });
});
afterEach(() => w.close());

describe('POST /accounts/:id/flatten', () => {
  it('flattens every symbol with an empty body', async () => {
    const res = await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
    expect(flattenResponseSchema.parse(res.body)).toMatchObject({ accountId: '101', symbol: null, cancelledOrderIds: ['7'] });
    expect(w.gateway.calls[0]!.req).toMatchObject({ type: 'flatten', accountId: '101', symbol: null });
    expect(res.timing.filter(([name]) => name !== 'actor')).toEqual([['broker', 2]]);
  });

  it('answers within 30 s, past the actor\'s 20 s wait for a lost connection; one still at work then is a 504 saying it goes on, and its outcome is what its key stores (cluster probe: a bare 504 at 15 s, then it closed 2; money: a retry with the key flattened again)', async () => {
    vi.useFakeTimers();
    try {
      let finish!: (r: FlattenResult) => void;
      w.gateway.responder.flatten = () => new Promise<FlattenResult>((r) => (finish = r)) as unknown as FlattenResult;
      const pending = callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-late' });
      await vi.advanceTimersByTimeAsync(29_999);
      expect(finish).toBeDefined();
      await vi.advanceTimersByTimeAsync(1);
      const err = await pending;
      expect(err).toBeInstanceOf(GoesOnError);
      expect(err).toMatchObject({ code: 'BROKER_TIMEOUT', message: expect.stringMatching(/^The flatten did not finish within 30 s and goes on in the service: GET …\/positions.*a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE until it has ended, then with its outcome$/) });
      // The front follows it past its answer, for the outcome.
      expect(w.gateway.calls.at(-1)).toMatchObject({ timeoutMs: 120_000 });
      finish({ cancelledOrderIds: ['7'], positions: [{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }], brokerMs: 2 });
      expect(await (err as GoesOnError).outcome).toMatchObject({ status: 200, body: { accountId: '101', cancelledOrderIds: ['7'], positions: [{ symbol: 'ESZ6', status: 'liquidated' }] } });
      // One that ends in an error stores that error; one the front stops following frees the key.
      w.gateway.responder.flatten = () => new Promise<FlattenResult>((r) => (finish = r)) as unknown as FlattenResult;
      const failing = callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
      await vi.advanceTimersByTimeAsync(30_000);
      const keyless = await failing;
      expect(keyless.message).not.toMatch(/Idempotency-Key/);
      finish({ cancelledOrderIds: [], positions: [{ symbol: 'ESZ6', closedQty: 0, status: 'failed', code: 'BROKER_REJECTED', detail: 'refused' }], brokerMs: 2 });
      expect(await (keyless as GoesOnError).outcome).toMatchObject({ code: 'BROKER_REJECTED' });
    } finally {
      vi.useRealTimers();
    }
  });

  it('resolves a given symbol to its contract before calling the actor', async () => {
    const res = await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'CME_MINI:ES1!' } });
    expect(flattenResponseSchema.parse(res.body).symbol).toBe('ESZ6');
  });

  it('derives liquidation clOrdIds from the Idempotency-Key so a retry cannot double-close', async () => {
    await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-1' });
    await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-1' });
    const [a, b] = w.gateway.calls.filter((c) => c.req.type === 'flatten').map((c) => (c.req as FlattenRequest).clOrdIdPrefix);
    expect(a).toBe(b);
    expect(route(w, 'POST', '/accounts/:id/flatten').idempotent).toBe(true);
  });

  it('a position it could not close makes the answer an error, never a stored 200 (faults probe: 200 while long 1 with its stop-loss cancelled, and the retry replayed it)', async () => {
    const failing = (code: string, detail: string, retryAfterSeconds?: number) => () => ({
      cancelledOrderIds: ['7', '8'],
      positions: [
        { symbol: 'NQZ6', closedQty: 1, status: 'liquidated' as const },
        { symbol: 'ESZ6', closedQty: 0, status: 'failed' as const, detail, code: code as never, ...(retryAfterSeconds !== undefined && { retryAfterSeconds }) },
      ],
      brokerMs: 2,
    });
    // Sent as the connection dropped: it may have reached the broker.
    w.gateway.responder.flatten = failing('BROKER_TIMEOUT', 'connection closed before the broker answered');
    const timedOut = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
    expect(timedOut.code).toBe('BROKER_TIMEOUT');
    expect(timedOut).not.toBeInstanceOf(GoesOnError);
    expect(timedOut.message).toMatch(/^The resting orders were cancelled, but the broker did not confirm the liquidation of ESZ6 \(connection closed before the broker answered\): the position may still close, or it is open without its protective orders/);
    expect(timedOut.extensions).toMatchObject({
      cancelledOrderIds: ['7', '8'],
      positions: [{ symbol: 'NQZ6', status: 'liquidated' }, { symbol: 'ESZ6', status: 'failed', code: 'BROKER_TIMEOUT' }],
    });
    // Not sent (the broker's 429, or not connected): 503 with the wait; refused: 422.
    w.gateway.responder.flatten = failing('BROKER_UNAVAILABLE', 'rate limited by the broker', 30);
    const unsent = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
    expect([unsent.code, unsent.retryAfterSeconds]).toEqual(['BROKER_UNAVAILABLE', 30]);
    expect(unsent.message).toMatch(/ESZ6 \(rate limited by the broker\) could not be closed: the position is still open without its protective orders/);
    expect((unsent.extensions.positions as object[])[1]).not.toHaveProperty('retryAfterSeconds');
    w.gateway.responder.flatten = failing('BROKER_REJECTED', 'the broker did not fill the liquidation (market closed): the position is still open');
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } })).code).toBe('BROKER_REJECTED');
    // The error is not stored under the key: once the broker is back, the same key flattens again.
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: [], positions: [{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' as const }], brokerMs: 2 });
    const again = await call(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-2' });
    expect(again.status).toBe(200);
    expect(w.gateway.calls.filter((c) => c.req.type === 'flatten')).toHaveLength(4);
  });

  describe('a liquidation the broker did not confirm holds the Idempotency-Key while the position is watched (cluster probe: the 504 freed the key, and a same-key retry sent another liquidation)', () => {
    const NOW = Date.parse('2026-11-20T15:00:00Z');
    const unconfirmedFlatten = () => ({
      cancelledOrderIds: ['7'],
      positions: [
        { symbol: 'NQZ6', closedQty: 1, status: 'liquidated' as const },
        { symbol: 'ESZ6', closedQty: 0, status: 'failed' as const, code: 'BROKER_TIMEOUT' as never, detail: 'connection closed before the broker answered' },
      ],
      brokerMs: 2,
    });
    const held = { accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW - 60_000).toISOString() };
    beforeEach(() => {
      vi.useFakeTimers();
      w.deps.now = () => new Date(NOW);
      w.gateway.responder.flatten = unconfirmedFlatten;
    });
    afterEach(() => vi.useRealTimers());

    it('answers 504 saying so, and stores a 200 with the position closed once it is', async () => {
      w.gateway.responder.positions = () => [held];
      const err = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-u1' });
      expect(err).toBeInstanceOf(GoesOnError);
      expect(err.message).toMatch(/did not confirm the liquidation of ESZ6.*; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE while the service watches the position \(up to 2 minutes\), then 200 once it is closed; a flatten with a new key acts at once$/);
      expect(err.extensions).toMatchObject({ positions: [{ symbol: 'NQZ6' }, { symbol: 'ESZ6', status: 'failed', code: 'BROKER_TIMEOUT' }] });
      let stored: unknown = 'pending';
      void (err as GoesOnError).outcome.then((o) => (stored = o));
      await vi.advanceTimersByTimeAsync(5_000);
      expect(stored).toBe('pending');
      // Closed (its liquidation filled): the key stores the flatten's 200, the position closed.
      w.gateway.responder.positions = () => [];
      await vi.advanceTimersByTimeAsync(1_000);
      expect(stored).toMatchObject({ status: 200 });
      expect(flattenResponseSchema.parse((stored as { body: unknown }).body)).toEqual({
        accountId: '101',
        symbol: null,
        cancelledOrderIds: ['7'],
        positions: [
          { symbol: 'NQZ6', closedQty: 1, status: 'liquidated' },
          { symbol: 'ESZ6', closedQty: 1, status: 'liquidated', detail: 'closed after this flatten was answered 504 (by its liquidation, or another exit)' },
        ],
      });
    });

    it('a position opened after the flatten is not the one it was to close; one still open after 2 minutes frees the key', async () => {
      w.gateway.responder.positions = () => [{ ...held, openedAt: new Date(NOW + 5_000).toISOString() }];
      const reentered = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-u2' });
      await vi.advanceTimersByTimeAsync(1_000);
      await expect((reentered as GoesOnError).outcome).resolves.toMatchObject({ status: 200 });
      w.gateway.responder.positions = () => [held];
      const open = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-u3' });
      let stored: unknown = 'pending';
      void (open as GoesOnError).outcome.then((o) => (stored = o));
      await vi.advanceTimersByTimeAsync(119_000);
      expect(stored).toBe('pending');
      await vi.advanceTimersByTimeAsync(1_000);
      expect(stored).toBeUndefined();
    });

    it('one whose cluster node stopped answering holds its key 30 s (what that node sent may still be carried out), then stores a 200 once what it was to close is closed, or frees the key after 2 minutes (cluster re-probe: freed at once, the retry flattened again, and the hung node’s late liquidation closed a position opened after)', async () => {
      // The service's clock moves with the timers here: the follow-up counts its 2 minutes from the flatten.
      vi.setSystemTime(NOW);
      w.deps.now = () => new Date(Date.now());
      w.gateway.responder.positions = () => [held];
      w.gateway.responder.flatten = () => {
        throw new AppError('BROKER_TIMEOUT', 'the node running con_1 stopped before it answered (another node took the connection over): flatten may have reached the broker; retry with the same Idempotency-Key', { ownerChanged: true });
      };
      const hung = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-o1' });
      expect(hung).toBeInstanceOf(GoesOnError);
      expect(hung.message).toMatch(/flatten may have reached the broker; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE for 30 s while the broker may still carry out what that node sent, then 200 once the positions it was to close are closed/);
      let stored: unknown = 'pending';
      void (hung as GoesOnError).outcome.then((o) => (stored = o));
      // Closed already, and a position opened since: still held for the whole hold.
      w.gateway.responder.positions = () => [{ ...held, openedAt: new Date(NOW + 5_000).toISOString() }];
      await vi.advanceTimersByTimeAsync(29_000);
      expect(stored).toBe('pending');
      await vi.advanceTimersByTimeAsync(1_000);
      expect(stored).toMatchObject({ status: 200 });
      expect(flattenResponseSchema.parse((stored as { body: unknown }).body)).toEqual({
        accountId: '101',
        symbol: null,
        cancelledOrderIds: [],
        positions: [{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated', detail: expect.stringContaining('the cluster node running its connection stopped answering') }],
      });

      // Still open two minutes after it: the key is free, and a flatten under it acts.
      w.gateway.responder.positions = () => [held];
      const open = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-o2' });
      let left: unknown = 'pending';
      void (open as GoesOnError).outcome.then((o) => (left = o));
      await vi.advanceTimersByTimeAsync(118_000);
      expect(left).toBe('pending');
      await vi.advanceTimersByTimeAsync(3_000);
      expect(left).toBeUndefined();
    });

    it('is not held when a position was not sent (it never closes by itself), nor without a key', async () => {
      w.gateway.responder.positions = () => [held];
      w.gateway.responder.flatten = () => {
        const r = unconfirmedFlatten();
        return { ...r, positions: [...r.positions, { symbol: 'CLZ6', closedQty: 0, status: 'failed' as const, code: 'BROKER_UNAVAILABLE' as never, detail: 'not connected' }] };
      };
      const mixed = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, idempotencyKey: 'f-u4' });
      expect([mixed.code, mixed instanceof GoesOnError]).toEqual(['BROKER_TIMEOUT', false]);
      w.gateway.responder.flatten = unconfirmedFlatten;
      const keyless = await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' } });
      expect([keyless.code, keyless instanceof GoesOnError]).toEqual(['BROKER_TIMEOUT', false]);
      expect(keyless.message).not.toMatch(/IDEMPOTENCY_KEY_IN_USE/);
    });
  });

  it('refuses an unknown symbol without broker traffic, and foreign or inactive accounts', async () => {
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '101' }, body: { symbol: 'QQQ' } })).code).toBe('UNKNOWN_SYMBOL');
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.b.userId, params: { id: '101' } })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'POST', '/accounts/:id/flatten', { userId: w.a.userId, params: { id: '102' } })).code).toBe('ACCOUNT_INACTIVE');
    expect(w.gateway.calls).toHaveLength(0);
  });
});
