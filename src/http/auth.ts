/**
 * Authentication and scopes (DESIGN §3): `X-API-Key` for API routes, the `:token` path
 * parameter for the webhook receiver. Every credential failure looks the same to the caller
 * (one 401 body, or one 404 for webhook URLs). API-key failures are limited per client IP; webhook
 * URL misses are not (see `webhook`).
 */
import { AppError } from '../domain/problems.js';
import type { Logger } from '../log.js';
import { SlidingLogLimiter } from './rate-limit.js';
import { addressKey } from './client-address.js';
import type { AuthContext, RouteScope } from './route-types.js';
import type { Scope } from '../domain/connections.js';
import type { GuardNarrowing } from '../domain/guards.js';

/** What `store.apiKeys.verify` returns. */
export interface ApiKeyView {
  id: string;
  userId: string;
  name: string;
  scopes: readonly string[];
  prefix?: string;
  revokedAt?: string | number | null;
  guards?: GuardNarrowing | null;
}

/** What `store.webhookTokens.verify` returns. */
export interface WebhookTokenView {
  id: string;
  userId: string;
  accountId: string;
  strategyId?: string | null;
  guards?: GuardNarrowing | null;
  inactiveReason?: string | null;
}

/** The slice of the store authentication uses. */
export interface AuthStore {
  apiKeys: {
    verify(raw: string): ApiKeyView | null | undefined;
    touch?(id: string, now: number): unknown;
  };
  webhookTokens: {
    verify(raw: string): WebhookTokenView | null | undefined;
    touch?(id: string, now: number): unknown;
  };
}

/**
 * Optional web-app session check (cookie + CSRF), consulted only when no X-API-Key is sent.
 * Returns the session's context, undefined when there is no valid session (→ 401), or
 * throws an AppError of its own (e.g. CSRF_REJECTED).
 */
export type SessionAuthenticator = (req: { method: string; headers: Readonly<Record<string, string>> }) => AuthContext | undefined;

/** Failed authentications allowed per client IP per minute. */
export const FAILED_AUTH_PER_MIN = 30;

// The exact form is the key store's business (it checks it before any read: secret-token.ts
// wellFormedToken); this only keeps megabyte headers away from it.
const MAX_CREDENTIAL_LENGTH = 256;
const TOUCH_EVERY_MS = 60_000;

/** Which limiter bucket an authenticated request counts against. */
export interface Authenticated {
  auth: AuthContext;
  /** Rate-limit key: the API key id, or the webhook token id. */
  rateKey: string;
  /** `key` (RATE_LIMIT_PER_MIN) or `webhook` (WEBHOOK_RATE_LIMIT_PER_MIN). */
  bucket: 'key' | 'webhook';
}

/** Where a request came from; asked only when the address is needed (a failure, a public route). */
export interface RemoteClient {
  remoteAddress(): string;
}

/**
 * 403 INSUFFICIENT_SCOPE for a credential that is valid: the request still counts against it, and
 * its answer carries the rate-limit headers like every keyed answer (the pipeline reads `authd`,
 * which is never part of the problem body).
 */
export class ScopeRefused extends AppError {
  constructor(
    scope: Scope,
    readonly authd: Authenticated,
  ) {
    super('INSUFFICIENT_SCOPE', `This credential lacks the '${scope}' scope`, { requiredScope: scope });
  }
}

/**
 * A web session's reads and its actions count in windows of their own (each RATE_LIMIT_PER_MIN):
 * the app refreshes what it shows on its own, in every open tab, and that must never use up the
 * budget of a flatten, a cancel or the kill switch. API keys keep one window (DESIGN §3).
 */
function sessionRateKey(principalId: string, method: string): string {
  return method === 'GET' ? `${principalId}|reads` : principalId;
}

/** A key's AuthContext, and its grant for each scope (null: refused, 403). */
interface KeyGrants {
  auth: AuthContext;
  read: Authenticated | null;
  trade: Authenticated | null;
}

