/**
 * Web-app sessions on the HTTP side: the session cookie, the CSRF rule, and the sign-in
 * throttle. The engine calls `authenticate` for requests that carry no X-API-Key.
 *
 * CSRF: SameSite=Strict already keeps the cookie off cross-site requests in current
 * browsers; on top of that every write with a session must carry `X-CSRF-Token`, an HMAC of
 * the session id (derived, never stored; useless without the HttpOnly cookie it came
 * from), and must not come from another origin (`Origin`, `Sec-Fetch-Site`).
 */
import { createHmac } from 'node:crypto';
import type { Config } from '../config.js';
import { AppError } from '../domain/problems.js';
import type { SessionPolicy, SessionRecord } from '../store/index.js';
import { timingSafeEqual } from '../store/crypto.js';
import type { SessionAuthenticator } from './auth.js';
import { SlidingLogLimiter } from './rate-limit.js';
import { addressKey } from './client-address.js';

/** The cookie that carries the session id. */
export const SESSION_COOKIE = 'tg_session';
/** The device cookie of a browser that signed its user in (store/device-tokens.ts). */
export const DEVICE_COOKIE = 'tg_device';
/** How long a device cookie lets its browser past a name locked by failures from elsewhere. */
export const DEVICE_COOKIE_MS = 30 * 24 * 3_600_000;
/** The header every session write carries. */
export const CSRF_HEADER = 'x-csrf-token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The slice of the store sessions use. */
export interface SessionAuthStore {
  sessions: { lookup(secret: string, opts?: { idle?: boolean }): SessionRecord | undefined };
}

/**
 * The value of one cookie in a Cookie header; undefined when absent, and when it is sent twice
 * with different values: a site of the same parent domain can plant a second `tg_session` (a
 * path under ours comes first), and the first one won, so the victim's page ran as the planter's
 * session and added the victim's broker login to it (attack probe, "cookie tossing").
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (found !== undefined && found !== value) return undefined;
    found = value;
  }
  return found;
}

/**
 * A cookie's name as a browser reaching us over https keeps it: `__Host-` makes the browser refuse
 * it from any other host (a sibling subdomain cannot set or shadow it) and without Secure and Path=/.
 */
export function cookieName(name: string, secure: boolean): string {
  return secure ? `__Host-${name}` : name;
}

/** The CSRF token of a session: HMAC-SHA256 keyed by the session id. */
export function csrfTokenFor(secret: string): string {
  return createHmac('sha256', secret).update('tradegate csrf v1').digest('base64url');
}

/**
 * Refuses a request another site made the browser send: a cross-site `Sec-Fetch-Site`, or an
 * `Origin` that is neither this host nor the configured base URL. Requests without either
 * header (curl, old browsers) pass here; the CSRF token still guards them.
 */
export function assertSameOrigin(headers: Readonly<Record<string, string>>, baseUrl: string | undefined): void {
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw csrfRejected('Cross-site request refused');
  const origin = headers['origin'];
  if (origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw csrfRejected('Cross-site request refused');
  }
  const allowed = [headers['host'], baseUrl ? new URL(baseUrl).host : undefined];
  if (!allowed.includes(host)) throw csrfRejected('Cross-site request refused');
}

function csrfRejected(detail: string): AppError {
  return new AppError('CSRF_REJECTED', detail);
}

/** Everything the session routes and the engine share about sessions. */
export interface WebSessions {
  policy: SessionPolicy;
  throttle: SignInThrottle;
  baseUrl: string | undefined;
  /** The engine hook: the session's context, or undefined (→ 401); throws CSRF_REJECTED. */
  authenticate: SessionAuthenticator;
  /** The session id from the request's cookie. */
  secretOf(headers: Readonly<Record<string, string>>): string | undefined;
  /** `Set-Cookie` for a new session. */
  cookie(secret: string, headers: Readonly<Record<string, string>>): string;
  /** `Set-Cookie` that deletes the session cookie. */
  clearCookie(headers: Readonly<Record<string, string>>): string;
  /** The device token from the request's cookie. */
  deviceOf(headers: Readonly<Record<string, string>>): string | undefined;
  /** `Set-Cookie` for a device token. */
  deviceCookie(token: string, headers: Readonly<Record<string, string>>): string;
}

