/**
 * Live connection health from the server's SSE stream, shared by every page (one stream
 * per tab). EventSource sends the session cookie on its own. It reconnects by itself after
 * a network error, resuming with Last-Event-ID; after a refused open (401, 429) it stops for
 * good, so we reopen it ourselves a little later.
 */
import { signal } from '@preact/signals';
import { api, ApiError, sessionLost } from './api';
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

const HISTORY = 8;
const REOPEN_MS = 5_000;

/** connectionId → latest health. */
export const health = signal<ReadonlyMap<string, ConnectionHealth>>(new Map());
/** Whether the stream is open. */
export const streamState = signal<'connecting' | 'open' | 'down'>('connecting');

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

/** The trader has read them. */
export function dismissBracketAlerts(): void {
  bracketAlerts.value = [];
}

let source: EventSource | null = null;
let reopen: ReturnType<typeof setTimeout> | undefined;
/** Opens refused in a row (reset once one opens): the wait before the next grows with it. */
let refusals = 0;
const REOPEN_MAX_MS = 60_000;

function apply(msg: HealthMessage): void {
  if (msg.type === 'bracket-alert' && msg.connectionId && msg.accountId && msg.orderId) {
    const key = `${msg.connectionId} ${msg.orderId} ${msg.ts} ${msg.detail ?? ''}`;
    if (seenAlerts.has(key)) return;
    seenAlerts.add(key);
    bracketAlerts.value = [{ connectionId: msg.connectionId, accountId: msg.accountId, orderId: msg.orderId, ts: msg.ts, detail: msg.detail ?? '' }, ...bracketAlerts.value].slice(0, 20);
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

/** Opens the stream (idempotent). */
export function startHealthStream(): void {
  if (source) return;
  clearTimeout(reopen);
  streamState.value = 'connecting';
  const es = new EventSource('/api/v1/connection-health/stream');
  source = es;
  es.onopen = () => {
    refusals = 0;
    streamState.value = 'open';
    streamLost.value = false;
  };
  es.onmessage = (e: MessageEvent<string>) => {
    try {
      apply(JSON.parse(e.data) as HealthMessage);
    } catch {
      // A malformed message is skipped; the next snapshot or status corrects the picture.
    }
  };
  es.onerror = () => {
    if (streamState.value === 'open') streamLost.value = true;
    if (es.readyState === EventSource.CLOSED) {
      stopHealthStream();
      streamState.value = 'down';
      void reopenUnlessSignedOut();
    } else {
      streamState.value = 'connecting';
    }
  };
}

/**
 * A refused open does not say why. Reopening blindly after the session ended would count a
 * failed authentication against this address every few seconds (in every open tab) until the
 * server refuses the address altogether: ask once whether the session still holds, and when
 * it does not, stop here and say so (sessionLost: the app shows the sign-in page).
 */
async function reopenUnlessSignedOut(): Promise<void> {
  try {
    await api('GET', '/session');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      sessionLost.value++;
      return;
    }
  }
  if (source) return;
  clearTimeout(reopen);
  // Refused again and again (a tab past the streams a session may hold open): each try costs the
  // session two requests of its rate window, so wait longer each time, up to a minute.
  reopen = setTimeout(startHealthStream, Math.min(REOPEN_MS * 2 ** refusals, REOPEN_MAX_MS));
  refusals++;
}

/** Closes the stream (sign-out). */
export function stopHealthStream(): void {
  clearTimeout(reopen);
  source?.close();
  source = null;
}

/** Forgets everything (sign-out: another user may sign in next). */
export function resetHealth(): void {
  stopHealthStream();
  refusals = 0;
  health.value = new Map();
  bracketAlerts.value = [];
  streamState.value = 'connecting';
  streamLost.value = false;
}
