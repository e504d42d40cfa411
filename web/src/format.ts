/** How times, prices and money read on the pages. */

const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const dateTimeFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

function toDate(v: string | number): Date {
  return typeof v === 'number' ? new Date(v) : new Date(v);
}

/** Today: 14:03:21; otherwise: Nov 21, 14:03. */
export function when(v: string | number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  const d = toDate(v);
  const today = new Date();
  return d.toDateString() === today.toDateString() ? timeFmt.format(d) : dateTimeFmt.format(d);
}

/** The full date and time, for title attributes. */
export function fullTime(v: string | number | null | undefined): string {
  return v === null || v === undefined ? '' : fullFmt.format(toDate(v));
}

/** "12 s ago", "3 min ago", "2 h ago", "4 d ago". */
export function ago(v: string | number | null | undefined, now = Date.now()): string {
  if (v === null || v === undefined) return '';
  const s = Math.max(0, Math.round((now - toDate(v).getTime()) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** A price as the broker reports it (no trailing zero games). */
export function price(v: number | null | undefined): string {
  return v === null || v === undefined ? '—' : String(v);
}

/** An average of fill prices (4993.333333333333 → 4993.333333): at most 6 decimals, enough for every tick (ZN's 1/64 = 0.015625). */
export function averagePrice(v: number | null | undefined): string {
  return v === null || v === undefined ? '—' : String(Math.round(v * 1e6) / 1e6);
}

const money = new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', signDisplay: 'exceptZero' });

/** P&L in account currency with its sign. */
export function pnl(v: number): string {
  return money.format(v);
}

/** "Tradovate live", "Paper", … */
export function brokerLabel(broker: string, environment: string): string {
  if (broker === 'paper') return 'Paper';
  return `Tradovate ${environment}`;
}
