/**
 * Placing orders: single → `order/placeorder`; absolute bracket → `order/placeoso` (bracket1
 * take-profit Limit, bracket2 stop-loss Stop); relative bracket → `orderstrategy/
 * startorderstrategy` (signed point offsets). The clOrdId is looked up first: if the broker
 * already has it (a retry after a timeout or a crash), that order is the answer. A placement
 * the broker did not answer in time stays outcome-unknown (unknown-outcomes.ts) until the
 * broker or the mirror says what became of it, and a retry places nothing meanwhile.
 */
import { AppError } from '../../src/domain/problems.js';
import { checkAnswer, placeOrderBody, placeOsoBody, startStrategyBody } from '../../src/broker/tradovate/requests.js';
import { since, type ActorContext } from './context.js';
import { onActiveAccount } from './access.js';
import type { Entity } from '../../src/broker/tradovate/mirror.js';
import type { LateAnswer } from '../../src/broker/tradovate/ws-client.js';
import type { Hold } from './exposure.js';
import { settledWithin } from './in-flight.js';
import { valueWithin } from '../../src/wait.js';
import { afterResync, brokerPositionsRead } from './broker-read.js';
import { flattenClock, flattenSince, flattensCovering } from './flatten-log.js';
import type { ComingExit } from './orphan-legs.js';
import { placementKey, type UnknownPlacement } from './unknown-outcomes.js';
import { linkageOf, rejectReasonOf, strategyBracket, type StrategyBracket } from '../../src/broker/tradovate/order-records.js';
import { PRICE_BAND_FACTOR, referencePrice, type BracketLeg, type OrderRecord } from '../../src/domain/orders.js';
import { checkFixedLegsFromFill, checkLegsFromFill, offsetLegs } from '../../src/domain/fill-anchor.js';
import { priceBand } from '../../src/domain/order-plan.js';
import { contractRoot } from '../../src/domain/symbols.js';
import type { PlaceOrderRequest, PlaceOrderResult } from '../../src/actors/protocol.js';

function isAbsolute(leg: BracketLeg | null | undefined): leg is { price: number } {
  return !!leg && 'price' in leg;
}

function offsetOf(req: Pick<PlaceOrderRequest, 'orderType' | 'price' | 'stopPrice'>, leg: BracketLeg | null | undefined): number | null {
  if (!leg) return null;
  if ('offsetPoints' in leg) return Math.abs(leg.offsetPoints);
  const ref = referencePrice(req.orderType, req.price, req.stopPrice);
  if (ref === null) throw new AppError('VALIDATION_FAILED', 'a bracket mixing a price and an offset needs an entry price');
  return Math.abs(leg.price - ref);
}

/**
 * Refuses a bracket at fixed prices with a leg on the wrong side of where the entry really
 * fills (VALIDATION_FAILED), and (PRICE_OUT_OF_RANGE) one whose offset legs would land outside
 * the band, or at or below zero, from where the entry really fills: the broker hangs them from the fill, not
 * from the price the order names. The market's last price comes from the quote feed; without
 * one, a leg below the fill must stay above zero from the lowest fill the entry allows.
 */
export async function checkOffsetLegs(ctx: ActorContext, req: Omit<PlaceOrderRequest, 'type' | 'clOrdId'>): Promise<void> {
  const product = contractRoot(req.symbol);
  if (!product) return;
  const legs = offsetLegs(req, (leg) => offsetOf(req, leg)!, product.tickSize);
  const fixed = legs.length === 0 && (req.takeProfit != null || req.stopLoss != null);
  if (legs.length === 0 && !fixed) return;
  const contract = ctx.mirror.all('contract').find((c) => c.name === req.symbol);
  const last = contract && ctx.market ? ((await ctx.market.lastPrice(contract.id)) ?? null) : null;
  if (fixed) {
    // A bracket at fixed prices (sent as an OSO): each leg must lie on its side of the fill.
    const errors = last === null ? [] : checkFixedLegsFromFill(req, req, last);
    if (errors.length) throw new AppError('VALIDATION_FAILED', errors.map((e) => `${e.path}: ${e.message}`).join('; '), { errors });
    return;
  }
  const band = req.priceBand ?? priceBand(product.referencePrice, product.tickSize, PRICE_BAND_FACTOR);
  const { anchor, errors } = checkLegsFromFill(req, legs, product.tickSize, band, req.symbol, last);
  if (errors.length === 0) return;
  const detail = errors.map((e) => `${e.path}: ${e.message}`).join('; ');
  throw new AppError('PRICE_OUT_OF_RANGE', detail, { errors, band: { min: band.min, max: band.max, reference: band.reference }, anchor });
}

/** Waits until the broker has settled the order's acceptance (left PendingNew, or rejected). */
export async function settle(ctx: ActorContext, orderId: number): Promise<void> {
  await ctx.mirror.waitForOrder(orderId, () => {
    const o = ctx.mirror.get('order', orderId);
    if (!o) return undefined;
    if (o.ordStatus === undefined || o.ordStatus === 'PendingNew') return rejectReasonOf(ctx.mirror, orderId) ? true : undefined;
    return true;
  }, ctx.settleMs);
}

