/**
 * One connection actor: owns a broker connection (socket, token, mirror) and its order model,
 * and answers the front's requests as plain `Result` data. Lives inside a worker thread; the
 * worker host (host.ts) may carry several of them.
 */
import type { Logger } from '../../src/log.js';
import { AppError, toErrorData } from '../../src/domain/problems.js';
import { contractRoot } from '../../src/domain/symbols.js';
import { BrokerConnection } from '../../src/broker/tradovate/connection.js';
import { BROKER_TIMEOUTS, CONNECTION_TUNING, type ConnectionTuning } from '../../src/tuning.js';
import { OrderModel } from './order-model.js';
import { checkOffsetLegs, placeOrder, placementsSettled } from './place.js';
import { settledWithin } from './in-flight.js';
import { afterResync, verifiedPositions } from './broker-read.js';
import { UnknownOutcomes } from './unknown-outcomes.js';
import { cancelOrder, watchOwedLegs } from './cancel.js';
import { flatten } from './flatten.js';
import type { ActorContext } from './context.js';
import type { ActorEvent, ActorRequest, Result, ResultMap, SupervisorNotice } from '../../src/actors/protocol.js';
import type { ConnectionSpec, StatusEvent } from '../../src/domain/connections.js';
import { BracketWatch } from './bracket-watch.js';
import { OrphanLegs } from './orphan-legs.js';
import { GuardKeeper } from './guards.js';
import { QuoteFeed } from '../../src/broker/tradovate/quotes.js';
import { OwedLegStore } from './owed-leg-store.js';
import { FinishedOrders } from './finished-orders.js';

/** The actor's clock: the real one, or a test's shared fake (tuning.fakeClock). */
function clockOf(t: ConnectionTuning): () => number {
  const fake = t.fakeClock;
  if (!fake) return Date.now;
  return () => {
    const v = Number(Atomics.load(fake, 0));
    return v === 0 ? Date.now() : v;
  };
}

/** The longest a stop waits for the broker work under way (inside the supervisor's 15 s remove call). */
const STOP_DRAIN_MS = 10_000;

/** How long a settled positions read waits for a flatten under way (its reconnect wait, 20 s, and its settling). */
const SETTLED_READ_WAIT_MS = 30_000;

/** Requests that trade, or read for trading (a strategy alert's settled positions read). */
function trading(req: ActorRequest): boolean {
  return req.type === 'place-order' || req.type === 'cancel-order' || req.type === 'flatten' || (req.type === 'positions' && !!req.settled);
}

/** A connection actor. `start()` connects; `handle()` never throws (errors come back as data). */
export class ConnectionActor {
  readonly conn: BrokerConnection;
  readonly model: OrderModel;
  readonly guards: GuardKeeper;
  private readonly ctx: ActorContext;
  private readonly brokerPointValues = new Map<string, number>();
  private readonly orphans: OrphanLegs;
  private readonly owedStore: OwedLegStore;
  /** Watches for the broker going quiet (reads answer 503 then): the front's kept pages are dropped once per quiet spell. */
  private readonly quietWatch: NodeJS.Timeout;
  /** Drops finished orders a while after they end (finished-orders.ts). */
  private readonly finishedSweep: NodeJS.Timeout;

