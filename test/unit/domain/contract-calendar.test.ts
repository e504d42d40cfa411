import { describe, expect, it } from 'vitest';
import {
  businessDaysBefore,
  civilOfDay,
  dayNumber,
  dayOf,
  expiryDay,
  firstNoticeDay,
  isBusinessDay,
  isoDay,
  nthLastBusinessDay,
  nthWeekday,
  rollDay,
  weekday,
} from '../../../src/domain/contract-calendar.js';
import { getProduct, listProducts } from '../../../src/domain/products.js';
import type { Product } from '../../../src/domain/products.js';

function product(root: string): Product {
  const p = getProduct(root);
  if (p === undefined) throw new Error(`missing ${root}`);
  return p;
}

function day(iso: string): number {
  return dayOf(new Date(`${iso}T00:00:00Z`));
}

describe('calendar primitives', () => {
  it('numbers days in UTC and knows their weekday', () => {
    expect(dayNumber(1970, 1, 1)).toBe(0);
    expect(weekday(0)).toBe(4); // Thursday
    expect(weekday(day('2026-11-21'))).toBe(6); // Saturday
    expect(weekday(dayNumber(1969, 12, 28))).toBe(0); // Sunday, negative day numbers too
    expect(isoDay(dayNumber(2026, 3, 20))).toBe('2026-03-20');
    expect(dayOf(new Date('2026-03-11T23:59:59.999Z'))).toBe(day('2026-03-11'));
  });

  it('treats Monday to Friday as business days and skips weekends when counting back', () => {
    expect(isBusinessDay(day('2026-11-20'))).toBe(true);
    expect(isBusinessDay(day('2026-11-21'))).toBe(false);
    expect(isBusinessDay(day('2026-11-22'))).toBe(false);
    expect(isoDay(businessDaysBefore(day('2026-11-23'), 1))).toBe('2026-11-20');
    expect(isoDay(businessDaysBefore(day('2026-11-25'), 3))).toBe('2026-11-20');
  });

  it('finds nth weekdays and nth-last business days of a month', () => {
    expect(isoDay(nthWeekday(2026, 12, 5, 3))).toBe('2026-12-18');
    expect(isoDay(nthWeekday(2026, 3, 3, 3))).toBe('2026-03-18');
    expect(isoDay(nthLastBusinessDay(2026, 1, 1))).toBe('2026-01-30'); // Jan 31 2026 is a Saturday
    expect(isoDay(nthLastBusinessDay(2026, 4, 3))).toBe('2026-04-28');
    expect(isoDay(firstNoticeDay(2026, 4))).toBe('2026-03-31');
    expect(isoDay(firstNoticeDay(2026, 1))).toBe('2025-12-31');
  });
});

describe('expiry rules (exchange last trading days, holidays ignored)', () => {
  const cases: [string, number, number, string][] = [
    ['ES', 2025, 12, '2025-12-19'],
    ['ES', 2026, 3, '2026-03-20'],
    ['MNQ', 2026, 12, '2026-12-18'],
    ['YM', 2026, 6, '2026-06-19'],
    ['CL', 2026, 12, '2026-11-20'], // Nov 25 is a Wednesday: 3 business days before
    ['CL', 2026, 2, '2026-01-20'], // Jan 25 is a Sunday: 4 business days before
    ['MCL', 2026, 12, '2026-11-19'], // one business day before CL
    ['MCL', 2026, 2, '2026-01-19'],
    ['NG', 2026, 3, '2026-02-25'],
    ['GC', 2026, 4, '2026-04-28'],
    ['MGC', 2026, 6, '2026-06-26'],
    ['SI', 2026, 3, '2026-03-27'],
    ['HG', 2026, 5, '2026-05-27'],
    ['ZN', 2026, 3, '2026-03-20'], // 7 business days before Mar 31
    ['ZB', 2026, 6, '2026-06-19'],
    ['ZF', 2026, 3, '2026-03-31'],
    ['ZC', 2026, 3, '2026-03-13'], // Mar 15 is a Sunday
    ['ZS', 2026, 1, '2026-01-14'],
    ['6E', 2026, 3, '2026-03-16'], // Monday before the third Wednesday
  ];
  for (const [root, year, month, expected] of cases) {
    it(`${root} ${year}-${month} stops trading on ${expected}`, () => {
      expect(isoDay(expiryDay(product(root), year, month))).toBe(expected);
    });
  }
});

