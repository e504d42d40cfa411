/**
 * The webhook receiver (DESIGN §7): POST /webhooks/{token}. The token in the path is the
 * credential (checked by the engine) and binds the alert to one account. TradingView
 * gives up after 3 s, so broker calls here carry a shorter deadline.
 */
import { AppError } from '../../domain/problems.js';
import type { OrderRecord, PositionRecord } from '../../domain/orders.js';
import { WEBHOOK_BROKER_TIMEOUT_MS } from '../../tuning.js';
import { clOrdIdFor, planOrder, type OrderInput, type OrderPlan } from '../../domain/order-plan.js';
import { defineRoute, GoesOnError, type RouteContext, type RouteDef, type RouteResponse } from '../route-types.js';
import type { StrategyRecord } from '../../store/strategies.js';
import { webhookPayloadSchema, webhookResponseSchema, type WebhookPayloadBody } from '../schemas.js';
import { completeOrder, parseWebhookPayload, TRADINGVIEW_TEMPLATE, type StrategyDefaults, type WebhookIntent } from '../webhook-payload.js';
import { BROKER_ERRORS, callActor, errors, guardedBy, heldAfterOwnerChange, heldAfterTimeout, nowOf, orderLimits, unsyncedAccountsError, userAccounts, type OwnedAccount, type RouteDeps } from './common.js';
import { flattenAccount, namesProduct, type FlattenTarget } from './flatten.js';
import { contractRoot } from '../../domain/symbols.js';
import { placedOrderView } from './orders.js';
import { ACTING_MARK_MS, carriedOutConflict, followLateOutcome, journalActing, journalQueued, recordQueuedOutcome } from './signals.js';
import { AlertTurns } from '../../actors/alert-turns.js';
import { settledWithin, valueWithin } from '../../wait.js';

/**
 * An alert not done this long after the receiver began on it is answered 504 and goes on: a little
 * past one broker call's deadline, so a call of its own that times out answers with its own words.
 */
const ALERT_ANSWER_MS = WEBHOOK_BROKER_TIMEOUT_MS + 100;

/** An alert that finds its connection (re)connecting tries again until this long after it arrived (throughReconnect): a first reconnect takes 1–1.3 s, and the answer is due at 2.6 s. */
const RECONNECT_WAIT_MS = 2_300;
const RECONNECT_RETRY_MS = 150;

/**
 * Runs an alert's work again while its connection is reconnecting, or changing cluster node:
 * TradingView never resends an alert, so one that arrived during a reconnect of a second, or a
 * node's handover, was lost with a 503 (faults and cluster probes).
 * Only a refusal that sent nothing (BROKER_UNAVAILABLE naming a connection being connected again:
 * the actor refuses before anything goes out) and did nothing (no close of a reversal) is tried
 * again, so no attempt can place anything twice.
 */
async function throughReconnect<T>(work: () => Promise<T>, until: () => number): Promise<T> {
  for (;;) {
    try {
      return await work();
    } catch (err) {
      if (!refusedWhileReconnecting(err) || (err as AppError).extensions.flatten !== undefined || Date.now() + RECONNECT_RETRY_MS > until()) throw err;
      await new Promise((r) => setTimeout(r, RECONNECT_RETRY_MS));
    }
  }
}

/** A refusal that sent nothing: the connection (re)connecting, or in a cluster changing node. */
function refusedWhileReconnecting(err: unknown): boolean {
  const status = err instanceof AppError && err.code === 'BROKER_UNAVAILABLE' ? err.extensions.connectionStatus : undefined;
  return status === 'RECONNECTING' || status === 'CONNECTING';
}

/**
 * How long a reversal whose close was done keeps trying to send its open while the connection
 * reconnects (nothing of the open sent meanwhile; not while it changes cluster node: openAfterClose).
 * Past the alert's answer it goes on and is journaled as a late outcome; given up, the account is
 * flat where the strategy is not, and TradingView never resends.
 */
const REVERSAL_OPEN_RETRY_MS = 10_000;

/**
 * How long an alert in its turn on the account waits for each broker step, the turn held: a
 * reversal's close (cancels, then the liquidation; past it the open is given up), then an order
 * the position decided. As long as an API flatten is answered within, past the actor's wait for a
 * lost connection; the alert itself is answered 504 at ALERT_ANSWER_MS and goes on.
 */
const TURN_WAIT = { timeoutMs: 30_000 };

/** Longest a 504 waits for its follow-up to be on disk (followUpOnDisk). */
const FOLLOW_UP_FLUSH_MS = 200;

/** Every broker call of an alert: TradingView gives a webhook about 3 s. */
const WEBHOOK_TIMEOUT = { timeoutMs: WEBHOOK_BROKER_TIMEOUT_MS };
/** The settled positions read of an alert: no broker call, a wait for the account's work under way (actor.ts SETTLED_READ_WAIT_MS). */
const POSITIONS_READ = { timeoutMs: 35_000 };

/**
 * The token's account as its broker reports it. 403 ACCOUNT_INACTIVE when the broker no
 * longer reports it; 503 while a connection that might report it has not synced yet
 * (an unknown state is not an inactive account), 409 when such a connection has FAILED.
 */
