/**
 * REST authentication: `auth/accesstokenrequest` and `auth/renewaccesstoken`. Tradovate answers
 * business failures with HTTP 200 bodies (`errorText`, p-tickets), so every answer is classified
 * here into one discriminated result; the actor decides what each outcome does to its status.
 */
import type { BrokerCredentials } from '../../domain/connections.js';
import { BROKER_TIMEOUTS, MAX_PENALTY_SECONDS, TOKEN_RENEWAL } from '../../tuning.js';
import { penaltyOf } from './frames.js';

/** A usable access token and when it dies. */
export interface AccessToken {
  accessToken: string;
  /** ms since the epoch */
  expiresAt: number;
  userId: number;
  /** The market-data socket's token, when the broker issues one. */
  mdAccessToken?: string;
}

/** Every way an auth call can end. */
export type AuthOutcome =
  | { kind: 'token'; token: AccessToken }
  /** Wrong credentials, locked user, or a p-captcha: retrying only makes it worse. */
  | { kind: 'rejected'; reason: string }
  /** 401 on renew: the token is dead; a fresh accesstokenrequest is needed. */
  | { kind: 'unauthorized'; reason: string }
  /** 429 (or the 423 before it): the broker holds the login out (up to an hour); every request meanwhile extends it. */
  | { kind: 'rate-limited'; reason: string }
  /** Network failure, 5xx, a long p-ticket: worth retrying later (not before `retryAfterMs`). */
  | { kind: 'unavailable'; reason: string; retryAfterMs?: number };

/** Auth call options (tests inject fetch and sleep). */
export interface AuthOptions {
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** Waits before resending with a p-ticket; injectable for tests. */
  sleep?: (ms: number) => Promise<void>;
  /** The longest p-time the caller is willing to wait before giving up (seconds). */
  maxPenaltySeconds?: number;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}/${path}`;
}

function tokenFrom(body: Record<string, unknown>): AccessToken | null {
  if (typeof body.accessToken !== 'string' || !body.accessToken) return null;
  const exp = typeof body.expirationTime === 'string' ? Date.parse(body.expirationTime) : NaN;
  // No usable expiry: assume the documented minimum lifetime so renewal still happens.
  const expiresAt = Number.isFinite(exp) ? exp : Date.now() + TOKEN_RENEWAL.assumedLifetimeMs;
  const token: AccessToken = { accessToken: body.accessToken, expiresAt, userId: Number(body.userId ?? 0) };
  if (typeof body.mdAccessToken === 'string' && body.mdAccessToken) token.mdAccessToken = body.mdAccessToken;
  return token;
}

async function send(
  url: string,
  init: RequestInit,
  opts: AuthOptions,
): Promise<{ status: number; body: Record<string, unknown> } | { error: string }> {
  const doFetch = opts.fetch ?? fetch;
  try {
    const res = await doFetch(url, { ...init, signal: AbortSignal.timeout(opts.timeoutMs ?? BROKER_TIMEOUTS.requestMs) });
    const text = await res.text();
    let body: Record<string, unknown> = {};
    if (text) {
      try {
        const parsed = JSON.parse(text) as unknown;
        if (parsed && typeof parsed === 'object') body = parsed as Record<string, unknown>;
      } catch {
        body = { errorText: text.slice(0, 200) };
      }
    }
    return { status: res.status, body };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Classifies an auth answer. p-tickets are handled by the caller loop; here they only matter
 * when they carry a captcha (unsolvable by an app → rejected).
 */
function classify(res: { status: number; body: Record<string, unknown> } | { error: string }): AuthOutcome | 'penalty' {
  if ('error' in res) return { kind: 'unavailable', reason: res.error };
  if (res.status === 401) return { kind: 'unauthorized', reason: String(res.body.errorText ?? 'unauthorized') };
  // 423 comes just before a 429 ("you're about to be locked out"): stop every call for the hour, as for a 429.
  if (res.status === 429 || res.status === 423) return { kind: 'rate-limited', reason: `HTTP ${res.status}` };
  if (res.status !== 200) return { kind: 'unavailable', reason: `HTTP ${res.status}` };
  const penalty = penaltyOf(res.body);
  if (penalty) return penalty.captcha ? { kind: 'rejected', reason: 'captcha required (p-captcha)' } : 'penalty';
  if (typeof res.body.errorText === 'string' && res.body.errorText) return { kind: 'rejected', reason: res.body.errorText };
  const token = tokenFrom(res.body);
  return token ? { kind: 'token', token } : { kind: 'unavailable', reason: 'no accessToken in answer' };
}

/**
 * `POST auth/accesstokenrequest`. A p-ticket without captcha is honoured once per ticket:
 * wait p-time, resend the identical body plus the ticket.
 */
export async function requestAccessToken(restUrl: string, creds: BrokerCredentials, opts: AuthOptions = {}): Promise<AuthOutcome> {
  const sleep = opts.sleep ?? defaultSleep;
  const base: Record<string, unknown> = { name: creds.name, password: creds.password };
  for (const k of ['appId', 'appVersion', 'cid', 'sec', 'deviceId'] as const) if (creds[k] !== undefined) base[k] = creds[k];
  let body = base;
  for (let attempt = 0; attempt < 3; attempt++) {
    const res = await send(
      joinUrl(restUrl, 'auth/accesstokenrequest'),
      { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) },
      opts,
    );
    const outcome = classify(res);
    if (outcome !== 'penalty') return outcome;
    const penalty = penaltyOf((res as { body: unknown }).body)!;
    if (penalty.seconds > (opts.maxPenaltySeconds ?? MAX_PENALTY_SECONDS)) {
      return { kind: 'unavailable', reason: `p-ticket wait ${penalty.seconds}s`, retryAfterMs: penalty.seconds * 1000 };
    }
    await sleep(penalty.seconds * 1000);
    body = { ...base, 'p-ticket': penalty.ticket };
  }
  return { kind: 'unavailable', reason: 'p-ticket not accepted' };
}

/** `GET auth/renewaccesstoken` with the current token; extends the same session. */
export async function renewAccessToken(restUrl: string, accessToken: string, opts: AuthOptions = {}): Promise<AuthOutcome> {
  const res = await send(
    joinUrl(restUrl, 'auth/renewaccesstoken'),
    { method: 'GET', headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' } },
    opts,
  );
  const outcome = classify(res);
  if (outcome !== 'penalty') return outcome;
  // Waited out before the next try: asked again sooner, the broker extends it.
  const penalty = penaltyOf((res as { body: unknown }).body)!;
  return { kind: 'unavailable', reason: `p-ticket on renew (${penalty.seconds} s)`, retryAfterMs: penalty.seconds * 1000 };
}

/** When to renew: TOKEN_RENEWAL.leadMs (10 min) before expiry, or at 80% of a short lifetime (tests, sims). */
export function renewDelayMs(token: AccessToken, now: number): number {
  const life = token.expiresAt - now;
  if (life <= 0) return 0;
  return life > 2 * TOKEN_RENEWAL.leadMs ? life - TOKEN_RENEWAL.leadMs : Math.floor(life * 0.8);
}