/** Authenticates requests against the store; owns the per-IP failed-auth limiter. */
export class Authenticator {
  readonly failures = new SlidingLogLimiter(FAILED_AUTH_PER_MIN);
  /**
   * Bodies refused on public routes, per address, apart from `failures`: bad keys from an
   * address (a shared NAT or proxy, or a stale tab) must not lock that address out of signing
   * in, which session-auth throttles with counters of its own (per address and per name).
   */
  readonly refusedBodies = new SlidingLogLimiter(FAILED_AUTH_PER_MIN);
  /** What the key views seen are granted (keyGrants). */
  private readonly grantsByView = new WeakMap<ApiKeyView, KeyGrants>();
  /** When each credential's use was last recorded, by id (keys and webhook tokens apart). */
  private readonly touched = { key: new Map<string, number>(), webhook: new Map<string, number>() };

  constructor(
    private readonly store: AuthStore,
    private readonly clock: () => number,
    private readonly log: Logger,
    private readonly session?: SessionAuthenticator,
  ) {}

  /**
   * Authenticates a request for a route of `scope`. Returns undefined for public routes;
   * throws AppError UNAUTHENTICATED / INSUFFICIENT_SCOPE / NOT_FOUND (webhook) / RATE_LIMITED.
   */
  authenticate(
    scope: RouteScope,
    headers: Readonly<Record<string, string>>,
    params: Record<string, string>,
    client: RemoteClient,
    method = 'GET',
  ): Authenticated | undefined {
    if (scope === 'none') return this.anonymous(addressKey(client.remoteAddress()));
    const now = this.clock();
    // Webhooks are exempt from the per-IP failure limit: TradingView sends every user's
    // alerts from the same four addresses, so one user's stale token URL must not block
    // everyone's alerts, and a 128-bit token in the path cannot be guessed anyway.
    if (scope === 'webhook') return this.webhook(params['token'] ?? '', now);
    const raw = headers['x-api-key'];
    if (scope === 'session') return this.sessionOnly(raw !== undefined, headers, method);
    if (raw === undefined && this.session) {
      const auth = this.session({ method, headers });
      if (auth) return this.grant(scope, auth, sessionRateKey(auth.principalId, method));
    }
    return this.apiKey(scope, raw ?? '', client, now);
  }

  private grant(scope: Scope, auth: AuthContext, rateKey: string): Authenticated {
    if (!auth.scopes.includes(scope)) throw new ScopeRefused(scope, { auth, rateKey, bucket: 'key' });
    return { auth, rateKey, bucket: 'key' };
  }

  private sessionOnly(hasKey: boolean, headers: Readonly<Record<string, string>>, method: string): Authenticated {
    if (hasKey) throw new AppError('SESSION_REQUIRED', 'API keys cannot call this route: sign in to the web app');
    const auth = this.session?.({ method, headers });
    // A 256-bit session id cannot be guessed, so misses here are not counted per address.
    if (!auth) throw new AppError('UNAUTHENTICATED', 'Sign in first: no valid session');
    return { auth, rateKey: sessionRateKey(auth.principalId, method), bucket: 'key' };
  }

  private apiKey(scope: Scope, raw: string, client: RemoteClient, now: number): Authenticated {
    let view: ApiKeyView | null | undefined;
    if (raw.length > 0 && raw.length <= MAX_CREDENTIAL_LENGTH) view = this.store.apiKeys.verify(raw);
    if (!view || view.revokedAt) {
      // Only failures are limited: a valid key keeps working from an address where someone
      // else keeps failing (a shared NAT or proxy must not let one client lock out the rest).
      const ip = addressKey(client.remoteAddress());
      const blocked = this.failures.isExhausted(ip, now);
      if (blocked) throw new AppError('RATE_LIMITED', 'Too many failed authentication attempts from this address', {}, blocked.retryAfterSeconds);
      throw this.fail(ip, now, new AppError('UNAUTHENTICATED', 'Send a valid API key in X-API-Key'));
    }
    const grants = this.keyGrants(view);
    const granted = grants[scope];
    if (granted === null) throw new ScopeRefused(scope, { auth: grants.auth, rateKey: view.id, bucket: 'key' });
    this.touch(view.id, now);
    return granted;
  }