export function webhookAccount(deps: RouteDeps, userId: string, accountId: string): OwnedAccount {
  const found = userAccounts(deps, userId).find((a) => a.account.id === accountId);
  const disabled = found && deps.store.connections.byId(found.connectionId)?.disabled;
  if (found?.account.active && !disabled) return found;
  const unsynced = found ? undefined : unsyncedAccountsError(deps, userId, accountId);
  if (unsynced) throw unsynced;
  if (disabled) {
    const inactiveReason = `its connection ${found.connectionId} is disabled`;
    throw new AppError('ACCOUNT_INACTIVE', `Account is inactive: ${inactiveReason}`, { accountId, inactiveReason });
  }
  throw new AppError('ACCOUNT_INACTIVE', 'Account is inactive', { accountId });
}

/**
 * The dedupe key of an alert: its `id` field. An `id` given but unusable is refused, never
 * dropped: an empty one (its template's placeholder came out empty) or a non-text one would
 * quietly turn deduplication off, and one that still holds a TradingView placeholder
 * (`{{strategy.order.id}}` in an indicator alert, where TradingView leaves it as is) is the same
 * in every alert, so every alert after the first would be answered as a repeat and not traded.
 */
export function alertId(body: WebhookPayloadBody | undefined): string | undefined {
  const id = body?.id;
  if (id === undefined || id === null) return undefined;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  if (typeof id !== 'string') throw new AppError('INVALID_IDEMPOTENCY_KEY', 'id must be text or a number (the alert’s dedupe key), or left out');
  // Empty after trimming: refused by the key's own rule (1 to 255 characters).
  if (id.trim() === '') return '';
  refusePlaceholder(id, 'id');
  return id;
}

/** An alert's key (its `id`, or an `Idempotency-Key` header) that still holds a TradingView placeholder is refused (see alertId). */
function refusePlaceholder(key: string, what: string): void {
  if (!/\{\{[^{}]*\}\}/.test(key)) return;
  throw new AppError(
    'INVALID_IDEMPOTENCY_KEY',
    `${what} '${key.length > 80 ? `${key.slice(0, 80)}…` : key}' still holds a TradingView placeholder ({{…}}): it would be the same in every alert, so every alert after the first would be taken for a repeat and not traded. Use placeholders this alert fills (a strategy alert fills {{strategy.order.id}}), or leave it out`,
  );
}

/** Alerts answered 504 that go on, per route deps (alertsGoingOn). */
const goingOn = new WeakMap<RouteDeps, Set<Promise<void>>>();

/**
 * Settles once every alert answered 504 that went on (its turn still to come, or at the broker)
 * is done. A shutdown waits for this before it closes the actors: the 504 said "it goes on: do not
 * resend", and a reversal whose close was done before the stop had its open refused (re-probe:
 * flat where the strategy was short, the alerts behind it not acted on).
 */
export async function alertsGoingOn(deps: RouteDeps): Promise<void> {
  // Again until none is left: an alert answered 504 while the first ones were waited for is waited for too.
  for (let late = goingOn.get(deps); late && late.size > 0; ) await Promise.allSettled([...late]);
}

