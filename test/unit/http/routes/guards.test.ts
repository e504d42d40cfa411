import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GuardStatus, PlaceOrderRequest } from '../../../../src/actors/protocol.js';
import { AppError } from '../../../../src/domain/problems.js';
import { guardConfig, NO_GUARDS } from '../../../../src/domain/guards.js';
import { call, callError, orderRecord, route, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

const DAY = { start: Date.UTC(2026, 10, 20, 23), end: Date.UTC(2026, 10, 21, 23) };
const status = (patch: Partial<GuardStatus> = {}): GuardStatus => ({
  accountId: '101',
  config: guardConfig({}),
  lock: null,
  day: { ...DAY, realized: -100, fees: 2.5, open: 50, pnl: -52.5 },
  inWindow: null,
  positions: [{ symbol: 'ESZ6', net: 1, buying: 0, selling: 1, exposure: 1 }],
  ...patch,
});
const params = { id: '101' };

describe('GET/PUT /accounts/{id}/guards', () => {
  it('GET: no guards yet, with what the actor sees now (ISO times)', async () => {
    w.gateway.responder['guard-status'] = () => status();
    const r = await call(w, 'GET', '/accounts/:id/guards', { userId: w.a.userId, params });
    expect(r.body).toEqual({
      accountId: '101',
      guards: NO_GUARDS,
      lock: null,
      live: {
        day: { start: '2026-11-20T23:00:00.000Z', end: '2026-11-21T23:00:00.000Z', realized: -100, fees: 2.5, open: 50, pnl: -52.5 },
        inWindow: null,
        positions: [{ symbol: 'ESZ6', net: 1, buying: 0, selling: 1, exposure: 1 }],
      },
    });
  });

  it('GET while the actor cannot answer: the stored guards and lock, live null', async () => {
    await w.store.guards.setLock(w.a.userId, '101', { guard: 'kill_switch', since: DAY.start, until: null, detail: 'away' });
    const r = await call(w, 'GET', '/accounts/:id/guards', { userId: w.a.userId, params });
    expect(r.body).toMatchObject({ live: null, lock: { guard: 'kill_switch', since: '2026-11-20T23:00:00.000Z', until: null, detail: 'away' } });
  });

  it('another user’s account is 404', async () => {
    expect((await callError(w, 'GET', '/accounts/:id/guards', { userId: w.b.userId, params })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'PUT', '/accounts/:id/guards', { userId: w.b.userId, params, body: {} })).code).toBe('NOT_FOUND');
  });

  it('PUT stores the guards (fields left out = none) and hands them to the actor', async () => {
    w.gateway.responder['set-guards'] = (req: { config: any }) => status({ config: req.config });
    const body = { maxOrderQty: 5, allowedProducts: ['es', 'MES'], dailyLossLimit: 1000, tradingWindows: { windows: [{ days: ['mon'], start: '17:00', end: '15:55' }] } };
    const r = await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body });
    const expected = guardConfig({
      maxOrderQty: 5,
      allowedProducts: ['ES', 'MES'],
      dailyLossLimit: 1000,
      tradingWindows: { timeZone: 'America/Chicago', flattenAtEnd: false, windows: [{ days: ['mon'], start: '17:00', end: '15:55' }] },
    });
    expect(w.store.guards.get(w.a.userId, '101')?.config).toEqual(expected);
    expect(w.gateway.calls.at(-1)).toMatchObject({ connectionId: w.a.connectionId, req: { type: 'set-guards', accountId: '101', config: expected } });
    expect(r.body).toMatchObject({ guards: expected, live: { positions: [expect.any(Object)] } });
  });

  it('PUT stores each product root once and the time zone as the database spells it (web probe: `es es` stored twice, `america/chicago` as typed)', async () => {
    const body = { allowedProducts: ['es', 'ES', 'mes'], tradingWindows: { timeZone: 'america/chicago', windows: [{ days: ['mon'], start: '08:30', end: '15:00' }] } };
    await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body });
    const stored = w.store.guards.get(w.a.userId, '101')?.config;
    expect(stored?.allowedProducts).toEqual(['ES', 'MES']);
    expect(stored?.tradingWindows?.timeZone).toBe('America/Chicago');
    // Today's names stay as given, not the old links ICU resolves them to (fuzz probe: Asia/Kolkata read back as Asia/Calcutta).
    for (const timeZone of ['Asia/Kolkata', 'Europe/Kyiv', 'America/Nuuk']) {
      await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body: { tradingWindows: { timeZone, windows: [{ days: ['mon'], start: '08:30', end: '15:00' }] } } });
      expect(w.store.guards.get(w.a.userId, '101')?.config.tradingWindows?.timeZone).toBe(timeZone);
    }
  });

  it.each(['EST', 'mst', 'HST'])('PUT refuses %s, a fixed offset with no daylight saving (web probe: EST accepted beside the hint that daylight saving is followed; stored as America/Panama, an hour off New York all summer)', (tz) => {
    const body = { tradingWindows: { timeZone: tz, windows: [{ days: ['mon'], start: '08:30', end: '15:00' }] } };
    const parsed = route(w, 'PUT', '/accounts/:id/guards').body!.safeParse(body);
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(parsed.error.issues).toEqual([expect.objectContaining({ path: ['tradingWindows', 'timeZone'], message: expect.stringContaining('no daylight saving') })]);
  });

  it('PUT takes EST5EDT (daylight saving included) as America/New_York', async () => {
    const body = { tradingWindows: { timeZone: 'EST5EDT', windows: [{ days: ['mon'], start: '08:30', end: '15:00' }] } };
    await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body });
    expect(w.store.guards.get(w.a.userId, '101')?.config.tradingWindows?.timeZone).toBe('America/New_York');
  });

  it('PUT with the actor down still stores them (the actor starts with the stored guards)', async () => {
    const r = await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body: { maxOrderQty: 1 } });
    expect(r.body).toMatchObject({ guards: { maxOrderQty: 1 }, live: null });
    expect(w.store.guards.get(w.a.userId, '101')?.config.maxOrderQty).toBe(1);
  });

  it.each([
    [{ maxOrderQty: 0 }, 'maxOrderQty'],
    [{ dailyLossLimit: -5 }, 'dailyLossLimit'],
    [{ direction: 'up' }, 'direction'],
    [{ maxOrderQty: 1, typo: true }, ''],
    [{ tradingWindows: { timeZone: 'Chicago', windows: [{ days: ['mon'], start: '08:30', end: '15:00' }] } }, 'tradingWindows.timeZone'],
    [{ tradingWindows: { windows: [{ days: ['mon'], start: '08:30', end: '08:30' }] } }, 'tradingWindows.windows.0.end'],
    [{ tradingWindows: { windows: [{ days: ['mon'], start: '8:30', end: '15:00' }] } }, 'tradingWindows.windows.0.start'],
    [{ tradingWindows: { windows: [{ days: ['funday'], start: '08:30', end: '15:00' }] } }, 'tradingWindows.windows.0.days.0'],
    [{ tradingWindows: { windows: Array.from({ length: 9 }, (_, i) => ({ days: ['mon'], start: `0${i}:00`, end: `0${i}:30` })) } }, 'tradingWindows.windows'],
    [{ allowedProducts: ['E S'] }, 'allowedProducts.0'],
    [{ allowedProducts: ['ES', 'ZZZ'] }, 'allowedProducts'],
  ])('PUT refuses %j (at %s)', async (body, path) => {
    const parsed = route(w, 'PUT', '/accounts/:id/guards').body!.safeParse(body);
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(parsed.error.issues.map((i) => i.path.join('.'))).toContain(path);
  });
});