function provisional(req: PlaceOrderRequest, orderId: number, role: OrderRecord['role']): OrderRecord {
  const now = new Date().toISOString();
  return {
    orderId: String(orderId),
    accountId: req.accountId,
    symbol: req.symbol,
    requestedSymbol: req.requestedSymbol,
    side: req.side,
    type: req.orderType,
    qty: req.qty,
    filledQty: 0,
    avgFillPrice: null,
    price: req.price ?? null,
    stopPrice: req.stopPrice ?? null,
    timeInForce: req.timeInForce,
    status: 'pending',
    role,
    bracketId: null,
    legs: { takeProfit: null, stopLoss: null },
    clientOrderId: req.clientOrderId ?? null,
    createdAt: now,
    updatedAt: now,
  };
}

function recordOrThrow(ctx: ActorContext, req: PlaceOrderRequest, orderId: number, role: OrderRecord['role']): OrderRecord {
  const rec = ctx.model.record(orderId, req.symbol) ?? provisional(req, orderId, role);
  if (rec.status === 'rejected') {
    const brokerReason = rec.rejectReason ?? rejectReasonOf(ctx.mirror, orderId) ?? 'rejected';
    throw new AppError('BROKER_REJECTED', `broker rejected the order: ${brokerReason}`, { brokerReason, order: rec });
  }
  return rec;
}

function legsResult(ctx: ActorContext, entry: OrderRecord): PlaceOrderResult['legs'] {
  const tp = entry.legs.takeProfit ? ctx.model.record(Number(entry.legs.takeProfit)) : null;
  const sl = entry.legs.stopLoss ? ctx.model.record(Number(entry.legs.stopLoss)) : null;
  return { takeProfit: tp, stopLoss: sl };
}

/** Prices the broker holds are the request's own, passed through a float: equal within this. */
const SAME_PRICE = 1e-9;

function samePrice(a: number | null | undefined, b: number | null | undefined): boolean {
  if (a == null || b == null) return (a ?? null) === (b ?? null);
  return Math.abs(a - b) <= SAME_PRICE * Math.max(1, Math.abs(a));
}

/** The broker's legs of the key's order, as far as it has them (fixed-price legs are placed with their entry). */
interface LegsAtBroker {
  takeProfit: OrderRecord | null;
  stopLoss: OrderRecord | null;
}

/** What of the request the broker's order under its key does not match, or undefined when it is this request's. */
function differsFrom(
  order: OrderRecord,
  req: PlaceOrderRequest,
  bracketAsked: boolean,
  bracketAtBroker: boolean,
  legs: LegsAtBroker,
  strategy: StrategyBracket | null | undefined,
  notedClientId: string | null | undefined,
): string | undefined {
  if (order.side !== req.side) return 'side';
  if (order.qty !== req.qty) return 'quantity';
  if (order.symbol !== req.symbol) return 'contract';
  if (order.type !== req.orderType) return 'order type';
  if (req.orderType !== 'market' && !samePrice(order.price, req.price)) return 'price';
  if ((req.orderType === 'stop' || req.orderType === 'stop_limit') && !samePrice(order.stopPrice, req.stopPrice)) return 'stop price';
  if (order.timeInForce !== req.timeInForce) return 'time in force';
  if (bracketAsked !== bracketAtBroker) return bracketAsked ? 'a bracket asked for, none at the broker' : 'no bracket asked for, one at the broker';
  if (bracketAsked) {
    // Each leg asked for is at the broker, and none that was not (money probe: a retry after a 504
    // that added a stop-loss answered 201 `reconciled`, the position without one).
    // An order strategy whose params the broker has not shown: its legs cannot be told (none checked).
    const missing = strategy === undefined ? legDiffers(req, legs) : strategy && strategyDiffers(req, strategy);
    if (missing) return missing;
  }
  // What the first attempt noted (when it got that far): a label is part of the request.
  if (notedClientId !== undefined && notedClientId !== (req.clientOrderId ?? null)) return 'clientOrderId';
  return undefined;
}

/** A leg asked for and none at the broker, or the other way round; undefined when both or neither. */
function legPresence(leg: 'take-profit' | 'stop-loss', asked: boolean, atBroker: boolean): string | undefined {
  if (asked === atBroker) return undefined;
  return asked ? `a ${leg} asked for, none at the broker` : `a ${leg} at the broker, none asked for`;
}

/** Fixed-price legs are at the broker with their entry: the legs asked for, at the request's prices. */
function legDiffers(req: PlaceOrderRequest, legs: LegsAtBroker): string | undefined {
  const missing = legPresence('take-profit', !!req.takeProfit, !!legs.takeProfit) ?? legPresence('stop-loss', !!req.stopLoss, !!legs.stopLoss);
  if (missing) return missing;
  if (isAbsolute(req.takeProfit) && legs.takeProfit && !samePrice(legs.takeProfit.price, req.takeProfit.price)) return 'take-profit price';
  if (isAbsolute(req.stopLoss) && legs.stopLoss && !samePrice(legs.stopLoss.stopPrice, req.stopLoss.price)) return 'stop-loss price';
  return undefined;
}

/**
 * Offset legs become orders only at the fill, but the order strategy holds them from the start
 * (points from the fill): the legs asked for, at the request's distances (money probe: a retry
 * with another stop distance answered 201 `reconciled`, the stop where the first one put it).
 */