/** The receiver route. */
export function webhookRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const turns = new AlertTurns();
  const late = new Set<Promise<void>>();
  goingOn.set(deps, late);
  return [
    defineRoute<WebhookPayloadBody>({
      method: 'POST',
      path: '/webhooks/:token',
      scope: 'webhook',
      operationId: 'receiveWebhook',
      summary: 'Receive an alert (the URL is the credential)',
      description:
        'JSON sent as application/json or text/plain. `action` buy|sell (aliases long, short) places an order; close|flat|flatten|exit ' +
        'flattens the account: every resting order cancelled and every position closed, on all symbols (a `symbol` is a check: 409 SYMBOL_MISMATCH, nothing ' +
        'closed, when the account holds another and not it). `marketPosition` ' +
        '({{strategy.market_position}}; alias sentiment) flat turns a buy or sell into an exit: its symbol (or the strategy’s) is flattened and nothing is ' +
        'opened; a buy that leaves the strategy short, or a sell that leaves it long, is a partial exit: placed with no bracket, only while the account ' +
        'holds at least that much on the other side (else 409 SYMBOL_MISMATCH), and the position’s legs are cut to what is left; a buy or sell that the strategy makes ' +
        'its side (long on a buy, short on a sell) while the account holds the other side is a reversal: that position is closed first (its legs with it), then the rest ' +
        'of the quantity is opened with the bracket (201 with both `order` and `flatten`; 200 when nothing is left to open). Aliases: ticker → ' +
        'symbol, quantity/contracts → qty; numeric strings in plain decimal notation accepted (qty digits only: `"2"`, never `" 2"` or `"1e3"`). One take-profit and one stop-loss at most ({price}, {ticks} or a bare ' +
        'number = price); more (also `take_profit_2`, `tp3`), trailing stops, breakeven or scale-outs, under any field name with trail, breakeven or scale_out in it, → 400 WEBHOOK_UNSUPPORTED on an order that may open a position ' +
        '(exits, closes and partial exits ignore them with a warning; a switch for one set to off, `"trail": 0`, is ignored with a warning). A take-profit or stop-loss in another product\'s spelling (`stop_loss`, `sl_pips`, ' +
        '`take_profit`, Pine\'s `stop`/`loss`/`profit`…) that asks for a level is 400 VALIDATION_FAILED on such an order, unless the alert gives that leg itself; stopPrice on a market or limit order is 400. ' +
        'Other unknown fields are ignored and listed in `warnings`. `id` deduplicates for 24 h, per token, with the body: a repeat delivery (the same body) is replayed, the same `id` with another body or sent to another token is another alert. A token whose account the broker no longer reports answers 403 `Account is inactive`. ' +
        'An entry that breaks the account’s risk guards (or the token’s narrowing of them) answers 403 RISK_GUARD; close/flatten never does.\n\n' +
        `TradingView alert message:\n\n\`\`\`json\n${TRADINGVIEW_TEMPLATE}\n\`\`\``,
      tags: ['webhooks'],
      body: webhookPayloadSchema,
      lenientContentType: true,
      idempotent: true,
      idempotencyKeyFrom: (req) => alertId(req.body),
      checkIdempotencyKey: (key) => refusePlaceholder(key, 'Idempotency-Key'),
      // Per token (`webhook:<tokenId>`): the same alert on two tokens places two orders.
      idempotencyScope: (auth) => auth.principalId,
      fingerprintParams: false,
      bodyKeyNamesBody: true,
      responses: [
        { status: 201, description: 'Order placed', schema: webhookResponseSchema },
        { status: 200, description: 'Account flattened', schema: webhookResponseSchema },
        ...errors('VALIDATION_FAILED', 'WEBHOOK_UNSUPPORTED', 'UNKNOWN_SYMBOL', 'PRICE_OUT_OF_RANGE', 'INVALID_IDEMPOTENCY_KEY', 'UNAUTHENTICATED', 'ACCOUNT_INACTIVE', 'RISK_GUARD', 'NOT_FOUND'),
        ...errors('SYMBOL_MISMATCH', 'CONFLICT', 'IDEMPOTENCY_KEY_IN_USE', 'IDEMPOTENCY_KEY_REUSED', 'BROKER_REJECTED', 'RATE_LIMITED', ...BROKER_ERRORS),
      ],
      async handler(ctx) {
        const now = nowOf(deps);
        // The token the pipeline verified: its account and strategy, as of this request.
        const token = ctx.auth.webhook;
        if (!token) throw new AppError('NOT_FOUND', 'Not found');
        const intent = parseWebhookPayload(ctx.req.body, now);
        // As verified on arrival (a token record read per alert cost more than the rest of the check).
        const inactive = token.inactiveReason;
        if (inactive) throw new AppError('ACCOUNT_INACTIVE', `Account is inactive: ${inactive}; rebind the token`, { accountId: token.accountId, inactiveReason: inactive });
        const owned = webhookAccount(deps, ctx.auth.userId, token.accountId);
        const base = { accepted: true as const, accountId: owned.account.id, warnings: intent.warnings, alertDelayMs: intent.alertDelayMs };

        const strategy = token.strategyId ? deps.store.strategies.getForUser(ctx.auth.userId, token.strategyId) : undefined;
        // What the position decides waits for the alerts before it on the account (alert-turns.ts):
        // exits, partial exits and strategy entries (each may be a reversal). Taking the turn only
        // once an entry found a position to reverse let alerts behind it go first (re-probe: long
        // 1, reverse, exit 20 ms later ended short 2).
        const decidedByPosition = intent.kind === 'flatten' || intent.reduce === true || intent.entry === true;
        const account = `${owned.connectionId}|${owned.account.id}`;
        const mode = decidedByPosition ? 'exclusive' : 'shared';
        let inTurn = false;
        const started = Date.now();
        const mark = setTimeout(() => journalActing(deps, ctx as RouteContext<unknown, unknown>, owned.connectionId, owned.account.id), ACTING_MARK_MS);
        // The reconnect retry's window runs from the later of the alert's arrival and its turn: an
        // alert queued behind a node's death (answered 504 "it is not lost") gets its turn on the
        // new owner as that one connects (cluster probe: refused then, and never placed).
        let turnAt = started;
        const until = () => turnAt + RECONNECT_WAIT_MS;
        // In a cluster, taken on the node that runs the connection (alerts reach any node); its
        // "node is changing" refusals are tried again like a reconnect.
        const gateway = deps.gateway;
        const takeTurn = () => (gateway.takeTurn ? gateway.takeTurn(owned.connectionId, account, mode) : turns.take(account, mode));
        const work = (async () => {
          try {
            // A free turn is taken at once, in the same run as the alert's arrival (no await).
            const free = gateway.takeTurn ? undefined : turns.takeNow(account, mode);
            const turn = free ?? (await throughReconnect(takeTurn, until));
            turnAt = Math.max(turnAt, Date.now());
            inTurn = true;
            // The turn is held across the retries: let go between them, a later alert on the
            // account took it and acted first (faults probe: a reversal retried through a
            // reconnect ran after the exit behind it, and the account ended short while the
            // strategy was flat).
            try {
              return await throughReconnect(() => act(ctx, intent, owned, strategy, base, now), until);
            } finally {
              turn.end();
            }
          } finally {
            clearTimeout(mark);
          }
        })();
        // A 504 is never stored under the alert's id, so a repeat runs again: an order is then found
        // by its clOrdId, but a close has none (money probe: an exit answered 504 and delivered
        // again after a re-entry closed the new position). A repeat of an alert that closes
        // positions meets 409 IDEMPOTENCY_KEY_IN_USE while it goes on, and this 409 once it is
        // known done (the alert's work answered, or its flatten's follow-up found the account flat).
        const keptForRepeats = (err: AppError): AppError | GoesOnError => {
          if (intent.kind !== 'flatten' && !flattenBegun.has(ctx)) {
            // Its order went to a cluster node that stopped answering: a repeat waits for what that node's broker socket does.
            const held = heldAfterOwnerChange(err);
            if (held) return held;
            // Its work goes on past this answer: a repeat meets 409 until it ends, and, where its
            // broker call then timed out (the order may still be placed: by a slow broker, or by a
            // cluster node that hangs, noticed only once its lease ends), for the same hold more
            // (cluster re-probes: answered at 2.6 s, the id was free at 3 s; a repeat placed the
            // order on the new owner, and the hung node's copy filled too).
            return new GoesOnError(
              err,
              work.then(
                () => undefined,
                (failed: unknown) => heldAfterTimeout(failed),
              ),
            );
          }
          // Its work answered: all of it was done. Its flatten timed out: a reversal's open was not sent.
          const outcome = work.then(
            () => carriedOutConflict(err.status, ctx.requestId),
            () => {
              const late = lateFlattens.get(ctx);
              return late?.found.then((found) => (found.status < 300 ? carriedOutConflict(err.status, ctx.requestId, late.reversal) : undefined));
            },
          );
          return new GoesOnError(err, outcome);
        };
        const done = await valueWithin(work, ALERT_ANSWER_MS).catch(async (err: unknown) => {
          if (!(err instanceof AppError) || err.code !== 'BROKER_TIMEOUT') throw err;
          await followUpOnDisk();
          throw keptForRepeats(err);
        });
        if (done) return done;
        // Not done within TradingView's time (~3 s; re-probe: alerts queued behind slow ones were
        // answered after 7.8 and 10 s): answered now, it goes on (in its turn), and what it did is
        // added to the token's alerts.
        const answered = ctx as RouteContext<unknown, unknown>;
        journalQueued(deps, answered, owned.connectionId, owned.account.id);
        const goesOn = work
          .then(
            (res) => recordQueuedOutcome(deps, answered, owned.account.id, res, undefined),
            (err: unknown) => recordQueuedOutcome(deps, answered, owned.account.id, undefined, err),
          )
          .catch((err: unknown) => ctx.log.error({ err }, 'the outcome of an alert answered 504 was not journaled'));
        late.add(goesOn);
        void goesOn.then(() => late.delete(goesOn));
        await followUpOnDisk();
        throw keptForRepeats(
          new AppError(
            'BROKER_TIMEOUT',
            inTurn
              ? `The broker had not answered this alert within ${ALERT_ANSWER_MS} ms; it goes on: do not resend the alert. Its outcome is added to this token's alerts`
              : `Earlier alerts on this account had not had the broker's answers within ${ALERT_ANSWER_MS} ms, or its connection is reconnecting or changing node; this one acts once they have (it is not lost): do not resend the alert. Its outcome is added to this token's alerts`,
          ),
        );
      },
    }),
  ];

  /**
   * A 504 says "do not resend: its outcome is added to this token's alerts". That promise lives in
   * the follow-up journaled with it (a restart takes it up), so it is on disk before the answer
   * goes: journal appends are batched for up to 50 ms, and a process killed right after its 504
   * left no trace of the alert at all. Bounded: TradingView gives the whole answer ~3 s.
   */
  function followUpOnDisk(): Promise<void> {
    return settledWithin(deps.store.flushed(), FOLLOW_UP_FLUSH_MS);
  }

  /** The alert, in its turn: a flatten, or an order sized against the account. */
  async function act(
    ctx: RouteContext<WebhookPayloadBody, unknown>,
    intent: WebhookIntent,
    owned: OwnedAccount,
    strategy: StrategyRecord | undefined,
    base: { accepted: true; accountId: string; warnings: string[]; alertDelayMs: number | null },
    now: Date,
  ): Promise<RouteResponse> {
    const token = ctx.auth.webhook!;
    if (intent.kind === 'flatten') {
      // An exit (a buy or sell that leaves the strategy flat) closes the strategy's symbol, not the account.
      const symbol = intent.symbol ?? (intent.exit ? (strategy?.symbol ?? undefined) : undefined);
      if (intent.exit && symbol === undefined) {
        const message = 'required for an exit (marketPosition flat), or set a symbol on the token’s strategy; action close flattens the whole account';
        throw new AppError('VALIDATION_FAILED', `symbol: ${message}`, { errors: [{ path: 'symbol', message }] });
      }
      const flatten = await webhookFlatten(deps, ctx as RouteContext<unknown, unknown>, owned, symbol, !!intent.exit);
      ctx.log.info({ accountId: owned.account.id, tokenId: token.tokenId }, 'webhook flatten');
      return { status: 200, body: Object.assign({}, base, { action: 'flatten', order: null, flatten }) };
    }
    // Bound to a strategy that is gone (deleted on another node meanwhile, or before deletes
    // were refused): its alert leaves out what the strategy set, its legs among them. Traded
    // without them, the entry would go out unprotected (API probe: 201 with no legs). Exits
    // (flatten, a partial exit) carry no legs and go on, as does an alert that names both legs itself.
    const reliesOnLegs = intent.order.takeProfit === undefined || intent.order.stopLoss === undefined;
    if (token.strategyId && !strategy && !intent.reduce && reliesOnLegs) {
      throw new AppError(
        'CONFLICT',
        `The token's strategy ${token.strategyId} no longer exists, and this alert relies on its order defaults (take-profit, stop-loss): nothing was placed. Rebind the token to a strategy or none`,
        { strategyId: token.strategyId },
      );
    }
    const defaults: StrategyDefaults | null = strategy ?? null;
    const input = completeOrder(intent.order, defaults, intent.warnings, intent.limitPriceAs);
    // A partial exit carries no bracket, not even the strategy's: the position keeps its own legs.
    if (intent.reduce) Object.assign(input, { takeProfit: null, stopLoss: null });
    const sizing: Sizing = { deps, ctx: ctx as RouteContext<unknown, unknown>, owned, input, warnings: intent.warnings, now, positionSize: intent.positionSize };
    let plan: OrderPlan | null = planOrder(input, owned.account.id, now, orderLimits(deps.config));
    let closed: Closed | null = null;
    const warned = base.warnings.length;
    if (intent.reduce) plan = await partialExit(sizing, plan);
    else if (intent.entry) ({ plan, closed } = await entry(sizing, plan));
    const clOrdId = clOrdIdFor(ctx.auth.userId, ctx.idempotencyKey);
    if (plan === null) {
      // A repeat of an alert answered 504 whose first delivery's order filled: sized against the
      // account, it leaves nothing to send. Its answer is that order, as an order's repeat is
      // (README), not "0 opened" as if the alert were another (re-probe at 15 s a request).
      const first = closed === null ? await firstDelivery(deps, ctx as RouteContext<unknown, unknown>, owned, clOrdId) : null;
      if (first) {
        base.warnings.length = warned;
        return { status: 201, body: Object.assign({}, base, { action: input.side, order: placedOrderView({ order: first, reconciled: true, brokerMs: 0 }), flatten: null }) };
      }
      // Nothing left to send: the account already is where the strategy is after the alert.
      return { status: 200, body: Object.assign({}, base, { action: closed ? ('flatten' as const) : input.side, order: null, flatten: closed }) };
    }
    // What the reversal's close did, in words: only what it did (trader probe: "the position the
    // other way was closed first" on a flat account, with nothing closed).
    const closedFirst = closed ? closeDone(closed) : undefined;
    // A close that did nothing (the account was flat already) leaves the error as it is: nothing
    // was done, so an open refused while the connection reconnects is tried again (throughReconnect
    // never retries an error that carries a close).
    const afterClose = (err: unknown): unknown => {
      if (!closed || !(err instanceof AppError)) return err;
      if (!closedFirst) return new AppError(err.code, `The new position was not opened: ${err.message}`, err.extensions, err.retryAfterSeconds);
      return new AppError(err.code, `${closedFirst}; the new one was not opened: ${err.message}`, { ...err.extensions, flatten: closed }, err.retryAfterSeconds);
    };
    const request = { type: 'place-order' as const, ...plan.order, clOrdId, ...guardedBy(ctx.auth, 'webhook'), ...(intent.reduce ? { reduceOnly: true, ...(intent.positionSize !== undefined && { keepQty: intent.positionSize }) } : {}) };
    let result;
    try {
      // An order the position decided (a strategy's entry, a reversal's open, a partial exit) is
      // waited for with its turn on the account held: given up at 2.5 s, the turn passed to the
      // alerts behind while the order was still on its way, and an exit behind it acted first
      // (re-probe: the exit said flat, then a reversal's open filled, short where the strategy was flat).
      const inTurn = closed !== null || intent.entry === true || intent.reduce === true;
      const once = (wait: { timeoutMs: number }) => callActor(deps, ctx as RouteContext<unknown, unknown>, owned.connectionId, request, wait);
      const send = inTurn ? () => waitedOut(once, ctx.log) : () => once(WEBHOOK_TIMEOUT);
      result = closedFirst ? await openAfterClose(send) : await send();
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'BROKER_TIMEOUT') throw afterClose(err);
      // TradingView does not wait (or retry): the order may still reach the broker. Its
      // outcome is looked up and journaled under the token once known (followLateOutcome).
      followLateOutcome(deps, ctx as RouteContext<unknown, unknown>, owned.connectionId, owned.account.id, { clOrdId });
      throw new AppError(
        'BROKER_TIMEOUT',
        // Its own cause (a connection lost after 60 ms is no 2.5 s wait: trader probe).
        `${closedFirst ? `${closedFirst}; then the` : 'The'} broker did not confirm the order (${withoutKeyAdvice(err.message)}) and may still place it: do not resend the alert. Its outcome is added to this token's alerts once the broker reports it`,
        closed ? { ...err.extensions, flatten: closed } : err.extensions,
        err.retryAfterSeconds,
      );
    }
    // A strategy's partial exit sent smaller: a leg filled part of it while the legs made room (actor place.ts stillHeldQty).
    if (intent.reduce && result.order.qty < request.qty) {
      base.warnings.push(`${request.side} ${result.order.qty} sent, not ${request.qty}: a stop-loss or take-profit filled ${request.qty - result.order.qty} while the legs made room for this exit, and the strategy keeps ${intent.positionSize}`);
    }
    return { status: 201, body: Object.assign({}, base, { action: input.side, order: placedOrderView(result), flatten: closed }) };
  }
}