describe('allowedProducts', () => {
  it('an unknown product root is refused, each one named, in the account’s guards and in every narrowing', () => {
    const parsed = route(w, 'PUT', '/accounts/:id/guards').body!.safeParse({ allowedProducts: ['es', 'ZZZ', 'FOO', 'zzz'] });
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(parsed.error.issues).toEqual([expect.objectContaining({ path: ['allowedProducts'], message: expect.stringMatching(/^unknown product roots ZZZ, FOO \(known: .*\bES\b.*\)$/) })]);
    expect(route(w, 'PUT', '/api-keys/:id/guards').body!.safeParse({ allowedProducts: ['ZZZ'] }).success).toBe(false);
    expect(route(w, 'POST', '/webhook-tokens').body!.safeParse({ accountId: '101', name: 't', guards: { allowedProducts: ['ZZZ'] } }).success).toBe(false);
    expect(route(w, 'PUT', '/accounts/:id/guards').body!.safeParse({ allowedProducts: ['mes', '6e'] }).success).toBe(true);
  });
});

describe('lock / unlock', () => {
  it('lock flattens by default and names the caller; the answer carries the flatten outcome', async () => {
    const flatten = { cancelledOrderIds: ['1'], positions: [{ symbol: 'ESZ6', closedQty: 1, status: 'liquidated' as const }], brokerMs: 3 };
    const lock = { guard: 'kill_switch' as const, since: DAY.start, until: null, detail: 'kill switch (api-key)' };
    w.gateway.responder.lock = () => ({ status: status({ lock }), flatten });
    const r = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(w.gateway.calls.at(-1)?.req).toEqual({ type: 'lock', accountId: '101', flatten: true, detail: 'kill switch (api-key)' });
    expect(r.body).toMatchObject({ lock: { guard: 'kill_switch', until: null }, flatten });
    await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params, body: { flatten: false, reason: 'lunch' } });
    expect(w.gateway.calls.at(-1)?.req).toEqual({ type: 'lock', accountId: '101', flatten: false, detail: 'lunch' });
  });

  it('a kill switch the actor cannot take now (a cluster failover, a worker restarting) is stored owing its flatten, answered 200, and sent again until an actor has it; unlock passes the actor’s 409 on', async () => {
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(locked.status).toBe(200);
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: true }, flatten: { error: expect.stringMatching(/^not flattened yet: .*the flatten runs as soon as an actor runs the connection$/) } });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
    const lock = { guard: 'kill_switch' as const, since: DAY.start, until: null, detail: 'kill switch (api-key)' };
    w.gateway.responder.lock = () => ({ status: status({ lock }), flatten: null });
    await expect.poll(() => w.gateway.calls.filter((c) => c.req.type === 'lock').length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    expect(w.gateway.calls.at(-1)?.req).toEqual({ type: 'lock', accountId: '101', flatten: true, detail: 'kill switch (api-key)', since: w.store.guards.get(w.a.userId, '101')!.lock!.since });
    w.gateway.responder.unlock = () => {
      throw new AppError('CONFLICT', 'locked by daily_loss', { guard: 'daily_loss', lockedUntil: '2026-11-21T23:00:00.000Z' });
    };
    expect(await callError(w, 'POST', '/accounts/:id/unlock', { userId: w.a.userId, params })).toMatchObject({ code: 'CONFLICT', extensions: { guard: 'daily_loss' } });
    w.gateway.responder.unlock = () => status();
    expect((await call(w, 'POST', '/accounts/:id/unlock', { userId: w.a.userId, params })).body).toMatchObject({ lock: null });
  });
});

