/** Path-based routing for the page paths the server serves index.html at. */
import { signal } from '@preact/signals';
import { addressOf, appPath } from './base';

export type PagePath = '/sign-in' | '/keys' | '/signals' | '/connections' | '/accounts' | '/strategies' | '/settings';

/** Where a signed-in user lands. */
export const HOME = '/accounts';

/** The current app path (without query or the base path). */
export const path = signal(appPath(location.pathname));

/** Goes to `to`, adding a history entry. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === appPath(location.pathname)) return;
  if (opts.replace) history.replaceState(null, '', addressOf(to));
  else history.pushState(null, '', addressOf(to));
  path.value = to;
  window.scrollTo(0, 0);
}

addEventListener('popstate', () => {
  path.value = appPath(location.pathname);
});
