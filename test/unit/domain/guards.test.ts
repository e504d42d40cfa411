import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkEntry,
  effectiveLimits,
  exposureOf,
  guardConfig,
  isExit,
  lockRefusal,
  NO_GUARDS,
  pnlTrip,
  withOrder,
  type ContractExposure,
  type GuardConfig,
  type GuardNarrowing,
  type GuardedOrder,
} from '../../../src/domain/guards.js';

const flat: ContractExposure = { net: 0, buying: 0, selling: 0 };
const buy = (qty = 1, root = 'ES'): GuardedOrder => ({ side: 'buy', qty, root, origin: 'api' });
const sell = (qty = 1, root = 'ES'): GuardedOrder => ({ side: 'sell', qty, root, origin: 'api' });
// Monday 2026-11-23 10:00 America/Chicago (16:00 UTC, CST).
const MON_10_CT = Date.UTC(2026, 10, 23, 16, 0);
const check = (config: Partial<GuardConfig>, order = buy(), contract = flat, accountExposure = exposureOf(contract), narrowings: GuardNarrowing[] = []) =>
  checkEntry(effectiveLimits(guardConfig(config), narrowings, order.origin), order, { now: MON_10_CT, contract, accountExposure });

describe('exposure and exits', () => {
  it('exposure is the largest position one side filling could reach', () => {
    expect(exposureOf({ net: 2, buying: 1, selling: 2 })).toBe(3);
    expect(exposureOf({ net: 2, buying: 0, selling: 5 })).toBe(3);
    expect(exposureOf({ net: -1, buying: 1, selling: 0 })).toBe(1);
    expect(exposureOf(flat)).toBe(0);
  });

  it('an exit only reduces the position, counting what already works on its side', () => {
    expect(isExit({ net: 3, buying: 0, selling: 0 }, 'sell', 3)).toBe(true);
    expect(isExit({ net: 3, buying: 0, selling: 0 }, 'sell', 4)).toBe(false);
    // A take-profit for 2 already works: selling 2 more could cross to short.
    expect(isExit({ net: 3, buying: 0, selling: 2 }, 'sell', 2)).toBe(false);
    expect(isExit({ net: 3, buying: 0, selling: 2 }, 'sell', 1)).toBe(true);
    expect(isExit({ net: -2, buying: 0, selling: 0 }, 'buy', 2)).toBe(true);
    expect(isExit({ net: -2, buying: 0, selling: 0 }, 'sell', 1)).toBe(false);
    expect(isExit(flat, 'sell', 1)).toBe(false);
    expect(isExit({ net: 2, buying: 0, selling: 0 }, 'buy', 1)).toBe(false);
  });
});

describe('checkEntry, guard by guard (limit and value named)', () => {
  it('max order qty', () => {
    expect(check({ maxOrderQty: 5 }, buy(5))).toBeNull();
    expect(check({ maxOrderQty: 5 }, buy(6))).toMatchObject({ guard: 'max_order_qty', limit: 5, value: 6 });
  });

  it('max position per contract counts the position and working entries on the order’s side', () => {
    expect(check({ maxPositionPerContract: 3 }, buy(1), { net: 2, buying: 0, selling: 0 })).toBeNull();
    expect(check({ maxPositionPerContract: 3 }, buy(1), { net: 2, buying: 1, selling: 0 })).toMatchObject({ guard: 'max_position', limit: 3, value: 4 });
    // Working exits of a long do not count against a long entry.
    expect(check({ maxPositionPerContract: 3 }, buy(1), { net: 2, buying: 0, selling: 2 })).toBeNull();
    // A sell that turns long 2 into short 4.
    expect(check({ maxPositionPerContract: 3 }, sell(6), { net: 2, buying: 0, selling: 0 })).toMatchObject({ guard: 'max_position', value: 4 });
  });

  it('max position over the account adds this contract’s new exposure to the others', () => {
    expect(check({ maxPositionTotal: 4 }, buy(1), { net: 1, buying: 0, selling: 0 }, 4)).toMatchObject({ guard: 'max_position_total', limit: 4, value: 5 });
    expect(check({ maxPositionTotal: 5 }, buy(1), { net: 1, buying: 0, selling: 0 }, 4)).toBeNull();
  });

  it('allowed products, case-insensitive', () => {
    expect(check({ allowedProducts: ['ES', 'mes'] }, buy(1, 'MES'))).toBeNull();
    expect(check({ allowedProducts: ['ES'] }, buy(1, 'NQ'))).toMatchObject({ guard: 'allowed_products', limit: ['ES'], value: 'NQ' });
  });

  it('long only / short only', () => {
    expect(check({ direction: 'long_only' }, sell())).toMatchObject({ guard: 'direction', limit: 'long_only', value: 'sell' });
    expect(check({ direction: 'long_only' }, buy())).toBeNull();
    expect(check({ direction: 'short_only' }, buy())).toMatchObject({ guard: 'direction', limit: 'short_only', value: 'buy' });
  });

  it('no pyramiding: no entry in the direction of the position or of working entries; a reversal is fine', () => {
    expect(check({ noPyramiding: true }, buy(), { net: 1, buying: 0, selling: 0 })).toMatchObject({ guard: 'no_pyramiding', value: 1 });
    expect(check({ noPyramiding: true }, buy(), { net: 0, buying: 2, selling: 0 })).toMatchObject({ guard: 'no_pyramiding', value: 2 });
    expect(check({ noPyramiding: true }, sell(2), { net: 1, buying: 0, selling: 0 })).toBeNull();
    expect(check({ noPyramiding: true }, buy(), { net: -2, buying: 2, selling: 0 })).toBeNull();
  });

  it('flat only (all entries) and webhook flat only (alerts only)', () => {
    const open = { net: 1, buying: 0, selling: 0 };
    expect(check({ flatOnly: true }, sell(3), open)).toMatchObject({ guard: 'flat_only', limit: 0 });
    expect(check({ flatOnly: true }, buy(), { net: 0, buying: 1, selling: 0 })).toMatchObject({ guard: 'flat_only' });
    expect(check({ webhookFlatOnly: true }, buy(), open)).toBeNull();
    expect(check({ webhookFlatOnly: true }, { ...buy(), origin: 'webhook' }, open)).toMatchObject({ guard: 'flat_only' });
    expect(check({ flatOnly: true }, buy())).toBeNull();
  });

  it('trading windows: refused outside, with the local time as the value', () => {
    const windows = (start: string, end: string) => ({ timeZone: 'America/Chicago', flattenAtEnd: false, windows: [{ days: ['mon' as const], start, end }] });
    expect(check({ tradingWindows: windows('08:30', '15:00') })).toBeNull();
    expect(check({ tradingWindows: windows('10:01', '15:00') })).toMatchObject({ guard: 'trading_window', value: 'Mon 10:00 America/Chicago' });
  });
});