describe('a kill switch during a handover', () => {
  it('stored while no actor runs the connection, it reaches the actor that takes it over before the 200, so no entry sent after the answer is placed (cluster probe: entries after the 200 filled for a second)', async () => {
    const flatten = { cancelledOrderIds: [], positions: [{ symbol: 'ESZ6', closedQty: 2, status: 'liquidated' as const }], brokerMs: 3 };
    const lock = { guard: 'kill_switch' as const, since: DAY.start, until: null, detail: 'kill switch (api-key)' };
    // The new owner's actor runs 600 ms after the lock arrives.
    setTimeout(() => (w.gateway.responder.lock = () => ({ status: status({ lock }), flatten })), 600);
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(locked.status).toBe(200);
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: false }, flatten: { positions: [{ symbol: 'ESZ6', closedQty: 2, status: 'liquidated' }] } });
    const locks = w.gateway.calls.filter((c) => c.req.type === 'lock');
    expect(locks.length).toBeGreaterThanOrEqual(3);
    expect(locks.at(-1)!.req).toMatchObject({ since: expect.any(Number) });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toEqual(lock);
  });
});

describe('a kill switch whose call timed out because the connection changed node', () => {
  it('is delivered to the actor running it now before the 200, not taken as in force (cluster probe: 200 "locked" from a hung node, and entries after it filled on the new owner)', async () => {
    const flatten = { cancelledOrderIds: [], positions: [], brokerMs: 3 };
    const lock = { guard: 'kill_switch' as const, since: DAY.start, until: null, detail: 'kill switch (api-key)' };
    let calls = 0;
    w.gateway.responder.lock = () => {
      // The first went to the node that hung; the gateway saw another take the connection over.
      if (++calls === 1) throw new AppError('BROKER_TIMEOUT', 'the node running con_1 stopped before it answered (another node took the connection over): lock may have reached the broker; retry with the same Idempotency-Key', { ownerChanged: true });
      return { status: status({ lock }), flatten };
    };
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(locked.status).toBe(200);
    const locks = w.gateway.calls.filter((c) => c.req.type === 'lock');
    expect(locks).toHaveLength(2);
    expect(locks[1]!.req).toMatchObject({ since: expect.any(Number), flatten: true });
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch' }, flatten: { positions: [] } });
  });
});

