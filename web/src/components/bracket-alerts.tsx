/**
 * Bracket alerts from the health stream, on every page until dismissed: a position left without
 * its take-profit or stop-loss (cancelled at the broker, never placed, an entry filling on after
 * its legs ended), and legs the service fitted to a position another order changed. Never silent:
 * a trader must see that a position is unprotected wherever they are in the app.
 */
import { bracketAlerts, dismissBracketAlerts, type BracketAlert } from '../health';

/** Alerts that say a position is left without protection (the rest report legs fitted to it). */
function unprotects(a: BracketAlert): boolean {
  // What the position lacks, not what went wrong on the way: an exit "not placed" whose legs were
  // given back, or whose position went flat, protects nothing less (trader probe: a red alarm on a flat account).
  return /no protective order|no take-profit or stop-loss|unprotected|without protective orders|protect or close it|close or protect it|protect the rest/i.test(a.detail);
}

export function BracketAlerts() {
  const list = bracketAlerts.value;
  if (list.length === 0) return null;
  const danger = list.some(unprotects);
  return (
    <section class={`callout ${danger ? 'danger' : 'warn'} bracket-alerts`} aria-labelledby="bracket-alerts-title">
      <div class="bracket-alerts-head">
        <strong id="bracket-alerts-title">{danger ? 'A position needs protection' : 'Protective orders changed'}</strong>
        <button type="button" class="btn small secondary" onClick={() => dismissBracketAlerts()}>
          {list.length > 1 ? `Dismiss all ${list.length}` : 'Dismiss'}
        </button>
      </div>
      {/* New alerts are announced; the list itself stays put. */}
      <ul aria-live="assertive" aria-relevant="additions">
        {list.map((a) => (
          <li key={`${a.ts}-${a.orderId}-${a.detail}`}>
            {/* Not format.ts: its formatters, built on import, would load with the first page (sign-in) for nothing. */}
            <time dateTime={new Date(a.ts).toISOString()} title={new Date(a.ts).toString()}>
              {new Date(a.ts).toLocaleTimeString()}
            </time>{' '}
            account {a.accountId}: {a.detail}
            {/* The server's words may already say it (web probe: "…protect or close it — protect or close it."). */}
            {unprotects(a) && !/protect or close it\.?$/.test(a.detail) && ' — protect or close it.'}
          </li>
        ))}
      </ul>
    </section>
  );
}
