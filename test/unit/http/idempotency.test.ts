import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { IDEMPOTENCY_TTL_MS } from '../../../src/tuning.js';
import type { ClaimOutcome } from '../../../src/store/idempotency.js';
import { IdempotencyGate, canonicalJson, isStoredStatus, parseBodyIdempotencyKey, parseIdempotencyKey, requestFingerprint, type IdempotencyRecord, type IdempotencyStore, type IdempotencyTicket } from '../../../src/http/idempotency.js';

/** In-memory stand-in for store.idempotency with exactly its get/put contract. */
class FakeStore implements IdempotencyStore {
  readonly records = new Map<string, IdempotencyRecord>();
  puts = 0;
  get(scope: string, key: string): IdempotencyRecord | undefined {
    return this.records.get(`${scope}|${key}`);
  }
  async put(scope: string, key: string, rec: IdempotencyRecord): Promise<void> {
    this.puts++;
    this.records.set(`${scope}|${key}`, rec);
  }
}

describe('parseIdempotencyKey', () => {
  it('accepts 1..255 visible ASCII characters and unquotes a structured-field string', () => {
    expect(parseIdempotencyKey('abc-123_XYZ:~!')).toBe('abc-123_XYZ:~!');
    expect(parseIdempotencyKey('x'.repeat(255))).toHaveLength(255);
    expect(parseIdempotencyKey('"8e03978e-40d5"')).toBe('8e03978e-40d5');
  });

  it.each(['', '""', 'x'.repeat(256), 'a b', 'tab\t', 'é', 'line\n', '\u0000'])('rejects %j with INVALID_IDEMPOTENCY_KEY', (raw) => {
    expect(() => parseIdempotencyKey(raw)).toThrowError(expect.objectContaining({ code: 'INVALID_IDEMPOTENCY_KEY' }) as unknown as Error);
  });

  it('property: any string is either rejected with the coded error or returned as visible ASCII', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 24, unit: 'binary' }), fc.string({ minLength: 250, maxLength: 260 })), (raw) => {
        try {
          return /^[\x21-\x7e]{1,255}$/.test(parseIdempotencyKey(raw));
        } catch (err) {
          return err instanceof AppError && err.code === 'INVALID_IDEMPOTENCY_KEY';
        }
      }),
    );
  });
});

describe('parseBodyIdempotencyKey (a webhook alert id)', () => {
  it.each(['Close entry(s) order Long-2026-11-26T14:35:00Z', 'Long Entry', 'é', '€ 1', 'x'.repeat(255), '🚀'.repeat(255), ' ', '"quoted"'])(
    'accepts %j as it is: TradingView order ids hold spaces and any text',
    (raw) => expect(parseBodyIdempotencyKey(raw)).toBe(raw),
  );

  it.each(['', 'x'.repeat(256), '🚀'.repeat(256), 'tab\t', 'line\n', '\u0000', 'del\u007f', 'c1\u0085'])('rejects %j with INVALID_IDEMPOTENCY_KEY naming id', (raw) => {
    expect(() => parseBodyIdempotencyKey(raw)).toThrow(new AppError('INVALID_IDEMPOTENCY_KEY', 'id must be 1 to 255 characters, none of them control characters'));
  });
});

describe('canonicalJson and requestFingerprint', () => {
  it('sorts keys at every depth, drops undefined members, keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[3,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('property: key order never changes the fingerprint; values always do', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue(), { maxKeys: 6 }), (obj) => {
        const reversed = Object.fromEntries(Object.entries(obj).reverse());
        const fp = requestFingerprint('POST', '/accounts/:id/orders', { id: '7' }, obj);
        expect(requestFingerprint('POST', '/accounts/:id/orders', { id: '7' }, reversed)).toBe(fp);
        expect(requestFingerprint('POST', '/accounts/:id/orders', { id: '8' }, obj)).not.toBe(fp);
        expect(requestFingerprint('POST', '/accounts/:id/orders', { id: '7' }, { ...obj, '\u0001extra': 1 })).not.toBe(fp);
      }),
    );
  });

  it('a different query string is a different request (a dryRun never replays as the real order)', () => {
    const body = { symbol: 'ES', side: 'buy', qty: 1, type: 'market' };
    const real = requestFingerprint('POST', '/accounts/:id/orders', { id: '7' }, body, {});
    const dry = requestFingerprint('POST', '/accounts/:id/orders', { id: '7' }, body, { dryRun: true });
    expect(dry).not.toBe(real);
  });
});