/** Between a broker timeout of an order in its turn and the call that waits for its outcome. */
const OUTCOME_RETRY_MS = 200;

/**
 * An order in its turn on the account, waited for up to TURN_WAIT whatever a broker request's own
 * deadline (10 s, BROKER_TIMEOUTS.requestMs): past it the actor answers BROKER_TIMEOUT with the
 * order maybe still on its way, and the turn went to the alert behind, whose exit found nothing
 * to close before the entry filled (re-probe, 12–35 s a request: long where the strategy was
 * flat). Called again under the same clOrdId, the actor places nothing new while the outcome is
 * unknown: it waits for it (up to its own deadline), and answers the order once the broker has it.
 */
async function waitedOut<T>(call: (wait: { timeoutMs: number }) => Promise<T>, log: { info(obj: object, msg: string): void }): Promise<T> {
  const until = Date.now() + TURN_WAIT.timeoutMs;
  for (;;) {
    try {
      return await call({ timeoutMs: Math.max(1, until - Date.now()) });
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'BROKER_TIMEOUT' || Date.now() + OUTCOME_RETRY_MS >= until) throw err;
      log.info({ code: err.code }, 'order outcome unknown: waited for in the alert’s turn');
      await new Promise((r) => setTimeout(r, OUTCOME_RETRY_MS));
    }
  }
}

