/**
 * Broker connections as every layer names them: the health states and the occurrences that
 * move between them, the spec an actor is started with, broker credentials and API scopes.
 * Pure types and constants: the store persists them, the actors run them, the front reports them.
 */
import type { AccountGuards } from './guards.js';
import { AppError } from './problems.js';

/** Health of one broker connection (DESIGN §8). */
export type ConnectionStatus = 'CONNECTING' | 'CONNECTED' | 'RECONNECTING' | 'AUTH_EXPIRED' | 'FAILED' | 'DISABLED';

/** The named occurrences of the spec's Events section, plus `disabled` for a stopped connection. */
export type StatusReason = 'connect' | 'disconnect' | 'reconnect' | 'auth-expired' | 'fatal-error' | 'disabled';

/** Which protocol family a connection speaks (the paper broker speaks Tradovate's). */
export type BrokerKind = 'paper' | 'tradovate';

/** Where a connection trades. */
export type Environment = 'paper' | 'demo' | 'live';

/** What a credential may do: `read` every GET, `trade` every write. */
export type Scope = 'read' | 'trade';

/** A broker login (sealed at rest, opened only when an actor starts). */
export interface BrokerCredentials {
  name: string;
  password: string;
  appId?: string;
  appVersion?: string;
  cid?: string | number;
  sec?: string;
  deviceId?: string;
}

/** Everything an actor needs to run one broker connection. */
export interface ConnectionSpec {
  connectionId: string;
  userId: string;
  broker: BrokerKind;
  environment: Environment;
  /** e.g. http://127.0.0.1:8091/v1 or https://demo.tradovateapi.com/v1 */
  restUrl: string;
  /** e.g. ws://127.0.0.1:8091/v1/websocket */
  wsUrl: string;
  /** Market data socket when the broker keeps it on another host (Tradovate md-demo/md); absent: the trading socket serves it. */
  mdWsUrl?: string;
  credentials: BrokerCredentials;
  /** Broker request budget for this connection (DESIGN §3 "Broker budget"). */
  budget: { perMinute: number; perHour: number };
  /** Per-request broker deadline. */
  requestTimeoutMs?: number;
  /** When the connection was stored (ISO 8601): of two of a user's connections reporting one account id with no stored claim, the older keeps it (account-claims.ts). */
  createdAt?: string;
  /** Risk guards and locks of the owner's accounts, by account id (stored by the front). */
  guards?: Record<string, AccountGuards>;
  /**
   * The broker's rate-limit hold (429) the connection is in, ms since the epoch, when it starts
   * again elsewhere (another cluster node, a restarted worker): it logs in only after it.
   */
  rateLimitedUntil?: number;
}

/** Tradovate REST and WebSocket endpoints per environment (reference/tradovate-protocol.md §1). */
export const TRADOVATE_URLS = {
  demo: { restUrl: 'https://demo.tradovateapi.com/v1', wsUrl: 'wss://demo.tradovateapi.com/v1/websocket' },
  live: { restUrl: 'https://live.tradovateapi.com/v1', wsUrl: 'wss://live.tradovateapi.com/v1/websocket' },
} as const;

/** What we identify as to Tradovate when the user gives no app id / version. */
export const TRADOVATE_APP_DEFAULTS = { appId: 'tradegate', appVersion: '1.0' } as const;

/** A connection's status detail while its first attempt to reach the broker is under way (CONNECTING). */
export const FIRST_ATTEMPT_DETAIL = 'starting';

/**
 * Whether a connection whose accounts are not known yet may still bring them soon: no status yet
 * (its actor is starting), or CONNECTING on its first attempt. One that has failed an attempt
 * ("not connected yet: …; retrying": the broker unreachable) may stay so for hours.
 */
export function onFirstAttempt(status: Pick<StatusEvent, 'status' | 'detail'> | undefined): boolean {
  return status === undefined || (status.status === 'CONNECTING' && (status.detail === undefined || status.detail === FIRST_ATTEMPT_DETAIL));
}

/** One transition of a connection's health. */
export interface StatusEvent {
  type: 'status';
  connectionId: string;
  status: ConnectionStatus;
  reason: StatusReason;
  /** ms since the epoch */
  ts: number;
  detail?: string;
  /** FAILED for the broker's rate limit: when it logs in again by itself (ms since the epoch). */
  retryAt?: number;
}

/**
 * The answer to a request for a connection that has given up (FAILED: credentials refused, a
 * captcha). Not transient, so no Retry-After: retrying cannot help, reconnecting can. A
 * connection FAILED for the broker's rate limit (`retryAt` ahead) logs in again by itself at
 * `retryAt`: 503 with Retry-After until then.
 */
export function connectionFailed(connectionId: string, detail: string | undefined, retryAt?: number, now = Date.now()): AppError {
  if (retryAt !== undefined && retryAt > now) {
    return new AppError(
      'BROKER_UNAVAILABLE',
      `Broker connection held out by the broker's rate limit (${detail ?? 'no detail'})`,
      { connectionId, connectionStatus: 'FAILED', retryAt: new Date(retryAt).toISOString() },
      Math.ceil((retryAt - now) / 1000),
    );
  }
  return new AppError(
    'CONNECTION_FAILED',
    `Broker connection failed (${detail ?? 'no detail'}); POST /api/v1/connections/${connectionId}/reconnect once the cause is fixed, or PATCH it with new credentials`,
    { connectionId, connectionStatus: 'FAILED' },
  );
}