  /** `notify`: the supervisor-only notices (working orders changed after a page was served, owed legs to store). */
  constructor(
    readonly spec: ConnectionSpec,
    emit: (event: ActorEvent) => void,
    logger: Logger,
    tuning: Partial<ConnectionTuning> = {},
    notify: (notice: SupervisorNotice) => void = () => {},
  ) {
    const t = { ...CONNECTION_TUNING, ...tuning };
    const log = logger.child({ connectionId: spec.connectionId });
    this.owedStore = new OwedLegStore(spec.connectionId, notify, log);
    this.conn = new BrokerConnection(spec, t, log, (e: StatusEvent) => {
      if (e.status === 'CONNECTED') this.guards.connected();
      emit(e);
    });
    this.model = new OrderModel(this.conn.mirror, spec, (version) => notify({ type: 'working-orders-changed', connectionId: spec.connectionId, version }));
    // A retry waits for an unknown outcome as long as a first attempt waits for the broker's answer.
    const unknown = new UnknownOutcomes(this.conn.mirror, this.model, log, spec.requestTimeoutMs ?? BROKER_TIMEOUTS.requestMs, t.unknownOutcomeMaxMs);
    this.ctx = { conn: this.conn, mirror: this.conn.mirror, model: this.model, settleMs: t.settleMs, logger: log, emit, placing: new Map(), reducing: new Map(), unknown, owedLegs: new Map(), cancelling: new Map(), flattening: new Map() };
    this.ctx.keepOwedLegs = (accountId) => this.owedStore.keep(accountId, [...this.ctx.owedLegs.values()].filter((l) => l.accountId === accountId));
    // Legs owed from before a restart (a crash during a leg cancel): placed once CONNECTED, like those of a reconnect.
    for (const g of Object.values(spec.guards ?? {})) for (const leg of g.owedLegs ?? []) this.ctx.owedLegs.set(leg.leg.orderId, leg);
    const quotes = new QuoteFeed(this.conn, (contractId, price) => this.guards.pnl.mark(contractId, price), log, spec.mdWsUrl);
    this.conn.onMarketData((data) => quotes.handle(data));
    this.guards = new GuardKeeper({ ctx: this.ctx, now: clockOf(t), tickMs: t.guardTickMs, initial: spec.guards ?? {}, quotes });
    this.ctx.guards = this.guards;
    this.ctx.market = quotes;
    const watch = new BracketWatch(this.conn.mirror, spec.connectionId);
    this.orphans = new OrphanLegs(this.ctx, spec.connectionId, t.orphanLegGraceMs);
    this.ctx.makeRoom = (accountId, coming) => this.orphans.makeRoom(accountId, coming);
    this.ctx.roomUsed = async (accountId, coming, failed) => (failed ? this.orphans.undoRoom(accountId, coming, failed.why, failed.outcomeUnknown, 0, failed.sentQty) : this.orphans.roomTaken(coming, accountId));
    this.quietWatch = setInterval(() => {
      if (this.conn.watchQuiet()) this.model.forgetPages();
    }, Math.max(50, Math.floor(t.readQuietMs / 20)));
    this.quietWatch.unref();
    const owedLegs = watchOwedLegs(this.ctx, spec.connectionId);
    const finished = new FinishedOrders(this.conn.mirror, (orderId) => this.model.forget(orderId), t.finishedOrderRetentionMs);
    this.finishedSweep = setInterval(() => finished.sweep(), Math.max(50, Math.min(60_000, Math.floor(t.finishedOrderRetentionMs / 4))));
    this.finishedSweep.unref();
    this.conn.mirror.onChange((change) => {
      finished.onChange(change);
      this.orphans.onChange(change);
      owedLegs(change);
      const alert = watch.check(change);
      if (alert) {
        log.error({ orderId: alert.orderId, detail: alert.detail }, 'bracket integrity alert');
        emit(alert);
      }
      const contractId = change.entity?.contractId;
      if (typeof contractId === 'number' && change.entityType !== 'contract' && !this.conn.mirror.get('contract', contractId) && this.conn.status === 'CONNECTED') {
        void this.conn.ensureContract({ id: contractId });
      }
      if (change.entityType !== 'account' && change.eventType !== 'Snapshot') return;
      const accounts = this.model.refreshAccounts();
      if (accounts) emit({ type: 'accounts', connectionId: spec.connectionId, accounts });
    });
  }

  /** Starts connecting (returns at once; progress arrives as status events). */
  start(resume = false): void {
    this.guards.start();
    this.conn.start(resume);
  }

  /**
   * Stops the actor silently (the supervisor announces DISABLED). Flattens, cancels and
   * placements already under way finish first, for at most STOP_DRAIN_MS: a graceful stop of a
   * cluster node cut a reversal's flatten between cancelling the position's legs and closing it,
   * which left the position without them (re-probe: a naked long 1).
   */
  async stop(): Promise<void> {
    clearInterval(this.quietWatch);
    clearInterval(this.finishedSweep);
    const ctx = this.ctx;
    // Work that starts during the drain (a request already on its way in) is waited for too.
    const deadline = Date.now() + STOP_DRAIN_MS;
    for (;;) {
      const underway = [...ctx.flattening.values(), ...ctx.cancelling.values(), ...ctx.placing.values()];
      const left = deadline - Date.now();
      if (underway.length === 0 || left <= 0) break;
      await settledWithin(Promise.allSettled(underway), left);
    }
    this.guards.stop();
    this.orphans.stop();
    return this.conn.stop();
  }

  /** Answers one request as `Result` data. */
  async handle(req: ActorRequest): Promise<Result<unknown>> {
    try {
      return { ok: true, value: await this.dispatch(req) };
    } catch (err) {
      if (!(err instanceof AppError)) this.ctx.logger.error({ err, type: req.type }, 'actor request failed');
      // Trading refused because the connection is down: its next attempt comes now, not at the end of a long backoff.
      else if (err.code === 'BROKER_UNAVAILABLE' && trading(req)) this.conn.hurry();
      return { ok: false, error: toErrorData(err) };
    }
  }