/**
 * A reversal's open, its close done: tried again while refused unsent for a reconnect
 * (REVERSAL_OPEN_RETRY_MS). Not when its connection is changing cluster node: the account's turn
 * it holds is on the old node and went with it, so an alert behind it may act first, and the open
 * sent after that doubled the strategy's position (re-probe: long 2 where the strategy was long 1).
 */
async function openAfterClose<T>(send: () => Promise<T>): Promise<T> {
  const until = Date.now() + REVERSAL_OPEN_RETRY_MS;
  for (;;) {
    try {
      return await send();
    } catch (err) {
      if (!refusedWhileReconnecting(err) || (err as AppError).extensions.nodeChanging === true || Date.now() + RECONNECT_RETRY_MS > until) throw err;
      await new Promise((r) => setTimeout(r, RECONNECT_RETRY_MS));
    }
  }
}

/** Contracts a flatten closed. */
function closedQty(closed: Closed): number {
  return closed.positions.reduce((n, p) => n + (p.status === 'liquidated' ? p.closedQty : 0), 0);
}

/** What a reversal's close did, as the start of a sentence; undefined when it closed and cancelled nothing. */
function closeDone(closed: Closed): string | undefined {
  if (closedQty(closed) > 0) return 'The position the other way was closed first';
  if (closed.cancelledOrderIds.length > 0) return 'The orders the other way were cancelled first';
  return undefined;
}