describe('narrowing by a token or key', () => {
  it('the stricter value of each field wins; lists intersect; a direction on each side allows no entry at all', () => {
    const account = guardConfig({ maxOrderQty: 5, allowedProducts: ['ES', 'NQ'], direction: 'long_only' });
    const limits = effectiveLimits(account, [{ maxOrderQty: 10, maxPositionPerContract: 2, allowedProducts: ['NQ', 'CL'], direction: 'short_only', flatOnly: true }], 'api');
    expect(limits).toMatchObject({ maxOrderQty: 5, maxPositionPerContract: 2, long: false, short: false, flatOnly: true });
    expect([...limits.allowedProducts!]).toEqual(['NQ']);
    expect(checkEntry(limits, buy(1, 'NQ'), { now: MON_10_CT, contract: flat, accountExposure: 0 })).toMatchObject({ guard: 'direction', limit: 'none' });
  });

  it('never widens: whatever the narrowing, every limit in force is at most the account’s (property)', () => {
    const num = fc.option(fc.integer({ min: 0, max: 20 }), { nil: null });
    const narrowing = fc.record({ maxOrderQty: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }), maxPositionPerContract: fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }), noPyramiding: fc.option(fc.boolean(), { nil: undefined }) }, { requiredKeys: [] });
    fc.assert(
      fc.property(num, num, fc.boolean(), fc.array(narrowing, { maxLength: 3 }), (maxQty, maxPos, pyramid, narrowings) => {
        const config = guardConfig({ maxOrderQty: maxQty === 0 ? 1 : maxQty, maxPositionPerContract: maxPos, noPyramiding: pyramid });
        const l = effectiveLimits(config, narrowings as GuardNarrowing[], 'api');
        if (config.maxOrderQty !== null) expect(l.maxOrderQty).toBeLessThanOrEqual(config.maxOrderQty);
        if (config.maxPositionPerContract !== null) expect(l.maxPositionPerContract).toBeLessThanOrEqual(config.maxPositionPerContract);
        if (pyramid) expect(l.noPyramiding).toBe(true);
      }),
    );
  });
});