/** Builds the session machinery from the config. */
export function createWebSessions(config: Pick<Config, 'baseUrl' | 'sessionIdleMinutes' | 'sessionMaxHours'>, store: SessionAuthStore, clock: () => number = Date.now): WebSessions {
  const policy: SessionPolicy = { idleMs: config.sessionIdleMinutes * 60_000, maxAgeMs: config.sessionMaxHours * 3_600_000 };
  // Secure whenever the browser reaches us over https: configured, or said by the proxy in front.
  const secure = (headers: Readonly<Record<string, string>>) => config.baseUrl?.startsWith('https:') === true || headers['x-forwarded-proto'] === 'https';
  const attributes = (headers: Readonly<Record<string, string>>) => `Path=/; HttpOnly; SameSite=Strict${secure(headers) ? '; Secure' : ''}`;
  const secretOf = (headers: Readonly<Record<string, string>>) => readCookie(headers['cookie'], cookieName(SESSION_COOKIE, secure(headers)));

  return {
    policy,
    throttle: new SignInThrottle(clock),
    baseUrl: config.baseUrl,
    secretOf,
    cookie: (secret, headers) => `${cookieName(SESSION_COOKIE, secure(headers))}=${secret}; ${attributes(headers)}; Max-Age=${Math.floor(policy.maxAgeMs / 1000)}`,
    clearCookie: (headers) => `${cookieName(SESSION_COOKIE, secure(headers))}=; ${attributes(headers)}; Max-Age=0`,
    deviceOf: (headers) => readCookie(headers['cookie'], cookieName(DEVICE_COOKIE, secure(headers))),
    deviceCookie: (token, headers) => `${cookieName(DEVICE_COOKIE, secure(headers))}=${token}; ${attributes(headers)}; Max-Age=${Math.floor(DEVICE_COOKIE_MS / 1000)}`,
    authenticate({ method, headers }) {
      const secret = secretOf(headers);
      if (!secret) return undefined;
      // A page refreshing itself on a timer says so (GET only): it keeps the session, not its idle clock.
      const idle = method === 'GET' && headers[BACKGROUND_HEADER] === '1';
      const session = store.sessions.lookup(secret, { idle });
      if (!session) return undefined;
      // A tab signed in as one user, in a browser now signed in as another (from another tab): its
      // requests carry the other user's cookie, and were served as that user under its own user's
      // name (web probe: a key created from a stale tab went to the other user).
      const expected = headers[SESSION_USER_HEADER];
      if (expected !== undefined && expected !== session.userId) {
        throw new AppError('UNAUTHENTICATED', 'This browser is signed in as another user now (from another tab or window): this page is signed out');
      }
      if (!SAFE_METHODS.has(method)) {
        assertSameOrigin(headers, config.baseUrl);
        const sent = headers[CSRF_HEADER];
        if (!sent || !timingSafeEqual(sent, csrfTokenFor(secret))) throw csrfRejected(`Send the session's CSRF token in X-CSRF-Token`);
      }
      return { userId: session.userId, principalId: `session:${session.id}`, scopes: ['read', 'trade'], kind: 'session' };
    },
  };
}

/**
 * Sent by the web app on every request once signed in: the id of the user the tab is signed in
 * as. A session of another user is refused (401), so a stale tab never acts or reads as them.
 */
export const SESSION_USER_HEADER = 'x-tradegate-user';

/**
 * Sent by the web app on the requests its pages make on a timer (refreshing positions, alerts):
 * they do not count as use, so an open tab nobody touches still signs out after SESSION_IDLE_MINUTES.
 */
export const BACKGROUND_HEADER = 'x-tradegate-background';

