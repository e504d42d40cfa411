/**
 * Trading sessions of the paper broker, after CME Globex (US Central time, DST-aware):
 * Sunday 17:00 → Friday 16:00, with a daily maintenance break 16:00–17:00 Monday to
 * Thursday. The session closes at 16:00 (Day orders expire then) and the trade date rolls at
 * 17:00 to the next weekday. Mode `none` keeps the market open around the clock but still rolls
 * the trade date at 17:00 CT, so daily rules (the daily loss limit) have a day to reset on.
 * Pure: every answer is a function of the UTC time in ms.
 */

/** `cme`: Globex hours and breaks; `none`: always open. */
export type SessionMode = 'none' | 'cme';

/** Tradovate's `tradeDate` shape. */
export interface TradeDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

/** The market at one moment. */
export interface SessionState {
  open: boolean;
  /** `maintenance` (16:00–17:00 CT on Monday–Thursday) or `weekend`, when closed. */
  closedFor?: 'maintenance' | 'weekend';
  tradeDate: TradeDate;
  /** The trade date as YYYYMMDD (Tradovate chart `td`). */
  tradeDateKey: number;
  /** The latest session close (16:00 CT on a weekday) at or before now, in ms. */
  lastClose: number;
}

const HOUR = 3_600_000;
const DAY = 86_400_000;
const CLOSE_MIN = 16 * 60;
const OPEN_MIN = 17 * 60;

/** Day number (days since 1970-01-01) of the n-th Sunday of a month (month 0-based). */
function nthSunday(year: number, month: number, nth: number): number {
  const first = Math.floor(Date.UTC(year, month, 1) / DAY);
  const weekday = (first + 4) % 7; // 1970-01-01 was a Thursday
  return first + ((7 - weekday) % 7) + (nth - 1) * 7;
}

/** UTC offset of US Central time at `utc` in ms: −5 h from the second Sunday of March 02:00 to the first Sunday of November 02:00, else −6 h. */
export function centralOffsetMs(utc: number): number {
  const year = new Date(utc).getUTCFullYear();
  // 02:00 CST = 08:00 UTC (spring forward); 02:00 CDT = 07:00 UTC (fall back).
  const start = nthSunday(year, 2, 2) * DAY + 8 * HOUR;
  const end = nthSunday(year, 10, 1) * DAY + 7 * HOUR;
  return utc >= start && utc < end ? -5 * HOUR : -6 * HOUR;
}

function civil(dayNumber: number): TradeDate {
  const d = new Date(dayNumber * DAY);
  return Object.freeze({ year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() });
}

/** UTC ms of a Central-time wall clock moment (local day number + minutes), DST-aware. */
function centralToUtc(localDay: number, minutes: number): number {
  const local = localDay * DAY + minutes * 60_000;
  const guess = local + 6 * HOUR;
  return local - centralOffsetMs(local - centralOffsetMs(guess));
}

/** The session state at `utc` under `mode` (uncached; see TradingCalendar). */
export function sessionAt(mode: SessionMode, utc: number): SessionState {
  const local = utc + centralOffsetMs(utc);
  const localDay = Math.floor(local / DAY);
  const minutes = Math.floor((local - localDay * DAY) / 60_000);
  const weekday = (localDay + 4) % 7; // 0 = Sunday
  // Trade date: the evening session belongs to the next weekday.
  let tradeDay = minutes >= OPEN_MIN ? localDay + 1 : localDay;
  const tradeWeekday = (tradeDay + 4) % 7;
  if (tradeWeekday === 6) tradeDay += 2;
  else if (tradeWeekday === 0) tradeDay += 1;
  const tradeDate = civil(tradeDay);
  // Latest weekday 16:00 CT at or before now.
  let closeDay = minutes >= CLOSE_MIN ? localDay : localDay - 1;
  while ((closeDay + 4) % 7 === 0 || (closeDay + 4) % 7 === 6) closeDay -= 1;
  const lastClose = centralToUtc(closeDay, CLOSE_MIN);
  let open = true;
  let closedFor: SessionState['closedFor'];
  if (mode === 'cme') {
    const weekend = weekday === 6 || (weekday === 0 && minutes < OPEN_MIN) || (weekday === 5 && minutes >= CLOSE_MIN);
    const maintenance = !weekend && weekday >= 1 && weekday <= 4 && minutes >= CLOSE_MIN && minutes < OPEN_MIN;
    open = !weekend && !maintenance;
    closedFor = weekend ? 'weekend' : maintenance ? 'maintenance' : undefined;
  }
  return { open, closedFor, tradeDate, tradeDateKey: tradeDate.year * 10_000 + tradeDate.month * 100 + tradeDate.day, lastClose };
}

/**
 * The session state, cached per UTC hour: Central time is a whole-hour offset from UTC, so
 * every transition (16:00, 17:00 CT, the trade-date roll) falls on a UTC hour boundary and the
 * hot path (every order, every price step) is one comparison.
 */
export class TradingCalendar {
  private hour = Number.NaN;
  private cached!: SessionState;

  constructor(readonly mode: SessionMode) {}

  /** The state at `utc`. */
  at(utc: number): SessionState {
    const hour = Math.floor(utc / HOUR);
    if (hour !== this.hour) {
      this.hour = hour;
      this.cached = sessionAt(this.mode, utc);
    }
    return this.cached;
  }
}
