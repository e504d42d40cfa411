/** Path-based routing for the page paths the server serves index.html at. */
import { signal } from '@preact/signals';

export type PagePath = '/sign-in' | '/keys' | '/signals' | '/connections' | '/accounts' | '/strategies' | '/settings';

/** Where a signed-in user lands. */
export const HOME = '/accounts';

/** The current path (without query). */
export const path = signal(location.pathname);

/** Goes to `to`, adding a history entry. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === location.pathname) return;
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  path.value = to;
  window.scrollTo(0, 0);
}

addEventListener('popstate', () => {
  path.value = location.pathname;
});
