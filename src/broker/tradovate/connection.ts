/**
 * The lifecycle of one broker connection: authenticate, open and authorize the socket,
 * resync the mirror from a fresh `user/syncrequest` snapshot, report CONNECTED; on a drop or
 * silence go RECONNECTING and retry with capped exponential backoff and jitter; on a dead token
 * go AUTH_EXPIRED and re-authenticate; on bad credentials or a captcha go FAILED and stop
 * (a retry would only extend the broker's lockout). Renews the token before it expires.
 */
import type { Logger } from '../../log.js';
import { AppError } from '../../domain/problems.js';
import { renewAccessToken, renewDelayMs, requestAccessToken, type AccessToken } from './rest-auth.js';
import { AuthRejectedError, BrokerStatusError, TradovateSocket, type CloseReason, type LateAnswer } from './ws-client.js';
import { Mirror, SYNC_ENTITY_TYPES, type Entity } from './mirror.js';
import { syncRequestBody } from './requests.js';
import { BrokerBudget, type RequestClass } from './budget.js';
import { BROKER_TIMEOUTS, TOKEN_RENEWAL, type ConnectionTuning } from '../../tuning.js';
import { connectionFailed, FIRST_ATTEMPT_DETAIL, type ConnectionSpec, type ConnectionStatus, type StatusEvent, type StatusReason } from '../../domain/connections.js';

/** Capped exponential backoff with jitter in [50%, 100%] of the step. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const step = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(step * (0.5 + random() / 2));
}

/** A socket up at least this long counts as stable: its drop is reconnected at once, not backed off. */
const STABLE_CONNECTION_MS = 30_000;

/** How long a position check waits before it reads a difference again (checkPositions). */
const POSITION_RECHECK_MS = 1_000;

/** Trading that finds the connection backing off brings the next attempt forward, but no sooner than this after the last one began (hurry). */
const HURRY_GAP_MS = 2_000;

/** Why a connection is in the broker's rate-limit hold; `on`: the request the 429 answered. */
function held(on: string): string {
  return `broker rate limit (429)${on}: Tradovate holds the login out for up to an hour, and every request meanwhile extends it; the connection sends nothing and logs in again by itself once the hour has passed`;
}

/** `hold`: the broker rate-limited us (429): wait out its lockout, then log in again. */
type Outcome = 'closed' | 'retry' | 'retry-now' | 'hold' | 'fatal' | 'stopped';

/** One broker connection with its mirror. Emits a StatusEvent on every transition. */
export class BrokerConnection {
  readonly mirror = new Mirror();
  readonly budget: BrokerBudget;
  private statusValue: ConnectionStatus = 'CONNECTING';
  /** Why the connection is in its current status (the last event's detail). */
  private statusDetail: string | undefined;
  private token: AccessToken | null = null;
  private socket: TradovateSocket | null = null;
  private stopped = false;
  private everConnected = false;
  private attempt = 0;
  private authRejections = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private positionTimer: NodeJS.Timeout | undefined;
  private sleeper: { timer: NodeJS.Timeout; wake(): void; backoff: boolean } | undefined;
  /** When the last connect attempt began (hurry's gap). */
  private attemptAt = 0;
  private runner: Promise<void> | undefined;
  /** Until when the broker's rate limit (429) holds the login out (ms since the epoch): nothing is sent before. */
  private holdUntil = 0;
  /** Renewals failed in a row (their retries back off). */
  private renewFailures = 0;
  /** When the socket last became CONNECTED (ms since the epoch). */
  private connectedAt = 0;
  private readonly contractFetches = new Map<string, Promise<void>>();
  /** Contracts the broker could not name: not asked again on every event. */
  private readonly contractMisses = new Set<string>();
  private marketData: ((data: unknown) => void) | undefined;

