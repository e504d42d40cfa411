/**
 * The risk guards of one connection's accounts, enforced inside the actor. The actor owns the
 * broker's live positions, working orders and fills, so a check never reads stale state, and
 * it runs synchronously right before the order is sent with the order's contracts held from
 * that moment: concurrent entries are checked one after the other against everything already
 * admitted, and a burst cannot race past a limit.
 *
 * Exits (orders that only reduce the position, see domain/guards.ts), cancels and flatten are
 * never refused. A clock tick lifts locks when the next trading day begins, flattens accounts
 * whose trading window closed (when asked to) and retries flattens owed to a tripped guard.
 */
import { AppError } from '../../src/domain/problems.js';
import { contractRoot } from '../../src/domain/symbols.js';
import { inWindows, windowEndedWithin } from '../../src/domain/trading-time.js';
import {
  checkEntry,
  effectiveLimits,
  exposureOf,
  isExit,
  lockRefusal,
  NO_GUARDS,
  pnlTrip,
  type AccountGuards,
  type EffectiveLimits,
  type GuardConfig,
  type GuardName,
  type GuardRefusal,
  type LockState,
} from '../../src/domain/guards.js';
import type { FlattenResult, GuardEvent, GuardStatus, LockResult, PlaceOrderRequest } from '../../src/actors/protocol.js';
import type { QuoteFeed } from '../../src/broker/tradovate/quotes.js';
import type { ActorContext } from './context.js';
import { Exposure, type Hold } from './exposure.js';
import { flatten } from './flatten.js';
import { outstandingOrders } from './place.js';
import { SessionPnl } from './session-pnl.js';

interface AccountState {
  config: GuardConfig;
  lock: LockState | null;
  /** Inside the trading windows: as of the last tick, or of when the guards were set or started (null without windows). */
  inside: boolean | null;
  /** A flatten the guards owe the account (it failed, e.g. while disconnected): retried every tick. */
  owed: { guard: GuardName; detail: string } | null;
  flattening: boolean;
  /** Start of the trading day whose P&L limit already tripped (one trip per day). */
  trippedDay: number | null;
  /** The day's P&L lock while a kill switch covers it: it takes over when the kill switch is lifted. */
  dayLock: LockState | null;
  /** The account's limits without a narrowing, per origin (built once per guards change). */
  limits: Partial<Record<'api' | 'webhook', EffectiveLimits>>;
}

/** What the keeper needs from its actor. */
export interface GuardKeeperDeps {
  ctx: ActorContext;
  now: () => number;
  tickMs: number;
  initial?: Record<string, AccountGuards>;
  quotes?: QuoteFeed;
}

