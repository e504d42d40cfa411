/**
 * The signed-in pages, each its own chunk: the sign-in screen (what a first visit shows)
 * loads without them, and a page's code arrives when it is first opened.
 */
import type { FunctionComponent } from 'preact';

type Loader = () => Promise<FunctionComponent>;

export const PAGES: Readonly<Record<string, Loader>> = {
  '/accounts': () => import('./accounts').then((m) => m.AccountsPage),
  '/signals': () => import('./signals').then((m) => m.SignalsPage),
  '/strategies': () => import('./strategies').then((m) => m.StrategiesPage),
  '/connections': () => import('./connections').then((m) => m.ConnectionsPage),
  '/keys': () => import('./api-keys').then((m) => m.ApiKeysPage),
  '/settings': () => import('./settings').then((m) => m.SettingsPage),
};

const loaded = new Map<string, Promise<FunctionComponent>>();

/** The page component for `path` (loaded once, shared). */
export function loadPage(path: string): Promise<FunctionComponent> | undefined {
  const loader = PAGES[path];
  if (!loader) return undefined;
  let p = loaded.get(path);
  if (!p) {
    p = loader();
    loaded.set(path, p);
    // A failed chunk load (server restarted with a new build) may be retried on the next visit.
    p.catch(() => loaded.delete(path));
  }
  return p;
}