/** What an alert's order is sized against: the account, the completed order and the strategy's size after the alert. */
interface Sizing {
  deps: RouteDeps;
  ctx: RouteContext<unknown, unknown>;
  owned: OwnedAccount;
  input: OrderInput;
  warnings: string[];
  now: Date;
  /** `marketPositionSize`: what the strategy holds on its side after the alert. */
  positionSize: number | undefined;
}

type Closed = Awaited<ReturnType<typeof webhookFlatten>>;

/**
 * A partial exit (the strategy still holds its side after it): the month the account holds when
 * the alert names the product after the roll, and no more than takes the account down to the
 * strategy's size. Null when there is nothing to take off (a stop already did it at the broker).
 */
async function partialExit(s: Sizing, plan: OrderPlan): Promise<OrderPlan | null> {
  const { input, owned, now, warnings } = s;
  const product = namesProduct(input.symbol, now);
  const size = s.positionSize;
  if (!product && size === undefined) return plan;
  const rows = await holdings(s.deps, s.ctx, owned, { contract: plan.order.symbol, product });
  // Naming the product after the roll reduces the month the account holds, as exits and
  // reversals do (TV probe: 409 "holds no ESH7" while long ESZ6).
  const month = product ? heldMonth(rows, plan.order.symbol, input.side) : undefined;
  if (month !== undefined && month !== plan.order.symbol) {
    warnings.push(`${input.symbol} names ${plan.order.symbol} now; the account's ${month} position is the one reduced`);
    plan = planOrder({ ...input, symbol: month }, owned.account.id, now, orderLimits(s.deps.config));
  }
  if (size === undefined) return plan;
  // The strategy's position after the alert is the least the account keeps: a partial exit a
  // stop already made at the broker is not made again (TV probe: long 1 left, sold to flat).
  const held = rows.filter((p) => p.symbol === plan.order.symbol && (input.side === 'sell' ? p.netQty > 0 : p.netQty < 0)).reduce((n, p) => n + Math.abs(p.netQty), 0);
  const side = input.side === 'sell' ? 'long' : 'short';
  // Holding less than the strategy keeps: they disagree, and selling would widen it (with none
  // at all, the actor's reduce-only check says so).
  if (held > 0 && held < size) {
    throw new AppError(
      'SYMBOL_MISMATCH',
      `the account holds ${held} ${plan.order.symbol} ${side}, less than the strategy's ${size} after this alert: nothing taken off`,
      { symbol: plan.order.symbol, held, marketPositionSize: size },
    );
  }
  const room = held - size;
  if (held === 0 || plan.order.qty <= room) return plan;
  warnings.push(`marketPositionSize ${size}: ${room} taken off, not ${plan.order.qty}: the strategy is ${side} ${size} after this alert and the account held ${held}`);
  return room === 0 ? null : planOrder({ ...input, symbol: plan.order.symbol, qty: room }, owned.account.id, now, orderLimits(s.deps.config));
}