describe('isStoredStatus', () => {
  it('stores executed outcomes, never pre-execution rejections or 5xx', () => {
    for (const s of [200, 201, 204, 409, 422]) expect(isStoredStatus(s)).toBe(true);
    for (const s of [400, 401, 403, 404, 429, 500, 503, 504]) expect(isStoredStatus(s)).toBe(false);
    // Nothing sent: a retry under the key must still run (a FAILED connection back, the right body after a wrong one).
    expect(isStoredStatus(409, 'CONNECTION_FAILED')).toBe(false);
    expect(isStoredStatus(422, 'IDEMPOTENCY_KEY_REUSED')).toBe(false);
    expect(isStoredStatus(422, 'BROKER_REJECTED')).toBe(true);
  });
});

/** A store with the cluster's claim contract, kept in memory (the NATS version is tested in test/unit/store/nats). */
class ClaimingStore extends FakeStore {
  readonly markers = new Map<string, string>();
  claims = 0;
  async claim(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome> {
    this.claims++;
    const slot = `${scope}|${key}`;
    const record = this.records.get(slot);
    if (record) return { kind: 'done', record };
    if (this.markers.has(slot)) return { kind: 'in-flight' };
    this.markers.set(slot, fingerprint);
    return {
      kind: 'claimed',
      claim: {
        commit: async (answer) => {
          this.markers.delete(slot);
          this.records.set(slot, { fingerprint, ...answer, createdAt: 0 });
          return true;
        },
        release: async () => {
          this.markers.delete(slot);
        },
      },
    };
  }
}

describe('IdempotencyGate over a claiming (cluster) store', () => {
  it('takes the in-flight marker from the store, so another node holding the key means 409', async () => {
    const store = new ClaimingStore();
    const gate = new IdempotencyGate(store, () => 0);
    // Another node claimed the key.
    store.markers.set('u1|k', 'fp');
    expect(await gate.begin('u1', 'k', 'fp')).toEqual({ kind: 'in-flight' });
    store.markers.clear();
    const first = await gate.begin('u1', 'k', 'fp');
    expect(first.kind).toBe('proceed');
    // Same node, same key: answered from memory without asking the store.
    const claims = store.claims;
    expect(await gate.begin('u1', 'k', 'fp')).toEqual({ kind: 'in-flight' });
    expect(store.claims).toBe(claims);
    await (first as { ticket: IdempotencyTicket }).ticket.commit({ status: 201, headers: { 'Content-Type': 'application/json' }, body: '{"id":1}' });
    expect(store.markers.size).toBe(0);
    expect(await gate.begin('u1', 'k', 'fp')).toMatchObject({ kind: 'replay', record: { status: 201, body: '{"id":1}' } });
    expect(await gate.begin('u1', 'k', 'other')).toEqual({ kind: 'mismatch' });
    expect(gate.inFlightCount()).toBe(0);
  });

  it('releases the store marker for an unstored status and on release, and never stores twice', async () => {
    const store = new ClaimingStore();
    const gate = new IdempotencyGate(store, () => 0);
    const a = (await gate.begin('u1', 'a', 'fp')) as { ticket: IdempotencyTicket };
    expect(await a.ticket.commit({ status: 503, headers: {}, body: '' })).toBe(false);
    expect(store.markers.size).toBe(0);
    expect(store.records.size).toBe(0);
    await expect(a.ticket.commit({ status: 201, headers: {}, body: '' })).rejects.toThrow(/already finished/);
    const b = (await gate.begin('u1', 'b', 'fp')) as { ticket: IdempotencyTicket };
    b.ticket.release();
    await Promise.resolve();
    expect(store.markers.size).toBe(0);
    expect((await gate.begin('u1', 'b', 'fp')).kind).toBe('proceed');
  });
});

describe('IdempotencyGate', () => {
  const answer = (status: number, body = `{"n":${status}}`) => ({ status, headers: { 'Content-Type': 'application/json' }, body });

  it('replays a committed answer, 422s another fingerprint, and forgets records after 24 h', async () => {
    const store = new FakeStore();
    const now = { t: 0 };
    const gate = new IdempotencyGate(store, () => now.t);
    const first = await gate.begin('u', 'k', 'fp1');
    expect(first.kind).toBe('proceed');
    if (first.kind !== 'proceed') return;
    expect(await first.ticket.commit(answer(201))).toBe(true);
    expect(await gate.begin('u', 'k', 'fp1')).toEqual({ kind: 'replay', record: { fingerprint: 'fp1', ...answer(201), createdAt: 0 } });
    expect(await gate.begin('u', 'k', 'fp2')).toEqual({ kind: 'mismatch' });
    expect(await gate.begin('other-user', 'k', 'fp2')).toMatchObject({ kind: 'proceed' });
    now.t = IDEMPOTENCY_TTL_MS;
    expect(await gate.begin('u', 'k', 'fp2')).toMatchObject({ kind: 'proceed' });
  });

  it('frees the key after a release or an unstored status, and a ticket finishes only once', async () => {
    const store = new FakeStore();
    const gate = new IdempotencyGate(store);
    const a = await gate.begin('u', 'k', 'fp');
    if (a.kind !== 'proceed') throw new Error('expected proceed');
    expect(await gate.begin('u', 'k', 'fp')).toEqual({ kind: 'in-flight' });
    expect(await a.ticket.commit(answer(504))).toBe(false);
    await expect(a.ticket.commit(answer(201))).rejects.toThrow();
    const b = await gate.begin('u', 'k', 'fp');
    if (b.kind !== 'proceed') throw new Error('expected proceed');
    b.ticket.release();
    expect(gate.inFlightCount()).toBe(0);
    expect(store.puts).toBe(0);
  });

  it('property: under any interleaving of concurrent begins, exactly one proceeds per key', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.integer({ min: 2, max: 20 }), async (s, n) => {
        const store = new FakeStore();
        // Every store read resolves in an order chosen by the scheduler.
        const scheduledGet = s.scheduleFunction(async (scope: string, key: string) => store.get(scope, key));
        const gate = new IdempotencyGate({ get: scheduledGet, put: (sc, k, r) => store.put(sc, k, r) });
        const outcomes = Array.from({ length: n }, () => gate.begin('u', 'k', 'fp'));
        await s.waitAll();
        const kinds = (await Promise.all(outcomes)).map((o) => o.kind);
        expect(kinds.filter((k) => k === 'proceed')).toHaveLength(1);
        expect(kinds.filter((k) => k === 'in-flight')).toHaveLength(n - 1);
      }),
      { numRuns: 100 },
    );
  });

  it('property: the gate follows the model state machine over random command sequences', async () => {
    type Cmd =
      | { op: 'begin'; key: number; fp: number }
      | { op: 'commit'; slot: number; status: number }
      | { op: 'release'; slot: number }
      | { op: 'advance'; ms: number };
    const cmd: fc.Arbitrary<Cmd> = fc.oneof(
      fc.record({ op: fc.constant('begin' as const), key: fc.integer({ min: 0, max: 2 }), fp: fc.integer({ min: 0, max: 1 }) }),
      fc.record({ op: fc.constant('commit' as const), slot: fc.nat(5), status: fc.constantFrom(201, 200, 409, 422, 400, 401, 403, 429, 500, 503, 504) }),
      fc.record({ op: fc.constant('release' as const), slot: fc.nat(5) }),
      fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(1, 60_000, IDEMPOTENCY_TTL_MS / 2, IDEMPOTENCY_TTL_MS) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { maxLength: 60 }), async (cmds) => {
        const now = { t: 1_000 };
        const gate = new IdempotencyGate(new FakeStore(), () => now.t);
        const model = { inFlight: new Set<number>(), stored: new Map<number, { fp: number; status: number; at: number }>() };
        const tickets: { key: number; fp: number; ticket: IdempotencyTicket; done: boolean }[] = [];
        for (const c of cmds) {
          if (c.op === 'advance') now.t += c.ms;
          else if (c.op === 'begin') {
            const out = await gate.begin('u', `k${c.key}`, `fp${c.fp}`);
            const rec = model.stored.get(c.key);
            const live = rec && now.t - rec.at < IDEMPOTENCY_TTL_MS;
            if (model.inFlight.has(c.key)) expect(out.kind).toBe('in-flight');
            else if (live && rec.fp === c.fp) expect(out).toMatchObject({ kind: 'replay', record: { status: rec.status } });
            else if (live) expect(out.kind).toBe('mismatch');
            else {
              expect(out.kind).toBe('proceed');
              if (out.kind === 'proceed') tickets.push({ key: c.key, fp: c.fp, ticket: out.ticket, done: false });
              model.inFlight.add(c.key);
            }
          } else {
            const open = tickets.filter((t) => !t.done);
            const t = open[c.slot % Math.max(1, open.length)];
            if (!t) continue;
            t.done = true;
            model.inFlight.delete(t.key);
            if (c.op === 'release') t.ticket.release();
            else {
              const stored = await t.ticket.commit(answer(c.status));
              expect(stored).toBe(isStoredStatus(c.status));
              if (stored) model.stored.set(t.key, { fp: t.fp, status: c.status, at: now.t });
            }
          }
        }
        expect(gate.inFlightCount()).toBe(model.inFlight.size);
      }),
      { numRuns: 200 },
    );
  });
});