describe('guards and locks in every connection state (item 4)', () => {
  const setStatus = (status: 'FAILED' | 'DISABLED' | 'CONNECTING' | 'CONNECTED') =>
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status, reason: 'fatal-error', ts: 1, detail: 'bad password' });

  it('on a FAILED connection: GET/PUT guards and lock reach the actor (no 409), and the lock is stored before the answer', async () => {
    setStatus('FAILED');
    const owed = { guard: 'kill_switch' as const, since: DAY.start, until: null, detail: 'kill switch (api-key)', flattenOwed: true as const };
    w.gateway.responder['guard-status'] = () => status();
    w.gateway.responder['set-guards'] = (req: { config: any }) => status({ config: req.config });
    w.gateway.responder.lock = () => ({ status: status({ lock: owed }), flatten: { error: 'not flattened: Broker connection failed (bad password)…' } });
    expect((await call(w, 'GET', '/accounts/:id/guards', { userId: w.a.userId, params })).status).toBe(200);
    expect((await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params, body: { maxOrderQty: 2 } })).body).toMatchObject({ guards: { maxOrderQty: 2 } });
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: true }, flatten: { error: expect.stringContaining('not flattened') } });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toEqual(owed);
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['guard-status', 'set-guards', 'lock']);
    // Orders still get the connection's 409, without a round trip.
    expect((await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params })).code).toBe('CONNECTION_FAILED');
    w.gateway.responder.unlock = () => status();
    await call(w, 'POST', '/accounts/:id/unlock', { userId: w.a.userId, params });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toBeNull();
  });

  it('a lock whose flatten outlasts the call (a slow broker) answers 200 with the lock in force and the flatten going on, not 504 (fault probe)', async () => {
    setStatus('CONNECTED');
    w.gateway.responder.lock = () => {
      throw new AppError('BROKER_TIMEOUT', 'actor request lock did not complete within 15000 ms');
    };
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params });
    expect(locked.status).toBe(200);
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch' }, flatten: { error: expect.stringMatching(/^not confirmed yet: .*The lock holds and the flatten goes on/) } });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
  });

  it('with no actor running the account: the lock is stored with the flatten owed, and the answer says it did not run', async () => {
    setStatus('DISABLED');
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params, body: { reason: 'before new credentials' } });
    expect(locked.body).toMatchObject({
      lock: { guard: 'kill_switch', until: null, detail: 'before new credentials', flattenPending: true },
      live: null,
      flatten: { error: expect.stringMatching(/^not flattened: .*the flatten runs once its connection is CONNECTED again$/) },
    });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toMatchObject({ guard: 'kill_switch', flattenOwed: true });
    expect(w.gateway.calls).toEqual([]);
    // Without flatten: locked, nothing owed; a second lock keeps the first one's time and reason.
    await call(w, 'POST', '/accounts/:id/unlock', { userId: w.a.userId, params });
    expect(w.store.guards.get(w.a.userId, '101')?.lock).toBeNull();
    const plain = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params, body: { flatten: false } });
    expect(plain.body).toMatchObject({ lock: { flattenPending: false }, flatten: null });
    const again = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params, body: { flatten: false, reason: 'other' } });
    expect(again.body).toMatchObject({ lock: { detail: 'kill switch (api-key)' } });
    // A P&L lock of today is not lifted by hand, with or without an actor.
    await w.store.guards.setLock(w.a.userId, '101', { guard: 'daily_loss', since: DAY.start, until: Date.now() + 3_600_000, detail: 'loss' });
    expect(await callError(w, 'POST', '/accounts/:id/unlock', { userId: w.a.userId, params })).toMatchObject({ code: 'CONFLICT', extensions: { guard: 'daily_loss' } });
  });

  it('an account no connection reported yet: stored while a connection of the caller FAILED before syncing or is still connecting; else 404', async () => {
    setStatus('FAILED');
    w.gateway.accountsOf.set(w.a.connectionId, []);
    const put = await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params: { id: '555' }, body: { maxOrderQty: 1 } });
    expect(put.body).toMatchObject({ accountId: '555', guards: { maxOrderQty: 1 }, live: null });
    expect((await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params: { id: '555' }, body: { flatten: false } })).body).toMatchObject({ lock: { guard: 'kill_switch' } });
    expect(w.store.guards.get(w.a.userId, '555')).toMatchObject({ config: { maxOrderQty: 1 }, lock: { guard: 'kill_switch' } });
    expect(w.gateway.calls).toEqual([]);
    // Another user's account ids are never theirs to read: they get their own (empty) record.
    expect(w.store.guards.get(w.b.userId, '555')).toBeUndefined();
    // An account another user's connection reports answers as an unused id does (fuzz probe: 404 there
    // and 200 here told which ids other users trade): the record is the caller's own, relayed only to
    // the caller's connections; the other user's record and actor are untouched.
    const before = w.gateway.calls.length;
    for (const id of ['201', '556']) {
      for (const [method, path] of [['PUT', '/accounts/:id/guards'], ['POST', '/accounts/:id/lock'], ['POST', '/accounts/:id/unlock'], ['GET', '/accounts/:id/guards']] as const) {
        expect((await call(w, method, path, { userId: w.a.userId, params: { id }, body: method === 'PUT' ? { maxOrderQty: 1 } : method === 'POST' ? { flatten: false } : {} })).status, `${method} ${id}`).toBe(200);
      }
    }
    expect(w.store.guards.get(w.a.userId, '201')).toMatchObject({ config: { maxOrderQty: 1 }, lock: null });
    expect(w.store.guards.get(w.b.userId, '201')).toBeUndefined();
    expect(w.gateway.calls.slice(before).every((c) => c.connectionId !== w.b.connectionId)).toBe(true);
    // Ids no broker gives (leading zeros, letters) name nothing (re-probe: accepted and counted).
    for (const id of ['0555', 'abc', '0']) expect((await callError(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params: { id }, body: { maxOrderQty: 1 } })).code, id).toBe('NOT_FOUND');
    // Made-up ids cannot fill the store: past 200 records, a new unreported id is 409 QUOTA_EXCEEDED (known ones still answer).
    for (let i = 0; w.store.guards.listByUser(w.a.userId).length < 200; i++) await w.store.guards.setConfig(w.a.userId, String(900_000 + i), { ...NO_GUARDS, maxOrderQty: 1 });
    expect(await callError(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params: { id: '557' }, body: { maxOrderQty: 1 } })).toMatchObject({ code: 'QUOTA_EXCEEDED', status: 409 });
    expect((await call(w, 'GET', '/accounts/:id/guards', { userId: w.a.userId, params: { id: '555' } })).status).toBe(200);
    // Still connecting (after a restart, or waiting out a broker hold) is the same (fault probe: the
    // kill switch answered 503 until the connection synced, up to the hour of a hold).
    setStatus('CONNECTING');
    expect((await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params: { id: '555' } })).body).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: true } });
    // Relayed to the connecting actor with the stored lock's time (re-probe: its copy was a second later).
    await new Promise((r) => setTimeout(r, 1200));
    expect(w.gateway.calls.find((c) => c.req.type === 'lock')).toMatchObject({ connectionId: w.a.connectionId, req: { accountId: '555', since: w.store.guards.get(w.a.userId, '555')!.lock!.since } });
    expect((await callError(w, 'GET', '/accounts/:id/guards', { userId: w.b.userId, params: { id: '556' } })).code).toBe('NOT_FOUND');
  });
});

