/**
 * Flatten an account: cancel every resting order, then liquidate every open position, on all
 * symbols. With a symbol: if the account holds positions and none is in that contract, refuse
 * with SYMBOL_MISMATCH and touch nothing. With `symbolOnly` (a strategy's exit), only that
 * contract's orders and position, whatever else the account holds.
 */
import { AppError } from '../../src/domain/problems.js';
import { since, type ActorContext } from './context.js';
import { tracked } from './in-flight.js';
import { afterResync, brokerPositionsRead, positionsConfirmed, verifiedPositions } from './broker-read.js';
import { outstandingOrders, placementsSettled } from './place.js';
import { cancelsSettled, forgetOwedLegs, oweAgain } from './cancel.js';
import type { OwedLeg } from '../../src/domain/guards.js';
import { flattenBegins, flattenScope } from './flatten-log.js';
import { dropFlattenLegs, keepFlattenLegs } from './flatten-legs.js';
import { onActiveAccount } from './access.js';
import type { Entity } from '../../src/broker/tradovate/mirror.js';
import { contractName, isFinal, rejectReasonOf } from '../../src/broker/tradovate/order-records.js';
import { cancelOrderBody, checkAnswer, liquidatePositionBody } from '../../src/broker/tradovate/requests.js';
import type { FlattenRequest, FlattenResult } from '../../src/actors/protocol.js';
import type { OrderRecord } from '../../src/domain/orders.js';

/** Flattens one account. */
export async function flatten(ctx: ActorContext, req: FlattenRequest): Promise<FlattenResult> {
  // Not judged on a state being read again (its symbol check too).
  await afterResync(ctx);
  ctx.conn.requireFresh();
  const account = ctx.model.account(req.accountId);
  if (req.symbol && !req.symbolOnly) {
    // What the account holds: its positions' contracts, and those its resting orders are in. A flat
    // account's orders in other contracts are another strategy's too (new-user probe: an NQ close
    // cancelled the resting ES entry and its stop-loss, where an ES position made it a 409).
    const held = () => {
      const positions = ctx.model.openPositionEntities(req.accountId).map((p) => contractName(ctx.mirror, p.contractId) ?? String(p.contractId));
      return { positions, held: positions.length > 0 ? positions : [...new Set(ctx.model.workingOrders(req.accountId).map((o) => o.symbol))] };
    };
    const refuses = (h: ReturnType<typeof held>) => h.held.length > 0 && !h.held.includes(req.symbol!);
    let found = held();
    // Refused only once the broker's own list agrees: a position in the symbol a fill lost in a
    // silence opened made it 409 while the broker held it (re-probe). Only a refusal costs the read.
    if (refuses(found)) {
      await verifiedPositions(ctx).catch(() => undefined);
      found = held();
    }
    if (refuses(found)) {
      const what = found.positions.length > 0 ? 'holds' : 'has working orders in';
      throw new AppError('SYMBOL_MISMATCH', `account ${what} ${found.held.join(', ')}, not ${req.symbol}`, { symbol: req.symbol, held: found.held });
    }
  }
  const mark = flattenBegins(ctx, req.accountId, flattenScope(req));
  const forgotten: [string, OwedLeg][] = [];
  const kept: OwedLeg[] = [];
  const closing = onActiveAccount(ctx, req.accountId, () => cancelAndLiquidate(ctx, req, account, forgotten, kept));
  // Before the flatten counts as over (sweeps place owed legs only then): the legs it kept against
  // a crash are dropped, and those it forgot are owed again where it left a position open.
  const over = async () => {
    const dropped = dropFlattenLegs(ctx, req.accountId, kept);
    oweAgain(ctx, req.accountId, forgotten);
    await dropped;
  };
  const running = tracked(ctx.flattening, req.accountId, closing.finally(over));
  const ended = () => {
    mark.running = false;
  };
  mark.ended = running.then(ended, ended);
  return running;
}

/**
 * A flatten stopped by a cancel the broker refused, after it had cancelled bracket legs of a
 * position it then did not close: said in its error and on the stream (re-probe: a p-ticket on
 * the first cancel, the legs' wave had gone through, and the 503 read as if nothing had happened).
 */