describe('the 24 h lifetime and release after completion', () => {
  const answer = (status: number) => ({ status, headers: { 'Content-Type': 'application/json' }, body: `{"n":${status}}` });

  it('replays until 1 ms before 24 h and runs afresh from exactly 24 h (the default lifetime is 24 h)', async () => {
    expect(IDEMPOTENCY_TTL_MS).toBe(24 * 60 * 60 * 1000);
    const store = new FakeStore();
    const now = { t: 1_000 };
    const gate = new IdempotencyGate(store, () => now.t);
    const first = await gate.begin('u', 'k', 'fp');
    if (first.kind !== 'proceed') throw new Error('expected proceed');
    await first.ticket.commit(answer(201));
    now.t = 1_000 + IDEMPOTENCY_TTL_MS - 1;
    expect((await gate.begin('u', 'k', 'fp')).kind).toBe('replay');
    expect((await gate.begin('u', 'k', 'other')).kind).toBe('mismatch');
    now.t = 1_000 + IDEMPOTENCY_TTL_MS;
    const again = await gate.begin('u', 'k', 'other');
    expect(again.kind).toBe('proceed');
    if (again.kind === 'proceed') again.ticket.release();
  });

  it('takes its lifetime from the constructor', async () => {
    const store = new FakeStore();
    const now = { t: 0 };
    const gate = new IdempotencyGate(store, () => now.t, 10);
    const first = await gate.begin('u', 'k', 'fp');
    if (first.kind !== 'proceed') throw new Error('expected proceed');
    await first.ticket.commit(answer(201));
    now.t = 9;
    expect((await gate.begin('u', 'k', 'fp')).kind).toBe('replay');
    now.t = 10;
    const fresh = await gate.begin('u', 'k', 'fp');
    expect(fresh.kind).toBe('proceed');
    if (fresh.kind === 'proceed') fresh.ticket.release();
  });

  it('release() after a commit changes nothing: the stored answer stays and a newer holder keeps its claim', async () => {
    const store = new FakeStore();
    const gate = new IdempotencyGate(store);
    const first = await gate.begin('u', 'k', 'fp');
    if (first.kind !== 'proceed') throw new Error('expected proceed');
    await first.ticket.commit(answer(201));
    first.ticket.release();
    expect((await gate.begin('u', 'k', 'fp')).kind).toBe('replay');
    // An unstored answer frees the key; a late release of that finished ticket must not free the next holder's claim.
    const second = await gate.begin('u', 'k2', 'fp');
    if (second.kind !== 'proceed') throw new Error('expected proceed');
    await second.ticket.commit(answer(503));
    const third = await gate.begin('u', 'k2', 'fp');
    expect(third.kind).toBe('proceed');
    second.ticket.release();
    expect(await gate.begin('u', 'k2', 'fp')).toEqual({ kind: 'in-flight' });
    expect(gate.inFlightCount()).toBe(1);
  });

  it('a store read that fails frees the claim', async () => {
    const gate = new IdempotencyGate({ get: () => Promise.reject(new Error('disk')), put: async () => undefined });
    await expect(gate.begin('u', 'k', 'fp')).rejects.toThrow('disk');
    expect(gate.inFlightCount()).toBe(0);
  });

  it('a store write that fails still frees the claim', async () => {
    const gate = new IdempotencyGate({ get: async () => undefined, put: () => Promise.reject(new Error('disk full')) });
    const first = await gate.begin('u', 'k', 'fp');
    if (first.kind !== 'proceed') throw new Error('expected proceed');
    await expect(first.ticket.commit(answer(201))).rejects.toThrow('disk full');
    expect(gate.inFlightCount()).toBe(0);
  });
});