describe('a disabled connection (ops probe)', () => {
  it('after a restart it reports no accounts: their guards and kill switch are still taken (stored, owed), not 404; trading reads answer 503 saying it is disabled', async () => {
    await w.store.connections.setDisabled(w.a.connectionId, true);
    w.gateway.statusOf.delete(w.a.connectionId);
    w.gateway.accountsOf.set(w.a.connectionId, []);
    const put = await call(w, 'PUT', '/accounts/:id/guards', { userId: w.a.userId, params: { id: '101' }, body: { maxOrderQty: 1 } });
    expect(put.body).toMatchObject({ accountId: '101', guards: { maxOrderQty: 1 }, live: null });
    const locked = await call(w, 'POST', '/accounts/:id/lock', { userId: w.a.userId, params: { id: '101' } });
    expect(locked.body).toMatchObject({ lock: { guard: 'kill_switch', flattenPending: true } });
    expect(w.gateway.calls).toEqual([]);
    // Another user's account answers as any id its accounts might be (no oracle): the caller's own empty record.
    expect((await call(w, 'GET', '/accounts/:id/guards', { userId: w.a.userId, params: { id: '201' } })).status).toBe(200);
    expect(w.store.guards.get(w.b.userId, '201')).toBeUndefined();
    // Its accounts are unknown now, not gone: 503 naming the disabled connection, a minute's Retry-After (re-probe: 404).
    const read = await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '101' } });
    expect(read).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 60, extensions: { connectionStatus: 'DISABLED', connectionId: w.a.connectionId } });
  });

  it('disabled while running (its accounts still known): positions and orders answer 503 naming it, not 404 "connection not found"', async () => {
    await w.store.connections.setDisabled(w.a.connectionId, true);
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'DISABLED', reason: 'disabled', ts: 1 });
    const err = await callError(w, 'GET', '/accounts/:id/positions', { userId: w.a.userId, params: { id: '101' } });
    expect(err).toMatchObject({ code: 'BROKER_UNAVAILABLE', status: 503, extensions: { connectionId: w.a.connectionId, connectionStatus: 'DISABLED' } });
    expect(err.message).toContain(`tradegate connections enable ${w.a.connectionId}`);
    expect(err.retryAfterSeconds).toBe(60);
    expect(w.gateway.calls).toEqual([]);
  });
});

