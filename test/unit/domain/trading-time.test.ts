import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeLocal, inWindows, isTimeZone, parseClock, tradingDay, wallClock, zonedToUtc, type TradingWindows } from '../../../src/domain/trading-time.js';

const CT = 'America/Chicago';
const H = 3_600_000;

describe('wall clock in a named zone (Intl, daylight saving included)', () => {
  it('reads Chicago time on both sides of the spring-forward and fall-back transitions', () => {
    // 2026-03-08 02:00 CST → 03:00 CDT (08:00 UTC); 2026-11-01 02:00 CDT → 01:00 CST (07:00 UTC).
    expect(wallClock(Date.UTC(2026, 2, 8, 7, 59), CT)).toMatchObject({ day: 8, weekday: 0, minutes: 1 * 60 + 59 });
    expect(wallClock(Date.UTC(2026, 2, 8, 8, 0), CT)).toMatchObject({ day: 8, minutes: 3 * 60 });
    expect(wallClock(Date.UTC(2026, 10, 1, 6, 30), CT)).toMatchObject({ minutes: 1 * 60 + 30 });
    expect(wallClock(Date.UTC(2026, 10, 1, 7, 30), CT)).toMatchObject({ minutes: 1 * 60 + 30 });
    expect(wallClock(Date.UTC(2026, 6, 1, 12, 0), 'Europe/London')).toMatchObject({ minutes: 13 * 60 });
  });

  it('zonedToUtc inverts wallClock for every real local minute (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) }), fc.constantFrom(CT, 'America/New_York', 'Europe/Berlin', 'Asia/Tokyo'), (t, tz) => {
        const minute = Math.floor(t / 60_000) * 60_000;
        const w = wallClock(minute, tz);
        const back = zonedToUtc(w.year, w.month, w.day, w.minutes, tz);
        // A repeated local hour (fall back) maps to one of its two instants.
        expect(wallClock(back, tz)).toEqual(w);
      }),
    );
  });

  it('the first minute after a spring-forward gap maps to itself, a minute in the gap to the moment after it', () => {
    // Found by the property above (seed 1362373872): 03:00 on 2028-03-12 in New York came back as 04:00.
    expect(zonedToUtc(2028, 3, 12, 3 * 60, 'America/New_York')).toBe(Date.UTC(2028, 2, 12, 7, 0));
    expect(zonedToUtc(2026, 3, 8, 3 * 60, CT)).toBe(Date.UTC(2026, 2, 8, 8, 0));
    expect(zonedToUtc(2026, 3, 29, 3 * 60, 'Europe/Berlin')).toBe(Date.UTC(2026, 2, 29, 1, 0));
    expect(zonedToUtc(2026, 3, 8, 2 * 60 + 30, CT)).toBe(Date.UTC(2026, 2, 8, 8, 30));
    // A repeated hour (fall back) gives one of its two instants.
    expect([Date.UTC(2026, 10, 1, 6, 30), Date.UTC(2026, 10, 1, 7, 30)]).toContain(zonedToUtc(2026, 11, 1, 60 + 30, CT));
  });

  it('zonedToUtc inverts wallClock around every offset change of 2024–2030 (property, many runs)', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) }), fc.constantFrom(CT, 'America/New_York', 'Europe/Berlin'), (t, tz) => {
        // Minutes within two hours of a local 02:00–03:00: where the offsets change.
        const w0 = wallClock(Math.floor(t / 60_000) * 60_000, tz);
        const minute = zonedToUtc(w0.year, w0.month, w0.day, 90, tz) + (Math.floor(t / 60_000) % 120) * 60_000;
        const w = wallClock(minute, tz);
        expect(wallClock(zonedToUtc(w.year, w.month, w.day, w.minutes, tz), tz)).toEqual(w);
      }),
      { numRuns: 20_000 },
    );
  });

  it('names and clock strings', () => {
    expect(isTimeZone(CT)).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
    expect(parseClock('00:00')).toBe(0);
    expect(parseClock('15:55')).toBe(955);
    expect(parseClock('24:00')).toBe(1440);
    for (const bad of ['24:01', '7:00', '12:60', 'noon', '']) expect(parseClock(bad)).toBeNull();
    expect(describeLocal(Date.UTC(2026, 10, 26, 21, 57), CT)).toBe('Thu 15:57 America/Chicago');
  });
});