function strategyDiffers(req: PlaceOrderRequest, strategy: StrategyBracket): string | undefined {
  let tp: number | null;
  let sl: number | null;
  try {
    tp = offsetOf(req, req.takeProfit);
    sl = offsetOf(req, req.stopLoss);
  } catch {
    return 'bracket';
  }
  const missing = legPresence('take-profit', tp !== null, strategy.profitTarget !== null) ?? legPresence('stop-loss', sl !== null, strategy.stopLoss !== null);
  if (missing) return missing;
  if (tp !== null && !samePrice(Math.abs(strategy.profitTarget!), tp)) return 'take-profit distance';
  if (sl !== null && !samePrice(Math.abs(strategy.stopLoss!), sl)) return 'stop-loss distance';
  return undefined;
}

function describeAtBroker(order: OrderRecord, bracket: boolean): string {
  const price = order.type === 'market' ? '' : ` @ ${order.stopPrice ?? ''}${order.type === 'stop_limit' ? '/' : ''}${order.type === 'stop' ? '' : (order.price ?? '')}`;
  return `${order.side} ${order.qty} ${order.symbol} ${order.type}${price}${bracket ? ' with a bracket' : ''}`;
}

/**
 * The answer for an order the broker already has under the request's clOrdId (a retry after a
 * timeout or a crash). When the first attempt never got to note what the broker cannot hold
 * (it timed out before the answer, or ran in a process that died), it is noted now from the
 * request — the same key names the same request — so the answer carries what a normal 201
 * carries: requestedSymbol, clientOrderId, the bracket's role and its legs.
 */
function reconciled(ctx: ActorContext, req: PlaceOrderRequest, id: number): PlaceOrderResult {
  const hasBracket = !!req.takeProfit || !!req.stopLoss;
  const link = linkageOf(ctx.mirror, ctx.mirror.get('order', id)!);
  // The broker's order for this key is another request's (the same key sent with another body
  // after a 504, whose answer was not stored): not this one's answer, and nothing of this request
  // is noted on it. A bracket asked for is a bracket at the broker (a plain order answered as a
  // bracket entry with legs to come claimed protection nobody placed).
  const atBroker = ctx.model.record(id, req.symbol)!;
  const legRecord = (legId: number | null) => (legId ? (ctx.model.record(legId) ?? null) : null);
  const noted = ctx.model.noteOf(id);
  const strategy = strategyBracket(ctx.mirror, id);
  const differs = differsFrom(atBroker, req, hasBracket, link.role === 'entry', { takeProfit: legRecord(link.takeProfit), stopLoss: legRecord(link.stopLoss) }, strategy, noted ? (noted.clientOrderId ?? null) : undefined);
  if (differs) {
    const there = `${atBroker.orderId}: ${describeAtBroker(atBroker, link.role === 'entry')}`;
    throw new AppError(
      'IDEMPOTENCY_KEY_REUSED',
      // An alert sent again after a 504 is the same alert, sized against a position it already changed (a reversal's
      // open is smaller than the alert's quantity): "use a new key" would have traded it twice (money probe).
      req.origin === 'webhook'
        ? `an earlier alert with this id placed order ${there} at the broker, which is not this alert's (${differs}): nothing was placed. ` +
            "If this is that alert sent again (one answered 504), it was acted on already: see the token's alerts, and do not send it with a new id; " +
            "if it is another alert, its template's id is not unique"
        : `this key's order at the broker (${there}) is not this request's (${differs}); use a new key for a new order`,
      { order: atBroker },
    );
  }
  // The broker rejected the first attempt's order: that is this request's outcome, as the first
  // attempt's answer would have said (re-probe: a retry after a 504 answered 201 `accepted` for it).
  if (atBroker.status === 'rejected') recordOrThrow(ctx, req, id, atBroker.role);
  if (!ctx.model.noteOf(id)) {
    const note = { requestedSymbol: req.requestedSymbol, clientOrderId: req.clientOrderId ?? null };
    ctx.model.note(id, hasBracket ? { ...note, role: 'entry', bracketId: String(id) } : note);
    // OSO legs are noted like the first attempt notes them; a strategy's are not (they come with the fill).
    if (hasBracket && link.role === 'entry' && ctx.mirror.by('order', 'parentId', id).length > 0) {
      if (link.takeProfit) ctx.model.note(link.takeProfit, { ...note, role: 'take_profit', bracketId: String(id) });
      if (link.stopLoss) ctx.model.note(link.stopLoss, { ...note, role: 'stop_loss', bracketId: String(id) });
    }
  }
  const order = ctx.model.record(id, req.symbol)!;
  const result: PlaceOrderResult = { order, reconciled: true, brokerMs: 0 };
  if (order.role === 'entry' || hasBracket) result.legs = legsResult(ctx, order);
  return result;
}

/**
 * Places an order (single or bracket), reconciling by clOrdId first. The mirror cannot know an
 * order the broker has not answered for yet, so a second placeorder for the key could be a
 * duplicate: a retry that arrives while an earlier attempt is still waiting on the broker (the
 * front timed out and let go) waits for that attempt, and one that arrives while an attempt's
 * outcome is unknown (the broker did not answer in time) waits for the outcome up to its own
 * deadline — then reconciles, or answers BROKER_TIMEOUT again having sent nothing.
 */