/** The guards of one connection. */
export class GuardKeeper {
  readonly exposure: Exposure;
  readonly pnl: SessionPnl;
  private readonly accounts = new Map<string, AccountState>();
  private readonly ctx: ActorContext;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: GuardKeeperDeps) {
    this.ctx = deps.ctx;
    this.now = deps.now;
    for (const [accountId, g] of Object.entries(deps.initial ?? {})) {
      const state = fresh(g.config, g.lock, this.insideNow(g.config));
      // Started (a restart, a connection back) after a window ended: its flatten may have been
      // missed while nothing ran this account. It is owed, and runs once CONNECTED (flat already: nothing to do).
      const tw = g.config.tradingWindows;
      if (!state.owed && tw?.flattenAtEnd && windowEndedWithin(tw, this.now(), MISSED_WINDOW_END_MS)) {
        state.owed = { guard: 'trading_window', detail: 'the trading window ended while this account’s connection was not running' };
      }
      this.accounts.set(accountId, state);
    }
    this.exposure = new Exposure(deps.ctx.mirror);
    this.pnl = new SessionPnl(deps.ctx.mirror, deps.now, (accountId) => this.checkPnl(accountId));
  }

  /** Starts the clock tick. */
  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.deps.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.deps.quotes?.close();
  }

  /**
   * Admits an order or throws RISK_GUARD naming the guard, its limit and the value the order
   * would reach. Synchronous: nothing can change between the check and the hold it returns,
   * which the caller keeps until the broker has reported the order (null: nothing to guard).
   */
  admit(req: PlaceOrderRequest): Hold | null {
    const state = this.accounts.get(req.accountId);
    if (!state && (req.narrowing ?? []).length === 0) return null;
    const contractId = this.contractIdOf(req.symbol);
    const refusal = this.refusalOf(req, contractId, true);
    if (refusal) this.refuse(req.accountId, refusal);
    return this.exposure.hold(req.accountId, contractId, req.side, req.qty);
  }

  /**
   * What admit would answer now, for a dry run: the refusal, or null. Holds nothing, reports
   * nothing and runs no P&L check (which may lock and flatten the account: that is for real
   * orders and the guard tick).
   */
  check(req: Omit<PlaceOrderRequest, 'type' | 'clOrdId'>): GuardRefusal | null {
    if (!this.accounts.has(req.accountId) && (req.narrowing ?? []).length === 0) return null;
    return this.refusalOf(req, this.contractIdOf(req.symbol), false);
  }

  private contractIdOf(symbol: string): number {
    const contractId = this.exposure.contractId(symbol);
    if (contractId === undefined) throw new AppError('BROKER_UNAVAILABLE', `contract ${symbol} is not known to the connection yet`, {}, 1);
    return contractId;
  }

  /** The first guard the order breaks (exits never do, unless they carry legs); `live`: a real order, which runs the P&L check first. */
  private refusalOf(req: Omit<PlaceOrderRequest, 'type' | 'clOrdId'>, contractId: number, live: boolean): GuardRefusal | null {
    const state = this.accounts.get(req.accountId);
    const narrowing = req.narrowing ?? [];
    const contract = this.exposure.contract(req.accountId, contractId);
    // An exit with a take-profit or stop-loss is no exit: once it has closed the position, its
    // legs open a new one when they fire (a locked account could otherwise reverse through one).
    // A partial exit (reduce-only) was checked to reduce the position already (place.ts); the
    // position's own legs working on its side are cut to what it leaves (orphan-legs.ts).
    if ((req.reduceOnly || isExit(contract, req.side, req.qty)) && !req.takeProfit && !req.stopLoss) return null;
    if (state) {
      this.expire(req.accountId, state);
      if (live) this.checkPnl(req.accountId);
      if (state.lock) return lockRefusal(state.lock);
    }
    const origin = req.origin ?? 'api';
    const limits = state && narrowing.length === 0 ? (state.limits[origin] ??= effectiveLimits(state.config, [], origin)) : effectiveLimits(state?.config ?? NO_GUARDS, narrowing, origin);
    const root = contractRoot(req.symbol)?.root ?? req.symbol.slice(0, -2);
    const order = { side: req.side, qty: req.qty, root, origin } as const;
    return checkEntry(limits, order, { now: this.now(), contract, accountExposure: this.exposure.total(req.accountId) });
  }

  /** Replaces an account's guards; its lock stays. */
  setGuards(accountId: string, config: GuardConfig): GuardStatus {
    const state = this.accounts.get(accountId);
    // Whether the account is inside a window is known now, not at the next tick: a window that
    // closes before that tick still flattens (flattenAtEnd), as after a start.
    if (state) {
      const wasInside = state.inside;
      state.config = config;
      state.inside = this.insideNow(config);
      state.limits = {};
      // Inside a window at the last look and outside now: a window end the next tick would have
      // flattened at, whether it came on the clock since that look or with these guards (re-probe:
      // the same guards saved again 100 ms after the end cancelled the flatten; long 3 after it).
      if (config.tradingWindows?.flattenAtEnd && wasInside === true && state.inside === false) {
        this.flattenFor(accountId, state, 'trading_window', 'the trading window ended');
      }
    } else {
      this.accounts.set(accountId, fresh(config, null, this.insideNow(config)));
    }
    this.syncQuotes();
    this.checkPnl(accountId);
    return this.status(accountId);
  }

  /** Whether a lock or a closed trading window owes the account a flatten still to run (or running). */
  owesFlatten(accountId: string): boolean {
    const state = this.accounts.get(accountId);
    return !!state && (state.owed !== null || state.flattening);
  }

  /** Kill switch: locks the account until unlocked, then flattens it unless `flattenToo` is false. */
  async lock(accountId: string, flattenToo: boolean, detail = 'kill switch', since?: number): Promise<LockResult> {
    const state = this.state(accountId);
    if (state.lock?.guard !== 'kill_switch') {
      // A P&L lock (or none) under the kill switch: it still ends only with its day, not at the unlock.
      state.dayLock = state.lock;
      // The flatten is stored as owed with the lock itself, before it is sent: a crash while it
      // runs leaves a lock that still owes it, and the next actor runs it (fresh()). The day's lock
      // under it is stored with it too.
      const under = state.dayLock ? { under: state.dayLock } : {};
      this.setLock(accountId, state, { guard: 'kill_switch', since: since ?? this.now(), until: null, detail, ...(flattenToo && { flattenOwed: true as const }), ...under });
    } else if (flattenToo) {
      this.oweOnLock(accountId, state, 'kill_switch', detail);
    }
    let result: LockResult['flatten'] = null;
    if (flattenToo) {
      try {
        result = await flatten(this.ctx, { type: 'flatten', accountId });
        if (!stillOwed(state, 'kill_switch')) {
          // Unlocked while the flatten ran: the positions are the trader's again, nothing the kill switch owed is.
          if (state.owed?.guard === 'kill_switch') state.owed = null;
        } else if (outstandingOrders(this.ctx, accountId) > 0 || notClosed(result)) {
          // An order sent before the lock whose outcome the broker has not given (still on its
          // way, or timed out) may still fill, or a position could not be closed: the flatten
          // stays owed, and runs again every tick until it is done.
          state.owed = owing(state.owed, 'kill_switch', detail);
          if (state.lock?.guard === 'kill_switch' && !state.lock.flattenOwed) state.lock = { ...state.lock, flattenOwed: true };
          // A position not closed is a failed flatten, said as one (fault probe: 'flattened' for it).
          this.emit(accountId, 'kill_switch', notClosed(result) ? 'flatten-failed' : 'flattened', `${summary(result)}; ${notClosed(result) ? NOT_CLOSED_RETRY : UNKNOWN_PENDING}`, state.lock);
        } else {
          state.owed = null;
          this.emit(accountId, 'kill_switch', 'flattened', summary(result), this.settleOwed(state));
        }
      } catch (err) {
        if (err instanceof AppError && (err.code === 'NOT_FOUND' || err.code === 'ACCOUNT_INACTIVE')) throw err;
        if (!stillOwed(state, 'kill_switch')) {
          // Unlocked while it ran: dropped, as unlock drops a flatten still pending (another guard's stays owed).
          if (state.owed?.guard === 'kill_switch') state.owed = null;
          return { status: this.status(accountId), flatten: { error: `${err instanceof Error ? err.message : String(err)}; the account was unlocked meanwhile: not retried` } };
        }
        // The lock holds; the flatten is owed (on the stored lock too, so a restarted actor still
        // owes it) and runs at the first tick the connection is CONNECTED.
        const message = owedFlattenMessage(err);
        state.owed = owing(state.owed, 'kill_switch', detail);
        if (state.lock?.guard === 'kill_switch' && !state.lock.flattenOwed) state.lock = { ...state.lock, flattenOwed: true };
        this.emit(accountId, 'kill_switch', 'flatten-failed', message, state.lock);
        result = { error: message };
      }
    }
    return { status: this.status(accountId), flatten: result };
  }

  /**
   * Lifts a kill-switch lock; a P&L lock lasts until the next trading day (409), and one that
   * tripped under the kill switch is what remains after it.
   */
  unlock(accountId: string): GuardStatus {
    const state = this.accounts.get(accountId);
    const lock = state?.lock;
    if (!state || !lock) return this.status(accountId);
    if (lock.guard !== 'kill_switch') {
      const until = lock.until === null ? null : new Date(lock.until).toISOString();
      throw new AppError('CONFLICT', `the account is locked by ${lock.guard} until ${until}: such a lock lifts when the next trading day begins`, {
        guard: lock.guard,
        lockedUntil: until,
      });
    }
    // A flatten the kill switch still owed is dropped with it: after an unlock, positions are the trader's again.
    if (state.owed?.guard === 'kill_switch') state.owed = null;
    this.clearLock(accountId, state, 'kill_switch', 'unlocked');
    const dayLock = state.dayLock;
    state.dayLock = null;
    if (dayLock?.until && this.now() < dayLock.until) this.setLock(accountId, state, dayLock);
    return this.status(accountId);
  }

  /** The guards in force on an account and what they see now. */
  status(accountId: string): GuardStatus {
    const state = this.accounts.get(accountId);
    if (state) this.expire(accountId, state);
    const pnl = this.pnl.of(accountId);
    const tw = state?.config.tradingWindows;
    const positions = this.exposure.contracts(accountId).map(({ contractId, exposure }) => ({
      symbol: String(this.ctx.mirror.get('contract', contractId)?.name ?? contractId),
      ...exposure,
      exposure: exposureOf(exposure),
    }));
    return {
      accountId,
      config: state?.config ?? { ...NO_GUARDS },
      lock: state?.lock ?? null,
      day: { ...this.pnl.window, realized: pnl.realized, fees: pnl.fees, open: pnl.open, pnl: pnl.total },
      inWindow: tw ? inWindows(tw, this.now()) : null,
      positions,
    };
  }

  /** After a (re)connect: quote subscriptions are gone with the old socket. */
  connected(): void {
    this.deps.quotes?.reset();
    this.syncQuotes();
  }

  /** Inside one of the config's trading windows now; null without windows. */
  private insideNow(config: GuardConfig): boolean | null {
    return config.tradingWindows ? inWindows(config.tradingWindows, this.now()) : null;
  }

  /** One clock tick: a new trading day, expired locks, closed windows, owed flattens, quotes. */
  tick(): void {
    this.pnl.roll();
    const now = this.now();
    for (const [accountId, state] of this.accounts) {
      this.expire(accountId, state);
      const tw = state.config.tradingWindows;
      const inside = tw ? inWindows(tw, now) : null;
      if (tw?.flattenAtEnd && state.inside === true && inside === false) {
        this.flattenFor(accountId, state, 'trading_window', 'the trading window ended');
      }
      state.inside = inside;
      // An owed flatten waits for the connection (a FAILED one only comes back when restarted).
      if (state.owed && !state.flattening && this.connectedNow()) this.flattenFor(accountId, state, state.owed.guard, state.owed.detail);
      this.checkPnl(accountId);
    }
    this.syncQuotes();
  }

  private state(accountId: string): AccountState {
    let state = this.accounts.get(accountId);
    if (!state) this.accounts.set(accountId, (state = fresh({ ...NO_GUARDS }, null, null)));
    return state;
  }

  /** A lock whose time is up is lifted (a P&L lock at the next trading day). */
  private expire(accountId: string, state: AccountState): void {
    const lock = state.lock;
    if (lock && lock.until !== null && this.now() >= lock.until) this.clearLock(accountId, state, lock.guard, 'the next trading day began');
  }

  /** Trips the daily loss limit or profit target once per trading day: lock until the day ends, cancel and flatten. */
  private checkPnl(accountId: string): void {
    const state = this.accounts.get(accountId);
    if (!state || (state.config.dailyLossLimit === null && state.config.dailyProfitTarget === null)) return;
    // A new trading day starts from zero at once, not at the next tick.
    this.pnl.roll();
    const day = this.pnl.window;
    if (state.trippedDay === day.start) return;
    // Locked for this day already (e.g. the lock was restored at a restart, under a kill switch too): nothing to trip twice.
    const dayLock = state.lock?.guard === 'kill_switch' ? state.dayLock : state.lock;
    if (dayLock && dayLock.guard !== 'kill_switch' && dayLock.until === day.end) {
      state.trippedDay = day.start;
      return;
    }
    const pnl = this.pnl.of(accountId).total;
    const trip = pnlTrip(state.config, pnl);
    if (!trip) return;
    state.trippedDay = day.start;
    const what = trip.guard === 'daily_loss' ? `the daily loss limit of ${trip.limit}` : `the profit target of ${trip.limit}`;
    const detail = `P&L of the day ${pnl} reached ${what}`;
    // A kill-switch lock is stronger (it lasts until unlocked): keep it, flatten all the same,
    // and keep the day's lock for when it is lifted.
    // The flatten is stored as owed with the lock before it is sent (see lock()).
    const lock: LockState = { guard: trip.guard, since: this.now(), until: day.end, detail, flattenOwed: true };
    if (state.lock?.guard === 'kill_switch') {
      state.dayLock = lock;
      // Stored with the kill switch (a restarted actor keeps it), owing the flatten.
      state.lock = { ...state.lock, flattenOwed: true, under: lock };
      this.emit(accountId, trip.guard, 'locked', `${detail}: under the kill switch, flattening`, state.lock);
    } else this.setLock(accountId, state, lock);
    this.flattenFor(accountId, state, trip.guard, detail);
  }

  private flattenFor(accountId: string, state: AccountState, guard: GuardName, detail: string): void {
    const firstTry = state.owed === null;
    // Owed first, even while another flatten runs: a daily loss tripping during the kill switch's
    // retry was dropped with the kill switch at the unlock (re-probe).
    state.owed = owing(state.owed, guard, detail);
    if (state.flattening) return;
    state.flattening = true;
    flatten(this.ctx, { type: 'flatten', accountId })
      .then((result) => {
        if (!stillOwed(state, guard)) {
          if (state.owed?.guard === guard) state.owed = null;
          return;
        }
        if (outstandingOrders(this.ctx, accountId) > 0 || notClosed(result)) {
          // Still owed (see lock): said once, done for good when the last such order is known
          // and every position is closed.
          if (firstTry) this.emit(accountId, guard, notClosed(result) ? 'flatten-failed' : 'flattened', `${detail}: ${summary(result)}; ${notClosed(result) ? NOT_CLOSED_RETRY : UNKNOWN_PENDING}`);
          return;
        }
        state.owed = null;
        this.emit(accountId, guard, 'flattened', `${detail}: ${summary(result)}`, this.settleOwed(state));
      })
      .catch((err: unknown) => {
        const code = err instanceof AppError ? err.code : 'INTERNAL';
        const message = `${detail}: ${err instanceof Error ? err.message : String(err)}`;
        // An account the broker no longer reports has nothing left to flatten here.
        let settled: LockState | undefined;
        if (!stillOwed(state, guard)) {
          if (state.owed?.guard === guard) state.owed = null;
        } else if (code === 'ACCOUNT_INACTIVE' || code === 'NOT_FOUND') {
          state.owed = null;
          settled = this.settleOwed(state);
        }
        if (firstTry || settled) this.emit(accountId, guard, 'flatten-failed', state.owed ? `${message}; retrying` : message, settled);
        this.ctx.logger.warn({ err, accountId, guard }, 'guard flatten failed');
      })
      .finally(() => {
        state.flattening = false;
      });
  }

  /** Marks the account's current lock as owing a flatten, and stores it so, before the flatten is sent. */
  private oweOnLock(accountId: string, state: AccountState, guard: GuardName, detail: string): void {
    if (!state.lock || state.lock.flattenOwed) return;
    state.lock = { ...state.lock, flattenOwed: true };
    this.emit(accountId, guard, 'locked', `${detail}: flattening`, state.lock);
  }

  /** The lock without its owed flatten once that went through (for the event that stores it), or undefined when unchanged. */
  private settleOwed(state: AccountState): LockState | undefined {
    // A day's P&L lock kept under a kill switch owed the same flatten.
    if (state.dayLock?.flattenOwed) {
      const { flattenOwed: _dayDone, ...dayLock } = state.dayLock;
      state.dayLock = dayLock;
    }
    if (!state.lock?.flattenOwed) return undefined;
    const { flattenOwed: _done, under: _under, ...lock } = state.lock;
    state.lock = state.dayLock && lock.guard === 'kill_switch' ? { ...lock, under: state.dayLock } : lock;
    return state.lock;
  }

  private connectedNow(): boolean {
    try {
      this.ctx.conn.requireConnected();
      return true;
    } catch {
      return false;
    }
  }

  private setLock(accountId: string, state: AccountState, lock: LockState): void {
    state.lock = lock;
    this.emit(accountId, lock.guard, 'locked', lock.detail, lock);
  }

  private clearLock(accountId: string, state: AccountState, guard: GuardName, detail: string): void {
    state.lock = null;
    this.emit(accountId, guard, 'unlocked', detail, null);
  }

  private refuse(accountId: string, r: GuardRefusal): never {
    this.emit(accountId, r.guard, 'refused', r.detail);
    throw new AppError('RISK_GUARD', r.detail, { guard: r.guard, limit: r.limit, value: r.value, accountId });
  }

  private emit(accountId: string, guard: GuardName, action: GuardEvent['action'], detail: string, lock?: LockState | null): void {
    const event: GuardEvent = { type: 'guard', connectionId: this.ctx.conn.spec.connectionId, accountId, guard, action, ts: this.now(), detail };
    if (lock !== undefined) event.lock = lock;
    this.ctx.emit(event);
  }

  /**
   * Quotes for every contract any account holds, P&L limit or not: the day's P&L a trader reads
   * (and sets a loss limit against) must be live. Quoted only for limited accounts, the rest showed
   * their last fill's price: a limit saved against -$5,000 shown locked and flattened at once at
   * the -$10,500 the first quote gave, with no warning (web probe).
   */
  private syncQuotes(): void {
    const quotes = this.deps.quotes;
    if (!quotes) return;
    try {
      this.ctx.conn.requireConnected();
    } catch {
      return;
    }
    quotes.want(this.pnl.heldByAny());
  }
}