describe('answers that are never stored', () => {
  it('does not store 409 CONNECTION_FAILED: the retry under the same key runs once the connection is back', () => {
    expect(isStoredStatus(409, 'CONNECTION_FAILED')).toBe(false);
    expect(isStoredStatus(409, 'ORDER_NOT_WORKING')).toBe(true);
    expect(isStoredStatus(409)).toBe(true);
    expect(isStoredStatus(201)).toBe(true);
  });
});

describe('idempotency details', () => {
  it('unquotes a Structured-Field string only when both quotes are there', () => {
    expect(parseIdempotencyKey('"abc"')).toBe('abc');
    expect(parseIdempotencyKey('"abc')).toBe('"abc');
    expect(parseIdempotencyKey('abc"')).toBe('abc"');
    expect(parseIdempotencyKey('"')).toBe('"');
    expect(() => parseIdempotencyKey('""')).toThrow(new AppError('INVALID_IDEMPOTENCY_KEY', 'Idempotency-Key must be 1 to 255 visible ASCII characters'));
    expect(parseIdempotencyKey('x'.repeat(255))).toHaveLength(255);
    expect(() => parseIdempotencyKey('x'.repeat(256))).toThrow(/1 to 255 visible ASCII/);
    expect(() => parseIdempotencyKey('a b')).toThrow(/visible ASCII/);
  });

  it('canonical JSON: arrays keep their order with undefined as null, objects are sorted at every depth and drop undefined', () => {
    expect(canonicalJson([3, undefined, { b: 1, a: [{ d: 1, c: undefined }] }])).toBe('[3,null,{"a":[{"d":1}],"b":1}]');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('stores only 2xx–4xx answers of execution', () => {
    for (const s of [100, 199, 500, 502]) expect(isStoredStatus(s), String(s)).toBe(false);
    for (const s of [200, 299, 402, 499]) expect(isStoredStatus(s), String(s)).toBe(true);
    expect(isStoredStatus(201, 'ORDER_NOT_WORKING')).toBe(true);
    expect(isStoredStatus(400, 'CONNECTION_FAILED')).toBe(false);
  });

  it('a ticket committed twice says so', async () => {
    const gate = new IdempotencyGate(new FakeStore());
    const t = await gate.begin('u', 'k', 'fp');
    if (t.kind !== 'proceed') throw new Error('expected proceed');
    await t.ticket.commit({ status: 201, headers: {}, body: '' });
    await expect(t.ticket.commit({ status: 201, headers: {}, body: '' })).rejects.toThrow('idempotency ticket already finished');
  });
});

describe('canonicalJson and "__proto__"', () => {
  it('keeps a body\'s own "__proto__" key, so two bodies that differ only there are not the same request', () => {
    const withProto = JSON.parse('{"qty":1,"__proto__":{"side":"sell"}}') as unknown;
    expect(canonicalJson(withProto)).toBe('{"__proto__":{"side":"sell"},"qty":1}');
    expect(canonicalJson(withProto)).not.toBe(canonicalJson({ qty: 1 }));
  });
});
