/**
 * Where the app is served: '' at the host's root, or the path a reverse proxy serves tradegate
 * under (TRADEGATE_BASE_URL `https://host/tg/` → `/tg`), which the server names in index.html
 * (`<meta name="tradegate-base">`, static-files.ts `rebasedIndex`). The app's own paths stay
 * `/accounts`, `/signals`, …; the browser's address, API calls and the health stream carry the
 * prefix.
 */
export const BASE = readBase();

function readBase(): string {
  const named = document.querySelector('meta[name="tradegate-base"]')?.getAttribute('content') ?? '';
  // A path of this origin only: never `//host` or a URL.
  return /^\/[^/\\]/.test(named) ? named.replace(/\/+$/, '') : '';
}

/** The app's path for the browser's: `/tg/accounts` → `/accounts`. */
export function appPath(pathname: string): string {
  if (BASE === '') return pathname;
  if (pathname === BASE) return '/';
  return pathname.startsWith(`${BASE}/`) ? pathname.slice(BASE.length) : pathname;
}

/** The browser's address for an app path (query kept): `/accounts?account=1` → `/tg/accounts?account=1`. */
export function addressOf(to: string): string {
  return `${BASE}${to}`;
}