  /**
   * A key's AuthContext and what it is granted per scope, built once per view: the store hands out
   * the same view object until any process writes keys again (record-cache.ts), so a request with
   * a known key builds nothing. Shared between requests: never changed after they are built.
   */
  private keyGrants(view: ApiKeyView): KeyGrants {
    let grants = this.grantsByView.get(view);
    if (grants === undefined) {
      const scopes = view.scopes.filter((s): s is Scope => s === 'read' || s === 'trade');
      const auth: AuthContext = { userId: view.userId, principalId: view.id, scopes, kind: 'api-key' };
      if (view.guards) auth.narrowing = view.guards;
      const grant = (scope: Scope): Authenticated | null => (scopes.includes(scope) ? { auth, rateKey: view.id, bucket: 'key' } : null);
      grants = { auth, read: grant('read'), trade: grant('trade') };
      this.grantsByView.set(view, grants);
    }
    return grants;
  }

  private webhook(raw: string, now: number): Authenticated {
    let view: WebhookTokenView | null | undefined;
    if (raw.length > 0 && raw.length <= MAX_CREDENTIAL_LENGTH) view = this.store.webhookTokens.verify(raw);
    // 404, the same body as an unknown route: a wrong token URL reveals nothing. Not counted per
    // address: TradingView sends every user's alerts from the same four addresses, and a stale URL
    // firing there (a rotated token) must not lock other users' live alerts out. A token is ~190
    // random bits: no rate of guessing finds one.
    if (!view) throw new AppError('NOT_FOUND');
    const touch = this.store.webhookTokens.touch;
    const tokenId = view.id;
    if (touch && this.due(this.touched.webhook, tokenId, now)) this.record(`webhook:${tokenId}`, () => touch.call(this.store.webhookTokens, tokenId, now));
    const webhook = { tokenId: view.id, accountId: view.accountId, strategyId: view.strategyId ?? null, inactiveReason: view.inactiveReason ?? null };
    const auth: AuthContext = { userId: view.userId, principalId: `webhook:${view.id}`, scopes: ['trade'], kind: 'webhook', webhook };
    if (view.guards) auth.narrowing = view.guards;
    return {
      auth,
      rateKey: `webhook:${view.id}`,
      bucket: 'webhook',
    };
  }

  /**
   * A public route (sign-in): refused with 429, before its body is read, while the address is
   * over its bodies refused on public routes (noteRefusedBody); bad keys do not count here.
   */
  private anonymous(ip: string): undefined {
    const blocked = this.refusedBodies.isExhausted(ip, this.clock());
    if (blocked) throw new AppError('RATE_LIMITED', 'Too many failed requests from this address', {}, blocked.retryAfterSeconds);
    return undefined;
  }

  /**
   * A public route refused the body (400, 415): counted against the address, so a client cannot
   * make the front validate junk without a credential, unbounded.
   */
  noteRefusedBody(ip: string): void {
    this.refusedBodies.hit(addressKey(ip), this.clock());
  }

  private fail(ip: string, now: number, err: AppError): AppError {
    this.failures.hit(ip, now);
    return err;
  }

  private touch(id: string, now: number): void {
    const touch = this.store.apiKeys.touch;
    if (touch && this.due(this.touched.key, id, now)) this.record(`key:${id}`, () => touch.call(this.store.apiKeys, id, now));
  }

  /** Whether the use of credential `id` is due to be recorded (at most once a minute each). */
  private due(touched: Map<string, number>, id: string, now: number): boolean {
    const last = touched.get(id);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return false;
    touched.set(id, now);
    return true;
  }

  /** Records a credential's use; never fails the request. */
  private record(slot: string, write: () => unknown): void {
    try {
      Promise.resolve(write()).catch((err: unknown) => this.log.warn({ err, credential: slot }, 'recording credential use failed'));
    } catch (err) {
      this.log.warn({ err, credential: slot }, 'recording credential use failed');
    }
  }

  /** Drops idle state (called periodically by the server). */
  sweep(now: number): void {
    this.failures.sweep(now);
    this.refusedBodies.sweep(now);
    for (const touched of [this.touched.key, this.touched.webhook]) for (const [id, at] of touched) if (now - at >= TOUCH_EVERY_MS) touched.delete(id);
  }
}
