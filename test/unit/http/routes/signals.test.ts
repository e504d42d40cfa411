import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppError, RequestNotSentError } from '../../../../src/domain/problems.js';
import { alertSchema, resumeLateOutcomes } from '../../../../src/http/routes/signals.js';
import { createLogger } from '../../../../src/log.js';
import { IdempotencyGate } from '../../../../src/http/idempotency.js';
import { GoesOnError } from '../../../../src/http/route-types.js';
import { createdWebhookTokenSchema, listOf } from '../../../../src/http/schemas.js';
import { TRADINGVIEW_TEMPLATE } from '../../../../src/http/webhook-payload.js';
import { call, callError, NOW, orderRecord, route, world, type World } from '../../../support/routes.js';

let w: World;
let token: { id: string; token: string };
beforeEach(async () => {
  w = await world();
  const created = createdWebhookTokenSchema.parse((await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'TV' } })).body);
  token = { id: created.id, token: created.token };
});
afterEach(() => w.close());

const alert = (body: unknown, requestId?: string) =>
  call(w, 'POST', '/webhooks/:token', { userId: w.a.userId, ...(requestId !== undefined && { requestId }), kind: 'webhook', principalId: `webhook:${token.id}`, scopes: ['trade'], webhook: { tokenId: token.id, accountId: '101', strategyId: null }, params: { token: token.token }, body });
const alerts = async (id = token.id, userId = w.a.userId) => {
  await w.store.flushed();
  return listOf(alertSchema).parse((await call(w, 'GET', '/webhook-tokens/:id/alerts', { userId, params: { id } })).body).data;
};

