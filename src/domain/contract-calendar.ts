/**
 * Calendar arithmetic for contract expiry and roll dates. Dates are UTC day numbers (days since
 * 1970-01-01) so rules compare with plain integers; business days are Monday–Friday with
 * exchange holidays ignored (see the convention notes in products.ts).
 */
import type { ExpiryRule, Product, RollRule } from './products.js';

const DAY_MS = 86_400_000;

/** UTC day number of a calendar date; month is 1..12, day may under/overflow like Date.UTC. */
export function dayNumber(year: number, month: number, day: number): number {
  return Date.UTC(year, month - 1, day) / DAY_MS;
}

/** UTC day number containing the instant `date` (NaN for an invalid Date). */
export function dayOf(date: Date): number {
  return Math.floor(date.getTime() / DAY_MS);
}

/** The Date at 00:00 UTC of a day number. */
export function dateOfDay(day: number): Date {
  return new Date(day * DAY_MS);
}

/** Calendar date of a day number (proleptic Gregorian; H. Hinnant's civil_from_days). */
export function civilOfDay(day: number): { year: number; month: number; day: number } {
  const z = day + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day: doy - Math.floor((153 * mp + 2) / 5) + 1 };
}

/** ISO calendar date `YYYY-MM-DD` of a day number (years 0..9999). */
export function isoDay(day: number): string {
  const c = civilOfDay(day);
  if (!(c.year >= 0 && c.year <= 9999)) throw new RangeError(`date out of range: day ${day}`);
  return `${String(c.year).padStart(4, '0')}-${c.month < 10 ? '0' : ''}${c.month}-${c.day < 10 ? '0' : ''}${c.day}`;
}

/** Day of week of a day number: 0 Sunday … 6 Saturday (1970-01-01 was a Thursday). */
export function weekday(day: number): number {
  return (((day + 4) % 7) + 7) % 7;
}

/** Whether the day is a business day (Monday–Friday; holidays are not modelled). */
export function isBusinessDay(day: number): boolean {
  const w = weekday(day);
  return w !== 0 && w !== 6;
}

/** The business day `count` business days strictly before `day` (count ≥ 1). */
export function businessDaysBefore(day: number, count: number): number {
  let d = day;
  let left = count;
  while (left > 0) {
    d -= 1;
    if (isBusinessDay(d)) left -= 1;
  }
  return d;
}

/** The nth-last business day of a month (nth = 1 is the last business day). */
export function nthLastBusinessDay(year: number, month: number, nth: number): number {
  // Day 0 of the next month is the last calendar day of this one.
  let d = dayNumber(year, month + 1, 0);
  while (!isBusinessDay(d)) d -= 1;
  return nth > 1 ? businessDaysBefore(d, nth - 1) : d;
}

/** The nth given weekday (0 Sunday … 6 Saturday) of a month. */
export function nthWeekday(year: number, month: number, dayOfWeek: number, nth: number): number {
  const first = dayNumber(year, month, 1);
  return first + ((dayOfWeek - weekday(first) + 7) % 7) + 7 * (nth - 1);
}

/** Last trading day (UTC day number) of a contract month under an expiry rule. */
export function expiryDayByRule(rule: ExpiryRule, year: number, month: number): number {
  switch (rule.kind) {
    case 'nth-weekday':
      return nthWeekday(year, month, rule.weekday, rule.nth);
    case 'before-25th-prior-month': {
      const the25th = dayNumber(year, month - 1, 25);
      // CME wording: N business days before the 25th, N+1 when the 25th itself is not a
      // business day — i.e. counting always starts from the last business day before it.
      return businessDaysBefore(the25th, isBusinessDay(the25th) ? rule.businessDays : rule.businessDays + 1);
    }
    case 'nth-last-business-day': {
      const target = civilOfDay(dayNumber(year, month + rule.monthOffset, 1));
      return nthLastBusinessDay(target.year, target.month, rule.nth);
    }
    case 'business-days-before-day':
      return businessDaysBefore(dayNumber(year, month, rule.day), rule.businessDays);
    case 'business-days-before-nth-weekday':
      return businessDaysBefore(nthWeekday(year, month, rule.weekday, rule.nth), rule.businessDays);
  }
}

/** First notice day as modelled here: the last business day of the month before the contract month. */
export function firstNoticeDay(year: number, month: number): number {
  const prior = civilOfDay(dayNumber(year, month - 1, 1));
  return nthLastBusinessDay(prior.year, prior.month, 1);
}

/** Roll day (front month moves on at 00:00 UTC of it) of a contract under a roll rule. */
export function rollDayByRule(rule: RollRule, expiry: number, year: number, month: number): number {
  switch (rule.kind) {
    case 'days-before-expiry':
      return expiry - rule.days;
    case 'business-days-before-expiry':
      return businessDaysBefore(expiry, rule.businessDays);
    case 'business-days-before-first-notice':
      return businessDaysBefore(firstNoticeDay(year, month), rule.businessDays);
  }
}

/** Last trading day of a product's contract (month 1..12, four-digit year). */
export function expiryDay(product: Product, year: number, month: number): number {
  return expiryDayByRule(product.expiry, year, month);
}

/** Roll day of a product's contract; always before its expiry day. */
export function rollDay(product: Product, year: number, month: number): number {
  const expiry = expiryDay(product, year, month);
  // The clamp guarantees the front month is never a contract in its last trading day.
  return Math.min(rollDayByRule(product.roll, expiry, year, month), expiry - 1);
}
