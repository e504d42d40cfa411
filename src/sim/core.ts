/**
 * The paper broker without sockets: engine, auth, injected faults, sync subscribers, market
 * data, prop-firm rules, trading sessions and the one dispatch path that REST and WebSocket
 * requests both go through.
 */
import { Auth, type AuthSession } from './auth.js';
import { Engine } from './engine.js';
import { HANDLERS, ORDER_ENDPOINTS } from './handlers.js';
import { MarketData } from './md.js';
import { PropRules } from './prop-rules.js';
import type { SessionMode } from './sessions.js';
import type { AccountRules, EntityType, IdReservation, SimEvent } from './state.js';
import { ok, WireError, type WireResult } from './wire.js';

/** A receiver of `props` events: a WebSocket session after `user/syncrequest`. */
export interface EventSink {
  userId: number;
  types: ReadonlySet<EntityType>;
  /** Only these accounts; undefined = every account of the user. */
  accounts?: ReadonlySet<number>;
  push(message: string): void;
}

/** The WebSocket side of a request: lets handlers subscribe the caller to events and market data. */
export interface WsClient {
  readonly userId: number;
  /** Starts (or replaces) the caller's `props` subscription. */
  sync(types: ReadonlySet<EntityType>, accounts: ReadonlySet<number> | undefined): void;
  push(message: string): void;
  /** Runs `fn` once the response to the current request has gone out, in a later frame. */
  later(fn: () => void): void;
}

/** Faults injected through `POST /control/faults`. */
export interface Faults {
  latencyMs: number;
  silent: boolean;
  rejectAuth: boolean | string;
  /** Arms one p-ticket of this many seconds for the next request of `pTicketTarget`. */
  pTicketSeconds?: number;
  pTicketTarget: 'auth' | 'orders' | 'any';
  pTicketCaptcha: boolean;
  rateLimit429: boolean;
}

/** Default faults: none. */
export const NO_FAULTS: Faults = { latencyMs: 0, silent: false, rejectAuth: false, pTicketTarget: 'auth', pTicketCaptcha: false, rateLimit429: false };

const BAD_CREDENTIALS = 'Incorrect username or password. Please try again, noting that passwords are case-sensitive.';

/** Options of the core (resolved defaults). */
export interface CoreOptions {
  seed: number;
  clock: () => number;
  tokenLifetimeMs: number;
  maxSessionsPerUser: number;
  requestsPerSecond: number;
  requestsPerHour: number;
  retainFinalOrders?: number;
  /** Trading sessions, default `none` (always open). */
  sessions?: SessionMode;
  /** Rules every account created through the control API starts with. */
  accountRules?: AccountRules;
  /** Price walk step in ms (sets the volatility of synthetic chart history); default 250. */
  priceStepMs?: number;
  /** Ids kept across restarts (SimOptions.idFile). */
  ids?: IdReservation | undefined;
}

/** Everything the paper broker knows, behind one dispatch function. */
export class SimCore {
  readonly engine: Engine;
  readonly auth: Auth;
  readonly md: MarketData;
  readonly rules: PropRules;
  faults: Faults = { ...NO_FAULTS };
  /** Requests received per endpoint, answered or not (REST and WebSocket; `/control/state` shows them). */
  readonly requests = new Map<string, number>();
  private readonly sinks = new Map<number, Set<EventSink>>();
  private open: boolean;
  private tradeDateKey: number;
  private lastClose: number;

  constructor(readonly opts: CoreOptions) {
    const sessions = opts.sessions ?? 'none';
    this.engine = new Engine({ clock: opts.clock, seed: opts.seed, retainFinalOrders: opts.retainFinalOrders, sessions, ids: opts.ids });
    this.auth = new Auth(opts);
    this.md = new MarketData(this.engine.state, { seed: opts.seed, sessions, stepMs: opts.priceStepMs || 250 });
    this.rules = new PropRules(this.engine, opts.accountRules);
    const now = this.engine.state.session();
    this.open = now.open;
    this.tradeDateKey = now.tradeDateKey;
    this.lastClose = now.lastClose;
  }

  /**
   * Applies what the passage of time does: at a session close Day orders expire; when the
   * market opens again resting orders are matched; a new trade date resets the daily loss
   * baseline. Cheap (the session is cached per hour), so every request and step calls it.
   */
  advance(): void {
    const now = this.engine.state.session();
    if (now.lastClose !== this.lastClose) {
      this.lastClose = now.lastClose;
      if (this.engine.state.calendar.mode === 'cme') this.engine.expireDayOrders();
    }
    if (now.tradeDateKey !== this.tradeDateKey) {
      this.tradeDateKey = now.tradeDateKey;
      this.rules.newTradeDate();
    }
    if (now.open !== this.open) {
      this.open = now.open;
      if (now.open) this.engine.matchAll();
    }
  }

  /** Registers (or re-registers with new filters) a sync subscriber. */
  subscribe(sink: EventSink): void {
    let set = this.sinks.get(sink.userId);
    if (!set) this.sinks.set(sink.userId, (set = new Set()));
    set.add(sink);
  }