describe('API key narrowing (web session only, like all key management)', () => {
  it('GET/PUT for the owner; 404 for another user’s key; {} removes it; the key list shows it', async () => {
    const { record } = await w.store.apiKeys.create({ userId: w.a.userId, name: 'bot', scopes: ['trade'] });
    const session = { kind: 'session' as const, principalId: 'session:s1', params: { id: record.id } };
    expect((await call(w, 'GET', '/api-keys/:id/guards', { userId: w.a.userId, ...session })).body).toEqual({ keyId: record.id, guards: null });
    const put = await call(w, 'PUT', '/api-keys/:id/guards', { userId: w.a.userId, ...session, body: { maxOrderQty: 1, allowedProducts: ['mes'] } });
    expect(put.body).toEqual({ keyId: record.id, guards: { maxOrderQty: 1, allowedProducts: ['MES'] } });
    const listed = (await call(w, 'GET', '/api-keys', { userId: w.a.userId, ...session, params: {} })).body as { data: { id: string; guards: unknown }[] };
    expect(listed.data.find((k) => k.id === record.id)?.guards).toEqual({ maxOrderQty: 1, allowedProducts: ['MES'] });
    expect((await callError(w, 'GET', '/api-keys/:id/guards', { userId: w.b.userId, ...session })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'PUT', '/api-keys/:id/guards', { userId: w.b.userId, ...session, body: {} })).code).toBe('NOT_FOUND');
    expect((await call(w, 'PUT', '/api-keys/:id/guards', { userId: w.a.userId, ...session, body: {} })).body).toEqual({ keyId: record.id, guards: null });
  });

  it('a revoked key has no guards to read or narrow: 404 like any use after delete, and nothing is written', async () => {
    const { record } = await w.store.apiKeys.create({ userId: w.a.userId, name: 'gone', scopes: ['trade'] });
    const session = { kind: 'session' as const, principalId: 'session:s1', params: { id: record.id } };
    await call(w, 'PUT', '/api-keys/:id/guards', { userId: w.a.userId, ...session, body: { maxOrderQty: 2 } });
    expect(await w.store.apiKeys.revoke(w.a.userId, record.id)).toBe(true);
    expect((await callError(w, 'GET', '/api-keys/:id/guards', { userId: w.a.userId, ...session })).code).toBe('NOT_FOUND');
    expect((await callError(w, 'PUT', '/api-keys/:id/guards', { userId: w.a.userId, ...session, body: { maxOrderQty: 1 } })).code).toBe('NOT_FOUND');
    expect(w.store.apiKeys.getForUser(w.a.userId, record.id)?.guards).toEqual({ maxOrderQty: 2 });
  });

  it('the routes take a web session: no API key can change a narrowing', () => {
    expect(route(w, 'PUT', '/api-keys/:id/guards').scope).toBe('session');
    expect(route(w, 'GET', '/api-keys/:id/guards').scope).toBe('session');
  });
});