/** How far back a window end missed while the actor was not running still owes its flatten. */
const MISSED_WINDOW_END_MS = 12 * 60 * 60_000;

function fresh(config: GuardConfig, lock: LockState | null, inside: boolean | null): AccountState {
  const dayLock = lock?.guard === 'kill_switch' ? (lock.under ?? null) : null;
  // A lock stored with its flatten still owed (the connection was down, or the service stopped
  // while it ran) owes it here too: it runs once CONNECTED.
  // The day's lock under a kill switch owing its flatten is owed as its own (it outlives an unlock).
  const owed = dayLock?.flattenOwed ? { guard: dayLock.guard, detail: dayLock.detail } : lock?.flattenOwed ? { guard: lock.guard, detail: lock.detail } : null;
  return { config, lock, inside, owed, flattening: false, trippedDay: null, dayLock, limits: {} };
}

/** What a kill switch answers when its flatten cannot run now. */
function owedFlattenMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof AppError && err.code === 'CONNECTION_FAILED') {
    return `not flattened: ${message}. The lock holds, and the flatten runs once the connection is CONNECTED again`;
  }
  return `${message}; the lock holds, and the flatten is retried until it goes through`;
}

/** A flatten that left a position open (its liquidation failed or was not answered). */
function notClosed(result: FlattenResult): boolean {
  return result.positions.some((p) => p.status === 'failed');
}