function leftUnprotected(ctx: ActorContext, accountId: string, working: readonly OrderRecord[], inScope: (symbol: string) => boolean, err: unknown): unknown {
  if (!(err instanceof AppError)) return err;
  const legs = working.filter((o) => (o.role === 'take_profit' || o.role === 'stop_loss') && ctx.mirror.get('order', Number(o.orderId))?.ordStatus === 'Canceled');
  const open = ctx.model.openPositionEntities(accountId).map((p) => contractName(ctx.mirror, p.contractId) ?? String(p.contractId));
  const bare = [...new Set(legs.map((o) => o.symbol))].filter((symbol) => inScope(symbol) && open.includes(symbol));
  if (bare.length === 0) return err;
  const detail = `the ${bare.join(', ')} position${bare.length > 1 ? 's are' : ' is'} open without protective orders: the flatten cancelled its stop-loss and take-profit (${legs.map((o) => o.orderId).join(', ')}) and then stopped before closing it (${err.message}); close or protect it`;
  ctx.logger.error({ accountId, symbols: bare }, 'flatten stopped after cancelling the legs');
  ctx.emit({ type: 'bracket-alert', connectionId: ctx.conn.spec.connectionId, accountId, orderId: legs[0]!.orderId, ts: Date.now(), detail });
  return new AppError(err.code, `${err.message}: ${detail}`, err.extensions, err.retryAfterSeconds);
}

/** Whether a refused liquidation's reason is that the broker holds no such position (Tradovate's "No position to liquidate"). */
function noPositionAtBroker(detail: string | undefined): boolean {
  return detail !== undefined && /no position/i.test(detail);
}

/**
 * The broker refused to liquidate a position the mirror still holds, so the events that closed it
 * were lost (a gap shorter than the silence watchdog resyncs after): the whole state is read again
 * (resyncNow), as the legs and fills of that position were lost with it (money probe: its dead
 * legs, still listed, made leg fitting cancel a new bracket's take-profit). Where that cannot be
 * done, the position alone is read and put in the mirror. A read that fails leaves the mirror as it was.
 */
async function rereadPosition(ctx: ActorContext, accountId: string, symbol: string): Promise<void> {
  const stale = ctx.model.openPositionEntities(accountId).find((p) => (contractName(ctx.mirror, p.contractId) ?? String(p.contractId)) === symbol);
  if (!stale) return;
  if (await ctx.conn.resyncNow?.(`the broker refused to liquidate ${symbol}, which the mirror holds ${String(stale.netPos)}: it has no such position`)) return;
  try {
    const fresh = await ctx.conn.send('position/item', undefined, { query: `id=${stale.id}` });
    if (fresh && typeof fresh === 'object' && (fresh as Entity).id === stale.id) {
      ctx.logger.warn({ accountId, symbol, mirror: stale.netPos, broker: (fresh as Entity).netPos }, 'position read again from the broker after it refused to liquidate it');
      ctx.mirror.put('position', fresh as Entity);
    }
  } catch (err) {
    ctx.logger.warn({ err, accountId, symbol }, 'position could not be read again from the broker');
  }
}

/** How long a flatten waits for the events of a position whose liquidation the broker refused, before judging it still open. */
const REFUSED_FLAT_WAIT_MS = 500;

/** How long a flatten waits for the broker's one-cancels-other to take the legs it did not cancel itself. */
const OCO_WAIT_MS = 500;
/** How long a flatten waits for cancels the broker did not answer in time to land, before it gives up (the front answers 504 "it goes on" meanwhile). */
const LATE_CANCEL_WAIT_MS = 45_000;
/** A promise that never settles: a race's side that has nothing to say. */
const NEVER = new Promise<never>(() => undefined);

/**
 * How long a flatten whose cancels or liquidation the connection lost waits for it to be back
 * (CONNECTED, its orders and positions read again) before carrying on; past it, it fails as before.
 */
const RECONNECT_WAIT_MS = 20_000;
const RECONNECT_POLL_MS = 100;

/** A request the connection lost: never sent (503), or sent and unanswered (504). */
function lostWithConnection(err: unknown): boolean {
  return err instanceof AppError && (err.code === 'BROKER_UNAVAILABLE' || err.code === 'BROKER_TIMEOUT') && /connection|socket/i.test(err.message);
}