describe('recent alerts of a token', () => {
  it('takes ?limit= 1..100 in decimal digits and ?cursor=, no other query parameter', () => {
    const query = route(w, 'GET', '/webhook-tokens/:id/alerts').query!;
    for (const q of [{ zzUnknown: '1' }, { limit: '0' }, { limit: '101' }, { limit: '1e2' }, { limit: '+5' }, { cursor: 'x'.repeat(201) }]) {
      expect(query.safeParse(q).success, JSON.stringify(q)).toBe(false);
    }
    expect(query.parse({ limit: '100', cursor: 'abc' })).toEqual({ limit: 100, cursor: 'abc' });
    expect(query.parse({})).toEqual({});
  });

  it('pages the alerts newest first: nextCursor continues below the last shown and is null on the last page; another list’s cursor is a 400', async () => {
    for (let i = 1; i <= 5; i++) await alert({ action: 'buy', symbol: 'XX1!', qty: i }).catch(() => undefined);
    await w.store.flushed();
    const page = async (cursor?: string, id = token.id) =>
      listOf(alertSchema).parse((await call(w, 'GET', '/webhook-tokens/:id/alerts', { userId: w.a.userId, params: { id }, query: { limit: '2', ...(cursor !== undefined && { cursor }) } })).body);
    const first = await page();
    expect(first.data.map((a) => a.qty)).toEqual(['5', '4']);
    await alert({ action: 'buy', symbol: 'XX1!', qty: 6 }).catch(() => undefined);
    await w.store.flushed();
    const second = await page(first.nextCursor!);
    expect(second.data.map((a) => a.qty)).toEqual(['3', '2']);
    const third = await page(second.nextCursor!);
    expect(third.data.map((a) => a.qty)).toEqual(['1']);
    expect(third.nextCursor).toBeNull();
    // Every entry has its own id, though the sender chose one request id for all (X-Request-Id):
    // the Signals page keys rows by it (re-probe: a reused request id hid alerts).
    const listed = [...first.data, ...second.data, ...third.data];
    expect(new Set(listed.map((a) => a.requestId)).size).toBe(1);
    expect(new Set(listed.map((a) => a.id)).size).toBe(listed.length);
    // The newest page shows what came meanwhile.
    expect((await page()).data.map((a) => a.qty)).toEqual(['6', '5']);
    // A cursor of another token's list, or none of ours, is refused, not read as the first page.
    const other = createdWebhookTokenSchema.parse((await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'other' } })).body);
    // Only a cursor exactly as the list wrote it: padding or a standard-base64 spelling of one is refused too.
    const padded = `${first.nextCursor!}=`;
    const standard = Buffer.from(Buffer.from(first.nextCursor!, 'base64url')).toString('base64');
    for (const cursor of [first.nextCursor!, 'abc', Buffer.from(`alerts/${token.id}:../1`).toString('base64url'), padded, ...(standard !== first.nextCursor ? [standard] : [])]) {
      const err = await callError(w, 'GET', '/webhook-tokens/:id/alerts', { userId: w.a.userId, params: { id: cursor === first.nextCursor ? other.id : token.id }, query: { cursor } });
      expect(err, cursor).toMatchObject({ code: 'VALIDATION_FAILED' });
    }
  });

  it('journals accepted and refused alerts with action, symbol, qty, status, code and order id, newest first', async () => {
    w.gateway.responder['place-order'] = () => ({ order: orderRecord({ orderId: '5551', status: 'filled', filledQty: 1 }), reconciled: false, brokerMs: 3 });
    expect((await alert({ action: 'buy', ticker: 'ES1!', contracts: '1', comment: 'secret-ish text' })).status).toBe(201);
    await expect(alert({ action: 'buy', symbol: 'XX1!', qty: 1 })).rejects.toMatchObject({ code: 'UNKNOWN_SYMBOL' });
    w.gateway.accountsOf.set(w.a.connectionId, [{ ...w.gateway.accountsOf.get(w.a.connectionId)![0]!, active: false }]);
    await expect(alert({ action: 'sell', symbol: 'ES1!', qty: 2 })).rejects.toMatchObject({ code: 'ACCOUNT_INACTIVE' });
    const list = await alerts();
    expect(list.map((a) => [a.action, a.symbol, a.qty, a.status, a.code, a.orderId])).toEqual([
      ['sell', 'ES1!', '2', 403, 'ACCOUNT_INACTIVE', null],
      ['buy', 'XX1!', '1', 400, 'UNKNOWN_SYMBOL', null],
      ['buy', 'ES1!', '1', 201, null, '5551'],
    ]);
    expect(list[0]).toMatchObject({ detail: 'Account is inactive', accountId: '101', requestId: 'req-1' });
    expect(list[2]).toMatchObject({ orderStatus: 'filled' });
    expect(JSON.stringify(list)).not.toContain('secret-ish');
  });

  it('an exit that left an order still on its way logs it: it may fill after the close (re-probe: the log said 0 closed, then the entry filled)', async () => {
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: [], positions: [], outstandingOrders: 1, brokerMs: 2 });
    expect((await alert({ action: 'close', symbol: 'ES1!' })).status).toBe(200);
    expect((await alerts())[0]!.flattened).toEqual({ cancelledOrders: 0, positions: 0, outstandingOrders: 1 });
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: [], positions: [], brokerMs: 2 });
    expect((await alert({ action: 'close', symbol: 'ES1!' })).status).toBe(200);
    expect((await alerts())[0]!.flattened).toEqual({ cancelledOrders: 0, positions: 0 });
  });

  it('a reversal whose open is refused after its close is logged with what the close did (trader probe: flattened null beside a closed position)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: ['71', '72'], positions: [{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' }], brokerMs: 2 });
    w.gateway.responder['place-order'] = () => {
      throw new AppError('RISK_GUARD', 'locked by the kill switch');
    };
    await expect(alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short' })).rejects.toMatchObject({ code: 'RISK_GUARD', extensions: { flatten: { cancelledOrderIds: ['71', '72'] } } });
    expect((await alerts())[0]).toMatchObject({ status: 403, code: 'RISK_GUARD', flattened: { cancelledOrders: 2, positions: 1 } });
  });

  describe('the follow-up of an alert answered 504', () => {
    beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout'] }));
    afterEach(() => vi.useRealTimers());
    const timedOut = async () => {
      w.gateway.responder['place-order'] = () => {
        throw new AppError('BROKER_TIMEOUT', 'actor request place-order did not complete within 2500 ms');
      };
      await expect(alert({ action: 'buy', symbol: 'ES1!', qty: 2 })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
    };
    const followUp = async () => (await alerts()).find((a) => a.lateOutcomeOf !== null);

    it('an order the broker rejected is reported as not placed (422 BROKER_REJECTED), not as placed', async () => {
      await timedOut();
      w.gateway.responder['find-by-clordid'] = () => orderRecord({ orderId: '77', status: 'rejected', rejectReason: 'MaxOrderQty' });
      await vi.advanceTimersByTimeAsync(3_000);
      expect(await followUp()).toMatchObject({ status: 422, code: 'BROKER_REJECTED', orderId: '77', detail: expect.stringContaining('rejected it after this alert was answered 504 (MaxOrderQty)') });
    });

    it('while the connection cannot be asked it never says "not placed": it goes on asking, and says the outcome is unknown', async () => {
      await timedOut();
      w.gateway.responder['find-by-clordid'] = () => {
        throw new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING');
      };
      await vi.advanceTimersByTimeAsync(120_000);
      expect(await followUp()).toBeUndefined();
      await vi.advanceTimersByTimeAsync(15 * 60_000);
      expect(await followUp()).toMatchObject({ status: 504, detail: expect.stringMatching(/^outcome unknown/) });
    });

    it('a restart within the follow-up takes it up again from the journal, once, where its schedule stands', async () => {
      await timedOut();
      // The process stops before any look-up: its timers are gone.
      vi.clearAllTimers();
      await w.store.flushed();
      w.gateway.responder['find-by-clordid'] = () => orderRecord({ orderId: '78', status: 'working' });
      expect(await resumeLateOutcomes(w.deps, createLogger('silent'))).toBe(1);
      await vi.advanceTimersByTimeAsync(3_000);
      expect(await followUp()).toMatchObject({ status: 201, orderId: '78', detail: 'placed after this alert was answered 504' });
      // Another restart finds its outcome journaled: nothing to take up.
      await w.store.flushed();
      expect(await resumeLateOutcomes(w.deps, createLogger('silent'))).toBe(0);
    });

    it('in a cluster a node takes up only the follow-ups it journaled itself (at its own restart), not another node\'s, nor does a single node', async () => {
      w.deps.nodeId = 'n1';
      await timedOut();
      vi.clearAllTimers();
      await w.store.flushed();
      w.gateway.responder['find-by-clordid'] = () => orderRecord({ orderId: '79', status: 'working' });
      const { nodeId: _, ...single } = w.deps;
      expect(await resumeLateOutcomes({ ...w.deps, nodeId: 'n2' }, createLogger('silent'))).toBe(0);
      expect(await resumeLateOutcomes(single, createLogger('silent'))).toBe(0);
      expect(await resumeLateOutcomes(w.deps, createLogger('silent'))).toBe(1);
      await vi.advanceTimersByTimeAsync(3_000);
      expect(await followUp()).toMatchObject({ status: 201, orderId: '79', detail: 'placed after this alert was answered 504' });
    });

    it('a close answered 504 is "flattened" once the position it was to close is gone, also when a later alert has opened a new one since (re-probe: "flatten it yourself" about the re-entry)', async () => {
      w.gateway.responder.flatten = () => {
        throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
      };
      await expect(alert({ action: 'close' })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      // The old long is still there at the first look: not flat yet.
      const old = { accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW.getTime() - 60_000).toISOString() };
      w.gateway.responder.positions = () => [old];
      await vi.advanceTimersByTimeAsync(3_000);
      expect(await followUp()).toBeUndefined();
      // Then long 1 again, but its lots began after the alert: the re-entry of the next alert.
      w.gateway.responder.positions = () => [{ ...old, openedAt: new Date(NOW.getTime() + 4_000).toISOString() }];
      await vi.advanceTimersByTimeAsync(7_000);
      expect(await followUp()).toMatchObject({ status: 200, detail: 'flat after this alert was answered 504: the positions it was to close are closed (by it or another exit)' });
    });

    it('a close answered 504 is not "flat" on the service’s state alone: the broker’s own list is asked before saying so (re-probe: "flat … closed" while the broker was long, a fill lost in a silence)', async () => {
      w.gateway.responder.flatten = () => {
        throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
      };
      await expect(alert({ action: 'close' })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      const held = { accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW.getTime() - 60_000).toISOString() };
      // The service's state is flat; the broker's list (a verified read) still has the position.
      w.gateway.responder.positions = (req: { verified?: boolean }) => (req.verified ? [held] : []);
      await vi.advanceTimersByTimeAsync(130_000);
      expect(await followUp()).toMatchObject({ status: 504, detail: expect.stringContaining('still holds ESZ6 long 1') });
      expect(w.gateway.calls.some((c) => c.req.type === 'positions' && (c.req as { verified?: boolean }).verified === true)).toBe(true);
    });

    it('a re-entry filled just after a close’s 504 is not the close’s to have closed: lots are counted from when the flatten was sent (re-probe: read as the exit’s, "not flat", the alert’s id freed, and its repeat closed the re-entry)', async () => {
      let clock = NOW.getTime();
      w.deps.now = () => new Date(clock);
      // The flatten is sent at NOW and times out 2.5 s later, when the follow-up begins.
      w.gateway.responder.flatten = () => {
        clock += 2_500;
        throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
      };
      await expect(alert({ action: 'close' })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      // The next alert's re-entry fills 300 ms after that 504: long 1 again, its lots new.
      w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW.getTime() + 2_800).toISOString() }];
      await vi.advanceTimersByTimeAsync(130_000);
      expect(await followUp()).toMatchObject({ status: 200, detail: 'flat after this alert was answered 504: the positions it was to close are closed (by it or another exit)' });
    });

    it('a reversal whose close was answered 504 stores, once flat, that its close was carried out and its new position not opened (re-probe: "it was carried out")', async () => {
      w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW.getTime() - 60_000).toISOString() }];
      w.gateway.responder.flatten = () => {
        throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
      };
      const err = await callError(w, 'POST', '/webhooks/:token', { userId: w.a.userId, requestId: 'req-rev', kind: 'webhook', principalId: `webhook:${token.id}`, scopes: ['trade'], webhook: { tokenId: token.id, accountId: '101', strategyId: null }, params: { token: token.token }, body: { action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', id: 'r1' }, idempotencyKey: 'k r1' });
      expect(err).toBeInstanceOf(GoesOnError);
      w.gateway.responder.positions = () => [];
      await vi.advanceTimersByTimeAsync(5_000);
      const stored = await (err as GoesOnError).outcome;
      expect(stored).toMatchObject({ code: 'CONFLICT', extensions: { firstRequestId: 'req-rev' } });
      expect((stored as AppError).message).toMatch(/went on, and its close was carried out, and the reversal's new position was not opened/);
    });

    describe('after a restart, the id of a close answered 504 (re-probe: after a stop, its repeat closed the re-entry)', () => {
      const FP = 'a'.repeat(64);
      const closeAnswered504 = async () => {
        w.gateway.responder.flatten = () => {
          throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
        };
        await expect(
          call(w, 'POST', '/webhooks/:token', { userId: w.a.userId, requestId: 'req-close', kind: 'webhook', principalId: `webhook:${token.id}`, scopes: ['trade'], webhook: { tokenId: token.id, accountId: '101', strategyId: null }, params: { token: token.token }, body: { action: 'close', id: 'c1' }, idempotencyKey: 'k c1', idempotencyFingerprint: FP }),
        ).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
        await w.store.flushed();
      };
      const long = [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: new Date(NOW.getTime() - 60_000).toISOString() }];
      /** The process stops (its timers and in-memory holds gone) and starts again with a gate of its own. */
      const restart = async () => {
        vi.clearAllTimers();
        const gate = new IdempotencyGate(w.store.idempotency, () => NOW.getTime());
        await resumeLateOutcomes(w.deps, createLogger('silent'), gate);
        await vi.advanceTimersByTimeAsync(0);
        return gate;
      };
      const storedConflict = async (gate: IdempotencyGate) => {
        let o = await gate.begin(w.a.userId, 'k c1', FP);
        // Held until its answer is on disk.
        for (let i = 0; i < 100 && o.kind === 'in-flight'; i++) {
          await new Promise((r) => setImmediate(r));
          await w.store.flushed();
          o = await gate.begin(w.a.userId, 'k c1', FP);
        }
        expect(o.kind).toBe('replay');
        if (o.kind === 'replay') expect({ status: o.record.status, body: JSON.parse(o.record.body) }).toMatchObject({ status: 409, body: { code: 'CONFLICT', firstRequestId: 'req-close' } });
      };

      it('is held (409 IN_USE to repeats) until the first look once its connection is up; found closed, repeats get the stored 409 CONFLICT', async () => {
        await closeAnswered504();
        w.gateway.responder.positions = () => {
          throw new AppError('BROKER_UNAVAILABLE', 'connecting');
        };
        const gate = await restart();
        await vi.advanceTimersByTimeAsync(5_000);
        expect((await gate.begin(w.a.userId, 'k c1', FP)).kind).toBe('in-flight');
        w.gateway.responder.positions = () => [];
        await vi.advanceTimersByTimeAsync(1_000);
        await storedConflict(gate);
      });

      it('found still open, the flatten was cut short by the stop: said at once, and the id is free, so the alert delivered again closes it', async () => {
        await closeAnswered504();
        w.gateway.responder.positions = () => long;
        const gate = await restart();
        // Its first look is due 3 s after the alert (the clock here stands still).
        await vi.advanceTimersByTimeAsync(3_000);
        expect(await followUp()).toMatchObject({ status: 504, detail: expect.stringMatching(/^not flat after the service restarted: .* still holds ESZ6 long 1\. Delivered again, the alert closes it$/) });
        await w.store.flushed();
        expect((await gate.begin(w.a.userId, 'k c1', FP)).kind).toBe('proceed');
      });

      it('whose follow-up had found the positions closed before the stop gets the answer for repeats stored', async () => {
        await closeAnswered504();
        w.gateway.responder.positions = () => [];
        await vi.advanceTimersByTimeAsync(10_000);
        expect(await followUp()).toMatchObject({ status: 200 });
        // No pipeline here to store it in-process: as if stopped before it did.
        await storedConflict(await restart());
      });
    });

    it('a close naming a symbol (a guard: it closes the whole account) answered 504 is not "flat" while another contract is still held (re-probe: said flat with NQ open)', async () => {
      w.gateway.responder.flatten = () => {
        throw new AppError('BROKER_TIMEOUT', 'actor request flatten did not complete within 2500 ms');
      };
      await expect(alert({ action: 'close', symbol: 'ES1!' })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      const nq = { accountId: '101', symbol: 'NQZ6', netQty: 1, avgPrice: 18000, openedAt: new Date(NOW.getTime() - 60_000).toISOString() };
      w.gateway.responder.positions = () => [nq];
      await vi.advanceTimersByTimeAsync(10_000);
      expect(await followUp()).toBeUndefined();
      w.gateway.responder.positions = () => [];
      await vi.advanceTimersByTimeAsync(60_000);
      expect(await followUp()).toMatchObject({ status: 200, detail: expect.stringMatching(/^flat after this alert was answered 504/) });
    });

    it('a restart after an alert was answered 504 at the receiver’s deadline, before its outcome was known, says the outcome is unknown, once; not for one whose outcome came (it said "it goes on" for good)', async () => {
      let answer!: (v: unknown) => void;
      w.gateway.responder['place-order'] = () => new Promise((resolve) => (answer = resolve)) as never;
      // Both still at the broker when the receiver answers 504 at 2.6 s.
      const first = expect(alert({ action: 'buy', symbol: 'ES1!', qty: 1 }, 'req-a')).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      const answerFirst = answer;
      const second = expect(alert({ action: 'buy', symbol: 'ES1!', qty: 2 }, 'req-b')).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      await vi.advanceTimersByTimeAsync(2_600);
      await Promise.all([first, second]);
      // The first one's order is placed after all: its outcome is journaled.
      answerFirst({ order: orderRecord({ orderId: '90' }), reconciled: false, brokerMs: 3_000 });
      await w.store.flushed();
      const late = async () => (await alerts()).filter((a) => a.lateOutcomeOf !== null);
      expect(await late()).toMatchObject([{ status: 201, orderId: '90' }]);
      // The process stops with the second still at the broker: its timers and work are gone. It
      // restarts the next morning, past the 20 minutes a look-up is resumed within.
      vi.clearAllTimers();
      const morning = new Date(NOW.getTime() + 10 * 3_600_000);
      const deps = { ...w.deps, now: () => morning };
      expect(await resumeLateOutcomes(deps, createLogger('silent'))).toBe(1);
      const after = await late();
      expect(after).toHaveLength(2);
      expect(after[0]).toMatchObject({ qty: '2', status: 504, code: 'BROKER_TIMEOUT', detail: expect.stringMatching(/^outcome unknown: the service stopped after this alert was answered 504/) });
      // Another restart finds both outcomes journaled.
      await w.store.flushed();
      expect(await resumeLateOutcomes(deps, createLogger('silent'))).toBe(0);
    });

    /**
     * Two strategy entries: the first slow at the broker, the second queued behind it, both answered
     * 504. Then the broker refuses with `refusal`, the first is answered: the second's late entry.
     */
    async function queuedBehindSlow(refusal: AppError) {
      let answer!: (v: unknown) => void;
      w.gateway.responder.positions = () => [];
      w.gateway.responder['place-order'] = () => new Promise((resolve) => (answer = resolve)) as never;
      const entry = { action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 };
      const first = expect(alert(entry, 'req-slow')).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      const second = expect(alert({ ...entry, qty: 2, marketPositionSize: 2 }, 'req-queued')).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
      await vi.advanceTimersByTimeAsync(2_600);
      await Promise.all([first, second]);
      const slow = answer;
      w.gateway.responder['place-order'] = () => {
        throw refusal;
      };
      slow({ order: orderRecord({ orderId: '95' }), reconciled: false, brokerMs: 3_000 });
      await vi.advanceTimersByTimeAsync(10);
      await w.store.flushed();
      return (await alerts()).find((a) => a.lateOutcomeOf === 'req-queued');
    }

    it('an alert queued behind a slow one and refused because the service is stopping is listed as not acted on, nothing sent (faults probe: "acted on … actor supervisor is closed")', async () => {
      // The service stops: the supervisor refuses what has not reached an actor yet.
      const queued = await queuedBehindSlow(new AppError('SHUTTING_DOWN', 'actor supervisor is closed'));
      expect(queued).toMatchObject({ status: 503, code: 'SHUTTING_DOWN', detail: 'not acted on after this alert was answered 504, nothing was sent: the service was stopping: actor supervisor is closed' });
    });

    it('an alert queued behind a slow one and refused unsent (the connection down past its retries, a broker penalty) is listed as not acted on (re-probe 6: "acted on … broker connection is RECONNECTING")', async () => {
      const queued = await queuedBehindSlow(new AppError('BROKER_UNAVAILABLE', 'the broker holds requests back for 30 s', {}, 30));
      expect(queued).toMatchObject({ status: 503, code: 'BROKER_UNAVAILABLE', detail: 'not acted on after this alert was answered 504, nothing was sent: the broker holds requests back for 30 s' });
    });

    it('another user’s alert with the same request id (X-Request-Id is the client’s) does not count as the killed alert’s answer (attack probe: it hid the "outcome unknown")', async () => {
      w.gateway.responder['place-order'] = () => new Promise(() => undefined) as never;
      void alert({ action: 'buy', symbol: 'ES1!', qty: 3 }, 'req-victim').catch(() => undefined);
      await vi.advanceTimersByTimeAsync(300);
      // Bob, on his own token, sends a refused alert under Alice's request id.
      const bobs = createdWebhookTokenSchema.parse((await call(w, 'POST', '/webhook-tokens', { userId: w.b.userId, body: { accountId: '201', name: 'eve' } })).body);
      await call(w, 'POST', '/webhooks/:token', { userId: w.b.userId, requestId: 'req-victim', kind: 'webhook', principalId: `webhook:${bobs.id}`, scopes: ['trade'], webhook: { tokenId: bobs.id, accountId: '201', strategyId: null }, params: { token: bobs.token }, body: { action: 'hold' } }).catch(() => undefined);
      await w.store.flushed();
      expect((await alerts(bobs.id, w.b.userId)).map((a) => a.requestId)).toEqual(['req-victim']);
      vi.clearAllTimers();
      const later = { ...w.deps, now: () => new Date(NOW.getTime() + 60_000) };
      expect(await resumeLateOutcomes(later, createLogger('silent'))).toBe(1);
      expect((await alerts()).filter((a) => a.lateOutcomeOf !== null)).toEqual([
        expect.objectContaining({ lateOutcomeOf: 'req-victim', status: 504, detail: expect.stringMatching(/^outcome unknown: the service stopped while it was acting/) }),
      ]);
    });

    it('journals a refusal’s detail cut at 1,000 characters (attack probe: 65 KB per refused alert grew the journal past its documented size)', async () => {
      w.gateway.responder['place-order'] = () => {
        throw new AppError('BROKER_REJECTED', `the broker said ${'x'.repeat(65_000)}`);
      };
      await expect(alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).rejects.toMatchObject({ code: 'BROKER_REJECTED' });
      const [entry] = await alerts();
      expect(entry!.detail!.length).toBe(1_001);
      expect(entry!.detail!.endsWith('x…')).toBe(true);
    });

    it('an alert still at work when the service is killed (no answer yet): a restart says its outcome is unknown, once; quick or answered alerts say nothing more (faults probe: SIGKILL mid-reversal left no entry)', async () => {
      w.gateway.responder['place-order'] = () => ({ order: orderRecord({ orderId: '60' }), reconciled: false, brokerMs: 1 });
      await alert({ action: 'buy', symbol: 'ES1!', qty: 1 }, 'req-quick');
      // Slow but answered within the budget: its own entry says what it did.
      w.gateway.responder['place-order'] = () => new Promise((resolve) => setTimeout(() => resolve({ order: orderRecord({ orderId: '61' }), reconciled: false, brokerMs: 900 }), 900)) as never;
      const slow = alert({ action: 'buy', symbol: 'ES1!', qty: 1 }, 'req-slow');
      await vi.advanceTimersByTimeAsync(1_000);
      await slow;
      // At the broker when the process dies: no answer, no entry of its own.
      w.gateway.responder['place-order'] = () => new Promise(() => undefined) as never;
      void alert({ action: 'sell', symbol: 'ES1!', qty: 3 }, 'req-killed').catch(() => undefined);
      await vi.advanceTimersByTimeAsync(300);
      await w.store.flushed();
      vi.clearAllTimers();
      const later = { ...w.deps, now: () => new Date(NOW.getTime() + 60_000) };
      expect(await resumeLateOutcomes(later, createLogger('silent'))).toBe(1);
      const entries = await alerts();
      expect(entries.filter((a) => a.lateOutcomeOf !== null)).toEqual([
        expect.objectContaining({ lateOutcomeOf: 'req-killed', qty: '3', status: 504, detail: expect.stringMatching(/^outcome unknown: the service stopped while it was acting on this alert, before it answered/) }),
      ]);
      await w.store.flushed();
      expect(await resumeLateOutcomes(later, createLogger('silent'))).toBe(0);
    });

    it('"not placed" once the broker’s own list, asked, has no order for it', async () => {
      await timedOut();
      w.gateway.responder['find-by-clordid'] = () => null;
      await vi.advanceTimersByTimeAsync(120_000);
      expect(await followUp()).toMatchObject({ status: 504, detail: expect.stringMatching(/^not placed: the broker has no order/) });
    });
  });

  it('records an unexpected failure as 500 INTERNAL, and the error still reaches the engine', async () => {
    w.gateway.responder['place-order'] = () => {
      throw new Error('boom');
    };
    await expect(alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).rejects.toThrow('boom');
    expect((await alerts())[0]).toMatchObject({ status: 500, code: 'INTERNAL' });
  });

  it('lists an alert withdrawn unsent (its sender gone, a request pipelined behind it) as 499 "not sent", not 500 INTERNAL (clients probe)', async () => {
    w.gateway.responder['place-order'] = () => {
      throw new RequestNotSentError('the client closed its connection before the request was sent');
    };
    await expect(alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).rejects.toBeInstanceOf(RequestNotSentError);
    expect((await alerts())[0]).toMatchObject({ status: 499, code: null, detail: 'not sent: the client closed its connection before the request was sent; nothing reached the broker' });
  });

  it('does not list a copy of an alert refused because the first is still at work (409 IDEMPOTENCY_KEY_IN_USE): the alert is listed once (clients probe)', async () => {
    const refused = route(w, 'POST', '/webhooks/:token').refused!;
    const auth = { userId: w.a.userId, principalId: `webhook:${token.id}`, scopes: ['trade'], kind: 'webhook' as const, webhook: { tokenId: token.id, accountId: '101', strategyId: null } };
    refused({ auth, body: { action: 'buy', symbol: 'ES1!', qty: 1, id: 'a1' }, requestId: 'dup' } as never, new AppError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight', {}, 1));
    refused({ auth, body: { action: 'buy', symbol: 'ES1!', qty: 1, id: 'a1' }, requestId: 'bad' } as never, new AppError('IDEMPOTENCY_KEY_REUSED', 'reused with another body'));
    expect((await alerts()).map((a) => [a.requestId, a.code])).toEqual([['bad', 'IDEMPOTENCY_KEY_REUSED']]);
  });

  it('lists a token’s alerts to its owner only, and not another token’s', async () => {
    w.gateway.responder['place-order'] = () => ({ order: orderRecord(), reconciled: false, brokerMs: 1 });
    await alert({ action: 'buy', symbol: 'ES1!', qty: 1 });
    const other = createdWebhookTokenSchema.parse((await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'other' } })).body);
    expect(await alerts(other.id)).toEqual([]);
    const err = await callError(w, 'GET', '/webhook-tokens/:id/alerts', { userId: w.b.userId, params: { id: token.id } });
    expect(err).toBeInstanceOf(AppError);
    expect(err.code).toBe('NOT_FOUND');
  });
});

describe('rotate', () => {
  it('returns a new URL for the same token; the old secret stops verifying', async () => {
    const res = await call(w, 'POST', '/webhook-tokens/:id/rotate', { userId: w.a.userId, params: { id: token.id } });
    const body = createdWebhookTokenSchema.parse(res.body);
    expect(body.id).toBe(token.id);
    expect(body.url).toBe(`https://trade.example.com/api/v1/webhooks/${body.token}`);
    expect(body.alertMessage).toBe(TRADINGVIEW_TEMPLATE);
    expect(w.store.webhookTokens.verify(token.token)).toBeNull();
    expect(w.store.webhookTokens.verify(body.token)?.accountId).toBe('101');
    expect((await callError(w, 'POST', '/webhook-tokens/:id/rotate', { userId: w.b.userId, params: { id: token.id } })).code).toBe('NOT_FOUND');
  });
});