  private async dispatch(req: ActorRequest): Promise<ResultMap[keyof ResultMap]> {
    switch (req.type) {
      case 'place-order':
        return placeOrder(this.ctx, req);
      case 'cancel-order':
        return cancelOrder(this.ctx, req);
      case 'flatten':
        return flatten(this.ctx, req);
      case 'working-orders':
        await this.readable(req.accountId);
        return this.model.workingOrders(req.accountId);
      case 'working-orders-page':
        await this.readable(req.accountId);
        return this.model.workingOrdersPage(req.accountId, req.after, req.limit);
      case 'positions':
        if (req.settled) {
          // Orders on their way and a flatten under way change the position about to be read.
          await placementsSettled(this.ctx, req.accountId);
          // Waited out whole (a flatten waiting for a reconnect takes up to 20 s): read half way,
          // a position about to be closed was taken for the strategy's (re-probe 4).
          const flattening = this.ctx.flattening.get(req.accountId);
          if (flattening) await settledWithin(flattening, SETTLED_READ_WAIT_MS);
        }
        await this.readable(req.accountId);
        if (req.verified) await verifiedPositions(this.ctx);
        return this.model.positions(req.accountId);
      case 'trade-history': {
        await this.readable(req.accountId);
        const symbols = new Set(this.model.fills(req.accountId).map((f) => f.symbol));
        await Promise.all([...symbols].map((s) => this.loadPointValue(s)));
        return this.model.tradeHistory(req.accountId, (symbol) => this.pointValue(symbol));
      }
      case 'accounts':
        return this.model.accounts();
      case 'set-guards':
        return this.guards.setGuards(req.accountId, req.config);
      case 'lock':
        return this.guards.lock(req.accountId, req.flatten, req.detail, req.since);
      case 'unlock':
        return this.guards.unlock(req.accountId);
      case 'guard-status':
        // Its day P&L and exposure are the broker's live figures: not shown from a quiet or lost socket.
        this.conn.requireFresh();
        return this.guards.status(req.accountId);
      case 'check-order':
        // The live exposure the guards count is the broker's: only a CONNECTED connection has it.
        this.conn.requireConnected();
        this.model.account(req.accountId);
        await this.conn.ensureContract({ name: req.symbol });
        // The legs against where the entry fills, as a placement checks them (new-user probe: a dry
        // run passed a market buy's stop-loss above the market, and the order itself was refused).
        await checkOffsetLegs(this.ctx, req);
        return { refusal: this.guards.check(req) };
      case 'owed-legs-stored':
        this.owedStore.stored(req.seq);
        return null;
      case 'find-by-clordid': {
        this.conn.requireConnected();
        const o = this.model.findByClOrdId(req.accountId, req.clOrdId);
        return o ? this.model.record(o.id) : null;
      }
      default: {
        const unknown: never = req;
        throw new AppError('VALIDATION_FAILED', `unknown actor request ${(unknown as { type: string }).type}`);
      }
    }
  }

  /**
   * Reads are served from the mirror only while it is live, and only for active accounts of
   * this connection: what the mirror holds for an account the broker stopped reporting is stale,
   * and so is all of it while the broker's state is being read again (broker-read.ts).
   */
  private async readable(accountId: string): Promise<void> {
    if (this.conn.resyncing()) await afterResync(this.ctx);
    this.conn.requireFresh();
    this.model.account(accountId);
  }

  /** Currency per point: the local catalogue, else the broker's product (fetched once per root). */
  private pointValue(symbol: string): number {
    return contractRoot(symbol)?.pointValue ?? this.brokerPointValues.get(symbol.slice(0, -2)) ?? 1;
  }

  /** Products outside the local catalogue (orders placed elsewhere) are asked of the broker. */
  private async loadPointValue(symbol: string): Promise<void> {
    const root = symbol.slice(0, -2);
    if (contractRoot(symbol) || this.brokerPointValues.has(root) || !root) return;
    try {
      const p = (await this.conn.send('product/find', undefined, { query: `name=${encodeURIComponent(root)}` })) as { valuePerPoint?: unknown } | null;
      const v = Number(p?.valuePerPoint);
      if (Number.isFinite(v) && v > 0) this.brokerPointValues.set(root, v);
    } catch (err) {
      this.ctx.logger.warn({ err, root }, 'point value unknown; trade pnl in points × 1');
    }
  }

}