describe('refusal details name the numbers (what a user reads in the 403)', () => {
  it('each guard words its refusal with the limit and the value', () => {
    expect(check({ maxOrderQty: 5 }, buy(6))!.detail).toBe('6 contracts exceed the 5 per order');
    expect(check({ maxPositionPerContract: 3 }, buy(1), { net: 2, buying: 1, selling: 0 })!.detail).toBe('the position could reach 4 contracts (max 3)');
    expect(check({ maxPositionTotal: 4 }, buy(1), { net: 1, buying: 0, selling: 0 }, 4)!.detail).toBe("the account's positions could reach 5 contracts (max 4)");
    expect(check({ allowedProducts: ['ES', 'MES'] }, buy(1, 'NQ'))!.detail).toBe('NQ is not an allowed product (ES, MES)');
    expect(check({ direction: 'long_only' }, sell())!.detail).toBe('sell entries are not allowed (long_only)');
    expect(check({ flatOnly: true }, buy(), { net: 1, buying: 1, selling: 2 })).toEqual({ guard: 'flat_only', limit: 0, value: 2, detail: 'entries only while flat; the contract has 1 open and 3 working' });
    expect(check({ noPyramiding: true }, buy(), { net: 1, buying: 0, selling: 0 })!.detail).toBe('a buy would add to 1 contracts already long or working');
    expect(check({ noPyramiding: true }, sell(), { net: -2, buying: 0, selling: 0 })).toEqual({ guard: 'no_pyramiding', limit: 0, value: 2, detail: 'a sell would add to 2 contracts already short or working' });
    const closed = { timeZone: 'America/Chicago', flattenAtEnd: false, windows: [{ days: ['mon' as const], start: '10:01', end: '15:00' }] };
    expect(check({ tradingWindows: closed })!.detail).toBe('entries are allowed only inside the trading windows; it is Mon 10:00 America/Chicago');
  });

  it('an empty intersection of products allows none and says so', () => {
    const r = check({ allowedProducts: ['ES'] }, buy(1, 'ES'), flat, 0, [{ allowedProducts: ['NQ'] }]);
    expect(r).toEqual({ guard: 'allowed_products', limit: [], value: 'ES', detail: 'ES is not an allowed product (none)' });
  });

  it('a lock refusal says who locked it, until when, and why', () => {
    expect(lockRefusal({ guard: 'kill_switch', since: 0, until: null, detail: 'away' }).detail).toBe('account locked by kill_switch until unlocked: away');
    expect(lockRefusal({ guard: 'daily_loss', since: 0, until: Date.UTC(2026, 10, 23, 23), detail: 'loss 1000' }).detail).toBe('account locked by daily_loss until 2026-11-23T23:00:00.000Z: loss 1000');
  });

  it('flat only counts working orders on either side', () => {
    expect(check({ flatOnly: true }, buy(), { net: 0, buying: 0, selling: 1 })).toMatchObject({ guard: 'flat_only', value: 1 });
    expect(check({ flatOnly: true }, buy(), { net: -1, buying: 0, selling: 0 })).toMatchObject({ guard: 'flat_only', value: 1 });
  });

  it('the allowed direction passes on a one-sided account', () => {
    expect(check({ direction: 'short_only' }, sell())).toBeNull();
    expect(check({ direction: 'long_only' }, buy())).toBeNull();
  });

  it('no guard at all is the default of every field', () => {
    expect(guardConfig({})).toEqual({
      maxOrderQty: null,
      maxPositionPerContract: null,
      maxPositionTotal: null,
      allowedProducts: null,
      direction: 'both',
      noPyramiding: false,
      flatOnly: false,
      tradingWindows: null,
      webhookFlatOnly: false,
      dailyLossLimit: null,
      dailyProfitTarget: null,
    });
    expect(Object.isFrozen(NO_GUARDS)).toBe(true);
  });
});

describe('narrowing, field by field', () => {
  const account = guardConfig({ maxOrderQty: 5, maxPositionPerContract: 4, maxPositionTotal: 6 });

  it('a narrowing that leaves a number out (or null) keeps the account’s number', () => {
    for (const n of [{}, { maxOrderQty: null, maxPositionPerContract: null, maxPositionTotal: null }] as GuardNarrowing[]) {
      expect(effectiveLimits(account, [n], 'api')).toMatchObject({ maxOrderQty: 5, maxPositionPerContract: 4, maxPositionTotal: 6 });
    }
    expect(effectiveLimits(guardConfig({}), [{ maxOrderQty: 2 }], 'api').maxOrderQty).toBe(2);
  });

  it('one direction on the narrowing closes only the other side', () => {
    expect(effectiveLimits(account, [{ direction: 'long_only' }], 'api')).toMatchObject({ long: true, short: false });
    expect(effectiveLimits(account, [{ direction: 'short_only' }], 'api')).toMatchObject({ long: false, short: true });
    expect(effectiveLimits(account, [{ direction: 'both' }], 'api')).toMatchObject({ long: true, short: true });
  });

  it('no pyramiding and flat only: either side turns them on, neither side off', () => {
    const off = effectiveLimits(account, [{ noPyramiding: false, flatOnly: false }], 'api');
    expect(off).toMatchObject({ noPyramiding: false, flatOnly: false });
    expect(effectiveLimits(account, [{}], 'api')).toMatchObject({ noPyramiding: false, flatOnly: false });
    expect(effectiveLimits(account, [{ noPyramiding: true }], 'api')).toMatchObject({ noPyramiding: true, flatOnly: false });
    expect(effectiveLimits(account, [{ flatOnly: true }], 'api')).toMatchObject({ noPyramiding: false, flatOnly: true });
    const on = guardConfig({ noPyramiding: true, flatOnly: true });
    expect(effectiveLimits(on, [{ noPyramiding: false, flatOnly: false }], 'api')).toMatchObject({ noPyramiding: true, flatOnly: true });
  });

  it('a narrowing’s trading windows apply on top of the account’s', () => {
    const closed = { timeZone: 'America/Chicago', flattenAtEnd: false, windows: [{ days: ['mon' as const], start: '11:00', end: '15:00' }] };
    expect(check({}, buy(), flat, 0, [{ tradingWindows: closed }])).toMatchObject({ guard: 'trading_window' });
    expect(effectiveLimits(account, [{ tradingWindows: closed }], 'api').windows).toEqual([closed]);
  });
});