/** Failed sign-ins allowed per client address, and per user name, in SIGN_IN_WINDOW_MS. */
export const SIGN_IN_FAILURES_PER_ADDRESS = 10;
export const SIGN_IN_FAILURES_PER_NAME = 5;
/** Failed sign-ins with one device cookie in SIGN_IN_WINDOW_MS, after which it no longer passes the name's lock. */
export const SIGN_IN_FAILURES_PER_DEVICE = 5;
/** Sign-ins of any outcome per client address in SIGN_IN_WINDOW_MS: a correct password is a password check too. */
export const SIGN_IN_ATTEMPTS_PER_ADDRESS = 30;
export const SIGN_IN_WINDOW_MS = 5 * 60_000;
/**
 * Password checks (scrypt, 16 MiB, ~0.2 s each) running at once. scrypt runs on libuv's thread
 * pool (4 threads, shared by the whole process: file and DNS work of the actors too), so
 * sign-ins hold at most half of it; up to SIGN_IN_QUEUE more wait their turn, beyond that 429.
 */
export const SIGN_IN_CONCURRENCY = 2;
export const SIGN_IN_QUEUE = 16;
/** Sign-ins of one client address (or one trusted device cookie) running or waiting at once: one client cannot fill the queue. */
export const SIGN_IN_PENDING_PER_ADDRESS = 2;
/**
 * How long an address that signed a name in keeps signing it in while the name is locked by
 * failures from elsewhere (in memory: a restart forgets it). Its own failures still count.
 */
export const SIGN_IN_KNOWN_ADDRESS_MS = 30 * 24 * 3_600_000;
/** Known addresses kept per name (the most recent). */
const KNOWN_ADDRESSES_PER_NAME = 8;

/**
 * Throttles password guessing: failures are counted per address and per user name in a
 * sliding window, and every sign-in per address; once one is exhausted, sign-ins for it are
 * refused (429 with Retry-After) before any password is checked. Addresses are limited as
 * addressKey gives them (an IPv6 client by its /64). Each address has at most
 * SIGN_IN_PENDING_PER_ADDRESS checks running or queued, so one client cannot keep the queue
 * full for everyone. A name locked by failures stops sign-ins for it from anywhere except the
 * addresses it was recently signed in from and browsers holding its device cookie (sealed, so it
 * outlives a restart and works from any address): guessing from elsewhere cannot lock its owner out.
 * A device cookie passes the address's limits too (a stranger behind the same NAT cannot lock its
 * owner out either); it is trusted no more after SIGN_IN_FAILURES_PER_DEVICE failures of its own.
 */