export async function placeOrder(ctx: ActorContext, req: PlaceOrderRequest): Promise<PlaceOrderResult> {
  const running = ctx.placing;
  const key = placementKey(req.accountId, req.clOrdId);
  let deadline = 0;
  for (;;) {
    const earlier = running.get(key);
    if (earlier) {
      // Several retries may wait on one attempt: they go on one at a time, each seeing what the one before left.
      await earlier.catch(() => undefined);
      if (running.get(key) === earlier) running.delete(key);
      continue;
    }
    if (!ctx.unknown.has(key)) break;
    deadline ||= performance.now() + ctx.unknown.waitMs;
    const outcome = await ctx.unknown.wait(key, deadline - performance.now());
    if (!outcome) throw new AppError('BROKER_TIMEOUT', 'the broker has not answered an earlier attempt with this key yet; nothing new was sent: retry later');
    // The order the late answer named (found by id even where no clOrdId names it in the mirror).
    if (outcome.orderId !== null && ctx.mirror.get('order', outcome.orderId)) {
      // As a first attempt's answer is: its status in (a market order's fills with it), so what
      // acts next on the account (an exit in the alert's turn) sees the position it made.
      await settle(ctx, outcome.orderId);
      ctx.conn.requireConnected();
      ctx.model.account(req.accountId);
      return reconciled(ctx, req, outcome.orderId);
    }
  }
  const attempt = placeOnce(ctx, req);
  if (req.reduceOnly) reduceOnlyAttempts.add(attempt);
  attemptSymbols.set(attempt, req.symbol);
  running.set(key, attempt);
  try {
    return await attempt;
  } finally {
    if (running.get(key) === attempt) running.delete(key);
  }
}

/** The room made for an exit that failed: undone now, or once its unknown outcome says it was not placed. */
function undoRoomFor(ctx: ActorContext, req: PlaceOrderRequest, coming: ComingExit, err: unknown, timedOut: boolean): void {
  const failed = (why: string, outcomeUnknown: boolean) =>
    ctx.roomUsed?.(req.accountId, coming, { why, outcomeUnknown }).catch((e: unknown) => ctx.logger.error({ err: e, accountId: req.accountId }, 'room for a failed exit not undone'));
  const why = err instanceof AppError ? `${err.code}: ${err.message}` : String(err);
  void failed(why, timedOut);
  if (!timedOut) return;
  void ctx.unknown.whenKnown(placementKey(req.accountId, req.clOrdId))?.then((outcome) => {
    // Placed after all: an exit, as its first answer would have noted it, so a position that is
    // smaller than it by now has it cancelled (final probe: a limit exit of 2 answered late rested
    // on long 1, not known as an exit, and filled into short 2).
    if (outcome.orderId !== null) ctx.model.note(outcome.orderId, { requestedSymbol: req.requestedSymbol, clientOrderId: req.clientOrderId ?? null, reduceOnly: true });
    if (outcome.orderId !== null || outcome.how === 'expired') return void ctx.roomUsed?.(req.accountId, coming);
    return failed(`it timed out, and the broker has not placed it (${outcome.how})`, false);
  });
}

/** Whether the guards would refuse the order now (false when they cannot tell yet: its contract unknown). */
function refusedNow(ctx: ActorContext, req: PlaceOrderRequest): boolean {
  try {
    return (ctx.guards?.check(req) ?? null) !== null;
  } catch {
    return false;
  }
}

/**
 * How long an API order waits for a flatten of its account to end before it is refused (503,
 * nothing sent): its caller waits 15 s in all, and the broker's own deadline is 10 s, so one sent
 * later than this could outlast the caller (cluster probe: a flatten ending at 9 s, the order then
 * sent to a 9 s broker, its caller answered a bare 504 at 15 s while it filled).
 */
export const FLATTEN_WAIT_MS = 4_000;

