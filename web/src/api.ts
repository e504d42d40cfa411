/**
 * The page's only way to the server: the public API under /api/v1, with the session
 * cookie (sent by the browser) and the CSRF token on every write. Errors come back as the
 * API's problem details, so the page shows exactly what the API said.
 */
import { signal } from '@preact/signals';
import { BASE } from './base';

/** One invalid field of a VALIDATION_FAILED answer. */
export interface FieldError {
  path: string;
  message: string;
}

/** An API answer that was not 2xx (or no answer at all: status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors: FieldError[] = [],
    readonly retryAfter: number | null = null,
  ) {
    super(detail);
  }

  /** The message of one field, for showing it next to that field. */
  field(path: string): string | undefined {
    return this.errors.find((e) => e.path === path)?.message;
  }
}

/** The CSRF token of the current session (set by the session module). */
export const csrfToken = signal<string | null>(null);
/**
 * The id of the user this tab is signed in as (set by the session module), sent on every request:
 * the browser's cookie may be another user's by now (signed in from another tab), and the server
 * refuses it then (401) rather than serve this tab as them.
 */
export const tabUser = signal<string | null>(null);
/** Raised when the server says the session is gone (401): the app shows the sign-in page. */
export const sessionLost = signal(0);
/** Why, when it is not just the end of the session (another user signed in in this browser). */
export const sessionLostReason = signal<string | null>(null);

export interface ListPage<T> {
  data: T[];
  nextCursor: string | null;
}

/** Calls the API; resolves with the JSON body (undefined for 204) or throws ApiError. */
/**
 * When the user last did something in this tab (loading the page counts). A read made after
 * BACKGROUND_AFTER_MS without one (the pages refresh themselves on timers) tells the server it
 * is background traffic, which keeps the session but not its idle clock: a tab left open and
 * untouched still signs out after the idle timeout.
 */
let lastInteraction = Date.now();
const BACKGROUND_AFTER_MS = 30_000;
for (const type of ['pointerdown', 'keydown', 'wheel', 'touchstart'] as const) {
  addEventListener(type, () => (lastInteraction = Date.now()), { capture: true, passive: true });
}

/**
 * Reads the pages make on their timers, made once for all the app's tabs: a GET answered less
 * than SHARED_READ_MS ago, in this tab or another (a BroadcastChannel), is answered from that.
 * Three windows of the Accounts page side by side read 126 times a minute, past the session's
 * 120 reads, and every tab showed 429 instead of its positions (web probe). Any write, in any tab,
 * forgets them (and answers of reads begun before it), so what a cancel or a flatten changed is
 * read afresh. The session's own routes are never shared.
 */
const SHARED_READ_MS = 4_000;
const recentReads = new Map<string, { at: number; json: unknown }>();
/** Reads begun before this (ms) are not shared: a write came after them. */
let forgottenAt = 0;
/** `user`: whose read it is; a tab signed in as another user does not take it. */
type ReadShare = { kind: 'read'; user: string | null; path: string; at: number; json: unknown } | { kind: 'forget'; at: number };
const readChannel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('tradegate-reads') : null;
if (readChannel) {
  readChannel.onmessage = (e: MessageEvent<ReadShare>) => {
    const m = e.data;
    if (m.kind === 'forget') {
      forgottenAt = Math.max(forgottenAt, m.at);
      recentReads.clear();
    } else if (m.at > forgottenAt && m.user !== null && m.user === tabUser.peek()) recentReads.set(m.path, { at: m.at, json: m.json });
  };
}

// Reads of the user this tab was signed in as are not answered to the next one.
tabUser.subscribe(() => recentReads.clear());

/** Forgets the shared reads, in every tab (a write, a sign-out). */
export function forgetReads(): void {
  forgottenAt = Date.now();
  recentReads.clear();
  readChannel?.postMessage({ kind: 'forget', at: forgottenAt } satisfies ReadShare);
}