export class SignInThrottle {
  private readonly byAddress = new SlidingLogLimiter(SIGN_IN_FAILURES_PER_ADDRESS, SIGN_IN_WINDOW_MS);
  private readonly attemptsByAddress = new SlidingLogLimiter(SIGN_IN_ATTEMPTS_PER_ADDRESS, SIGN_IN_WINDOW_MS);
  private readonly byName = new SlidingLogLimiter(SIGN_IN_FAILURES_PER_NAME, SIGN_IN_WINDOW_MS);
  private readonly byDevice = new SlidingLogLimiter(SIGN_IN_FAILURES_PER_DEVICE, SIGN_IN_WINDOW_MS);
  /** name → address → when it last signed that name in. */
  private readonly known = new Map<string, Map<string, number>>();
  private readonly pending = new Map<string, number>();
  private checking = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly clock: () => number = Date.now) {}

  /**
   * Runs one password check unless the address or the name is locked out (RATE_LIMITED) or
   * too many checks are running; counts a failure when `check` resolves false.
   */
  async attempt<T>(clientAddress: string, name: string, check: () => Promise<T | null>, device?: string): Promise<T | null> {
    const nameKey = name.toLowerCase();
    const address = addressKey(clientAddress);
    // A device cookie with SIGN_IN_FAILURES_PER_DEVICE failures is trusted no more: its holder is
    // guessing (attack probe: a kept cookie let every guess past the name's lock, from address after address).
    const trustedDevice = device !== undefined && this.byDevice.isExhausted(device, this.clock()) === undefined;
    this.refuseIfLocked(address, nameKey, trustedDevice);
    // The address's limits hold back a trusted device no more than the name's do: behind a shared
    // NAT, a stranger's guesses locked its owner out (attack probe). The device's own failures count.
    const many = trustedDevice ? undefined : this.attemptsByAddress.isExhausted(address, this.clock());
    if (many) throw new AppError('RATE_LIMITED', 'Too many sign-ins from this address; wait before trying again', {}, many.retryAfterSeconds);
    // At most two at once per address, or per device for a trusted one: a burst of guesses under
    // one cookie would all be checked before the first failure ended its trust (re-probe: 299 of 300).
    const pendingKey = trustedDevice ? `device ${device!}` : address;
    const mine = this.pending.get(pendingKey) ?? 0;
    if (mine >= SIGN_IN_PENDING_PER_ADDRESS) throw new AppError('RATE_LIMITED', trustedDevice ? 'Too many sign-ins at once from this browser; retry in a moment' : 'Too many sign-ins at once from this address; retry in a moment', {}, 1);
    // An address the name was signed in from goes ahead of the queue, full or not: a flood from
    // many other addresses cannot keep a user out from where they usually sign in.
    const known = trustedDevice || this.knows(nameKey, address, this.clock());
    if (!known && this.checking >= SIGN_IN_CONCURRENCY && this.waiting.length >= SIGN_IN_QUEUE) throw new AppError('RATE_LIMITED', 'Too many sign-ins at once; retry in a moment', {}, 1);
    this.attemptsByAddress.hit(address, this.clock());
    this.pending.set(pendingKey, mine + 1);
    try {
      if (this.checking >= SIGN_IN_CONCURRENCY) {
        // The slot is handed over by the finishing check (checking stays counted), so no one jumps the queue.
        await new Promise<void>((resolve) => (known ? this.waiting.unshift(resolve) : this.waiting.push(resolve)));
      } else {
        this.checking++;
      }
      try {
        // Failures counted while this attempt waited may have locked it out, or ended its device's trust, meanwhile.
        const stillTrusted = trustedDevice && this.byDevice.isExhausted(device!, this.clock()) === undefined;
        this.refuseIfLocked(address, nameKey, stillTrusted);
        const result = await check();
        const at = this.clock();
        if (result === null) {
          this.byAddress.hit(address, at);
          // A trusted device's failures count against it, not the name (OWASP's device cookies).
          if (stillTrusted) this.byDevice.hit(device!, at);
          else this.byName.hit(nameKey, at);
        } else {
          this.remember(nameKey, address, at);
        }
        return result;
      } finally {
        const next = this.waiting.shift();
        if (next) next();
        else this.checking--;
      }
    } finally {
      const left = (this.pending.get(pendingKey) ?? 1) - 1;
      if (left === 0) this.pending.delete(pendingKey);
      else this.pending.set(pendingKey, left);
    }
  }

  private refuseIfLocked(address: string, nameKey: string, trustedDevice: boolean): void {
    const now = this.clock();
    if (trustedDevice) return;
    const failed = this.byAddress.isExhausted(address, now) ?? (this.knows(nameKey, address, now) ? undefined : this.byName.isExhausted(nameKey, now));
    if (failed) throw new AppError('RATE_LIMITED', 'Too many failed sign-ins; wait before trying again', {}, failed.retryAfterSeconds);
  }

  private knows(nameKey: string, address: string, now: number): boolean {
    const at = this.known.get(nameKey)?.get(address);
    return at !== undefined && now - at < SIGN_IN_KNOWN_ADDRESS_MS;
  }

  private remember(nameKey: string, address: string, now: number): void {
    let addresses = this.known.get(nameKey);
    if (!addresses) this.known.set(nameKey, (addresses = new Map()));
    addresses.delete(address);
    addresses.set(address, now);
    if (addresses.size > KNOWN_ADDRESSES_PER_NAME) addresses.delete(addresses.keys().next().value!);
  }

  /** Drops idle state (called periodically). */
  sweep(now: number): void {
    this.byAddress.sweep(now);
    this.attemptsByAddress.sweep(now);
    this.byName.sweep(now);
    this.byDevice.sweep(now);
    for (const [name, addresses] of this.known) {
      for (const [address, at] of addresses) if (now - at >= SIGN_IN_KNOWN_ADDRESS_MS) addresses.delete(address);
      if (addresses.size === 0) this.known.delete(name);
    }
  }
}