async function placeOnce(ctx: ActorContext, req: PlaceOrderRequest): Promise<PlaceOrderResult> {
  // An order that arrives while the account is being flattened goes after the flatten: sent in
  // between, the flatten's liquidation would close it too (a strategy's close and its next entry,
  // sent a moment apart, ended flat while both were answered as done).
  const flattening = flattensCovering(ctx, req.accountId, req.symbol);
  if (flattening) {
    // An entry a guard refuses now (the kill switch whose flatten this is) is refused at once:
    // waiting out a slow flatten first ended in a 504 for an order never sent (re-probe).
    if (refusedNow(ctx, req)) ctx.guards!.admit(req)?.release();
    // An API order not past its caller's patience: a flatten at a 9 s broker takes ~18 s, the
    // caller was answered a bare 504 at 15 s, and the order was sent after it all the same; a retry
    // without an Idempotency-Key doubled the position (re-probe). Refused instead, nothing sent.
    // A webhook alert's order waits as long as the flatten takes: its alert was answered already,
    // TradingView does not resend, and its late outcome is followed up (a strategy's close and its
    // re-entry at a slow broker keep their order).
    const ended = flattening.then(() => true, () => true);
    if ((req.origin === 'webhook' ? await ended : await valueWithin(ended, FLATTEN_WAIT_MS)) !== true) {
      // 503, not 409: nothing was done, and an answer under an Idempotency-Key is not stored, so
      // the same key places the order once the flatten has ended (a stored 409 replayed for good).
      throw new AppError(
        'BROKER_UNAVAILABLE',
        `a flatten of account ${req.accountId} was still running after ${FLATTEN_WAIT_MS / 1000} s: this order was not sent (nothing reached the broker); send it again once the flatten has ended`,
        { accountId: req.accountId, flattening: true },
        1,
      );
    }
  }
  /** From here on, a flatten that begins and closes this order's contract is one the order did not wait for. */
  const afterFlattens = flattenClock();
  // An order arriving while the connection logs in again (its token died) waits for it.
  const relogin = ctx.conn.reauthenticated?.();
  if (relogin) await relogin;
  // Not checked nor sized against a state being read again (broker-read.ts).
  await afterResync(ctx);
  // Not into a socket gone quiet (two heartbeats missed): its outcome would be unknown (504), not "nothing sent".
  ctx.conn.requireFresh();
  const account = ctx.model.account(req.accountId);
  const existing = ctx.model.findByClOrdId(req.accountId, req.clOrdId);
  if (existing) return reconciled(ctx, req, existing.id);
  // Only the first order in a contract pays for this lookup; records then name the contract.
  await ctx.conn.ensureContract({ name: req.symbol });
  await checkOffsetLegs(ctx, req);
  if (req.reduceOnly) await settledBeforeExit(ctx, req);
  const reducing = req.reduceOnly ? requireReduces(ctx, req) : undefined;
  // From the guards' check to the send nothing awaits: the order's contracts are held from the
  // check until the broker reports the order, so concurrent orders see each other.
  let hold: Hold | null;
  try {
    hold = ctx.guards?.admit(req) ?? null;
  } catch (err) {
    reducing?.release();
    throw err;
  }
  // The broker's answer after BROKER_TIMEOUT goes to the unknown outcome the timeout opened (the
  // rejection reaches the catch below in the same turn, before any later frame is read).
  let unknown: UnknownPlacement | undefined;
  const onLate = (answer: LateAnswer) => unknown?.answered(answer);
  let coming: ComingExit | undefined;
  try {
    // A plain exit that will rest on a position or fill at once: the legs make room before it is
    // sent (TV probe: a market partial exit sent as the full-size stop filled left the account
    // short), and it is kept as an exit (cancelled, as a partial exit is, should the position go
    // flat or smaller than it).
    // Checked before the legs make room, not after: refused once they were cut, the exit gave them
    // back while a retry under its key made room again, and a take-profit larger than the position
    // was left (re-probe). Once room is made the exit goes out; a caller answered meanwhile was told
    // it may still reach the broker.
    requireCallerWaiting(req);
    const asExit = reducesAsExit(ctx, req);
    if (asExit) coming = { symbol: req.symbol, side: req.side, type: req.orderType, qty: req.qty, placement: placementKey(req.accountId, req.clOrdId) };
    const cutStops = coming ? ((await ctx.makeRoom?.(req.accountId, coming)) ?? false) : false;
    // A flatten that began while the legs made room closes the position this exit was for: sent
    // now, it would rest on the flat account and open a position when it filled (money probe:
    // short 2, unprotected). Not sent; the legs are given back as far as a position still needs them.
    if (coming && flattenSince(ctx, req.accountId, req.symbol, afterFlattens)) {
      throw new AppError(
        'CONFLICT',
        `a flatten of account ${req.accountId} began while the stop-loss and take-profit made room for this exit: it closes the ${req.symbol} position, so the exit was not sent`,
        { accountId: req.accountId },
      );
    }
    // Cutting the legs took broker round trips: a leg may have filled meanwhile (faults probe: long
    // 1, its stop filled as it was being cut, and the market exit then made the account short 1).
    const sendQty = coming ? stillHeldQty(ctx, req) : req.qty;
    const sent = sendQty === req.qty ? req : { ...req, qty: sendQty };
    const result = await onActiveAccount(ctx, req.accountId, () => placeNew(ctx, asExit ? { ...sent, reduceOnly: true } : sent, account, hold, onLate));
    if (coming && sendQty < req.qty) {
      const why = `a stop-loss or take-profit filled ${req.qty - sendQty} while the legs made room for it, and the strategy keeps ${req.keepQty}`;
      void ctx.roomUsed?.(req.accountId, coming, { why, outcomeUnknown: false, sentQty: sendQty }).catch((e: unknown) => ctx.logger.error({ err: e, accountId: req.accountId }, 'room for a smaller exit not given back'));
    } else if (coming) void ctx.roomUsed?.(req.accountId, coming);
    if (cutStops && (req.orderType === 'stop' || req.orderType === 'stop_limit')) (ctx.stopsCutBy ??= new Set()).add(result.order.orderId);
    hold?.release();
    // Settled (its fills are in the position now): it takes nothing more off.
    reducing?.release();
    return result;
  } catch (err) {
    const timedOut = err instanceof AppError && err.code === 'BROKER_TIMEOUT';
    // After a timeout the order may still reach the broker: its outcome is unknown, and its
    // contracts stay held (and a partial exit's quantity counted), until the broker, the mirror
    // or a full sync says what became of it.
    if (timedOut) {
      unknown = ctx.unknown.open(req.accountId, req.clOrdId, reducing ? keepingReduction(hold, reducing) : hold, reducing !== undefined, req.symbol);
    } else {
      hold?.release();
      reducing?.release();
    }
    // Legs cut for an exit that was not placed are sized back; its outcome unknown, they are said
    // to stay cut until it is known, and sized back then if it was not placed (re-probe: they
    // stayed cut for good after the outcome came back "not placed").
    if (coming) undoRoomFor(ctx, req, coming, err, timedOut);
    throw err;
  }
}

