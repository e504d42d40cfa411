/**
 * The trading-windows part of the guards form: entries are allowed only inside a window (exits,
 * cancels and flatten always), optionally flattened when a window ends. Edited as text ("08:30",
 * "24:00" for the end of a day) so every time the API takes can be shown; the server checks the
 * form of each and its words show next to the window.
 */
import type { AccountGuards, TradingWindow, Weekday } from '../types';
import { Field } from '../components/ui';

export type WindowsDraft = { enabled: boolean; timeZone: string; flattenAtEnd: boolean; windows: TradingWindow[] };

const DAYS: readonly [Weekday, string][] = [
  ['sun', 'Sun'],
  ['mon', 'Mon'],
  ['tue', 'Tue'],
  ['wed', 'Wed'],
  ['thu', 'Thu'],
  ['fri', 'Fri'],
  ['sat', 'Sat'],
];

/** The CME equity index day session, in Chicago time: what a new window starts as. */
const NEW_WINDOW: TradingWindow = { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '08:30', end: '15:00' };
const ZONES = ['America/Chicago', 'America/New_York', 'America/Los_Angeles', 'Europe/London', 'Europe/Berlin', 'Asia/Tokyo', 'Australia/Sydney', 'UTC'];

/** "Mon–Fri", "Sun, Wed": a window's days in words (runs of three or more joined). */
function daysText(days: readonly Weekday[]): string {
  const on = DAYS.map(([d]) => days.includes(d));
  const parts: string[] = [];
  for (let i = 0; i < 7; i++) {
    if (!on[i]) continue;
    let j = i;
    while (j + 1 < 7 && on[j + 1]) j++;
    parts.push(j - i >= 2 ? `${DAYS[i]![1]}–${DAYS[j]![1]}` : DAYS.slice(i, j + 1).map(([, l]) => l).join(', '));
    i = j;
  }
  return parts.join(', ');
}

/** "Mon–Fri 08:30–15:00 (America/Chicago), flattened at the end": the windows in force, in words. */
export function windowsSummary(tw: NonNullable<AccountGuards['tradingWindows']>): string {
  const list = tw.windows.map((w) => `${daysText(w.days)} ${w.start}–${w.end}`).join('; ');
  return `trading windows ${list} (${tw.timeZone})${tw.flattenAtEnd ? ', flattened at the end' : ''}`;
}

export function windowsDraft(g: AccountGuards): WindowsDraft {
  const tw = g.tradingWindows;
  return tw
    ? { enabled: true, timeZone: tw.timeZone, flattenAtEnd: tw.flattenAtEnd ?? false, windows: tw.windows.map((w) => ({ ...w, days: [...w.days] })) }
    : { enabled: false, timeZone: 'America/Chicago', flattenAtEnd: false, windows: [{ ...NEW_WINDOW }] };
}

/** What PUT /guards takes for the draft: null when the windows are off. */
export function windowsBody(d: WindowsDraft): AccountGuards['tradingWindows'] {
  if (!d.enabled) return null;
  return { timeZone: d.timeZone.trim(), flattenAtEnd: d.flattenAtEnd, windows: d.windows.map((w) => ({ days: w.days, start: w.start.trim(), end: w.end.trim() })) };
}

export function TradingWindowsFields(props: { draft: WindowsDraft; onChange: (d: WindowsDraft) => void; error: (path: string) => string | undefined }) {
  const d = props.draft;
  const set = (patch: Partial<WindowsDraft>) => props.onChange({ ...d, ...patch });
  const setWindow = (i: number, patch: Partial<TradingWindow>) => set({ windows: d.windows.map((w, j) => (j === i ? { ...w, ...patch } : w)) });
  const listError = props.error('tradingWindows.windows') && !d.windows.some((_, i) => props.error(`tradingWindows.windows.${i}`)) ? props.error('tradingWindows.windows') : undefined;

  return (
    <fieldset class="field windows">
      <legend>Trading windows</legend>
      <label class="check">
        <input type="checkbox" checked={d.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} /> Allow entries only inside these windows
      </label>
      {d.enabled && (
        <>
          <Field label="Time zone" id="windows-zone" hint="An IANA name; daylight saving is followed." error={props.error('tradingWindows.timeZone')}>
            <input id="windows-zone" list="windows-zones" value={d.timeZone} maxLength={64} onInput={(e) => set({ timeZone: e.currentTarget.value })} />
            <datalist id="windows-zones">
              {ZONES.map((z) => (
                <option key={z} value={z} />
              ))}
            </datalist>
          </Field>
          {d.windows.map((w, i) => {
            const error = props.error(`tradingWindows.windows.${i}`);
            return (
              <fieldset key={i} class={`window${error ? ' invalid' : ''}`} aria-describedby={error ? `window-${i}-error` : undefined}>
                <legend>Window {i + 1}</legend>
                <div class="days" role="group" aria-label={`Days of window ${i + 1}`}>
                  {DAYS.map(([day, label]) => (
                    <label key={day} class="check day">
                      <input
                        type="checkbox"
                        checked={w.days.includes(day)}
                        onChange={(e) => setWindow(i, { days: e.currentTarget.checked ? DAYS.map(([x]) => x).filter((x) => x === day || w.days.includes(x)) : w.days.filter((x) => x !== day) })}
                      />{' '}
                      {label}
                    </label>
                  ))}
                </div>
                <div class="field-row">
                  <Field label="Opens" id={`window-${i}-start`}>
                    <input id={`window-${i}-start`} value={w.start} placeholder="08:30" inputMode="numeric" maxLength={5} onInput={(e) => setWindow(i, { start: e.currentTarget.value })} />
                  </Field>
                  <Field label="Closes" id={`window-${i}-end`} hint="24:00 = end of day; before the opening = the next day">
                    <input id={`window-${i}-end`} value={w.end} placeholder="15:00" inputMode="numeric" maxLength={5} onInput={(e) => setWindow(i, { end: e.currentTarget.value })} />
                  </Field>
                </div>
                {error && (
                  <p class="field-error" id={`window-${i}-error`}>
                    {error}
                  </p>
                )}
                {d.windows.length > 1 && (
                  <button type="button" class="btn small secondary" onClick={() => set({ windows: d.windows.filter((_, j) => j !== i) })}>
                    Remove window {i + 1}
                  </button>
                )}
              </fieldset>
            );
          })}
          {listError && <p class="field-error">{listError}</p>}
          <button type="button" class="btn small secondary" onClick={() => set({ windows: [...d.windows, { ...NEW_WINDOW, days: [...NEW_WINDOW.days] }] })}>
            Add a window
          </button>
          <label class="check">
            <input type="checkbox" checked={d.flattenAtEnd} onChange={(e) => set({ flattenAtEnd: e.currentTarget.checked })} /> When a window ends, cancel working orders and close positions
          </label>
        </>
      )}
    </fieldset>
  );
}
