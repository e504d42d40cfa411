/**
 * Live connection health from the server's SSE stream, shared by every page and by every tab
 * of the app: one tab (the holder of a Web Lock) keeps the stream open and relays what it
 * hears over a BroadcastChannel; when it closes, the lock passes to another tab, which opens
 * the stream in its turn. A browser holds at most six HTTP/1.1 connections to one host, and
 * the server five health streams to one session: a stream per tab left a sixth tab without
 * live status, and tabs' page loads queued behind the open streams. Without those APIs each
 * tab keeps its own stream.
 *
 * EventSource sends the session cookie on its own. It reconnects by itself after a network
 * error, resuming with Last-Event-ID; after a refused open (401, 429) it stops for good, so we
 * reopen it ourselves a little later.
 */
import { signal } from '@preact/signals';
import { api, ApiError, lose, sessionLost, tabUser } from './api';
import { BASE } from './base';
import type { ConnectionStatus, HealthMessage } from './types';

export interface StatusChange {
  status: ConnectionStatus;
  ts: number;
  reason: string | null;
  detail: string | null;
}

export interface ConnectionHealth extends StatusChange {
  /** Changes seen since the page opened, newest first (at most HISTORY). */
  history: StatusChange[];
}

export interface BracketAlert {
  connectionId: string;
  accountId: string;
  orderId: string;
  ts: number;
  detail: string;
}

type StreamState = 'connecting' | 'open' | 'down';

const HISTORY = 8;
const REOPEN_MS = 5_000;
/** How long after a stream ended on purpose (revoked) a refused session is asked about again. */
const REVOKED_RECHECK_MS = 2_000;
const ALERTS_KEPT = 20;

/** connectionId → latest health. */
export const health = signal<ReadonlyMap<string, ConnectionHealth>>(new Map());
/** Whether the stream is open. */
export const streamState = signal<StreamState>('connecting');

/**
 * The stream was open and is not now (tradegate restarting or unreachable, the network gone): every
 * status shown is the last known, not the current one. The browser retries on its own meanwhile,
 * so the stream stays 'connecting' rather than 'down' for as long as tradegate is away.
 */
export const streamLost = signal(false);
/** Bracket alerts since the page opened, newest first, until dismissed (never leave these silent). */
export const bracketAlerts = signal<readonly BracketAlert[]>([]);

/** Alerts shown (and dismissed) already: a stream opened again repeats the last 15 minutes' alerts. */
const seenAlerts = new Set<string>();
/** The last alerts heard, dismissed or not: what a tab that joins later is told. */
let recentAlerts: HealthMessage[] = [];

/** The trader has read them (in every tab). */
export function dismissBracketAlerts(): void {
  bracketAlerts.value = [];
  recentAlerts = [];
  channel?.postMessage({ kind: 'dismissed' } satisfies Relay);
}

/** What the tab holding the stream tells the others. */
type Relay =
  | { kind: 'hello' }
  | { kind: 'message'; msg: HealthMessage }
  | { kind: 'state'; state: StreamState; lost: boolean }
  | { kind: 'sync'; health: [string, ConnectionHealth][]; alerts: HealthMessage[]; state: StreamState; lost: boolean }
  | { kind: 'signed-out' }
  /** Any tab: the trader dismissed the bracket alerts there. */
  | { kind: 'dismissed' };

const CHANNEL = 'tradegate-health';
const LOCK = 'tradegate-health-stream';

let source: EventSource | null = null;
let reopen: ReturnType<typeof setTimeout> | undefined;
/** Opens refused in a row (reset once one opens): the wait before the next grows with it. */
let refusals = 0;
const REOPEN_MAX_MS = 60_000;

/** The other tabs, while sharing. */
let channel: BroadcastChannel | null = null;
/** Aborted to leave: withdraws a waiting lock request, or lets a held lock go. */
let leave: AbortController | null = null;
/** This tab holds the lock, so the stream. */
let holder = false;
/** Between startHealthStream and stopHealthStream (signed in). */
let running = false;

function canShare(): boolean {
  return typeof BroadcastChannel === 'function' && typeof navigator !== 'undefined' && !!navigator.locks;
}

function relay(r: Relay): void {
  if (holder) channel?.postMessage(r);
}

function apply(msg: HealthMessage): void {
  if (msg.type === 'bracket-alert' && msg.connectionId && msg.accountId && msg.orderId) {
    const key = `${msg.connectionId} ${msg.orderId} ${msg.ts} ${msg.detail ?? ''}`;
    if (seenAlerts.has(key)) return;
    seenAlerts.add(key);
    recentAlerts = [msg, ...recentAlerts].slice(0, ALERTS_KEPT);
    bracketAlerts.value = [{ connectionId: msg.connectionId, accountId: msg.accountId, orderId: msg.orderId, ts: msg.ts, detail: msg.detail ?? '' }, ...bracketAlerts.value].slice(0, ALERTS_KEPT);
    return;
  }
  if ((msg.type !== 'snapshot' && msg.type !== 'status') || !msg.connectionId || !msg.status) return;
  const next = new Map(health.value);
  const prev = next.get(msg.connectionId);
  const change: StatusChange = { status: msg.status, ts: msg.ts, reason: msg.reason ?? null, detail: msg.detail ?? null };
  // A snapshot after a reconnect repeats the current state: it is not a change.
  const same = prev && prev.status === change.status && prev.ts === change.ts;
  const history = same ? prev.history : [change, ...(prev?.history ?? [])].slice(0, HISTORY);
  next.set(msg.connectionId, { ...change, history });
  health.value = next;
}

function setStream(state: StreamState, lost = streamLost.peek()): void {
  streamState.value = state;
  streamLost.value = lost;
  relay({ kind: 'state', state, lost });
}

