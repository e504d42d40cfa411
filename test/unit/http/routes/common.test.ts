import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AppError } from '../../../../src/domain/problems.js';
import { accountsSyncing, baseUrl, callActor, errors, ownedAccount, pageOf, paginate, paginateByCreation, requireActive } from '../../../../src/http/routes/common.js';
import type { RouteContext } from '../../../../src/http/route-types.js';
import { loadConfig } from '../../../../src/config.js';
import { createLogger } from '../../../../src/log.js';
import { account, orderRecord, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

function context(userId: string): { ctx: RouteContext<unknown, unknown>; timing: [string, number][] } {
  const timing: [string, number][] = [];
  const ctx: RouteContext<unknown, unknown> = {
    req: { method: 'POST', path: '/x', params: {}, query: {}, headers: {}, body: undefined, rawBody: Buffer.alloc(0), ip: '' },
    auth: { userId, principalId: 'k1', scopes: ['read', 'trade'], kind: 'api-key' },
    requestId: 'req-9',
    timing: { add: (n, ms) => timing.push([n, ms]) },
    log: createLogger('silent'),
  };
  return { ctx, timing };
}

describe('ownership', () => {
  it('finds the caller’s account with the connection that reports it; a foreign or unknown id is 404', () => {
    expect(ownedAccount(w.deps, w.a.userId, '101')).toEqual({ account: account('101', w.a.connectionId), connectionId: w.a.connectionId });
    expect(() => ownedAccount(w.deps, w.a.userId, '201')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it('trading needs an account its broker still reports', () => {
    expect(() => requireActive(ownedAccount(w.deps, w.a.userId, '102'))).toThrow(expect.objectContaining({ code: 'ACCOUNT_INACTIVE' }));
    expect(() => requireActive(ownedAccount(w.deps, w.a.userId, '101'))).not.toThrow();
  });
});

describe('accountsSyncing', () => {
  it("a connection this process never started (no status: ACTORS_MAX, a login not opened) holds the user's list only within the start's grace (docs probe: 503 for good)", () => {
    w.gateway.accountsOf.set(w.a.connectionId, []);
    w.gateway.statusOf.delete(w.a.connectionId);
    const now = w.deps.now!().getTime();
    expect(accountsSyncing(w.deps, w.a.userId, now + 10_000)).toMatchObject({ code: 'BROKER_UNAVAILABLE', extensions: { connectionId: w.a.connectionId } });
    expect(accountsSyncing(w.deps, w.a.userId, now - 1)).toBeUndefined();
    // Started and on its first attempt, it holds the list past the grace too.
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: now });
    expect(accountsSyncing(w.deps, w.a.userId, now - 1)).toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  });
});

describe('callActor', () => {
  it('sends to the account’s actor, reports actor, broker and settle time for Server-Timing and journals the trading outcome', async () => {
    w.gateway.responder['cancel-order'] = () => ({ order: orderRecord({ status: 'cancelled' }), removedLegIds: [], replaced: null, remainderCancelled: false, brokerMs: 3.5 });
    const { ctx, timing } = context(w.a.userId);
    await callActor(w.deps, ctx, w.a.connectionId, { type: 'cancel-order', accountId: '101', orderId: '9001' });
    expect(timing.map(([name]) => name)).toEqual(['actor', 'broker']);
    expect(timing[1]).toEqual(['broker', 3.5]);
    await w.store.flushed();
    const [entry] = await w.store.journal.list({ userId: w.a.userId, limit: 10 });
    expect(entry).toMatchObject({ kind: 'cancel-order', accountId: '101', outcome: { orderId: '9001', status: 'cancelled' } });
    expect(entry!.request).toMatchObject({ via: 'api-key', requestId: 'req-9' });
  });

  it('journals a failure by its code and passes the error on; reads are not journaled', async () => {
    const { ctx } = context(w.a.userId);
    await expect(callActor(w.deps, ctx, w.a.connectionId, { type: 'flatten', accountId: '101' })).rejects.toBeInstanceOf(AppError);
    w.gateway.responder.positions = () => [];
    await callActor(w.deps, ctx, w.a.connectionId, { type: 'positions', accountId: '101' });
    await w.store.flushed();
    expect((await w.store.journal.list({ userId: w.a.userId, limit: 10 })).map((e) => [e.kind, e.outcome])).toEqual([['flatten', { error: 'BROKER_UNAVAILABLE', detail: 'no scripted answer for flatten' }]]);
  });
});

describe('paginate', () => {
  const items = Array.from({ length: 5 }, (_, i) => i);
  it('pages with an opaque cursor until the end', () => {
    const first = paginate(items, { limit: 2 }, 'things');
    expect(first.data).toEqual([0, 1]);
    const second = paginate(items, { limit: 2, cursor: first.nextCursor! }, 'things');
    expect(second.data).toEqual([2, 3]);
    const last = paginate(items, { limit: 2, cursor: second.nextCursor! }, 'things');
    expect(last).toEqual({ data: [4], nextCursor: null });
    expect(paginate(items, undefined, 'things')).toEqual({ data: items, nextCursor: null });
  });

  it('a cursor it did not issue is 400, never a silent restart', () => {
    expect(() => paginate(items, { cursor: 'garbage' }, 'things')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
  });

  it("another list's cursor is 400, never a page of this list at that offset", () => {
    const accounts = paginate(items, { limit: 1 }, 'accounts').nextCursor!;
    expect(() => paginate(items, { cursor: accounts }, 'connections')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED', message: 'query.cursor: not a cursor returned by this list' }));
    // An account's list is its own: account 1's positions do not page account 2's.
    const a1 = paginate(items, { limit: 1 }, 'positions/1').nextCursor!;
    expect(() => pageOf({ cursor: a1 }, 'positions/2')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    expect(() => pageOf({ cursor: a1 }, 'positions/1:')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    expect(pageOf({ cursor: a1 }, 'positions/1')).toEqual({ offset: 1, limit: 100 });
    // The untagged cursors issued before lists named themselves (`o:1`) name no list.
    expect(() => pageOf({ cursor: Buffer.from('o:1').toString('base64url') }, 'accounts')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
  });
});

describe('paginateByCreation', () => {
  const at = (i: number) => new Date(Date.UTC(2026, 10, 1, 12, 0, i)).toISOString();
  const records = ['a', 'b', 'c', 'd', 'e'].map((id, i) => ({ id: `stg_${id}`, createdAt: at(i) }));

  it('continues after the last record shown, whatever was deleted or created since (fuzz probe: deleting a shown token made the next page skip one)', () => {
    const first = paginateByCreation(records, { limit: 2 }, 'strategies');
    expect(first.data.map((r) => r.id)).toEqual(['stg_a', 'stg_b']);
    // The first shown is deleted, and the last shown too; one is created: nothing unseen is skipped.
    const now = [records[2]!, records[3]!, records[4]!, { id: 'stg_f', createdAt: at(9) }];
    const second = paginateByCreation(now, { limit: 2, cursor: first.nextCursor! }, 'strategies');
    expect(second.data.map((r) => r.id)).toEqual(['stg_c', 'stg_d']);
    const third = paginateByCreation(now, { limit: 2, cursor: second.nextCursor! }, 'strategies');
    expect(third).toEqual({ data: [records[4], { id: 'stg_f', createdAt: at(9) }], nextCursor: null });
    // Two created in the same millisecond page by id.
    const tied = [{ id: 'x1', createdAt: at(0) }, { id: 'x2', createdAt: at(0) }, { id: 'x3', createdAt: at(0) }];
    const p1 = paginateByCreation(tied, { limit: 1 }, 'strategies');
    expect(paginateByCreation(tied, { limit: 5, cursor: p1.nextCursor! }, 'strategies').data.map((r) => r.id)).toEqual(['x2', 'x3']);
  });

  it('newest first (API keys) continues below the last shown', () => {
    const newest = [...records].reverse();
    const first = paginateByCreation(newest, { limit: 2 }, 'api-keys', true);
    expect(first.data.map((r) => r.id)).toEqual(['stg_e', 'stg_d']);
    const second = paginateByCreation(newest.filter((r) => r.id !== 'stg_e'), { limit: 2, cursor: first.nextCursor! }, 'api-keys', true);
    expect(second.data.map((r) => r.id)).toEqual(['stg_c', 'stg_b']);
  });

  it('takes only a cursor it issued for this list: an offset, or one forged, is 400 (fuzz probe: strategies:0 and strategies:01 were taken)', () => {
    const cursor = paginateByCreation(records, { limit: 1 }, 'strategies').nextCursor!;
    expect(() => paginateByCreation(records, { cursor }, 'webhook-tokens')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    for (const forged of ['strategies:0', 'strategies:01', 'strategies:1.', 'strategies:.stg_a']) {
      expect(() => paginateByCreation(records, { cursor: Buffer.from(forged).toString('base64url') }, 'strategies'), forged).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    }
  });
});

describe('documentation helpers', () => {
  it('groups error codes by status', () => {
    expect(errors('NOT_FOUND', 'VALIDATION_FAILED', 'UNKNOWN_SYMBOL')).toEqual([
      { status: 404, description: 'NOT_FOUND', codes: ['NOT_FOUND'] },
      { status: 400, description: 'VALIDATION_FAILED, UNKNOWN_SYMBOL', codes: ['VALIDATION_FAILED', 'UNKNOWN_SYMBOL'] },
    ]);
  });

  it('the public base URL: --base-url, else where the server listens, else the configured address', () => {
    expect(baseUrl(loadConfig({ 'base-url': 'https://t.example.com/' }, {}))).toBe('https://t.example.com');
    expect(baseUrl(loadConfig({}, {}), 'http://127.0.0.1:4321/')).toBe('http://127.0.0.1:4321');
    expect(baseUrl(loadConfig({ host: '0.0.0.0', port: '9000' }, {}))).toBe('http://127.0.0.1:9000');
  });
});