/**
 * Whether the flatten a guard asked for is still wanted: a kill switch's only while the account
 * is still locked by it (unlock drops it, even one running), a P&L limit's while its lock (or the
 * one kept under a kill switch) lasts; a trading window's always.
 */
/**
 * The flatten owed once `guard` asks for one: a flatten owed already for a guard that outlives an
 * unlock (a day's P&L, a window's end) stays the one owed, so that lifting the kill switch does
 * not drop it (re-probe: a daily-loss flatten owed, then lock and unlock: long 2 for good).
 */
function owing(current: AccountState['owed'], guard: GuardName, detail: string): NonNullable<AccountState['owed']> {
  return current && current.guard !== 'kill_switch' && guard === 'kill_switch' ? current : { guard, detail };
}

function stillOwed(state: AccountState, guard: GuardName): boolean {
  if (guard === 'kill_switch') return state.lock?.guard === 'kill_switch';
  if (guard === 'daily_loss' || guard === 'profit_target') return state.lock?.guard === guard || state.dayLock?.guard === guard || state.lock?.guard === 'kill_switch';
  return true;
}

/** What a flatten that left a position open says: it is owed, and runs again. */
const NOT_CLOSED_RETRY = 'a position was not closed: flattening again every second until it is';

/** Why a flatten that went through is still owed. */
const UNKNOWN_PENDING = 'an order sent before it has no known outcome yet (on its way, or a broker timeout): flattening again once it is known';

function summary(r: FlattenResult): string {
  const closed = r.positions.map((p) => `${p.symbol} ${p.status}${p.status === 'liquidated' ? ` (${p.closedQty})` : ''}`);
  return `cancelled ${r.cancelledOrderIds.length} orders${closed.length ? `, ${closed.join(', ')}` : ', no position'}`;
}