describe('roll rules', () => {
  const cases: [string, number, number, string][] = [
    ['ES', 2026, 3, '2026-03-12'], // Thursday, 8 days before the third Friday
    ['RTY', 2026, 12, '2026-12-10'],
    ['CL', 2026, 3, '2026-02-17'], // 3 business days before Feb 20
    ['CL', 2026, 2, '2026-01-15'],
    ['NG', 2026, 3, '2026-02-20'],
    ['GC', 2026, 4, '2026-03-26'], // 3 business days before FND Mar 31
    ['GC', 2026, 2, '2026-01-27'],
    ['ZN', 2026, 3, '2026-02-24'],
    ['ZS', 2026, 1, '2025-12-26'],
    ['6E', 2026, 3, '2026-03-09'],
  ];
  for (const [root, year, month, expected] of cases) {
    it(`${root} ${year}-${month} stops being the front month on ${expected}`, () => {
      expect(isoDay(rollDay(product(root), year, month))).toBe(expected);
    });
  }

  it('puts every roll date strictly before expiry, both on business days, for every product and month of 2020-2040', () => {
    const failures: string[] = [];
    for (const p of listProducts()) {
      for (let year = 2020; year <= 2040; year += 1) {
        for (let month = 1; month <= 12; month += 1) {
          const expiry = expiryDay(p, year, month);
          const roll = rollDay(p, year, month);
          const at = `${p.root} ${year}-${month}`;
          if (!(roll < expiry)) failures.push(`${at}: roll ${isoDay(roll)} not before expiry ${isoDay(expiry)}`);
          if (!isBusinessDay(expiry)) failures.push(`${at}: expiry ${isoDay(expiry)} not a business day`);
          if (!isBusinessDay(roll)) failures.push(`${at}: roll ${isoDay(roll)} not a business day`);
          // Expiry lies in the contract month or the month before it: the front-month search relies on it.
          if (expiry < dayNumber(year, month - 1, 1) || expiry >= dayNumber(year, month + 1, 1)) failures.push(`${at}: expiry ${isoDay(expiry)} out of range`);
        }
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('calendar arithmetic at its edges', () => {
  it('matches the platform’s own calendar for every day of four centuries (leap years, century rules)', () => {
    const start = dayNumber(1899, 12, 25);
    const wrong: number[] = [];
    for (let day = start; day < start + 400 * 366; day += 1) {
      const d = new Date(day * 86_400_000);
      const c = civilOfDay(day);
      if (c.year !== d.getUTCFullYear() || c.month !== d.getUTCMonth() + 1 || c.day !== d.getUTCDate()) wrong.push(day);
    }
    expect(wrong).toEqual([]);
  });

  it('writes ISO dates with zero padding and refuses years outside 0..9999', () => {
    expect(isoDay(dayNumber(2026, 9, 9))).toBe('2026-09-09');
    expect(isoDay(dayNumber(2026, 10, 10))).toBe('2026-10-10');
    // Day numbers of 0000-01-01 and 9999-12-31 (days since 1970-01-01).
    const first = -719_528;
    const last = 2_932_896;
    expect([isoDay(first), isoDay(last)]).toEqual(['0000-01-01', '9999-12-31']);
    expect(() => isoDay(last + 1)).toThrow(new RangeError(`date out of range: day ${last + 1}`));
    expect(() => isoDay(first - 1)).toThrow(RangeError);
  });

  it('the last business day of a month is nth = 1 (and 0 counts as the last too)', () => {
    // 2026-05-31 is a Sunday: the last business day is Friday 29th.
    expect(isoDay(nthLastBusinessDay(2026, 5, 1))).toBe('2026-05-29');
    expect(isoDay(nthLastBusinessDay(2026, 5, 2))).toBe('2026-05-28');
  });
});
