/**
 * DNS rebinding: a page on attacker.example whose name the attacker points at 127.0.0.1 runs in
 * the victim's browser as a same-origin client of a service bound to loopback, so the login-CSRF
 * and Origin checks (which compare Origin with the request's own Host) pass. A service bound to
 * loopback therefore answers only requests that name it: `localhost`, a loopback address, or the
 * public URL's host (TRADEGATE_BASE_URL, for a reverse proxy that passes the client's Host on).
 * A service bound to other addresses cannot know every name it is reached under, so it checks
 * nothing (put a proxy in front).
 */

/**
 * The host part of a Host header: lower case, without the port and IPv6 brackets. Only digits
 * count as a port: anything else after the colon stays part of the name, which then names no
 * loopback host (fuzz probe: `127.0.0.1:80@evil.example` passed as 127.0.0.1).
 */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end > 0 && PORT_PART.test(h.slice(end + 1)) ? h.slice(1, end) : h;
  }
  const colon = h.lastIndexOf(':');
  return colon >= 0 && h.indexOf(':') === colon && PORT_PART.test(h.slice(colon)) ? h.slice(0, colon) : h;
}

/** What may follow a host name in a Host header: nothing, or a colon and digits. */
const PORT_PART = /^(:\d{0,5})?$/;

function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost') || name === '::1' || /^127(\.\d{1,3}){3}$/.test(name);
}

/**
 * The check for a server bound to `listenHost` with `baseUrl` as its public URL: a function that
 * says whether a Host header names another server, or undefined when nothing is checked.
 */
export function foreignHostCheck(listenHost: string, baseUrl: string | undefined): ((host: string | undefined) => boolean) | undefined {
  if (!isLoopbackName(hostName(listenHost))) return undefined;
  const publicName = baseUrl ? new URL(baseUrl).hostname.toLowerCase().replace(/^\[|\]$/g, '') : undefined;
  // Clients send the same Host on every request: the last answer is kept (one string compare).
  let last: string | undefined;
  let lastForeign = false;
  return (host) => {
    if (host === undefined) return false;
    if (host === last) return lastForeign;
    const name = hostName(host);
    last = host;
    lastForeign = !isLoopbackName(name) && name !== publicName;
    return lastForeign;
  };
}