/**
 * The order an earlier delivery of this alert placed (its clOrdId names the alert with its body),
 * or null: none, an alert without an `id` (nothing names its deliveries alike), one the broker
 * rejected (the alert was not traded; what the account holds now says the rest), or the lookup failed.
 */
async function firstDelivery(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, owned: OwnedAccount, clOrdId: string): Promise<OrderRecord | null> {
  if (ctx.idempotencyKey === undefined) return null;
  // Not asked at all, the alert is answered as one that opened nothing: what the account holds was read just now.
  const found = await deps.gateway.request(owned.connectionId, { type: 'find-by-clordid', accountId: owned.account.id, clOrdId }, WEBHOOK_TIMEOUT).catch((err: unknown) => {
    ctx.log.warn({ err, accountId: owned.account.id }, 'looking up the order of an earlier delivery of this alert failed');
    return null;
  });
  return found && found.status !== 'rejected' ? found : null;
}

/**
 * An entry (the alert makes the strategy's side its own). Against a position the other way it
 * is a reversal (TradingView sends `sell 2`, marketPosition short, from long 1): that position
 * is closed first, its legs with it, and only the rest is opened with the bracket. In one order,
 * the old legs would work against the new position until fitted, sized for the whole order, and
 * count as exposure: a max position of 1 refused every reversal and left the account long.
 * The strategy's size after the alert caps what the account then holds on its side. The plan is
 * null when nothing is left to open.
 */
async function entry(s: Sizing, plan: OrderPlan): Promise<{ plan: OrderPlan | null; closed: Closed | null }> {
  const { input, owned, now, warnings } = s;
  const { against: held, same } = await heldIn(s.deps, s.ctx, owned, { contract: plan.order.symbol, product: namesProduct(input.symbol, now), side: input.side });
  const size = s.positionSize;
  // An alert for more than the strategy then holds reverses it (the rest closed its other side):
  // that side's position and resting orders go first, even where the account is flat already
  // (TV probe: a resting buy limit of the old long filled after the reversal). Not where the
  // account already holds the strategy's side, up to its size, and nothing the other way: the
  // reversal is done (a repeat of it, or the account got there first), and closing would close the
  // strategy's own position (money probe: a reversal delivered again after its 504 closed the
  // short it had opened, and its open, the first delivery's order by clOrdId, placed nothing).
  // Holding more than the size, it is closed and the size opened, as before (re-probe).
  const reversing = held > 0 || (size !== undefined && plan.order.qty > size && (same === 0 || same > size));
  let closed: Closed | null = null;
  let open = plan.order.qty;
  if (reversing) {
    closed = await webhookFlatten(s.deps, s.ctx, owned, input.symbol, true, true);
    open -= held;
    if (open <= 0) {
      warnings.push(`reversal: the ${held} held the other way closed; the alert's qty ${plan.order.qty} leaves nothing to open`);
      return { plan: null, closed };
    }
  }
  // A reversal reaching an account its stop already closed would otherwise open short 2, and one
  // reaching an account already short 1 would make it short 2 (re-probe).
  if (size !== undefined) {
    const onItsSide = closed ? 0 : same;
    const room = Math.max(0, size - onItsSide);
    if (open > room) {
      const side = input.side === 'buy' ? 'long' : 'short';
      warnings.push(`marketPositionSize ${size}: ${room} opened, not ${open}: the strategy is ${side} ${size} after this alert; the account held ${onItsSide} ${side} and ${held} the other way`);
      open = room;
    }
    if (open <= 0) return { plan: null, closed };
  }
  if (held > 0) {
    // What the close closed, not what was held before it: a stop may have closed it first.
    const shut = closed ? closedQty(closed) : held;
    warnings.push(shut > 0 ? `reversal: the ${shut} held the other way closed first, then ${open} opened` : `reversal: the position the other way was flat already (a stop or target closed it), then ${open} opened`);
  }
  if (open !== plan.order.qty) plan = planOrder({ ...input, qty: open }, owned.account.id, now, orderLimits(s.deps.config));
  return { plan, closed };
}

/** Alerts (their handler contexts) that began to close positions: their 504 is kept for repeats. */
const flattenBegun = new WeakSet<object>();
/** The follow-up of an alert's flatten answered 504 (it carries on in the actor): what it found. */
const lateFlattens = new WeakMap<object, { found: Promise<{ status: number }>; reversal: boolean }>();