/** `fresh`: a read that must not be answered from another read of the last seconds (it is known to have changed since). */
export async function api<T>(method: string, path: string, body?: unknown, extraHeaders?: Record<string, string>, opts: { fresh?: boolean } = {}): Promise<T> {
  const shared = method === 'GET' && !path.startsWith('/session');
  if (shared && !opts.fresh) {
    const hit = recentReads.get(path);
    if (hit && Date.now() - hit.at < SHARED_READ_MS) return structuredClone(hit.json) as T;
  } else if (method !== 'GET') forgetReads();
  const startedAt = Date.now();
  try {
    const json = await request<T>(method, path, body, false, extraHeaders);
    if (shared && startedAt > forgottenAt) {
      recentReads.set(path, { at: startedAt, json: structuredClone(json) });
      readChannel?.postMessage({ kind: 'read', user: tabUser.peek(), path, at: startedAt, json } satisfies ReadShare);
    }
    return json;
  } finally {
    if (!shared && method !== 'GET') forgetReads();
  }
}

/** The server's words for a session of another user than the tab's (session-auth.ts). */
const OTHER_USER = /another user/;

/**
 * Whether this browser holds a session of this tab's user now, taking its CSRF token: another
 * tab may have replaced it (a password change ends every session and hands the browser a new
 * one), and this tab's writes then carried the old token (403 CSRF_REJECTED) or its reads the old
 * cookie (401) until reloaded (web probe: a flatten refused in a tab that looked signed in). A
 * session of another user is not this tab's (the server refuses it: X-Tradegate-User), and a
 * request is never sent again under it (web probe: a key asked for in one user's tab was created
 * for the user signed in since in another tab).
 */
async function sessionNow(): Promise<'same' | 'other' | 'none'> {
  try {
    const s = await request<{ csrfToken?: string; user?: { id: string } }>('GET', '/session');
    if (s?.user?.id !== tabUser.peek()) return 'other';
    if (s?.csrfToken) csrfToken.value = s.csrfToken;
    return 'same';
  } catch (err) {
    return err instanceof ApiError && err.status === 401 && OTHER_USER.test(err.detail) ? 'other' : 'none';
  }
}

/**
 * How long a request refused as stale waits before asking once more whether the browser holds a
 * session: a password change in another tab ends the sessions before that tab has its answer (and
 * the browser the new cookie), and a request of this tab in between was refused with the old one.
 */
const STALE_RECHECK_MS = 2_000;

/** This tab's session is over: the app shows the sign-in page, saying why when it knows. */
export function lose(detail: string): void {
  sessionLostReason.value = OTHER_USER.test(detail) ? 'This browser was signed in as another user (in another tab or window). Sign in again.' : null;
  sessionLost.value++;
}

async function request<T>(method: string, path: string, body?: unknown, again = false, extraHeaders?: Record<string, string>): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...extraHeaders };
  if (method === 'GET' && Date.now() - lastInteraction > BACKGROUND_AFTER_MS) headers['X-Tradegate-Background'] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken.value) headers['X-CSRF-Token'] = csrfToken.value;
  if (tabUser.value !== null) headers['X-Tradegate-User'] = tabUser.value;
  let res: Response;
  try {
    res = await fetch(`${BASE}/api/v1${path}`, {
      method,
      headers,
      // 'include' (same-origin only here) matches the credentials mode of the preload of
      // /session in index.html, so the first call reuses that response instead of waiting.
      credentials: 'include',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError(0, 'NETWORK', 'Cannot reach tradegate. Check that the service is running and your network is up.');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (res.ok) return json as T;
  const p = (json ?? {}) as { code?: string; detail?: string; title?: string; errors?: FieldError[] };
  const retry = res.headers.get('Retry-After');
  const err = new ApiError(res.status, p.code ?? `HTTP_${res.status}`, p.detail ?? p.title ?? `HTTP ${res.status}`, p.errors ?? [], retry ? Number(retry) : null);
  // Refused before it ran (no session on this cookie, or an old CSRF token): once more with the session the browser holds now.
  const stale = res.status === 401 || (res.status === 403 && err.code === 'CSRF_REJECTED');
  if (stale && !again && path !== '/session') {
    let now = await sessionNow();
    if (now === 'none') {
      await new Promise((r) => setTimeout(r, STALE_RECHECK_MS));
      now = await sessionNow();
    }
    if (now === 'same') return request<T>(method, path, body, true, extraHeaders);
    // Refused, and the browser holds no session of this tab's user: signed out here too.
    if (tabUser.peek() !== null) lose(err.detail);
  } else if (res.status === 401 && path !== '/session') lose(err.detail);
  throw err;
}

/** Every item of a list endpoint (follows nextCursor). */
export async function apiList<T>(path: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page: ListPage<T> = await api<ListPage<T>>('GET', `${path}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...page.data);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}