/** Waits until the connection is CONNECTED again (true), or `ms` passed (false). */
async function reconnected(ctx: ActorContext, ms: number): Promise<boolean> {
  for (let waited = 0; ; waited += RECONNECT_POLL_MS) {
    try {
      ctx.conn.requireConnected();
      return true;
    } catch {
      if (waited >= ms) return false;
      ctx.conn.hurry?.();
    }
    await new Promise((r) => setTimeout(r, RECONNECT_POLL_MS));
  }
}

/** Whether an order ended (rejected, cancelled, expired) without a fill. */
function endedUnfilled(ctx: ActorContext, orderId: number): boolean {
  return isFinal(ctx.mirror, orderId) && ctx.mirror.get('order', orderId)?.ordStatus !== 'Filled';
}

async function cancelAndLiquidate(ctx: ActorContext, req: FlattenRequest, account: Entity, forgotten: [string, OwedLeg][], kept: OwedLeg[]): Promise<FlattenResult> {
  const t0 = performance.now();
  // A fill whose events were lost (a partial fill in a short silence, its order's cancel seen after
  // it) leaves the mirror flat where the broker is not, and "nothing to close" left the position
  // open, under a kill switch too (re-probe). One read, alongside the cancels; a difference reads
  // the whole state again.
  const brokerPositions = ctx.conn.checkPositions?.({ recheck: false });
  const inScope = flattenScope(req);
  await placementsSettled(ctx, req.accountId, undefined, false, inScope);
  // A leg cancel under way may be placing its survivor: once it is placed, it is a working order to cancel here (money probe).
  await cancelsSettled(ctx, req.accountId);
  /** Each position as the flatten found it: after waiting out a lost connection, only one still as it was is closed. */
  const heldAtStart = new Map(ctx.model.openPositionEntities(req.accountId).map((p) => [p.contractId, Number(p.netPos)]));
  /** The account's fills as the flatten began: one after it, not of an order it was cancelling nor closing a position, was traded elsewhere. */
  const filledBefore = new Set(ctx.model.fills(req.accountId).map((f) => f.fillId));
  let resumed = false;
  /**
   * The connection lost a request of this flatten: once it is back (its mirror read again), the
   * flatten carries on, so an exit answered 504 "it goes on" does (re-probe 3: the cancels were
   * lost in a reconnect, nothing ran again, and the position stayed open with its legs).
   */
  const resumeAfterReconnect = async (errors: readonly unknown[]): Promise<boolean> => {
    if (errors.length === 0 || !errors.every(lostWithConnection)) return false;
    if (!(await reconnected(ctx, RECONNECT_WAIT_MS))) return false;
    resumed = true;
    ctx.logger.warn({ accountId: req.accountId }, 'flatten carries on after the connection came back');
    return true;
  };
  forgotten.push(...forgetOwedLegs(ctx, req.accountId, inScope));
  const working = ctx.model.workingOrders(req.accountId).filter((o) => inScope(o.symbol));
  // Stored before the first cancel: killed between the cancels and the liquidation, the restarted service puts them back.
  kept.push(...(await keepFlattenLegs(ctx, req.accountId, working)));
  const ids = working.map((o) => Number(o.orderId));
  /** The brackets of the orders it cancels: legs of theirs that appear later (an entry filling during an outage) are its own too. */
  const brackets = new Set(working.map((o) => o.bracketId).filter((b): b is string => b !== null));
  /**
   * Whether a position found after waiting out a lost connection is still the flatten's: the one
   * it found, or part of it, or what the orders it was cancelling filled meanwhile (re-probe 4: an
   * entry it was cancelling filled during the outage, and its position was left open as "traded
   * elsewhere"). One that grew past that, or turned, was traded elsewhere.
   */
  const stillItsOwn = (contractId: unknown, symbol: string, now: number): boolean => {
    let start = heldAtStart.get(contractId) ?? 0;
    // Bought (sold) meanwhile by an order that is not one it was cancelling: the position was added
    // to, or closed and opened again the same size, elsewhere (re-probe 5, suspected: its lost
    // liquidation had closed the position, and a new one of the same size would have been closed).
    const mine = new Set(working.map((o) => o.orderId));
    for (const o of ctx.model.workingOrders(req.accountId)) if (o.bracketId !== null && brackets.has(o.bracketId)) mine.add(o.orderId);
    for (const f of ctx.model.fills(req.accountId, Number(contractId))) {
      const rec = ctx.model.record(Number(f.orderId));
      if (rec?.bracketId && brackets.has(rec.bracketId)) mine.add(f.orderId);
    }
    const adding = start > 0 ? 'buy' : start < 0 ? 'sell' : undefined;
    const elsewhere = ctx.model.fills(req.accountId, Number(contractId)).some((f) => !filledBefore.has(f.fillId) && !mine.has(f.orderId) && (adding === undefined || f.side === adding));
    if (elsewhere) return false;
    let room = 0;
    for (const o of working) {
      if (o.symbol !== symbol) continue;
      const filled = (ctx.model.record(Number(o.orderId))?.filledQty ?? o.filledQty) - o.filledQty;
      if (filled <= 0) continue;
      room += filled;
      start += o.side === 'buy' ? filled : -filled;
    }
    if (now === 0) return false;
    if (start !== 0 && Math.sign(now) !== Math.sign(start)) return false;
    return Math.abs(now) <= Math.max(Math.abs(start), Math.abs(heldAtStart.get(contractId) ?? 0) + room);
  };
  // Cancels go out together, in waves (one after the other, they held the liquidation back by a
  // round trip per order): entries and plain orders first (an entry's cancel takes its suspended
  // legs along), then one leg of each bracket (its OCO takes the other), then whatever still works.
  // A cancel that fails counts only if its order still works once the broker's events are in.
  const failures = new Map<number, unknown>();
  const sent = new Set<number>();
  const cancelEach = (orders: readonly OrderRecord[]) =>
    Promise.all(
      orders.map(async (o) => {
        const id = Number(o.orderId);
        if (isFinal(ctx.mirror, id) || sent.has(id)) return;
        sent.add(id);
        try {
          const tag = req.clOrdIdPrefix ? `${req.clOrdIdPrefix}-x${id}` : undefined;
          const answer = ctx.conn.send('order/cancelorder', cancelOrderBody(id, tag), { kind: 'order' });
          // Its order ended meanwhile (the other leg's cancel took it through the OCO, or it filled):
          // its own answer changes nothing and is not waited for. At a broker slower than the request
          // deadline a leg's cancel, sent again after the first timed out, held the liquidation back
          // 8 s past the OCO (re-probe: a reversal's close took 32 s, and its open was given up).
          // Watched past the request's own deadline (by then its answer has come or failed).
          const ended = ctx.mirror.waitForOrder(id, () => (isFinal(ctx.mirror, id) ? true : undefined), ctx.unknown.waitMs + ctx.settleMs);
          const first = await Promise.race([
            answer.then(
              (reply) => ({ reply }),
              (err: unknown) => ({ err }),
            ),
            ended.then((v) => (v ? ({ ended: true } as const) : NEVER)),
          ]);
          if ('err' in first) throw first.err;
          if ('reply' in first) checkAnswer('cancelorder', first.reply);
          failures.delete(id);
        } catch (err) {
          failures.set(id, err);
        }
      }),
    );
  const isLeg = (o: OrderRecord) => o.role === 'take_profit' || o.role === 'stop_loss';
  const cancelInWaves = async (orders: readonly OrderRecord[]): Promise<void> => {
    const ended = () => (orders.every((o) => isFinal(ctx.mirror, Number(o.orderId))) ? true : undefined);
    await cancelEach(orders.filter((o) => !isLeg(o)));
    const oneLegEach = new Map<string, OrderRecord>();
    for (const o of orders) if (isLeg(o) && !isFinal(ctx.mirror, Number(o.orderId)) && !oneLegEach.has(o.bracketId ?? o.orderId)) oneLegEach.set(o.bracketId ?? o.orderId, o);
    await cancelEach([...oneLegEach.values()]);
    await ctx.mirror.waitFor(ended, Math.min(ctx.settleMs, OCO_WAIT_MS));
    // The other legs, where the broker's OCO did not take them (a cancel already sent is not sent again).
    await cancelEach(orders.filter((o) => !isFinal(ctx.mirror, Number(o.orderId))));
    await ctx.mirror.waitFor(ended, ctx.settleMs);
  };
  /** Cancels the orders in scope working now that the flatten did not know of (they reached the broker since it began). */
  const cancelArrived = async (): Promise<void> => {
    const arrived = ctx.model.workingOrders(req.accountId).filter((o) => inScope(o.symbol) && !ids.includes(Number(o.orderId)));
    if (arrived.length === 0) return;
    working.push(...arrived);
    ids.push(...arrived.map((o) => Number(o.orderId)));
    await cancelInWaves(arrived);
  };
  await cancelInWaves(working);
  const unsent = () => [...failures].filter(([id]) => !isFinal(ctx.mirror, id));
  if (await resumeAfterReconnect(unsent().map(([, err]) => err))) {
    // What the broker did meanwhile is in the mirror again: cancels that got through are not sent twice.
    for (const [id] of unsent()) sent.delete(id);
    await cancelEach(working.filter((o) => !isFinal(ctx.mirror, Number(o.orderId))));
    await ctx.mirror.waitFor(() => (ids.every((id) => isFinal(ctx.mirror, id)) ? true : undefined), ctx.settleMs);
  }
  // Cancels the broker did not answer in time may still land: a slow broker answers late, it does
  // not forget. Waited for before the flatten gives up: given up, they landed after it, and the
  // position was left open without its legs and never liquidated (re-probe at 28 s a request).
  const late = unsent();
  if (late.length > 0 && late.every(([, err]) => err instanceof AppError && err.code === 'BROKER_TIMEOUT')) {
    await ctx.mirror.waitFor(() => (late.every(([id]) => isFinal(ctx.mirror, id)) ? true : undefined), LATE_CANCEL_WAIT_MS);
  }
  // Cancels the broker took whose orders never ended here: their events were lost (a silence
  // shorter than the watchdog's, which reads everything again only after it), so the mirror is
  // stale. An entry that had filled meanwhile showed no position, and the flatten answered "nothing
  // to close" with the position open, a kill switch with it (money probe). Read again first.
  const unended = [...sent].filter((id) => !failures.has(id) && !isFinal(ctx.mirror, id));
  if (unended.length > 0 && (await ctx.conn.resyncNow?.(`cancels of orders ${unended.join(', ')} were answered, but the orders never ended here: events were lost`))) {
    await ctx.mirror.waitFor(() => (ids.every((id) => isFinal(ctx.mirror, id)) ? true : undefined), ctx.settleMs);
  }
  for (const [id, err] of failures) if (!isFinal(ctx.mirror, id)) throw leftUnprotected(ctx, req.accountId, working, inScope, err);
  // A cancel lost with the connection whose order ended anyway (an entry that filled meanwhile): the
  // connection is still to come back, and positions read before it is (its mirror half read again)
  // missed what that entry opened (re-probe 6: an exit answered 200 "nothing to close", long 2 left
  // with its legs). Waited for, then the legs that entry's fill brought are cancelled too.
  const lostCancel = [...failures.values()].find(lostWithConnection);
  if (lostCancel !== undefined && !resumed) {
    if (!(await reconnected(ctx, RECONNECT_WAIT_MS))) throw lostCancel;
    resumed = true;
  }
  if (resumed) {
    const born = ctx.model.workingOrders(req.accountId).filter((o) => inScope(o.symbol) && !ids.includes(Number(o.orderId)) && o.bracketId !== null && brackets.has(o.bracketId));
    if (born.length > 0) {
      working.push(...born);
      ids.push(...born.map((o) => Number(o.orderId)));
      await cancelEach(born);
      await ctx.mirror.waitFor(() => (ids.every((id) => isFinal(ctx.mirror, id)) ? true : undefined), ctx.settleMs);
      for (const [id, err] of failures) if (!isFinal(ctx.mirror, id)) throw leftUnprotected(ctx, req.accountId, working, inScope, err);
    }
  }
  // The broker's own positions, read as the flatten began, before any is judged (and the state read
  // a difference starts): broker-read.ts.
  await brokerPositionsRead(ctx, brokerPositions, t0);
  // Nothing to close in scope on the service's state: said only once the broker's list agrees
  // (broker-read.ts); not known then, the flatten fails (a kill switch runs it again), never "nothing to close".
  // Also with an order still on its way: its `outstandingOrders` speaks of that order only. Skipped
  // for it, a flatten answered 200 "nothing to close" at 5 s over a position a trade at the broker
  // itself had opened unseen, and the broker's list, landing at 9 s, closed nothing (re-probe).
  const nothingInScope = () => !ctx.model.openPositionEntities(req.accountId).some((p) => inScope(contractName(ctx.mirror, p.contractId) ?? String(p.contractId)));
  const unconfirmed = nothingInScope() && !(await positionsConfirmed(brokerPositions, t0));
  // Orders sent just before the flatten that reached the broker after its wait for them (5 s), while
  // it waited for the broker's list: cancelled as the rest were (re-probe: a buy limit landed during
  // that wait, the flatten answered 200 "nothing to close" with no word of it, and it filled later).
  await cancelArrived();
  for (const [id, err] of failures) if (!isFinal(ctx.mirror, id)) throw leftUnprotected(ctx, req.accountId, working, inScope, err);
  const cancelled = working.filter((o) => ctx.mirror.get('order', Number(o.orderId))?.ordStatus === 'Canceled').map((o) => o.orderId);
  if (unconfirmed && nothingInScope()) {
    // An order on its way is said here too: it may still rest or fill (re-probe: a limit the 504 did not name rested and filled).
    const onItsWay = outstandingOrders(ctx, req.accountId, inScope);
    throw new AppError(
      'BROKER_TIMEOUT',
      `the service holds no position to close, but the broker's own positions could not be confirmed (no answer to position/list within ${Math.max(1, Math.round((performance.now() - t0) / 1000))} s, or the state read it started did not land): ${cancelled.length > 0 ? `${cancelled.length} resting order(s) were cancelled, and ` : ''}nothing was liquidated${onItsWay > 0 ? `; ${onItsWay} order(s) sent to the account before had no answer from the broker yet and may still rest or fill` : ''}. Read the positions and working orders before flattening again`,
      { cancelledOrderIds: cancelled, positions: [], ...(onItsWay > 0 && { outstandingOrders: onItsWay }) },
    );
  }

  const outcomes: FlattenResult['positions'] = [];
  const liquidations = new Map<string, number>();
  /** Whether the account's position in `contractId` closes within a request's deadline (after its liquidation timed out). */
  const closedLate = async (contractId: unknown): Promise<boolean> =>
    (await ctx.mirror.waitFor(() => (ctx.model.openPositionEntities(req.accountId).some((q) => q.contractId === contractId) ? undefined : true), ctx.unknown.waitMs)) === true;
  for (const p of ctx.model.openPositionEntities(req.accountId)) {
    const symbol = contractName(ctx.mirror, p.contractId) ?? String(p.contractId);
    if (!inScope(symbol)) continue;
    const closedQty = Math.abs(Number(p.netPos));
    // Waited out a lost connection: a position that grew, turned or is new meanwhile (traded
    // elsewhere) is not the one this flatten was for; one a leg took part of still is.
    if (resumed && !stillItsOwn(p.contractId, symbol, Number(p.netPos))) {
      outcomes.push({ symbol, closedQty: 0, status: 'failed', code: 'CONFLICT', detail: `the position was traded elsewhere while the connection was down (${heldAtStart.get(p.contractId) ?? 0} when the flatten began, ${Number(p.netPos)} now): not closed` });
      continue;
    }
    const liquidate = () => ctx.conn.send('order/liquidateposition', liquidatePositionBody(account.id, p.contractId), { kind: 'order' });
    try {
      let reply;
      try {
        reply = await liquidate();
      } catch (err) {
        // Lost with the connection, sent or not (re-probe 4: one lost unanswered was never sent
        // again, the position left open without its legs): once the connection is back and its
        // positions read again, sent again only for a position still open and still the flatten's.
        // One it did close is flat by then, and a market liquidation does not rest.
        if (!(await resumeAfterReconnect([err]))) throw err;
        const now = ctx.model.openPositionEntities(req.accountId).find((q) => q.contractId === p.contractId);
        if (!now) {
          outcomes.push({ symbol, closedQty, status: 'liquidated', detail: 'closed while the connection was down' });
          continue;
        }
        if (!stillItsOwn(p.contractId, symbol, Number(now.netPos))) throw new AppError('CONFLICT', `the position was traded elsewhere while the connection was down (${Number(p.netPos)} when its liquidation was lost, ${Number(now.netPos)} now): not closed`);
        reply = await liquidate();
      }
      const answer = checkAnswer('liquidateposition', reply) as { orderId?: unknown };
      outcomes.push({ symbol, closedQty, status: 'liquidated' });
      if (typeof answer?.orderId === 'number') liquidations.set(symbol, answer.orderId);
    } catch (err) {
      // Not answered in time: the broker may still carry it out, and a slow one does. The position
      // closing within another request's time is its answer (re-probe: at 12 s a request every
      // liquidation timed out, and a reversal whose close was in fact done opened nothing).
      if (err instanceof AppError && err.code === 'BROKER_TIMEOUT' && (await closedLate(p.contractId))) {
        outcomes.push({ symbol, closedQty, status: 'liquidated', detail: 'the broker answered after its deadline; the position closed' });
        continue;
      }
      // What kept it open, for the caller's answer: a liquidation that may have reached the
      // broker (BROKER_TIMEOUT) is not one that never left (BROKER_UNAVAILABLE) or was refused.
      const why = err instanceof AppError ? { code: err.code, ...(err.retryAfterSeconds !== undefined && { retryAfterSeconds: err.retryAfterSeconds }) } : {};
      outcomes.push({ symbol, closedQty: 0, status: 'failed', detail: err instanceof Error ? err.message : String(err), ...why });
    }
  }
  const contracts = outcomes.filter((o) => o.status === 'liquidated').map((o) => o.symbol);
  // Flat, or its liquidation order ended without filling (the broker rejected it: a closed market).
  const settled = (s: string, open: readonly string[]) => !open.includes(s) || (liquidations.has(s) && endedUnfilled(ctx, liquidations.get(s)!));
  const openNow = () => ctx.model.openPositionEntities(req.accountId).map((p) => contractName(ctx.mirror, p.contractId) ?? String(p.contractId));
  const flat = await ctx.mirror.waitFor(() => {
    const open = openNow();
    return contracts.every((s) => settled(s, open)) ? true : undefined;
  }, ctx.settleMs);
  // A liquidation the broker refused for a position it no longer holds ("No position to
  // liquidate": closed by a leg, or by the alert before this one, as our events caught up) left
  // nothing open: not a failure. Its events are waited for a moment.
  const refused = outcomes.filter((o) => o.status === 'failed' && o.code === 'BROKER_REJECTED');
  if (refused.length > 0) await ctx.mirror.waitFor(() => (refused.every((o) => !openNow().includes(o.symbol)) ? true : undefined), Math.min(ctx.settleMs, REFUSED_FLAT_WAIT_MS));
  // Still open here while the broker says it holds none: its events were lost, and the position is
  // read from the broker itself (re-probe: a phantom long after a short silence, every flatten 422 for good).
  for (const o of refused) if (openNow().includes(o.symbol) && noPositionAtBroker(o.detail)) await rereadPosition(ctx, req.accountId, o.symbol);
  const open = new Set(openNow());
  for (const o of refused) {
    if (open.has(o.symbol)) continue;
    Object.assign(o, { status: 'liquidated', closedQty: 0, detail: `already flat at the broker (${o.detail ?? 'refused'})` });
    delete o.code;
  }
  for (const o of outcomes) {
    if (o.status !== 'liquidated' || !open.has(o.symbol)) continue;
    const id = liquidations.get(o.symbol);
    if (id !== undefined && endedUnfilled(ctx, id)) {
      // Not closed: the lock that asked for it runs it again, and the position has lost its protective orders meanwhile.
      const reason = rejectReasonOf(ctx.mirror, id) ?? ctx.mirror.get('order', id)?.ordStatus ?? 'ended';
      Object.assign(o, { status: 'failed', closedQty: 0, code: 'BROKER_REJECTED', detail: `the broker did not fill the liquidation (${String(reason)}): the position is still open` });
      const detail = `the ${o.symbol} position is open without protective orders: the flatten cancelled them and the broker did not fill its liquidation (${String(reason)}); close or protect it`;
      ctx.logger.error({ accountId: req.accountId, symbol: o.symbol }, 'flatten left the position open');
      ctx.emit({ type: 'bracket-alert', connectionId: ctx.conn.spec.connectionId, accountId: req.accountId, orderId: String(id), ts: Date.now(), detail });
    } else if (!flat) o.detail = 'liquidation sent; position not yet flat';
  }
  const outstanding = outstandingOrders(ctx, req.accountId, inScope);
  return { cancelledOrderIds: cancelled, positions: outcomes, ...(outstanding > 0 && { outstandingOrders: outstanding }), brokerMs: since(t0) };
}