describe('locks and P&L limits', () => {
  it('a lock refusal names the guard and when it lifts', () => {
    expect(lockRefusal({ guard: 'kill_switch', since: 0, until: null, detail: 'away' })).toMatchObject({ guard: 'kill_switch', limit: null, value: 'locked' });
    expect(lockRefusal({ guard: 'daily_loss', since: 0, until: Date.UTC(2026, 10, 23, 23), detail: 'x' }).limit).toBe('2026-11-23T23:00:00.000Z');
  });

  it('the loss limit trips at −limit exactly; the profit target at the target', () => {
    const c = guardConfig({ dailyLossLimit: 1000, dailyProfitTarget: 2000 });
    expect(pnlTrip(c, -999.99)).toBeNull();
    expect(pnlTrip(c, -1000)).toEqual({ guard: 'daily_loss', limit: 1000 });
    expect(pnlTrip(c, 2000)).toEqual({ guard: 'profit_target', limit: 2000 });
    expect(pnlTrip(guardConfig({}), -1e9)).toBeNull();
  });
});

/**
 * The model the actor implements: every order goes through isExit/checkEntry against the live
 * exposure, admitted orders work until filled (in any pieces) or cancelled. Whatever the
 * sequence, the position never passes the max — nor does the exposure, which bounds it.
 */
describe('no sequence of orders, fills and cancels passes the max position (property)', () => {
  type Op = { kind: 'order'; side: 'buy' | 'sell'; qty: number } | { kind: 'fill'; pick: number; part: number } | { kind: 'cancel'; pick: number };
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('order' as const), side: fc.constantFrom('buy' as const, 'sell' as const), qty: fc.integer({ min: 1, max: 6 }) }),
    fc.record({ kind: fc.constant('fill' as const), pick: fc.nat(), part: fc.integer({ min: 1, max: 6 }) }),
    fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  );

  it('holds for max positions 0..5, with or without no-pyramiding', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5 }), fc.boolean(), fc.array(op, { maxLength: 60 }), (max, noPyramiding, ops) => {
        const limits = effectiveLimits(guardConfig({ maxPositionPerContract: max, noPyramiding }), [], 'api');
        let net = 0;
        const working: { side: 'buy' | 'sell'; qty: number }[] = [];
        const exposure = (): ContractExposure => ({
          net,
          buying: working.filter((o) => o.side === 'buy').reduce((n, o) => n + o.qty, 0),
          selling: working.filter((o) => o.side === 'sell').reduce((n, o) => n + o.qty, 0),
        });
        for (const o of ops) {
          if (o.kind === 'order') {
            const e = exposure();
            const admitted = isExit(e, o.side, o.qty) || checkEntry(limits, { side: o.side, qty: o.qty, root: 'ES', origin: 'api' }, { now: MON_10_CT, contract: e, accountExposure: exposureOf(e) }) === null;
            if (admitted) working.push({ side: o.side, qty: o.qty });
          } else if (working.length > 0) {
            const i = o.pick % working.length;
            const w = working[i]!;
            if (o.kind === 'fill') {
              const q = Math.min(w.qty, o.part);
              net += w.side === 'buy' ? q : -q;
              w.qty -= q;
            }
            if (o.kind === 'cancel' || w.qty === 0) working.splice(i, 1);
          }
          expect(Math.abs(net)).toBeLessThanOrEqual(max);
          expect(exposureOf(exposure())).toBeLessThanOrEqual(max);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('withOrder adds to one side only', () => {
    expect(withOrder({ net: 1, buying: 2, selling: 3 }, 'buy', 4)).toEqual({ net: 1, buying: 6, selling: 3 });
    expect(withOrder({ net: 1, buying: 2, selling: 3 }, 'sell', 4)).toEqual({ net: 1, buying: 2, selling: 7 });
  });
});