/** How long before its caller stops waiting an API order is still sent: its answer has the time to get back. */
const CALLER_MARGIN_MS = 250;

/**
 * An API order is not sent once its caller was answered: waits before the send (a flatten, a
 * login again, the first lookup of a contract, the guards: each a broker round trip at a slow
 * broker) could outlast the caller's 15 s, and an order sent then was answered a 504 while it
 * filled (cluster probe). Refused instead, nothing sent (503, Retry-After 1): the caller's
 * 504, should it come first, says the order may still reach the broker, and a retry under the
 * same Idempotency-Key waits for this attempt, then places it. A webhook alert's order has been
 * answered already and goes out whatever the wait (its outcome is followed up).
 */
function requireCallerWaiting(req: PlaceOrderRequest): void {
  if (req.origin === 'webhook' || req.callerGoneAt === undefined) return;
  if (performance.now() < req.callerGoneAt - CALLER_MARGIN_MS) return;
  throw new AppError(
    'BROKER_UNAVAILABLE',
    'this order was not sent (nothing reached the broker): what it had to wait for before it could go (a flatten, a login again, the first lookup of its contract) took until its request had run out of time; send it again',
    { accountId: req.accountId },
    1,
  );
}

/**
 * A plain order that will rest on the position, or fill at once against it (market), and reduce
 * it: no bracket, no larger than what the position holds beyond the exits already resting on it
 * (else, with them, it could take the position past flat).
 */
function reducesAsExit(ctx: ActorContext, req: PlaceOrderRequest): boolean {
  if (req.takeProfit || req.stopLoss) return false;
  const net = ctx.model.netPosition(req.accountId, req.symbol);
  const held = req.side === 'sell' ? net : -net;
  // The resting exits are counted only for an order the position could take at all.
  return held >= req.qty && held - restingExitQty(ctx, req) >= req.qty;
}

/** Open quantity of the exits (partial exits, API exits) resting on the order's side of its contract. */
function restingExitQty(ctx: ActorContext, req: PlaceOrderRequest): number {
  let qty = 0;
  for (const o of ctx.model.workingReduceOnly(req.accountId)) if (o.symbol === req.symbol && o.side === req.side) qty += o.qty - o.filledQty;
  return qty;
}

/**
 * The guards' hold of an order whose outcome is unknown, keeping its reduce-only quantity counted
 * too: until the broker reports the order (bound) or the outcome says it never got it (released).
 */
function keepingReduction(hold: Hold | null, reducing: { release(): void }): Hold {
  return {
    bind(orderId) {
      hold?.bind(orderId);
      reducing.release();
    },
    release() {
      hold?.release();
      reducing.release();
    },
  };
}

/**
 * Placements on the account still waiting for the broker's answer that began before `except`
 * (the caller's own, when it is a placement; partial exits left out with `skipReduceOnly`): an entry sent a moment before a flatten would otherwise be neither cancelled
 * (the mirror has no such order yet) nor liquidated (not filled yet), and fill after it; an
 * exit sent a moment before a partial exit would not be counted against the position. Waited
 * for up to settleMs; with `inScope`, those in its contracts only.
 */
export async function placementsSettled(ctx: ActorContext, accountId: string, except?: string, skipReduceOnly = false, inScope?: (symbol: string) => boolean): Promise<void> {
  const prefix = `${accountId}|`;
  const inFlight: Promise<unknown>[] = [];
  for (const [key, attempt] of ctx.placing) {
    // In the order they began: those after the caller's own were sent after it.
    if (key === except) break;
    if (!key.startsWith(prefix) || (skipReduceOnly && reduceOnlyAttempts.has(attempt))) continue;
    // A strategy's close of one contract does not wait for another's order (cluster probe: an ES exit waited 5 s for an NQ entry it could neither cancel nor close).
    const symbol = inScope && attemptSymbols.get(attempt);
    if (symbol && !inScope(symbol)) continue;
    inFlight.push(attempt.catch(() => undefined));
  }
  if (inFlight.length > 0) await settledWithin(Promise.all(inFlight), ctx.settleMs);
}

/**
 * Orders on the account whose outcome the broker has not given yet: on their way, or timed out
 * (unknown); with `inScope`, of those contracts only (a flatten `{symbol}`'s answer counted an
 * order of another symbol, which it does not touch: probe).
 */
export function outstandingOrders(ctx: ActorContext, accountId: string, inScope?: (symbol: string) => boolean): number {
  const prefix = `${accountId}|`;
  let n = ctx.unknown.pendingFor(accountId, false, inScope);
  for (const [key, attempt] of ctx.placing) {
    if (!key.startsWith(prefix) || ctx.unknown.has(key)) continue;
    const symbol = attemptSymbols.get(attempt);
    if (inScope && symbol !== undefined && !inScope(symbol)) continue;
    n++;
  }
  return n;
}

/** The contract of each placement on its way (ActorContext.placing's values). */
const attemptSymbols = new WeakMap<Promise<unknown>, string>();

/** Placements of partial exits: what they take off is counted by `ctx.reducing`, not waited for. */
const reduceOnlyAttempts = new WeakSet<Promise<unknown>>();

/**
 * A partial exit counts what was sent to the account before it: it waits (up to settleMs each)
 * for earlier orders to reach the broker and for a flatten in flight, and is refused (409
 * CONFLICT, nothing sent) while an earlier order still has no outcome (on its way, or timed
 * out): it could reverse the position once that one fills.
 */