describe('the CME trading day starts at 17:00 Chicago time', () => {
  it('in winter at 23:00 UTC, in summer at 22:00 UTC; 16:59 belongs to the day that began yesterday', () => {
    expect(tradingDay(Date.UTC(2026, 10, 24, 23, 0))).toEqual({ start: Date.UTC(2026, 10, 24, 23, 0), end: Date.UTC(2026, 10, 25, 23, 0) });
    expect(tradingDay(Date.UTC(2026, 10, 24, 22, 59)).start).toBe(Date.UTC(2026, 10, 23, 23, 0));
    expect(tradingDay(Date.UTC(2026, 6, 15, 22, 0)).start).toBe(Date.UTC(2026, 6, 15, 22, 0));
  });

  it('days around a daylight saving change last 23 or 25 hours', () => {
    const spring = tradingDay(Date.UTC(2026, 2, 8, 12, 0));
    expect(spring.start).toBe(Date.UTC(2026, 2, 7, 23, 0));
    expect(spring.end - spring.start).toBe(23 * H);
    const fall = tradingDay(Date.UTC(2026, 10, 1, 12, 0));
    expect(fall.end - fall.start).toBe(25 * H);
  });

  it('every moment lies inside its day, and the next day starts where it ends (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) }), (t) => {
        const d = tradingDay(t);
        expect(t).toBeGreaterThanOrEqual(d.start);
        expect(t).toBeLessThan(d.end);
        expect(tradingDay(d.end).start).toBe(d.end);
        expect(wallClock(d.start, CT).minutes).toBe(17 * 60);
      }),
    );
  });
});

describe('trading windows', () => {
  const tw = (windows: TradingWindows['windows'], timeZone = CT): TradingWindows => ({ timeZone, windows, flattenAtEnd: false });
  const ct = (y: number, m: number, d: number, hh: number, mm = 0) => zonedToUtc(y, m, d, hh * 60 + mm, CT);

  it('a same-day window: start inclusive, end exclusive, only on its days', () => {
    const rth = tw([{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '08:30', end: '15:00' }]);
    expect(inWindows(rth, ct(2026, 11, 23, 8, 29))).toBe(false);
    expect(inWindows(rth, ct(2026, 11, 23, 8, 30))).toBe(true);
    expect(inWindows(rth, ct(2026, 11, 23, 14, 59))).toBe(true);
    expect(inWindows(rth, ct(2026, 11, 23, 15, 0))).toBe(false);
    expect(inWindows(rth, ct(2026, 11, 22, 10, 0))).toBe(false);
  });

  it('an overnight window opens on its day and runs into the next (no trading 15:55–17:00)', () => {
    const evaluation = tw([{ days: ['sun', 'mon', 'tue', 'wed', 'thu'], start: '17:00', end: '15:55' }]);
    expect(inWindows(evaluation, ct(2026, 11, 22, 17, 0))).toBe(true); // Sunday evening
    expect(inWindows(evaluation, ct(2026, 11, 23, 10, 0))).toBe(true); // Monday morning
    expect(inWindows(evaluation, ct(2026, 11, 23, 15, 55))).toBe(false);
    expect(inWindows(evaluation, ct(2026, 11, 23, 16, 59))).toBe(false);
    expect(inWindows(evaluation, ct(2026, 11, 27, 15, 0))).toBe(true); // Friday, from Thursday's window
    expect(inWindows(evaluation, ct(2026, 11, 27, 17, 0))).toBe(false); // Friday evening: no window opens
    expect(inWindows(evaluation, ct(2026, 11, 28, 10, 0))).toBe(false); // Saturday
  });

  it('follows local time across the DST change: 08:30 CT is 14:30 UTC in winter and 13:30 UTC in summer', () => {
    const morning = tw([{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '08:30', end: '09:00' }]);
    expect(inWindows(morning, Date.UTC(2026, 2, 6, 14, 30))).toBe(true); // Friday before, CST
    expect(inWindows(morning, Date.UTC(2026, 2, 9, 14, 30))).toBe(false); // Monday after, CDT: 09:30 local
    expect(inWindows(morning, Date.UTC(2026, 2, 9, 13, 30))).toBe(true);
  });

  it('windows in another zone, and several windows a day', () => {
    const london = tw([{ days: ['mon'], start: '08:00', end: '09:00' }, { days: ['mon'], start: '14:30', end: '16:00' }], 'Europe/London');
    expect(inWindows(london, Date.UTC(2026, 10, 23, 8, 30))).toBe(true);
    expect(inWindows(london, Date.UTC(2026, 10, 23, 12, 0))).toBe(false);
    expect(inWindows(london, Date.UTC(2026, 10, 23, 15, 0))).toBe(true);
  });
});
