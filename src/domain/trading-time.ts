/**
 * Wall-clock time in named time zones (through Intl, so daylight saving follows the tz
 * database), trading windows per weekday, and the trading day of CME futures: it starts at
 * 17:00 America/Chicago (the evening session belongs to the next trade date). Pure functions
 * of the UTC time in ms; results are cached per minute, because guards ask on every order.
 */

export type Weekday = 'sun' | 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat';

/** Weekdays in `Date.getDay()` order (0 = Sunday). */
export const WEEKDAYS: readonly Weekday[] = Object.freeze(['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']);

/** One window: on each listed day from `start` to `end` (HH:MM, local). `end` before `start` runs past midnight into the next day. */
export interface TradingWindow {
  days: Weekday[];
  start: string;
  end: string;
}

/** Windows in one time zone; entries are allowed inside any of them. */
export interface TradingWindows {
  timeZone: string;
  windows: TradingWindow[];
  /** Flatten the account (cancel working orders, close positions) when a window ends. */
  flattenAtEnd: boolean;
}

/** The CME trading day: starts at 17:00 in Chicago. */
export const CME_DAY = Object.freeze({ timeZone: 'America/Chicago', startMinutes: 17 * 60 });

/** Local date, weekday (0 = Sunday) and minutes since local midnight. */
export interface WallClock {
  year: number;
  month: number;
  day: number;
  weekday: number;
  minutes: number;
}

const MINUTE = 60_000;
const formatters = new Map<string, Intl.DateTimeFormat>();
const lastWall = new Map<string, { minute: number; wall: WallClock }>();
const WEEKDAY_INDEX: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', weekday: 'short', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Whether Intl knows the IANA time zone name. */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The wall clock in `timeZone` at `utc` (ms). */
export function wallClock(utc: number, timeZone: string): WallClock {
  const minute = Math.floor(utc / MINUTE);
  const cached = lastWall.get(timeZone);
  if (cached?.minute === minute) return cached.wall;
  const parts: Record<string, string> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(minute * MINUTE))) parts[p.type] = p.value;
  const wall: WallClock = {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    weekday: WEEKDAY_INDEX[parts.weekday!] ?? 0,
    minutes: Number(parts.hour) * 60 + Number(parts.minute),
  };
  lastWall.set(timeZone, { minute, wall });
  return wall;
}

/** UTC offset of `timeZone` at `utc`, in ms (local − UTC). */
function offsetAt(utc: number, timeZone: string): number {
  const w = wallClock(utc, timeZone);
  const local = Date.UTC(w.year, w.month - 1, w.day) + w.minutes * MINUTE;
  return local - Math.floor(utc / MINUTE) * MINUTE;
}

/**
 * UTC ms of a local wall-clock moment (`day` may overflow the month: Date.UTC normalises it).
 * A time that does not exist (skipped by a spring-forward) maps to the moment after the gap;
 * a time that exists twice (fall back), to one of its two instants.
 */
export function zonedToUtc(year: number, month: number, day: number, minutes: number, timeZone: string): number {
  const local = Date.UTC(year, month - 1, day) + minutes * MINUTE;
  const first = local - offsetAt(local, timeZone);
  const second = local - offsetAt(first, timeZone);
  if (first === second) return first;
  // Near a change of offset the two guesses differ; the one that reads back as `local` is the
  // answer (03:00 on a spring-forward day is the first minute after the gap, not 04:00).
  const fits = (t: number) => t + offsetAt(t, timeZone) === local;
  const firstFits = fits(first);
  if (firstFits !== fits(second)) return firstFits ? first : second;
  return Math.max(first, second);
}

/** Minutes since midnight of `HH:MM` (00:00–24:00), or null. */
export function parseClock(text: string): number | null {
  const m = /^([01]\d|2[0-4]):([0-5]\d)$/.exec(text);
  if (!m) return null;
  const minutes = Number(m[1]) * 60 + Number(m[2]);
  return minutes <= 24 * 60 ? minutes : null;
}

/** Whether `utc` falls inside one of the windows. */
export function inWindows(tw: TradingWindows, utc: number): boolean {
  const w = wallClock(utc, tw.timeZone);
  const today = WEEKDAYS[w.weekday]!;
  const yesterday = WEEKDAYS[(w.weekday + 6) % 7]!;
  for (const win of tw.windows) {
    const start = parseClock(win.start) ?? 0;
    const end = parseClock(win.end) ?? 0;
    if (start < end) {
      if (win.days.includes(today) && w.minutes >= start && w.minutes < end) return true;
    } else if ((win.days.includes(today) && w.minutes >= start) || (win.days.includes(yesterday) && w.minutes < end)) {
      return true;
    }
  }
  return false;
}

/**
 * Whether a window ended within `withinMs` before `utc`, and `utc` is outside every window: the
 * moment a `flattenAtEnd` flatten was due (checked minute by minute back from `utc`).
 */
export function windowEndedWithin(tw: TradingWindows, utc: number, withinMs: number): boolean {
  if (inWindows(tw, utc)) return false;
  for (let back = MINUTE; back <= withinMs; back += MINUTE) if (inWindows(tw, utc - back)) return true;
  return false;
}

/** "Thu 15:57 America/Chicago": a moment as the windows read it (for refusal messages). */
export function describeLocal(utc: number, timeZone: string): string {
  const w = wallClock(utc, timeZone);
  const hh = String(Math.floor(w.minutes / 60)).padStart(2, '0');
  const mm = String(w.minutes % 60).padStart(2, '0');
  const day = WEEKDAYS[w.weekday]!;
  return `${day[0]!.toUpperCase()}${day.slice(1)} ${hh}:${mm} ${timeZone}`;
}

/** The CME trading day containing `utc`: [start, end) in ms, starts at 17:00 Chicago time. */
export function tradingDay(utc: number): { start: number; end: number } {
  const { timeZone, startMinutes } = CME_DAY;
  const w = wallClock(utc, timeZone);
  const day = w.minutes >= startMinutes ? w.day : w.day - 1;
  const start = zonedToUtc(w.year, w.month, day, startMinutes, timeZone);
  return { start, end: zonedToUtc(w.year, w.month, day + 1, startMinutes, timeZone) };
}
