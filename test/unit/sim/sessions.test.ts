/** CME Globex sessions in US Central time: open hours, the maintenance break, weekends, trade dates, DST. */
import { describe, expect, it } from 'vitest';
import { centralOffsetMs, sessionAt, TradingCalendar } from '../../../src/sim/sessions.js';

const at = (iso: string) => sessionAt('cme', Date.parse(iso));
const HOUR = 3_600_000;

describe('central time', () => {
  it('is UTC−5 from the second Sunday of March 02:00 to the first Sunday of November 02:00, else UTC−6', () => {
    expect(centralOffsetMs(Date.parse('2026-03-08T07:59:59Z'))).toBe(-6 * HOUR);
    expect(centralOffsetMs(Date.parse('2026-03-08T08:00:00Z'))).toBe(-5 * HOUR);
    expect(centralOffsetMs(Date.parse('2026-11-01T06:59:59Z'))).toBe(-5 * HOUR);
    expect(centralOffsetMs(Date.parse('2026-11-01T07:00:00Z'))).toBe(-6 * HOUR);
  });
});

describe('cme sessions', () => {
  it('is open on a weekday morning, trading that date', () => {
    expect(at('2026-11-20T15:00:00Z')).toMatchObject({ open: true, tradeDate: { year: 2026, month: 11, day: 20 }, tradeDateKey: 20261120 });
  });

  it('closes at 16:00 CT for the maintenance break and reopens at 17:00 CT on the next trade date', () => {
    expect(at('2026-11-23T21:59:59Z')).toMatchObject({ open: true, tradeDateKey: 20261123 });
    expect(at('2026-11-23T22:00:00Z')).toMatchObject({ open: false, closedFor: 'maintenance', tradeDateKey: 20261123 });
    expect(at('2026-11-23T23:00:00Z')).toMatchObject({ open: true, tradeDateKey: 20261124 });
    // In summer (CDT) the same break is an hour earlier in UTC.
    expect(at('2026-07-15T21:00:00Z')).toMatchObject({ open: false, closedFor: 'maintenance' });
    expect(at('2026-07-15T22:00:00Z')).toMatchObject({ open: true });
  });

  it('is closed from Friday 16:00 CT to Sunday 17:00 CT; the weekend trades as Monday', () => {
    expect(at('2026-11-20T22:00:00Z')).toMatchObject({ open: false, closedFor: 'weekend', tradeDateKey: 20261120 });
    expect(at('2026-11-20T23:30:00Z')).toMatchObject({ open: false, closedFor: 'weekend', tradeDateKey: 20261123 });
    expect(at('2026-11-21T12:00:00Z')).toMatchObject({ open: false, closedFor: 'weekend', tradeDateKey: 20261123 });
    expect(at('2026-11-22T22:59:59Z')).toMatchObject({ open: false, closedFor: 'weekend' });
    expect(at('2026-11-22T23:00:00Z')).toMatchObject({ open: true, tradeDateKey: 20261123 });
  });

  it('knows the latest session close (16:00 CT on a weekday) at or before now', () => {
    expect(at('2026-11-24T16:00:00Z').lastClose).toBe(Date.parse('2026-11-23T22:00:00Z'));
    expect(at('2026-11-23T16:00:00Z').lastClose).toBe(Date.parse('2026-11-20T22:00:00Z'));
    expect(at('2026-11-23T22:00:00Z').lastClose).toBe(Date.parse('2026-11-23T22:00:00Z'));
  });
});

describe('mode none', () => {
  it('is always open but still rolls the trade date at 17:00 CT', () => {
    const s = sessionAt('none', Date.parse('2026-11-21T12:00:00Z'));
    expect(s).toMatchObject({ open: true, tradeDateKey: 20261123 });
    expect(sessionAt('none', Date.parse('2026-11-23T22:30:00Z'))).toMatchObject({ open: true, tradeDateKey: 20261123 });
    expect(sessionAt('none', Date.parse('2026-11-23T23:00:00Z'))).toMatchObject({ open: true, tradeDateKey: 20261124 });
  });
});

it('caches the state for the UTC hour (every transition falls on an hour boundary)', () => {
  const cal = new TradingCalendar('cme');
  const a = cal.at(Date.parse('2026-11-23T21:00:00Z'));
  expect(cal.at(Date.parse('2026-11-23T21:59:59.999Z'))).toBe(a);
  expect(cal.at(Date.parse('2026-11-23T22:00:00Z')).open).toBe(false);
});