/** Opens the stream (idempotent): this tab's own, or the one all tabs share. */
export function startHealthStream(): void {
  running = true;
  if (!canShare()) {
    openSource();
    return;
  }
  if (channel) return;
  streamState.value = 'connecting';
  // One stream per user of the browser: a tab signed in as another user neither hears nor holds it.
  const user = tabUser.peek() ?? '';
  channel = new BroadcastChannel(`${CHANNEL}:${user}`);
  channel.onmessage = (e: MessageEvent<Relay>) => heard(e.data);
  const quit = new AbortController();
  leave = quit;
  // The tab holding the stream answers with what it knows; until then, 'connecting'.
  channel.postMessage({ kind: 'hello' } satisfies Relay);
  navigator.locks
    .request(`${LOCK}:${user}`, { signal: quit.signal }, () => {
      holder = true;
      openSource();
      return new Promise<void>((resolve) => quit.signal.addEventListener('abort', () => resolve(), { once: true }));
    })
    .catch(() => {
      // Left (signed out) while still waiting for the lock.
    });
}

/** A message from another tab. */
function heard(r: Relay): void {
  if (r.kind === 'dismissed') {
    // Not told again to a tab that opens later (the holder's sync).
    bracketAlerts.value = [];
    recentAlerts = [];
    return;
  }
  if (holder) {
    if (r.kind === 'hello') {
      relay({ kind: 'sync', health: [...health.peek()], alerts: recentAlerts, state: streamState.peek(), lost: streamLost.peek() });
    }
    return;
  }
  switch (r.kind) {
    case 'message':
      apply(r.msg);
      break;
    case 'state':
      streamState.value = r.state;
      streamLost.value = r.lost;
      break;
    case 'sync':
      health.value = new Map(r.health);
      for (const msg of [...r.alerts].reverse()) apply(msg);
      streamState.value = r.state;
      streamLost.value = r.lost;
      break;
    case 'signed-out':
      sessionLost.value++;
      break;
  }
}

function openSource(): void {
  if (source) return;
  clearTimeout(reopen);
  setStream('connecting');
  // Named for this tab's user: the browser reopens a dropped stream by itself, with the cookie it
  // holds then, which may be another user's (signed in from another tab); the server refuses that.
  const user = tabUser.peek();
  const es = new EventSource(`${BASE}/api/v1/connection-health/stream${user ? `?user=${encodeURIComponent(user)}` : ''}`);
  source = es;
  /** The server ended this stream on purpose (its credential was revoked: a sign-out, a password change): not "unreachable". */
  let ended = false;
  es.onopen = () => {
    refusals = 0;
    ended = false;
    setStream('open', false);
  };
  es.onmessage = (e: MessageEvent<string>) => {
    let msg: HealthMessage;
    try {
      msg = JSON.parse(e.data) as HealthMessage;
    } catch {
      // A malformed message is skipped; the next snapshot or status corrects the picture.
      return;
    }
    if ((msg.type as string) === 'revoked') {
      // Not reopened by the browser on its own: its cookie may be another user's by now (signed
      // in from another tab), and a stream opened with it would show theirs here.
      ended = true;
      closeSource();
      setStream('connecting', false);
      void reopenUnlessSignedOut(true);
      return;
    }
    apply(msg);
    if (msg.type !== 'heartbeat') relay({ kind: 'message', msg });
  };
  es.onerror = () => {
    const lost = !ended && (streamLost.peek() || streamState.peek() === 'open');
    if (es.readyState === EventSource.CLOSED) {
      closeSource();
      setStream('down', lost);
      void reopenUnlessSignedOut();
    } else {
      setStream('connecting', lost);
    }
  };
}

function closeSource(): void {
  clearTimeout(reopen);
  source?.close();
  source = null;
}

/**
 * A refused open does not say why. Reopening blindly after the session ended would count a
 * failed authentication against this address every few seconds until the server refuses the
 * address altogether: ask once whether the session still holds, and when it does not, stop here
 * and say so, in every tab (sessionLost: the app shows the sign-in page).
 */
async function reopenUnlessSignedOut(revoked = false, recheck = revoked): Promise<void> {
  try {
    await api('GET', '/session');
  } catch (err) {
    // Ended by a password change in another tab, the server ends the stream before that tab has
    // its answer (and the browser the new cookie): asked too soon, the old cookie is refused.
    if (recheck && err instanceof ApiError && err.status === 401) {
      await new Promise((r) => setTimeout(r, REVOKED_RECHECK_MS));
      return reopenUnlessSignedOut(revoked, false);
    }
    if (err instanceof ApiError && err.status === 401) {
      relay({ kind: 'signed-out' });
      lose(err.detail);
      return;
    }
  }
  // Signed out meanwhile, opened again, or the stream is another tab's to open.
  if (!running || source || (channel && !holder)) return;
  clearTimeout(reopen);
  // Ended on purpose and still signed in (a password change handed this browser a new session): at once.
  if (revoked) {
    openSource();
    return;
  }
  // Refused again and again (past the streams a session may hold open): each try costs the
  // session two requests of its rate window, so wait longer each time, up to a minute.
  reopen = setTimeout(openSource, Math.min(REOPEN_MS * 2 ** refusals, REOPEN_MAX_MS));
  refusals++;
}

/** Closes the stream, or stops listening to the tab that holds it (sign-out). */
export function stopHealthStream(): void {
  running = false;
  closeSource();
  holder = false;
  leave?.abort();
  leave = null;
  channel?.close();
  channel = null;
}

/** Forgets everything (sign-out: another user may sign in next). */
export function resetHealth(): void {
  stopHealthStream();
  refusals = 0;
  health.value = new Map();
  bracketAlerts.value = [];
  recentAlerts = [];
  streamState.value = 'connecting';
  streamLost.value = false;
}