async function settledBeforeExit(ctx: ActorContext, req: PlaceOrderRequest): Promise<void> {
  // What it reduces is the broker's own position: read as the exit begins (a stop-loss filled in a
  // short silence left the mirror long where the broker was flat, and a strategy's partial exit
  // sold into the flat account and left it short: re-probe).
  const t0 = performance.now();
  const read = ctx.conn.checkPositions?.({ recheck: false });
  const own = placementKey(req.accountId, req.clOrdId);
  await placementsSettled(ctx, req.accountId, own, true);
  const flattening = ctx.flattening.get(req.accountId);
  if (flattening) await settledWithin(flattening, ctx.settleMs);
  await brokerPositionsRead(ctx, read, t0);
  const prefix = `${req.accountId}|`;
  let earlier = ctx.unknown.pendingFor(req.accountId, true);
  for (const [key, attempt] of ctx.placing) {
    if (key === own) break;
    if (key.startsWith(prefix) && !ctx.unknown.has(key) && !reduceOnlyAttempts.has(attempt)) earlier++;
  }
  if (earlier > 0 || ctx.flattening.has(req.accountId)) {
    throw new AppError(
      'CONFLICT',
      `a partial exit waits for the account's earlier orders: ${earlier > 0 ? `${earlier} still ha${earlier === 1 ? 's' : 've'} no outcome from the broker (on the way, or timed out)` : 'a flatten is still running'}, ` +
        'and the position they leave is not known: nothing was sent; send it again once they are known',
      { accountId: req.accountId },
      1,
    );
  }
}

/**
 * A partial exit may only reduce: the account must hold at least its quantity on the other side
 * of the contract, less what reduce-only orders still in flight may take off. Otherwise the
 * strategy and the account disagree (a stop hit at the broker, an alert missed), and the order
 * would open or grow a position: refused, nothing sent. Admitted, its quantity counts against
 * the position until it settles or fails (`release`).
 */