/**
 * A broker timeout's words without their advice to retry under the same Idempotency-Key: an
 * alert has none, and its answer says what to do (do not resend it).
 */
function withoutKeyAdvice(message: string): string {
  return message.replace(/: retry with the same Idempotency-Key[^;.)]*/, '');
}

/**
 * Flattens the alert's account, or (symbolOnly) every position in the symbol. TradingView does
 * not retry: a flatten the broker did not confirm in time is followed, like a late order.
 */
function webhookFlatten(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, owned: OwnedAccount, symbol: string | undefined, symbolOnly: boolean, reversal = false) {
  flattenBegun.add(ctx);
  // Positions opened after this (past the broker clock's margin) are not this flatten's to close.
  const from = nowOf(deps).getTime();
  const onTimeout = (target: FlattenTarget) => {
    const late = followLateOutcome(deps, ctx, owned.connectionId, owned.account.id, { flatten: { ...target, from, ...(reversal && { reversal: true }) } });
    if (late) lateFlattens.set(ctx, { found: late, reversal });
  };
  // A reversal's close is waited for past the alert's answer (504 at 2.6 s, "it goes on"): its open
  // follows once the close is done. Given up at 2.5 s, a close the broker took 3 s over (cancels,
  // then the liquidation) left the account flat for good where the strategy was short (money probe).
  const { timeoutMs } = reversal ? TURN_WAIT : WEBHOOK_TIMEOUT;
  return flattenAccount(deps, ctx, owned, symbol, { timeoutMs, onTimeout, ...(symbolOnly && { symbolOnly: true }) }).catch((err: unknown) => {
    if (!(err instanceof AppError)) throw err;
    // Done, but a position could not be closed (flatten.ts notFlat): said as it is, for this alert.
    if ('positions' in err.extensions) {
      const followed = err.code === 'BROKER_TIMEOUT' ? ". Do not resend the alert: whether the positions closed is added to this token's alerts once known" : '';
      throw new AppError(err.code, `${reversal ? 'Reversal: the new position is not opened. ' : ''}${err.message}${followed}`, err.extensions, err.retryAfterSeconds);
    }
    if (err.code !== 'BROKER_TIMEOUT') throw err;
    throw new AppError(
      'BROKER_TIMEOUT',
      `The broker did not confirm the flatten within ${timeoutMs} ms; it goes on${reversal ? ', and the new position is not opened' : ''}: do not resend the alert. Whether the positions closed is added to this token's alerts once known`,
      err.extensions,
      err.retryAfterSeconds,
    );
  });
}

/**
 * The account's positions in the alert's contract (every month of its product when named by
 * product), read once the account's orders on their way have reached the broker: an entry sent
 * just before a reversal is held.
 */
async function holdings(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, owned: OwnedAccount, of: { contract: string; product: boolean }) {
  const root = contractRoot(of.contract)?.root;
  // Waits for the account's work in progress (a flatten that waits out a reconnect may take 20 s):
  // past TradingView's time the alert is answered 504 and acts when the read comes back, in its
  // turn (re-probe 4: a re-entry queued behind such an exit was dropped when this read gave up
  // at 2.5 s).
  const rows = await callActor(deps, ctx, owned.connectionId, { type: 'positions', accountId: owned.account.id, settled: true }, POSITIONS_READ).catch((err: unknown) => {
    // A read that took too long (the account's orders still settling) sent nothing: no 504's
    // "may still be placed", and no follow-up (re-probe 3: a strategy's re-entry dropped behind
    // a bare 504 that said a follow-up would come).
    if (!(err instanceof AppError) || err.code !== 'BROKER_TIMEOUT') throw err;
    throw new AppError('BROKER_UNAVAILABLE', `The account's positions, which this alert is sized against, could not be read in time (${err.message}): nothing was sent`, {}, err.retryAfterSeconds);
  });
  return rows.filter((p) => (of.product ? contractRoot(p.symbol)?.root === root : p.symbol === of.contract) && p.netQty !== 0);
}

/**
 * For a partial exit on `side` that names a product: `front` when the account holds a position
 * there it reduces, else the one other month of the product it holds such a position in (the
 * month before the roll); undefined when there is none or more than one.
 */
function heldMonth(rows: readonly PositionRecord[], front: string, side: 'buy' | 'sell'): string | undefined {
  const reducible = rows.filter((p) => (side === 'sell' ? p.netQty > 0 : p.netQty < 0)).map((p) => p.symbol);
  if (reducible.includes(front)) return front;
  return reducible.length === 1 ? reducible[0] : undefined;
}

/** How many contracts the account holds against `side`, and on it, in the contract (every month of its product, when named by product). */
async function heldIn(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, owned: OwnedAccount, of: { contract: string; product: boolean; side: 'buy' | 'sell' }): Promise<{ against: number; same: number }> {
  let against = 0;
  let same = 0;
  for (const p of await holdings(deps, ctx, owned, of)) {
    if (of.side === 'buy' ? p.netQty > 0 : p.netQty < 0) same += Math.abs(p.netQty);
    else against += Math.abs(p.netQty);
  }
  return { against, same };
}
