import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { accountSchema, listOf, positionSchema } from '../../../../src/http/schemas.js';
import { call, callError, NOW, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('accounts and positions', () => {
  it('lists only the caller’s accounts, inactive ones flagged', async () => {
    const page = listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body);
    expect(page.data.map((a) => [a.id, a.active])).toEqual([
      ['101', true],
      ['102', false],
    ]);
    const other = listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.b.userId })).body);
    expect(other.data.map((a) => a.id)).toEqual(['201']);
  });

  it('keeps the first page’s answer text until a connection or an actor’s account report changes', async () => {
    const first = await call(w, 'GET', '/accounts', { userId: w.a.userId });
    const again = await call(w, 'GET', '/accounts', { userId: w.a.userId });
    expect(again.body).toEqual(first.body);
    // The actor reports a new account list: seen by the next read.
    const [active, inactive] = w.gateway.accountsOf.get(w.a.connectionId)!;
    w.gateway.accountsOf.set(w.a.connectionId, [{ ...active!, name: 'renamed' }, inactive!]);
    const renamed = listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body);
    expect(renamed.data.map((a) => a.name)).toEqual(['renamed', inactive!.name]);
    // A second connection of the user: its accounts are listed at once.
    const other = await w.store.connections.create({
      userId: w.a.userId, name: 'second', broker: 'paper', environment: 'paper', restUrl: 'http://x/v1', wsUrl: 'ws://x/v1/websocket', credentials: { name: 'u', password: 'p' },
    });
    w.gateway.accountsOf.set(other.id, [{ ...active!, id: '103', connectionId: other.id }]);
    const both = listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body);
    expect(both.data.map((a) => a.id).sort()).toEqual(['101', '102', '103']);
    // A page asked for by limit is built afresh and agrees.
    const limited = listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId, query: { limit: '2' } })).body);
    expect(limited.data).toHaveLength(2);
    expect(limited.nextCursor).not.toBeNull();
  });

  it('reads one account, 404 for another user’s', async () => {
    expect(accountSchema.parse((await call(w, 'GET', '/accounts/:id', { userId: w.a.userId, params: { id: '101' } })).body).connectionId).toBe(w.a.connectionId);
    expect((await callError(w, 'GET', '/accounts/:id', { userId: w.a.userId, params: { id: '201' } })).code).toBe('NOT_FOUND');
  });

  it('503 BROKER_UNAVAILABLE, not 404, while a connection of the caller has not reported its accounts yet', async () => {
    // Just after a start the actor is CONNECTING and knows no accounts: "not found" would make a
    // client give up an order it should retry.
    w.gateway.accountsOf.set(w.a.connectionId, []);
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: 0 });
    const err = await callError(w, 'GET', '/accounts/:id', { userId: w.a.userId, params: { id: '101' } });
    expect(err.code).toBe('BROKER_UNAVAILABLE');
    expect(err.retryAfterSeconds).toBe(1);
    // It says which connection and why (fuzz probe: a login that cannot reach the broker stays CONNECTING).
    expect(err.extensions).toMatchObject({ connectionId: w.a.connectionId, connectionStatus: 'CONNECTING' });
    // An id that cannot be an account is 404 meanwhile (fuzz probe: 503 and a retry a second, forever).
    for (const id of ['abc', '-1', '1.5', '0101', '__proto__', '12345678901234567890']) {
      expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id } })).code, id).toBe('NOT_FOUND');
    }
    expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '999' } })).code).toBe('BROKER_UNAVAILABLE');
    // Another user's connection being unsynced changes nothing for bob: his unknown id stays 404.
    expect((await callError(w, 'GET', '/accounts/:id', { userId: w.b.userId, params: { id: '101' } })).code).toBe('NOT_FOUND');
  });

  it('the list is 503 while a connection of the caller is on its first attempt to report its accounts, not a 200 without them (clients probe: [] right after a restart); a connection that failed, is disabled or failed an attempt before reporting does not hold it back', async () => {
    // A second connection of alice, still getting its accounts; her first one is synced.
    const second = await w.store.connections.create({
      userId: w.a.userId, name: 'second', broker: 'paper', environment: 'paper', restUrl: 'http://x/v1', wsUrl: 'ws://x/v1/websocket', credentials: { name: 'u', password: 'p' },
    });
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'CONNECTING', reason: 'connect', ts: 0 });
    for (const query of [{}, { limit: '1' }] as Record<string, string>[]) {
      const err = await callError(w, 'GET', '/accounts', { userId: w.a.userId, query });
      expect(err.code, JSON.stringify(query)).toBe('BROKER_UNAVAILABLE');
      expect(err.retryAfterSeconds).toBe(1);
      expect(err.extensions).toMatchObject({ connectionId: second.id, connectionStatus: 'CONNECTING' });
    }
    // Once it has reported, the same (cached) first page lists all of them.
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'CONNECTED', reason: 'connect', ts: 0 });
    expect(listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body).data.map((a) => a.id)).toEqual(['101', '102']);
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'CONNECTING', reason: 'connect', detail: 'starting', ts: 0 });
    expect((await callError(w, 'GET', '/accounts', { userId: w.a.userId })).code).toBe('BROKER_UNAVAILABLE');
    // Its first attempt failed (the broker unreachable: it retries, maybe for hours). In the 30 s after
    // the service started the list still waits (a broker down at a restart refuses in a moment, and the
    // list read 200 [] then: re-probe); past them the others' accounts are listed, not 503 for as long
    // (fuzz probe), and its status says why.
    for (const [status, detail] of [['CONNECTING', 'not connected yet: fetch failed; retrying'], ['RECONNECTING', "the broker's rate-limit hold has passed: logging in again"]] as const) {
      w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status, reason: 'connect', detail, ts: 0 });
      w.deps.now = () => new Date(NOW.getTime() + 29_000);
      expect((await callError(w, 'GET', '/accounts', { userId: w.a.userId })).code, status).toBe('BROKER_UNAVAILABLE');
      w.deps.now = () => new Date(NOW.getTime() + 30_000);
      expect(listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body).data.map((a) => a.id), status).toEqual(['101', '102']);
      for (const query of [{ limit: '5' }, {}] as Record<string, string>[]) expect((await call(w, 'GET', '/accounts', { userId: w.a.userId, query })).status).toBe(200);
      w.deps.now = () => NOW;
    }
    // Failed before reporting: the others' accounts are listed (its status says why: GET /connections).
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'FAILED', reason: 'fatal-error', detail: 'bad login', ts: 0 });
    expect(listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.a.userId })).body).data.map((a) => a.id)).toEqual(['101', '102']);
    // Bob is not held back by alice's connection.
    w.gateway.statusOf.set(second.id, { type: 'status', connectionId: second.id, status: 'CONNECTING', reason: 'connect', ts: 0 });
    expect(listOf(accountSchema).parse((await call(w, 'GET', '/accounts', { userId: w.b.userId })).body).data.map((a) => a.id)).toEqual(['201']);
  });

  it('serves positions from the account’s actor', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: -2, avgPrice: 5000.25, openedAt: null }];
    const page = listOf(positionSchema).parse((await call(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '101' } })).body);
    expect(page.data[0]!.netQty).toBe(-2);
    expect(w.gateway.calls[0]).toMatchObject({ connectionId: w.a.connectionId, req: { type: 'positions', accountId: '101' } });
  });
});