  constructor(
    readonly spec: ConnectionSpec,
    private readonly tuning: ConnectionTuning,
    private readonly logger: Logger,
    private readonly onStatus: (event: StatusEvent) => void,
  ) {
    this.budget = new BrokerBudget(spec.budget);
    // A hold that began on another node, or before the worker restarted, still holds.
    if (spec.rateLimitedUntil !== undefined && spec.rateLimitedUntil > Date.now()) this.holdUntil = spec.rateLimitedUntil;
  }

  get status(): ConnectionStatus {
    return this.statusValue;
  }

  get userId(): number {
    return this.token?.userId ?? 0;
  }

  /**
   * Starts the connect loop (idempotent). `resume` is for an actor restarted after its worker
   * crashed: the front already shows RECONNECTING, and getting back is a reconnect.
   */
  start(resume = false): void {
    if (resume && !this.runner) {
      this.statusValue = 'RECONNECTING';
      this.everConnected = true;
    }
    this.runner ??= this.run().catch((err) => {
      this.logger.error({ err }, 'connection loop crashed');
      this.setStatus('FAILED', 'fatal-error', err instanceof Error ? err.message : String(err));
    });
  }

  /** Resolves when the connect loop has ended (FAILED, or stopped). */
  async done(): Promise<void> {
    await this.runner;
  }

  /**
   * Stops for good: closes the socket and reports nothing more. The status becomes DISABLED;
   * announcing it is the owner's job (the supervisor does, once, for a removed connection).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    clearInterval(this.pollTimer);
    clearInterval(this.positionTimer);
    this.sleeper?.wake();
    this.socket?.close();
    await this.runner;
    this.statusValue = 'DISABLED';
  }

  /** Callers waiting for the next CONNECTED (a request refused for a dead token, sent again then). */
  private readonly connectedWaiters = new Set<(connected: boolean) => void>();