function requireReduces(ctx: ActorContext, req: PlaceOrderRequest): { release(): void } {
  const net = ctx.model.netPosition(req.accountId, req.symbol);
  const key = `${req.accountId}|${req.symbol}`;
  const pending = (ctx.reducing.get(key) ?? 0) + restingExitQty(ctx, req);
  const held = (req.side === 'sell' ? net : -net) - pending;
  if (held < req.qty) {
    const holds = net === 0 ? 'holds no' : `is ${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
    const inFlight = pending > 0 ? ` (${pending} already on the way out or resting to go)` : '';
    throw new AppError('SYMBOL_MISMATCH', `a partial exit may only reduce the position: the account ${holds} ${req.symbol}${inFlight}, the order would ${req.side} ${req.qty}`, {
      symbol: req.symbol,
      net,
    });
  }
  ctx.reducing.set(key, pending + req.qty);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      const left = (ctx.reducing.get(key) ?? 0) - req.qty;
      if (left > 0) ctx.reducing.set(key, left);
      else ctx.reducing.delete(key);
    },
  };
}

/**
 * An exit, once its legs made room for it: the position must still hold what it takes off, or it
 * would open one the other way. Nothing is sent; its legs are sized back to what is left. What it
 * is sent for: all of it, or, for a strategy's partial exit, what the position holds above the
 * strategy's size when a leg fill took part of it (re-probe 3: long 3, sell 2 to keep 1, a
 * take-profit filled 1; refusing it left long 2 under a strategy long 1).
 */
function stillHeldQty(ctx: ActorContext, req: PlaceOrderRequest): number {
  const net = ctx.model.netPosition(req.accountId, req.symbol);
  // A strategy's partial exit also keeps the strategy's size (trader probe: its stop filled 1 of
  // long 3 meanwhile, and selling 1 more left long 1 under a strategy long 2).
  const keep = req.keepQty ?? 0;
  const above = (req.side === 'sell' ? net : -net) - keep;
  if (above >= req.qty) return req.qty;
  if (req.keepQty !== undefined && above > 0) return above;
  const holds = net === 0 ? 'holds no' : `is ${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
  const keeps = keep > 0 && net !== 0 ? ` and keeps ${keep} (the strategy's size after the alert)` : '';
  throw new AppError(
    'SYMBOL_MISMATCH',
    `the position changed while its stop-loss and take-profit made room for this exit (one of them filled): the account ${holds} ${req.symbol} now${keeps}, the exit would ${req.side} ${req.qty}; nothing sent, and the legs cut for it are given back for what is left (a bracket-alert says how)`,
    { symbol: req.symbol, net },
  );
}

/** Sends a new order (single, OSO or strategy) and waits for the broker to settle it. */
async function placeNew(ctx: ActorContext, req: PlaceOrderRequest, account: Entity, hold: Hold | null, onLate: (answer: LateAnswer) => void): Promise<PlaceOrderResult> {
  const ref = { id: account.id, name: String(account.name ?? account.id) };
  const note = { requestedSymbol: req.requestedSymbol, clientOrderId: req.clientOrderId ?? null };
  const hasBracket = !!req.takeProfit || !!req.stopLoss;
  const t0 = performance.now();

  if (!hasBracket) {
    const d = checkAnswer('placeorder', await ctx.conn.send('order/placeorder', placeOrderBody(req, ref), { kind: 'order', onLate }));
    const brokerMs = since(t0);
    const orderId = Number(d.orderId);
    if (!orderId) throw new AppError('BROKER_REJECTED', 'broker returned no order id', { brokerReason: 'no orderId' });
    hold?.bind(orderId);
    ctx.model.note(orderId, req.reduceOnly ? { ...note, reduceOnly: true } : note);
    const t1 = performance.now();
    await settle(ctx, orderId);
    return { order: recordOrThrow(ctx, req, orderId, 'single'), reconciled: false, brokerMs, settleMs: since(t1) };
  }

  const bothAbsolute = (!req.takeProfit || isAbsolute(req.takeProfit)) && (!req.stopLoss || isAbsolute(req.stopLoss));
  if (bothAbsolute) {
    const tp = isAbsolute(req.takeProfit) ? req.takeProfit.price : null;
    const sl = isAbsolute(req.stopLoss) ? req.stopLoss.price : null;
    const d = checkAnswer('placeoso', await ctx.conn.send('order/placeoso', placeOsoBody(req, ref, tp, sl), { kind: 'order', onLate }));
    const brokerMs = since(t0);
    const orderId = Number(d.orderId);
    if (!orderId) throw new AppError('BROKER_REJECTED', 'broker returned no order id', { brokerReason: 'no orderId' });
    hold?.bind(orderId);
    const first = Number(d.oso1Id) || null;
    const second = Number(d.oso2Id) || null;
    const tpId = tp !== null ? first : null;
    const slId = sl !== null ? (tp !== null ? second : first) : null;
    const bracketId = String(orderId);
    // The answer is the authority on linkage; brokers differ in how legs point at entries.
    ctx.model.note(orderId, { requestedSymbol: note.requestedSymbol, clientOrderId: note.clientOrderId, role: 'entry', bracketId, legs: { takeProfit: tpId ? String(tpId) : null, stopLoss: slId ? String(slId) : null } });
    if (tpId) ctx.model.note(tpId, { requestedSymbol: note.requestedSymbol, clientOrderId: note.clientOrderId, role: 'take_profit', bracketId });
    if (slId) ctx.model.note(slId, { requestedSymbol: note.requestedSymbol, clientOrderId: note.clientOrderId, role: 'stop_loss', bracketId });
    const t1 = performance.now();
    await settle(ctx, orderId);
    const legIds = [tpId, slId].filter((x): x is number => !!x);
    await Promise.all(legIds.map((id) => settle(ctx, id)));
    const settleMs = since(t1);
    const order = recordOrThrow(ctx, req, orderId, 'entry');
    if (order.role !== 'entry') {
      // Linkage not visible in broker data (yet): state it from the answer's leg ids.
      order.role = 'entry';
      order.bracketId = bracketId;
      order.legs = { takeProfit: tpId ? String(tpId) : null, stopLoss: slId ? String(slId) : null };
    }
    return { order, legs: legsResult(ctx, order), reconciled: false, brokerMs, settleMs };
  }

  const body = startStrategyBody(req, ref, offsetOf(req, req.takeProfit), offsetOf(req, req.stopLoss));
  const d = checkAnswer('startorderstrategy', await ctx.conn.send('orderstrategy/startorderstrategy', body, { kind: 'order', onLate }));
  const brokerMs = since(t0);
  const strategy = d.orderStrategy as Record<string, unknown> | undefined;
  const strategyId = Number(strategy?.id);
  if (!strategyId) throw new AppError('BROKER_REJECTED', 'broker returned no order strategy', { brokerReason: 'no orderStrategy' });
  // The answer names no orders: the entry appears later as an orderStrategyLink.
  const entry = await ctx.mirror.waitFor(() => {
    const s = ctx.mirror.get('orderStrategy', strategyId);
    if (s && (s.status === 'ExecutionFailed' || s.status === 'NotEnoughLiquidity')) return -1;
    const links = ctx.mirror.by('orderStrategyLink', 'orderStrategyId', strategyId);
    const orders = links.map((l) => ctx.mirror.get('order', Number(l.orderId))).filter((o) => !!o);
    const found = orders.find((o) => o!.action === (req.side === 'buy' ? 'Buy' : 'Sell'));
    return found ? found.id : undefined;
  }, ctx.settleMs);
  if (entry === -1) {
    const s = ctx.mirror.get('orderStrategy', strategyId);
    const brokerReason = String(s?.failureMessage ?? s?.status ?? 'strategy failed');
    throw new AppError('BROKER_REJECTED', `broker rejected the bracket: ${brokerReason}`, { brokerReason });
  }
  if (entry === undefined) throw new AppError('BROKER_TIMEOUT', `order strategy ${strategyId} started but its entry order did not appear in time`);
  hold?.bind(entry);
  ctx.model.note(entry, { requestedSymbol: note.requestedSymbol, clientOrderId: note.clientOrderId, role: 'entry', bracketId: String(entry) });
  const t1 = performance.now();
  await settle(ctx, entry);
  const settleMs = since(t1);
  const order = recordOrThrow(ctx, req, entry, 'entry');
  if (order.role !== 'entry') {
    order.role = 'entry';
    order.bracketId = String(entry);
  }
  const link = linkageOf(ctx.mirror, ctx.mirror.get('order', entry)!);
  return { order, legs: link.role === 'entry' ? legsResult(ctx, order) : { takeProfit: null, stopLoss: null }, reconciled: false, brokerMs, settleMs };
}