describe('orders carry who placed them to the guards', () => {
  it('an API order: origin api and the key’s narrowing; a webhook alert: origin webhook and the token’s', async () => {
    w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => ({ order: orderRecord({ accountId: req.accountId }), reconciled: false, brokerMs: 1 });
    await call(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params, body: { symbol: 'ES', side: 'buy', qty: 1 }, narrowing: { maxOrderQty: 1 } });
    expect(w.gateway.calls.at(-1)?.req).toMatchObject({ origin: 'api', narrowing: [{ maxOrderQty: 1 }] });
    await call(w, 'POST', '/accounts/:id/orders', { userId: w.a.userId, params, body: { symbol: 'ES', side: 'buy', qty: 1 } });
    expect(w.gateway.calls.at(-1)?.req).toMatchObject({ origin: 'api' });
    expect(w.gateway.calls.at(-1)?.req).not.toHaveProperty('narrowing');
    const webhook = { tokenId: 't1', accountId: '101', strategyId: null };
    await call(w, 'POST', '/webhooks/:token', { userId: w.a.userId, kind: 'webhook', webhook, body: { action: 'buy', symbol: 'ES', qty: 1 }, narrowing: { flatOnly: true } });
    expect(w.gateway.calls.at(-1)?.req).toMatchObject({ origin: 'webhook', narrowing: [{ flatOnly: true }] });
  });

  it('webhook tokens take a narrowing on create and PATCH, and show it', async () => {
    const created = await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'tv', guards: { maxOrderQty: 2, direction: 'long_only' } } });
    expect(created.body).toMatchObject({ guards: { maxOrderQty: 2, direction: 'long_only' } });
    const id = (created.body as { id: string }).id;
    const patched = await call(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id }, body: { guards: null } });
    expect(patched.body).toMatchObject({ guards: null });
    const plain = await call(w, 'POST', '/webhook-tokens', { userId: w.a.userId, body: { accountId: '101', name: 'plain' } });
    expect(plain.body).toMatchObject({ guards: null });
  });
});