  /** Removes a subscriber from events and market data (socket closed). */
  unsubscribe(sink: EventSink & WsClient): void {
    this.sinks.get(sink.userId)?.delete(sink);
    this.md.drop(sink);
  }

  /** A contract's last price changed: record it, match its resting orders, publish market data, mark its holders for the rules. */
  priceChanged(contractId: number): void {
    this.engine.matchContract(contractId);
    this.md.priceChanged(contractId);
    this.rules.priceMoved(contractId);
  }

  /**
   * Applies the prop-firm rules to whatever changed, then sends the events recorded since the
   * last flush to the matching subscribers.
   */
  flushEvents(): void {
    this.rules.enforce();
    const events = this.engine.state.takeEvents();
    for (const ev of events) this.deliver(ev);
  }

  private deliver(ev: SimEvent): void {
    const account = this.engine.state.accounts.get(ev.accountId);
    if (!account) return;
    // A revoked account is invisible; the only event about it is its own Deleted. Visibility is
    // taken when the event happened: a breach's liquidation precedes the revocation in one flush.
    if (!ev.visible && !(ev.entityType === 'account' && ev.eventType === 'Deleted')) return;
    const sinks = this.sinks.get(account.userId);
    if (!sinks) return;
    let message: string | undefined;
    for (const sink of sinks) {
      if (!sink.types.has(ev.entityType) || (sink.accounts && !sink.accounts.has(ev.accountId))) continue;
      // Type and event names are fixed identifiers (no escaping); the entity is JSON already.
      message ??= `{"e":"props","d":{"entityType":"${ev.entityType}","eventType":"${ev.eventType}","entity":${ev.json}}}`;
      sink.push(message);
    }
  }

  /** One step of the price walk (none while the market is closed); resting orders of the contracts that moved are matched. */
  tickPrices(): void {
    this.advance();
    if (this.open) for (const id of this.engine.state.prices.step()) this.priceChanged(id);
    this.flushEvents();
  }

  /**
   * Runs one request. `session` is the caller's auth session (WS: from `authorize`; REST:
   * from the Bearer token), `token` the raw token for renewal. Events are left for the caller
   * to flush after it has queued the response, so the response frame precedes its events.
   */
  dispatch(endpoint: string, session: AuthSession | undefined, query: URLSearchParams, body: unknown, client?: WsClient): WireResult {
    this.advance();
    this.requests.set(endpoint, (this.requests.get(endpoint) ?? 0) + 1);
    if (endpoint === 'auth/accesstokenrequest') return this.faults.rateLimit429 ? { s: 429 } : this.accessTokenRequest(body);
    if (!session || !this.auth.valid(session)) return { s: 401, d: 'Access is denied' };
    if (this.faults.rateLimit429 || !this.auth.allow(session.userId)) return { s: 429 };
    const user = this.engine.state.users.get(session.userId)!;
    if (endpoint === 'auth/renewaccesstoken') return ok(this.auth.renew(session, user));
    if (ORDER_ENDPOINTS.has(endpoint)) {
      const penalty = this.penalty(body, 'orders');
      if (penalty) return ok(penalty);
    }
    const handler = HANDLERS.get(endpoint);
    if (!handler) return { s: 404, d: JSON.stringify(`Not found: ${endpoint}`) };
    try {
      return handler({ core: this, userId: session.userId, query, body, client });
    } catch (err) {
      if (err instanceof WireError) return { s: err.status, d: err.message };
      throw err;
    }
  }

  private accessTokenRequest(raw: unknown): WireResult {
    const body = raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
    const penalty = this.penalty(body, 'auth');
    if (penalty) return ok(penalty);
    const user = typeof body.name === 'string' ? this.engine.state.usersByName.get(body.name) : undefined;
    if (this.faults.rejectAuth) return ok({ errorText: typeof this.faults.rejectAuth === 'string' ? this.faults.rejectAuth : BAD_CREDENTIALS });
    if (!user || user.password !== body.password) return ok({ errorText: BAD_CREDENTIALS });
    return ok(this.auth.login(user));
  }

  /** A p-ticket answer when one is owed, or undefined to go ahead. */
  private penalty(body: unknown, target: 'auth' | 'orders'): Record<string, unknown> | undefined {
    const ticket = body && typeof body === 'object' ? (body as Record<string, unknown>)['p-ticket'] : undefined;
    if (typeof ticket === 'string') {
      const again = this.auth.redeemTicket(ticket);
      if (again) return again;
      return undefined;
    }
    const f = this.faults;
    if (f.pTicketSeconds === undefined || (f.pTicketTarget !== 'any' && f.pTicketTarget !== target)) return undefined;
    const seconds = f.pTicketSeconds;
    this.faults = { ...f, pTicketSeconds: undefined };
    return this.auth.issueTicket(seconds, f.pTicketCaptcha);
  }
}