  /** Resolves true at the next CONNECTED within `ms`, false at FAILED, DISABLED or the deadline. */
  private nextConnected(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (connected: boolean) => {
        clearTimeout(timer);
        this.connectedWaiters.delete(done);
        resolve(connected);
      };
      const timer = setTimeout(() => done(false), ms);
      this.connectedWaiters.add(done);
    });
  }

  private setStatus(status: ConnectionStatus, reason: StatusReason, detail?: string): void {
    if (this.stopped) return;
    if (status === 'CONNECTED' || status === 'FAILED') for (const w of [...this.connectedWaiters]) w(status === 'CONNECTED');
    this.statusValue = status;
    this.statusDetail = detail;
    const event: StatusEvent = { type: 'status', connectionId: this.spec.connectionId, status, reason, ts: Date.now() };
    if (detail) event.detail = detail;
    if (status === 'FAILED' && this.holdUntil > event.ts) event.retryAt = this.holdUntil;
    this.logger.info({ status, reason, detail }, 'connection status');
    this.onStatus(event);
  }

  /** `backoff`: a wait between attempts that hurry may cut short (never a broker-imposed hold or penalty). */
  private sleep(ms: number, backoff = false): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleeper = undefined;
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleeper = { timer, wake, backoff };
    });
  }

  /**
   * An order, cancel or flatten found the connection down: the next attempt is made now rather
   * than at the end of a backoff that repeated drops have grown to as much as backoffMaxMs (30 s),
   * so an alert arriving as the broker comes back is placed within its wait (TradingView never
   * sends it again) instead of answered 503. At most one attempt per HURRY_GAP_MS this way, and
   * never inside the broker's rate-limit hold or a login penalty, which asking again extends.
   */
  hurry(): void {
    if (this.sleeper?.backoff && Date.now() - this.attemptAt >= HURRY_GAP_MS) {
      this.logger.info('trading is waiting: reconnecting now rather than at the end of the backoff');
      this.sleeper.wake();
    }
  }

  private async run(): Promise<void> {
    if (!this.everConnected) this.setStatus('CONNECTING', 'connect', FIRST_ATTEMPT_DETAIL);
    while (!this.stopped) {
      const outcome = await this.connectOnce();
      if (outcome === 'fatal' || outcome === 'stopped' || this.stopped) return;
      if (outcome === 'hold') {
        await this.sleep(Math.max(0, this.holdUntil - Date.now()));
        if (this.stopped) return;
        this.attempt = 0;
        this.setStatus('RECONNECTING', 'reconnect', "the broker's rate-limit hold has passed: logging in again");
        continue;
      }
      // A socket that had stayed up a while comes back at once; one dropped soon after it came up
      // (the broker closing the oldest of too many sessions, revoking its token) backs off like a
      // failed attempt: coming back at once each time would fight the other session for ever.
      const shortLived = outcome === 'closed' && Date.now() - this.connectedAt < STABLE_CONNECTION_MS;
      if (outcome === 'closed' && !shortLived) this.attempt = 0;
      if (outcome === 'retry' || shortLived) await this.sleep(backoffMs(this.attempt++, this.tuning.backoffBaseMs, this.tuning.backoffMaxMs), true);
      else await this.sleep(backoffMs(0, Math.min(100, this.tuning.backoffBaseMs), this.tuning.backoffMaxMs), true);
    }
  }

  private async authenticate(): Promise<Outcome | null> {
    this.budget.record();
    const outcome = await requestAccessToken(this.spec.restUrl, this.spec.credentials, { timeoutMs: this.spec.requestTimeoutMs ?? BROKER_TIMEOUTS.requestMs });
    if (outcome.kind === 'token') {
      this.token = outcome.token;
      this.renewFailures = 0;
      this.scheduleRenew();
      return null;
    }
    if (outcome.kind === 'rejected' || outcome.kind === 'unauthorized') {
      this.setStatus('FAILED', 'fatal-error', `authentication refused: ${outcome.reason}`);
      return 'fatal';
    }
    if (outcome.kind === 'rate-limited') {
      return this.rateLimited(held(' on login'));
    }
    this.logger.warn({ reason: outcome.reason }, 'authentication unavailable');
    this.noteDown(outcome.reason);
    // Asking again inside a penalty only extends it: wait it out.
    if (outcome.retryAfterMs) await this.sleep(outcome.retryAfterMs);
    return 'retry';
  }

  /**
   * A failed attempt while connected (or after) is a disconnect. Before the first, we stay
   * CONNECTING, but say why (the broker unreachable, its login endpoint down): a connection that
   * never comes up must not read "starting" for ever. Reported again only when the reason changes.
   */
  private noteDown(detail: string): void {
    if (this.statusValue === 'CONNECTED') this.setStatus('RECONNECTING', 'disconnect', detail);
    else if (this.statusValue === 'CONNECTING') {
      const why = `not connected yet: ${detail}; retrying`;
      if (this.statusDetail !== why) this.setStatus('CONNECTING', 'connect', why);
    }
  }

  private async connectOnce(): Promise<Outcome> {
    this.attemptAt = Date.now();
    if (this.holdUntil > Date.now()) return this.rateLimited(held(''), false);
    if (!this.token || this.token.expiresAt <= Date.now()) {
      const failed = await this.authenticate();
      if (failed) return failed;
    }
    if (this.stopped) return 'stopped';
    let closed!: (r: { reason: CloseReason; detail: string }) => void;
    const closedP = new Promise<{ reason: CloseReason; detail: string }>((r) => (closed = r));
    this.budget.record();
    try {
      this.socket = await TradovateSocket.connect(
        this.spec.wsUrl,
        this.token!.accessToken,
        {
          onEvent: (m) => {
            if (m.event === 'md') return this.marketData?.(m.data);
            if (m.event !== 'props' || !m.data || typeof m.data !== 'object') return;
            const d = m.data as { entityType?: unknown; eventType?: unknown; entity?: unknown };
            if (typeof d.entityType === 'string') this.mirror.apply(d.entityType, String(d.eventType), d.entity);
          },
          onClose: (reason, detail) => closed({ reason, detail }),
        },
        {
          heartbeatMs: this.tuning.heartbeatMs,
          silenceMs: this.tuning.silenceMs,
          requestTimeoutMs: this.spec.requestTimeoutMs ?? BROKER_TIMEOUTS.requestMs,
          lateAnswerMs: this.tuning.unknownOutcomeMaxMs,
        },
      );
    } catch (err) {
      if (err instanceof AuthRejectedError) return this.authExpired(err.message);
      this.noteDown(err instanceof Error ? err.message : String(err));
      return 'retry';
    }
    if (this.stopped) {
      this.socket.close();
      return 'stopped';
    }
    try {
      await this.resync();
    } catch (err) {
      this.socket.close();
      if (err instanceof BrokerStatusError && err.status === 401) return this.authExpired('syncrequest refused');
      if (err instanceof AppError && (err.extensions.brokerStatus === 429 || err.extensions.brokerStatus === 423)) return this.rateLimited(err.message);
      this.noteDown(`resync failed: ${err instanceof Error ? err.message : String(err)}`);
      // A penalty longer than the socket waits on its own (p-time): asking again sooner extends it.
      if (err instanceof AppError && err.extensions.penalty === true && err.retryAfterSeconds) await this.sleep(err.retryAfterSeconds * 1000);
      return 'retry';
    }
    this.authRejections = 0;
    this.connectedAt = Date.now();
    // A quiet spell of the socket before is no reason to read again what this connect just read.
    this.quietSeen = false;
    this.setStatus('CONNECTED', this.everConnected ? 'reconnect' : 'connect');
    this.everConnected = true;
    this.startPolling();
    const { reason, detail } = await closedP;
    clearInterval(this.pollTimer);
    clearInterval(this.positionTimer);
    this.socket = null;
    if (this.stopped || reason === 'client') return 'stopped';
    if (reason === 'unauthorized') return this.authExpired(detail);
    if (reason === 'rate-limited') return this.rateLimited(detail);
    this.setStatus('RECONNECTING', 'disconnect', `${reason}: ${detail}`);
    return 'closed';
  }

  /**
   * The broker answered 429: asking again inside its lockout extends it, so nothing is sent until
   * the hold has passed (FAILED meanwhile, saying when it logs in again; a manual reconnect may
   * try sooner), then the connection logs in again by itself: a bot is not left stopped for good.
   */
  private rateLimited(detail: string, begin = true): Outcome {
    if (begin) this.holdUntil = Date.now() + this.tuning.rateLimitHoldMs;
    // Renewing the token is a request too: none inside the hold (re-probe: one every 15 s).
    clearTimeout(this.renewTimer);
    this.token = null;
    const at = new Date(this.holdUntil).toISOString();
    this.setStatus('FAILED', 'fatal-error', `${detail} (at ${at}; POST /connections/{id}/reconnect tries sooner)`);
    return 'hold';
  }

  private authExpired(detail: string): Outcome {
    this.token = null;
    clearTimeout(this.renewTimer);
    if (++this.authRejections > this.tuning.maxAuthRejections) {
      this.setStatus('FAILED', 'fatal-error', `access token refused ${this.authRejections} times: ${detail}`);
      return 'fatal';
    }
    this.setStatus('AUTH_EXPIRED', 'auth-expired', detail);
    return 'retry-now';
  }

  /** Fresh snapshot replacing the whole mirror: nothing from before the gap survives. */
  private async resync(): Promise<void> {
    this.budget.record();
    this.mirror.expectSnapshot();
    const d = await this.socket!.request('user/syncrequest', { body: syncRequestBody(this.userId, SYNC_ENTITY_TYPES) });
    if (!d || typeof d !== 'object') throw new Error('empty sync snapshot');
    this.mirror.replace(d as Record<string, unknown>);
    const missing = this.mirror.missingContractIds();
    if (missing.length) {
      this.budget.record();
      const list = await this.socket!.request('contract/items', { query: `ids=${missing.join(',')}` });
      if (Array.isArray(list)) for (const c of list) if (c && typeof c === 'object' && typeof (c as { id?: unknown }).id === 'number') this.mirror.put('contract', c as Entity);
    }
  }

  /**
   * Makes sure the mirror knows a contract (brokers do not push contract entities): by id for
   * an entity that references one, by name before placing an order. Failures are left to the
   * caller's fallback naming.
   */
  async ensureContract(ref: { id: number } | { name: string }): Promise<void> {
    if ('id' in ref ? this.mirror.get('contract', ref.id) : this.mirror.all('contract').some((c) => c.name === ref.name)) return;
    const key = 'id' in ref ? `id:${ref.id}` : `name:${ref.name}`;
    if (this.contractMisses.has(key)) return;
    if (this.contractFetches.has(key)) return this.contractFetches.get(key);
    // A broker slower than the request's deadline answers it late: the contract is still taken.
    // Dropped, a position in it stayed named by its id for good, and an exit naming its symbol
    // found nothing to close (re-probe at 12 s a request: long where the strategy was flat).
    const found = (c: unknown): boolean => {
      if (!c || typeof c !== 'object' || typeof (c as { id?: unknown }).id !== 'number') return false;
      this.mirror.put('contract', c as Entity);
      return true;
    };
    const onLate = (answer: LateAnswer) => {
      if (answer.status === 200) found(answer.data);
    };
    const p = (async () => {
      try {
        const c = 'id' in ref
          ? await this.send('contract/item', undefined, { query: `id=${ref.id}`, onLate })
          : await this.send('contract/find', undefined, { query: `name=${encodeURIComponent(ref.name)}`, onLate });
        if (!found(c)) this.contractMisses.add(key);
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND') this.contractMisses.add(key);
        this.logger.debug({ err, ref }, 'contract lookup failed');
      } finally {
        this.contractFetches.delete(key);
      }
    })();
    this.contractFetches.set(key, p);
    return p;
  }

  private scheduleRenew(): void {
    clearTimeout(this.renewTimer);
    if (!this.token || this.stopped) return;
    this.renewTimer = setTimeout(() => void this.renew(), renewDelayMs(this.token, Date.now()));
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    const current = this.token;
    if (!current || this.stopped || this.holdUntil > Date.now()) return;
    const outcome = await renewAccessToken(this.spec.restUrl, current.accessToken);
    if (this.token !== current) return;
    if (outcome.kind === 'rate-limited') {
      // The broker holds us out: the socket closes as for a 429 on it, and the loop waits the hold out.
      this.holdUntil = Date.now() + this.tuning.rateLimitHoldMs;
      this.socket?.closeFor('rate-limited', held(' on token renewal'));
      this.token = null;
      return;
    }
    if (outcome.kind === 'token') {
      this.renewFailures = 0;
      this.token = { ...outcome.token, userId: outcome.token.userId || current.userId };
      if (!this.token.mdAccessToken && current.mdAccessToken) this.token.mdAccessToken = current.mdAccessToken;
      this.scheduleRenew();
    } else if (outcome.kind === 'unauthorized' || outcome.kind === 'rejected') {
      // The next (re)connect authenticates from scratch; the open socket keeps its session.
      this.token = null;
    } else {
      // Not every 15 s for the ten minutes before expiry (40 of Tradovate's 15 an hour): doubling,
      // and never before a p-ticket's p-time has passed.
      const backoff = Math.min(TOKEN_RENEWAL.retryMs * 2 ** this.renewFailures++, TOKEN_RENEWAL.retryMaxMs);
      this.renewTimer = setTimeout(() => void this.renew(), Math.max(backoff, outcome.retryAfterMs ?? 0));
      this.renewTimer.unref();
    }
  }

  private startPolling(): void {
    clearInterval(this.pollTimer);
    clearInterval(this.positionTimer);
    if (this.tuning.accountPollMs > 0) {
      this.pollTimer = setInterval(() => void this.pollAccounts(), this.tuning.accountPollMs);
      this.pollTimer.unref();
    }
    if (this.tuning.positionCheckMs > 0) {
      this.positionTimer = setInterval(() => void this.checkPositions(), this.tuning.positionCheckMs);
      this.positionTimer.unref();
    }
  }

  /**
   * Compares the mirror's positions with the broker's own list (`position/list`): events the
   * broker sent into a gap shorter than the silence watchdog are lost, and the mirror then held a
   * position (and its bracket legs) the broker had closed, for good (money probe: leg fitting then
   * cancelled a new bracket's take-profit over the dead legs, and the position was left without a
   * stop). The answer comes on the socket after every event sent before it, so the mirror it is
   * compared with has them all; a difference is read once more before it counts. One that stays
   * reads the whole state again (resyncNow). Resolves true when the mirror's positions are the
   * broker's (they agreed, or the state read landed), false when that is not known (not CONNECTED,
   * no answer, the state read failed).
   */
  async checkPositions(opts: { recheck?: boolean } = {}): Promise<boolean> {
    if (this.liveResync) return this.liveResync;
    if (this.statusValue !== 'CONNECTED') return false;
    try {
      const first = await this.positionsDiffer();
      if (first.size === 0) return true;
      // Asked for at once (a flatten about to judge positions): a difference counts as it is.
      if (opts.recheck === false) {
        return await this.resyncNow(`positions differ from the broker's: ${[...first].map(([key, d]) => `${key} ${d}`).join('; ')}`);
      }
      await new Promise((resolve) => setTimeout(resolve, POSITION_RECHECK_MS).unref());
      // Lost, not late: the same difference, neither side having moved, a moment later (under
      // steady trading a position's events may trail the broker's list by a few milliseconds).
      const again = await this.positionsDiffer();
      const kept = [...again].filter(([key, d]) => first.get(key) === d);
      if (kept.length === 0) return true;
      return this.statusValue === 'CONNECTED' && (await this.resyncNow(`positions differ from the broker's: ${kept.map(([key, d]) => `${key} ${d}`).join('; ')}`));
    } catch (err) {
      this.logger.debug({ err }, 'position check failed');
      return false;
    }
  }

  /**
   * Confirms the mirror's positions with the broker's own list: true when they agree, or once the
   * whole state has been read again where they did not; false when that read failed. Throws when
   * the list cannot be had (not CONNECTED, no answer).
   */
  async verifyPositions(): Promise<boolean> {
    this.requireConnected();
    const differ = await this.positionsDiffer();
    if (differ.size === 0) return true;
    return this.resyncNow(`positions differ from the broker's: ${[...differ].map(([key, d]) => `${key} ${d}`).join('; ')}`);
  }

  /** The positions of the accounts the mirror holds whose net differs from the broker's: `accountId:contractId` → "N here, M at the broker". */
  private async positionsDiffer(): Promise<Map<string, string>> {
    const differ = new Map<string, string>();
    const list = await this.send('position/list', undefined, { kind: 'read' });
    if (!Array.isArray(list)) return differ;
    const accounts = new Set(this.mirror.all('account').map((a) => a.id));
    const net = (e: Entity) => Number(e.netPos ?? 0);
    const key = (e: Entity) => `${String(e.accountId)}:${String(e.contractId)}`;
    const held = new Map<string, number>();
    for (const p of this.mirror.all('position')) if (accounts.has(Number(p.accountId)) && net(p) !== 0) held.set(key(p), net(p));
    for (const p of list as Entity[]) {
      if (!p || typeof p !== 'object' || !accounts.has(Number(p.accountId))) continue;
      const mine = held.get(key(p)) ?? 0;
      held.delete(key(p));
      if (mine !== net(p)) differ.set(key(p), `${mine} here, ${net(p)} at the broker`);
    }
    for (const [k, mine] of held) differ.set(k, `${mine} here, none at the broker`);
    return differ;
  }

  /** A resync made while CONNECTED (resyncNow), one at a time. */
  private liveResync: Promise<boolean> | undefined;

  /**
   * The whole account state being read again right now (resyncNow), or undefined: until it lands
   * the mirror holds what it held before, which events lost in a silence made wrong. Reads, orders
   * and a flatten wait for it (re-probe: a strategy entry sized against the state before a resync
   * doubled the position, and a flatten at a broker answering in 1.2 s judged the positions before
   * the resync its own position read had started).
   */
  resyncing(): Promise<boolean> | undefined {
    // Heard from again after a quiet spell the watch saw: the state read that starts is due now,
    // not at the watch's next look (until then the mirror answered as if nothing was lost).
    if (this.quietSeen && !this.liveResync) this.watchQuiet();
    return this.liveResync;
  }

  /**
   * Reads the whole account state again (a fresh `user/syncrequest` snapshot, as a reconnect does)
   * while the socket stays up: events may have been lost (positions that differ from the broker's,
   * a quiet spell, a liquidation refused for a position the mirror holds). Events that arrive while
   * it is asked are applied again over the snapshot (Mirror.expectSnapshot). Resolves true once the
   * mirror holds it; false when not CONNECTED or the request failed (the mirror is left as it was).
   */
  resyncNow(why: string): Promise<boolean> {
    if (this.liveResync) return this.liveResync;
    if (this.statusValue !== 'CONNECTED' || !this.socket?.open) return Promise.resolve(false);
    this.logger.warn({ why }, 'reading the account state again from the broker: events may have been lost');
    const run = (async () => {
      try {
        this.budget.take('read');
        await this.resync();
        return true;
      } catch (err) {
        this.logger.warn({ err, why }, 'the account state could not be read again');
        return false;
      } finally {
        this.liveResync = undefined;
      }
    })();
    this.liveResync = run;
    return run;
  }

  /** Brokers may stop reporting an account without a Deleted event; `account/list` catches that. */
  async pollAccounts(): Promise<void> {
    try {
      const list = await this.send('account/list', undefined, { kind: 'read' });
      if (!Array.isArray(list)) return;
      const seen = new Set<number>();
      for (const a of list) {
        if (a && typeof a === 'object' && typeof (a as { id?: unknown }).id === 'number') {
          seen.add((a as { id: number }).id);
          this.mirror.apply('account', 'Updated', a);
        }
      }
      for (const a of this.mirror.all('account')) if (!seen.has(a.id)) this.mirror.apply('account', 'Deleted', a);
    } catch (err) {
      this.logger.debug({ err }, 'account poll failed');
    }
  }

  /** The token for a market-data socket (the broker's md token, else the access token); null before authentication. */
  marketDataToken(): string | null {
    return this.token?.mdAccessToken ?? this.token?.accessToken ?? null;
  }

  /** Receives the `md` events (quotes) of the socket's market data subscriptions. */
  onMarketData(listener: (data: unknown) => void): void {
    this.marketData = listener;
  }

  /**
   * Throws unless CONNECTED (callers must never serve stale data): CONNECTION_FAILED once the
   * connection has given up (retrying the request cannot help; reconnecting it can), else
   * BROKER_UNAVAILABLE (transient: retry).
   */
  requireConnected(): void {
    if (this.statusValue === 'FAILED') throw connectionFailed(this.spec.connectionId, this.statusDetail, this.holdUntil);
    if (this.statusValue !== 'CONNECTED' || !this.socket?.open) {
      throw new AppError('BROKER_UNAVAILABLE', `broker connection is ${this.statusValue}`, { connectionStatus: this.statusValue });
    }
  }

  /**
   * requireConnected, and the broker heard from within `readQuietMs`: a read served from the
   * mirror of a socket gone quiet (two heartbeats missed) may be missing fills and cancels the
   * broker sent into the void, long before the silence watchdog calls the socket dead.
   */
  requireFresh(): void {
    this.requireConnected();
    const quiet = this.socket?.quietMs() ?? 0;
    // Refused from the moment the actor's watch saw the quiet spell (and dropped the pages the
    // front keeps), until the next frame: reads refused and pages dropped are one step.
    if (this.quietSeen && quiet > this.tuning.readQuietMs) {
      throw new AppError(
        'BROKER_UNAVAILABLE',
        `no word from the broker for ${(quiet / 1000).toFixed(1)} s (it sends a heartbeat every 2.5 s): positions and orders may have changed since; retry shortly`,
        { connectionStatus: this.statusValue, quietMs: Math.round(quiet) },
        1,
      );
    }
  }

  /** Looks whether the broker has been quiet longer than `readQuietMs` (reads then answer 503 until a frame comes); true when that just began. */
  watchQuiet(): boolean {
    const quiet = this.statusValue === 'CONNECTED' && (this.socket?.quietMs() ?? 0) > this.tuning.readQuietMs;
    const began = quiet && !this.quietSeen;
    // Heard from again on the same socket: what the broker sent into the quiet spell may be lost.
    if (this.quietSeen && !quiet && this.statusValue === 'CONNECTED') void this.resyncNow('the broker was quiet for over two heartbeats');
    this.quietSeen = quiet;
    return began;
  }

  /** The last watchQuiet saw the broker quiet. */
  private quietSeen = false;

  /**
   * One metered broker request over the socket; non-200 answers become coded errors. `onLate`
   * receives the broker's answer if it comes after BROKER_TIMEOUT (ws-client RequestOptions).
   */
  /**
   * While the connection logs in again after its token died (AUTH_EXPIRED, well under a second
   * on a live broker), waits for it, up to `reauthRetryMs`: a request arriving then is sent once
   * it is back, not refused (re-probe: orders and alerts arriving in those 50 ms answered 503).
   */
  reauthenticated(): Promise<boolean> | undefined {
    // Nothing to wait for (the common case): no promise, so the hot path takes no extra turn.
    return this.statusValue === 'AUTH_EXPIRED' ? this.nextConnected(this.tuning.reauthRetryMs) : undefined;
  }

  async send(endpoint: string, body?: unknown, opts: { kind?: RequestClass; query?: string; onLate?: (answer: LateAnswer) => void; afterReauth?: true } = {}): Promise<unknown> {
    const relogin = opts.afterReauth ? undefined : this.reauthenticated();
    if (relogin) await relogin;
    this.requireConnected();
    this.budget.take(opts.kind ?? 'read');
    try {
      return await this.socket!.request(endpoint, { body, query: opts.query ?? '', onLate: opts.onLate, mayExecute: opts.kind === 'order' });
    } catch (err) {
      if (err instanceof BrokerStatusError) {
        // A 401 refuses the request before it runs: the token died (the broker ended this session,
        // e.g. the user logged in elsewhere past its session limit). The connection logs in again
        // at once; the request is sent once more when it is back, not lost (fault probe: the next
        // webhook alert was answered 503 and never placed, TradingView does not resend).
        if (err.status === 401 && !opts.afterReauth && (await this.nextConnected(this.tuning.reauthRetryMs))) {
          return this.send(endpoint, body, { ...opts, afterReauth: true });
        }
        if (err.status === 401) throw new AppError('BROKER_UNAVAILABLE', 'broker refused the access token; re-authenticating');
        if (err.status === 404) throw new AppError('NOT_FOUND', `broker: ${describe(err.data)}`, { brokerReason: describe(err.data) });
        throw new AppError('BROKER_REJECTED', `broker rejected ${endpoint}: ${describe(err.data)}`, { brokerReason: describe(err.data) });
      }
      throw err;
    }
  }
}

function describe(data: unknown): string {
  return typeof data === 'string' ? data : JSON.stringify(data ?? null);
}
