/**
 * Cancel with the exact semantics of DESIGN §6:
 * - unfilled entry with legs → the entry is cancelled and its legs removed too;
 * - partly filled entry → only the unfilled remainder is cancelled (never flattens);
 * - a leg of a filled bracket → that leg is cancelled; the broker's OCO takes the other leg
 *   down with it, so the survivor is re-placed under a new id with the same price and qty;
 * - a final order → 409 ORDER_NOT_WORKING carrying the order; an unknown id → 404.
 *
 * A survivor's re-placement counts once the broker has accepted it. When the broker rejects it,
 * the position is unprotected: a bracket-alert says so and the cancel answers 422 BROKER_REJECTED.
 * When the connection drops or the broker does not answer in time, the re-placement is owed: a
 * bracket-alert says so, the cancel answers 504 BROKER_TIMEOUT, and once the connection is back
 * (its snapshot) the leg is re-placed, sized to the position then, unless the broker already has
 * it (its clOrdId `rp-<old id>`) or the position is gone.
 *
 * The survivor is owed from before the cancel is sent: it is stored (ActorContext.keepOwedLegs)
 * and the cancel waits until it is, so an actor started after a crash at any later moment still
 * places it (or finds it was not needed: the survivor still working, filled, or the position gone).
 */
import { AppError } from '../../src/domain/problems.js';
import { since, type ActorContext } from './context.js';
import { isFinal, linkageOf, rejectReasonOf, strategyWantsLegs } from '../../src/broker/tradovate/order-records.js';
import { cancelOrderBody, checkAnswer, replaceLegBody } from '../../src/broker/tradovate/requests.js';
import type { MirrorChange } from '../../src/broker/tradovate/mirror.js';
import type { CancelOrderRequest, CancelOrderResult } from '../../src/actors/protocol.js';
import { FINAL_STATUSES, type OrderRecord } from '../../src/domain/orders.js';
import type { OwedLeg } from '../../src/domain/guards.js';
import { placementsSettled, settle } from './place.js';
import { flattenClock, flattensBefore } from './flatten-log.js';
import { settledWithin, tracked } from './in-flight.js';
import { isStopExit, stopCoverage } from './stop-coverage.js';
import { restoreFlattenLegs } from './flatten-legs.js';

interface Bracket {
  entryId: number;
  takeProfit: number | null;
  stopLoss: number | null;
}

/** The bracket an order belongs to: tradegate's notes (re-placed legs) first, then broker linkage. */
function bracketOf(ctx: ActorContext, orderId: number): Bracket | null {
  const note = ctx.model.noteOf(orderId);
  const entryId = note?.bracketId ? Number(note.bracketId) : null;
  if (entryId && entryId !== orderId) {
    const entryNote = ctx.model.noteOf(entryId);
    if (entryNote?.legs) return { entryId, takeProfit: num(entryNote.legs.takeProfit), stopLoss: num(entryNote.legs.stopLoss) };
  }
  const own = ctx.model.noteOf(orderId);
  if (own?.legs) return { entryId: orderId, takeProfit: num(own.legs.takeProfit), stopLoss: num(own.legs.stopLoss) };
  const order = ctx.mirror.get('order', orderId);
  if (!order) return null;
  const link = linkageOf(ctx.mirror, order);
  if (link.entryId === null) return null;
  return { entryId: link.entryId, takeProfit: link.takeProfit, stopLoss: link.stopLoss };
}

function num(id: string | null): number | null {
  return id ? Number(id) : null;
}

/**
 * A bracket entry sent as an order strategy gets its legs from the broker only once it has
 * filled completely: its remainder cancelled after a partial fill, the filled part has none. Unless
 * the broker places them after all (it is given a moment), a bracket-alert says the position is
 * unprotected: never silent.
 */
async function reportLeglessFill(ctx: ActorContext, accountId: string, entry: OrderRecord): Promise<string | undefined> {
  const id = Number(entry.orderId);
  const legsCame = await ctx.mirror.waitFor(() => {
    const b = bracketOf(ctx, id);
    return b && (b.takeProfit !== null || b.stopLoss !== null) ? true : undefined;
  }, Math.min(ctx.settleMs, LEGS_AFTER_CANCEL_MS));
  if (legsCame) return undefined;
  const detail =
    `entry ${entry.orderId} cancelled after ${entry.filledQty} of ${entry.qty} filled: the ${entry.symbol} position from it has no take-profit or stop-loss ` +
    '(the broker places a bracket’s legs only once its entry has filled completely); protect or close it';
  ctx.logger.error({ accountId, orderId: entry.orderId }, 'position unprotected');
  ctx.emit({ type: 'bracket-alert', connectionId: ctx.conn.spec.connectionId, accountId, orderId: entry.orderId, ts: Date.now(), detail });
  return detail;
}

/** How long a cancelled strategy entry's legs are waited for before the position is reported unprotected. */
const LEGS_AFTER_CANCEL_MS = 1000;

/** The working order that re-placed leg `orderId` (clOrdId `rp-<id>`), if any. */
function successorOf(ctx: ActorContext, accountId: string, orderId: number): number | undefined {
  const next = ctx.model.findByClOrdId(accountId, `rp-${orderId}`);
  return next && !isFinal(ctx.mirror, next.id) ? next.id : undefined;
}

/** Sends cancelorder and waits for the order to become final. */
async function cancelAndWait(ctx: ActorContext, orderId: number): Promise<OrderRecord> {
  try {
    checkAnswer('cancelorder', await ctx.conn.send('order/cancelorder', cancelOrderBody(orderId), { kind: 'order' }));
  } catch (err) {
    // The order may have become final between our check and the broker's: report that state.
    const rec = ctx.model.record(orderId);
    if (rec && isFinal(ctx.mirror, orderId)) throw notWorking(rec);
    throw err;
  }
  await ctx.mirror.waitFor(() => (isFinal(ctx.mirror, orderId) ? true : undefined), ctx.settleMs);
  const rec = ctx.model.record(orderId)!;
  if (rec.status === 'filled') throw notWorking(rec);
  if (rec.status !== 'cancelled' && rec.status !== 'expired' && rec.status !== 'rejected') {
    throw new AppError('BROKER_TIMEOUT', `cancel of ${orderId} was accepted but not confirmed in time`, { order: rec });
  }
  return rec;
}

function notWorking(order: OrderRecord): AppError {
  return new AppError('ORDER_NOT_WORKING', `order ${order.orderId} is ${order.status}`, { order });
}

/**
 * Re-places a surviving bracket leg as a standalone order with the same side, type, price and open
 * qty, and returns its id once the broker has accepted it (BROKER_REJECTED when it rejects it).
 */
async function replaceLeg(ctx: ActorContext, old: OrderRecord, entryId: number, role: 'take_profit' | 'stop_loss'): Promise<number> {
  const account = ctx.model.account(old.accountId);
  const body = replaceLegBody(old, { id: account.id, name: String(account.name ?? account.id) });
  const d = checkAnswer('placeorder', await ctx.conn.send('order/placeorder', body, { kind: 'order' }));
  const newId = Number(d.orderId);
  if (!newId) throw new AppError('BROKER_REJECTED', 'broker returned no order id for the re-placed leg', { brokerReason: 'no orderId' });
  adoptLeg(ctx, old, newId, entryId, role);
  await settle(ctx, newId);
  const placed = ctx.model.record(newId);
  if (placed?.status === 'rejected') {
    const brokerReason = placed.rejectReason ?? rejectReasonOf(ctx.mirror, newId) ?? 'rejected';
    throw new AppError('BROKER_REJECTED', `the broker rejected it: ${brokerReason}`, { brokerReason, order: placed });
  }
  return newId;
}

/** Files `newId` as the bracket's `role` leg in place of `old`. */
function adoptLeg(ctx: ActorContext, old: OrderRecord, newId: number, entryId: number, role: 'take_profit' | 'stop_loss'): void {
  const oldNote = ctx.model.noteOf(Number(old.orderId));
  ctx.model.note(newId, {
    role,
    bracketId: String(entryId),
    requestedSymbol: old.requestedSymbol,
    clientOrderId: old.clientOrderId ?? oldNote?.clientOrderId ?? null,
  });
  // The other leg was cancelled (that is why this one is re-placed): the bracket has this one only.
  ctx.model.note(entryId, { legs: { takeProfit: role === 'take_profit' ? String(newId) : null, stopLoss: role === 'stop_loss' ? String(newId) : null } });
}

/** Why a broker call failed, in words. */
function reasonOf(err: unknown): string {
  if (err instanceof AppError) return String(err.extensions.brokerReason ?? err.message);
  return err instanceof Error ? err.message : String(err);
}

/**
 * Re-places the legs owed on an account, once its connection is back: each is adopted when the
 * broker has it already (sent before the drop), dropped when the position it protected is flat or
 * on its own side now, and otherwise placed again, cut to the position. Reported as bracket-alerts.
 */
export async function resumeOwedLegs(ctx: ActorContext, accountId: string, connectionId: string, opts: { afterSnapshot?: boolean } = {}): Promise<void> {
  // A flatten running on the account drops what is owed on it (forgetOwedLegs): nothing to place.
  if (ctx.flattening.has(accountId)) return;
  // Legs of a flatten a crash cut short: put back as pairs, or handed on as owed legs below.
  let changed = await restoreFlattenLegs(ctx, accountId, connectionId);
  // A copy: an entry still waiting is put back while the loop runs.
  for (const [key, owed] of [...ctx.owedLegs]) {
    // A cancel of that bracket in flight settles its own survivor.
    if (owed.accountId !== accountId || ctx.cancelling.has(`${accountId}|${owed.entryId}`)) continue;
    ctx.owedLegs.delete(key);
    changed = true;
    const { leg, entryId, role } = owed;
    const alert = (detail: string) => {
      ctx.logger.warn({ orderId: leg.orderId, accountId, detail }, 'owed bracket leg');
      ctx.emit({ type: 'bracket-alert', connectionId, accountId, orderId: leg.orderId, ts: Date.now(), detail });
    };
    // Owed from before its sibling's cancel was sent (a restart after a crash): unless the broker
    // cancelled it (the one-cancels-other of that cancel), nothing is owed.
    const survivor = ctx.model.record(Number(leg.orderId));
    if (survivor && !isFinal(ctx.mirror, Number(leg.orderId))) {
      if (owed.cancelPending && !opts.afterSnapshot) {
        // Its sibling's cancel may still be carried out: owed again once this leg is cancelled.
        ctx.owedLegs.set(key, owed);
        continue;
      }
      if (owed.cancelPending) {
        // The snapshot after the reconnect settles it: the cancel was carried out before it (the
        // survivor outlived the OCO) or never will be. Owed no longer, or a later cancel of this
        // leg (a flatten, its sibling's fill) would place it again on a position it no longer protects.
        alert(`${role} ${leg.orderId} is still working after the reconnect: nothing to place again`);
        continue;
      }
      alert(`${role} ${leg.orderId} is still working: the cancel of its sibling did not reach the broker before the service stopped`);
      continue;
    }
    if (survivor?.status === 'filled') continue;
    const sent = ctx.model.findByClOrdId(accountId, `rp-${leg.orderId}`);
    if (sent && ctx.model.record(sent.id)?.status !== 'rejected') {
      adoptLeg(ctx, leg, sent.id, entryId, role);
      alert(`${role} ${leg.orderId}: its re-placement ${sent.id} reached the broker before the connection was lost`);
      continue;
    }
    const position = ctx.model.netPosition(accountId, leg.symbol);
    const reduces = position > 0 ? leg.side === 'sell' : position < 0 && leg.side === 'buy';
    if (!reduces) {
      alert(`${role} ${leg.orderId} not re-placed: the ${leg.symbol} position it protected is ${position === 0 ? 'flat' : 'on its side'} now`);
      continue;
    }
    const qty = Math.min(leg.qty - leg.filledQty, Math.abs(position));
    try {
      const newId = await replaceLeg(ctx, { ...leg, qty: leg.filledQty + qty }, entryId, role);
      alert(`${role} ${leg.orderId} re-placed as ${newId} (${qty}) ${opts.afterSnapshot ? 'once the connection was back' : 'once the broker confirmed the late cancel of its sibling'}`);
    } catch (err) {
      const rejected = err instanceof AppError && err.code === 'BROKER_REJECTED';
      if (!rejected && owed.attempts < MAX_OWED_ATTEMPTS) ctx.owedLegs.set(key, { ...owed, attempts: owed.attempts + 1 });
      alert(
        rejected
          ? `${role} ${leg.orderId} could not be re-placed (${reasonOf(err)}): the ${leg.symbol} position is unprotected`
          : `${role} ${leg.orderId} not re-placed yet (${reasonOf(err)}): ${owed.attempts < MAX_OWED_ATTEMPTS ? 'tried again after the next reconnect' : 'given up: the position is unprotected'}`,
      );
    }
  }
  if (changed) void ctx.keepOwedLegs?.(accountId);
}

/**
 * A flatten owes no leg on what it flattens: the position is being closed, and a leg placed again
 * meanwhile (its sibling's late cancel, the flatten's own cancels) would open one when it fired.
 */
export function forgetOwedLegs(ctx: ActorContext, accountId: string, inScope: (symbol: string) => boolean): [string, OwedLeg][] {
  const forgotten: [string, OwedLeg][] = [];
  for (const [key, owed] of [...ctx.owedLegs]) {
    if (owed.accountId !== accountId || !inScope(owed.leg.symbol)) continue;
    ctx.owedLegs.delete(key);
    forgotten.push([key, owed]);
  }
  if (forgotten.length > 0) void ctx.keepOwedLegs?.(accountId);
  return forgotten;
}

/**
 * Owed legs a flatten forgot that it did not close the position of (it failed, or its liquidation
 * was refused): owed again, placed by the next sweep as far as the position still needs them
 * (re-probe: a leg cancel's survivor, owed after a 429, was forgotten by a flatten that then
 * failed on the same 429, and the position was left without its stop for good).
 */
export function oweAgain(ctx: ActorContext, accountId: string, forgotten: readonly [string, OwedLeg][]): void {
  let changed = false;
  for (const [key, owed] of forgotten) {
    const position = ctx.model.netPosition(accountId, owed.leg.symbol);
    const reduces = position > 0 ? owed.leg.side === 'sell' : position < 0 && owed.leg.side === 'buy';
    if (!reduces || ctx.owedLegs.has(key)) continue;
    ctx.owedLegs.set(key, owed);
    changed = true;
  }
  if (changed) void ctx.keepOwedLegs?.(accountId);
}

/**
 * Said in the answer when the stop exit just cancelled leaves its position's stops short: the
 * stop-loss it cut to make room stays cut (the stream's bracket alert follows after the grace).
 */
function stopExitWarning(ctx: ActorContext, accountId: string, cancelled: OrderRecord): string | undefined {
  // Only an exit that had a stop-loss cut for it: a plain position's own stops were never cut (re-probe).
  if (!ctx.stopsCutBy?.has(cancelled.orderId)) return undefined;
  const net = ctx.model.netPosition(accountId, cancelled.symbol);
  if (!isStopExit(cancelled, net)) return undefined;
  const covered = stopCoverage(ctx.model.workingOrders(accountId), cancelled.symbol, net);
  if (covered >= Math.abs(net)) return undefined;
  const position = `the ${cancelled.symbol} position ${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
  return (
    `${position} ${covered === 0 ? 'has no stop-loss now' : `has stop-losses for ${covered} only now`}: ` +
    'the stop-loss cut to make room for this exit is not given back; protect the rest or close it'
  );
}

/** Reconnects an owed leg is tried on before the alert says it was given up. */
const MAX_OWED_ATTEMPTS = 3;

/**
 * Cancels one order per DESIGN §6. Cancels of one bracket run one after another: cancelling both
 * legs at once would otherwise race the re-placement the first one makes of the other (the second
 * would find its leg cancelled by the broker's OCO and re-placed under a new id).
 */
export function cancelOrder(ctx: ActorContext, req: CancelOrderRequest, forPlacement?: string): Promise<CancelOrderResult> {
  const id = Number(req.orderId);
  const key = `${req.accountId}|${(Number.isSafeInteger(id) && bracketOf(ctx, id)?.entryId) || req.orderId}`;
  const before = ctx.cancelling.get(key) ?? Promise.resolve();
  const askedAt = flattenClock();
  return tracked(ctx.cancelling, key, before.then(() => cancelOne(ctx, req, askedAt, forPlacement)));
}

/** The account's cancels under way (a leg's may be placing its survivor), waited for up to settleMs. */
export async function cancelsSettled(ctx: ActorContext, accountId: string): Promise<void> {
  const prefix = `${accountId}|`;
  const inFlight: Promise<unknown>[] = [];
  for (const [key, cancel] of ctx.cancelling) if (key.startsWith(prefix)) inFlight.push(cancel.catch(() => undefined));
  if (inFlight.length > 0) await settledWithin(Promise.all(inFlight), ctx.settleMs);
}

/**
 * `askedAt`: when the cancel was asked for (flattenClock): a flatten begun after it that closes the
 * leg's position takes the survivor's place. `forPlacement`: the placement this cancel makes room
 * for (an exit's, whose legs are cut before it is sent): not waited for, as it waits for this.
 */
async function cancelOne(ctx: ActorContext, req: CancelOrderRequest, askedAt = flattenClock(), forPlacement?: string): Promise<CancelOrderResult> {
  ctx.conn.requireFresh();
  ctx.model.account(req.accountId);
  const entity = ctx.model.orderEntity(req.accountId, req.orderId);
  if (!entity) throw new AppError('NOT_FOUND', `order ${req.orderId} not found on account ${req.accountId}`);
  const rec = ctx.model.record(entity.id)!;
  // A leg owed back (its sibling's cancel timed out) that the trader now cancels is not owed any more.
  if (ctx.owedLegs.delete(String(entity.id))) void ctx.keepOwedLegs?.(req.accountId);
  if (isFinal(ctx.mirror, entity.id)) {
    // A leg the cancel of its sibling re-placed lives on under a new id: cancelling the old id
    // (both legs cancelled at once, or from a stale list) cancels the leg where it is now.
    const successor = successorOf(ctx, req.accountId, entity.id);
    if (successor !== undefined) return cancelOne(ctx, { ...req, orderId: String(successor) }, askedAt, forPlacement);
    throw notWorking(rec);
  }
  const t0 = performance.now();
  const bracket = bracketOf(ctx, entity.id);
  const base = { removedLegIds: [] as string[], replaced: null, remainderCancelled: false };

  if (!bracket) {
    const order = await cancelAndWait(ctx, entity.id);
    const warning = stopExitWarning(ctx, req.accountId, rec);
    ctx.stopsCutBy?.delete(rec.orderId);
    return { ...base, order, brokerMs: since(t0), ...(warning !== undefined && { warning }) };
  }

  const legIds = [bracket.takeProfit, bracket.stopLoss].filter((x): x is number => x !== null);
  if (bracket.entryId === entity.id) {
    const order = await cancelAndWait(ctx, entity.id);
    // Filled in part, also by a fill that landed while the cancel was on its way (faults probe: the
    // legs of the filled part were cancelled with the entry, or a tick bracket's missing legs went
    // unsaid): the filled part keeps its legs, or is reported without them.
    if (rec.filledQty > 0 || order.filledQty > 0 || (ctx.model.record(entity.id)?.filledQty ?? 0) > 0) {
      // Said in the answer too, not only on the stream (ops probe: 200 remainderCancelled and nothing else).
      const warning = legIds.length === 0 && strategyWantsLegs(ctx.mirror, entity.id) ? await reportLeglessFill(ctx, req.accountId, order) : undefined;
      return { ...base, order, remainderCancelled: true, brokerMs: since(t0), ...(warning !== undefined && { warning }) };
    }
    // The broker normally cancels suspended legs with their entry; make sure of it.
    await ctx.mirror.waitFor(() => (legIds.every((id) => isFinal(ctx.mirror, id) || !ctx.mirror.get('order', id)) ? true : undefined), ctx.settleMs);
    for (const id of legIds) if (ctx.mirror.get('order', id) && !isFinal(ctx.mirror, id)) await cancelAndWait(ctx, id).catch(() => undefined);
    return { ...base, order, removedLegIds: legIds.map(String), brokerMs: since(t0) };
  }

  const entryRec = ctx.model.record(bracket.entryId);
  const entryFilled = !entryRec || entryRec.filledQty > 0;
  const siblingId = entity.id === bracket.takeProfit ? bracket.stopLoss : bracket.takeProfit;
  const siblingRole = entity.id === bracket.takeProfit ? 'stop_loss' : 'take_profit';
  if (siblingId === null || isFinal(ctx.mirror, siblingId) || !ctx.mirror.get('order', siblingId)) {
    return { ...base, order: await cancelAndWait(ctx, entity.id), brokerMs: since(t0) };
  }
  if (entryRec && !FINAL_STATUSES.has(entryRec.status)) {
    // The entry is still working. Unfilled: its legs wait for it, and the broker's one-cancels-
    // other would take the other leg down with this one, leaving it to fill with none. Filling:
    // its legs grow with each fill, a re-placed survivor would not, and the contracts still to
    // fill would have no protection. Refused either way, nothing sent.
    const filling = entryRec.filledQty > 0;
    throw new AppError(
      'CONFLICT',
      `order ${req.orderId} is a leg of entry ${bracket.entryId}, which ${filling ? `is still filling (${entryRec.filledQty} of ${entryRec.qty})` : 'has not filled yet'}: ` +
        (filling
          ? 'cancel the entry first (its filled part keeps its legs), then this leg'
          : 'cancelling one leg would take the other down with it at the broker (one cancels the other) and leave the entry without legs; cancel the entry (its legs go with it) and place it again'),
      { entryId: String(bracket.entryId) },
    );
  }
  if (!entryFilled) {
    // An entry that ended unfilled, its leg somehow still working: nothing is exposed.
    const order = await cancelAndWait(ctx, entity.id);
    await ctx.mirror.waitFor(() => (isFinal(ctx.mirror, siblingId) ? true : undefined), ctx.settleMs);
    const removed = ctx.mirror.get('order', siblingId)?.ordStatus === 'Canceled' ? [String(siblingId)] : [];
    return { ...base, order, removedLegIds: removed, brokerMs: since(t0) };
  }
  const sibling = ctx.model.record(siblingId)!;
  // The survivor is owed from here on, stored before the cancel goes out (see the top).
  const owedKey = String(siblingId);
  ctx.owedLegs.set(owedKey, { accountId: req.accountId, leg: sibling, entryId: bracket.entryId, role: siblingRole, attempts: 0 });
  await ctx.keepOwedLegs?.(req.accountId);
  const settled = () => {
    ctx.owedLegs.delete(owedKey);
    void ctx.keepOwedLegs?.(req.accountId);
  };
  let order: OrderRecord;
  try {
    order = await cancelAndWait(ctx, entity.id);
    // OCO: the broker cancels the sibling too. Wait for it, and cancel it ourselves if it lingers.
    await ctx.mirror.waitFor(() => (isFinal(ctx.mirror, siblingId) ? true : undefined), ctx.settleMs);
    if (!isFinal(ctx.mirror, siblingId)) await cancelAndWait(ctx, siblingId);
  } catch (err) {
    // Still owed when the survivor may be gone (a timeout, a lost connection): the broker may
    // carry the cancel out late, its OCO then taking the survivor down. It is re-placed as soon as
    // the broker reports it cancelled (watchOwedLegs), and said now. Settled otherwise.
    if (!(err instanceof AppError) || (err.code !== 'BROKER_TIMEOUT' && err.code !== 'BROKER_UNAVAILABLE')) {
      settled();
      throw err;
    }
    ctx.owedLegs.set(owedKey, { accountId: req.accountId, leg: sibling, entryId: bracket.entryId, role: siblingRole, attempts: 0, cancelPending: true });
    void ctx.keepOwedLegs?.(req.accountId);
    const detail =
      `cancel of leg ${entity.id} not confirmed (${reasonOf(err)}): if the broker carries it out, its one-cancels-other also cancels ` +
      `${siblingRole} ${siblingId}, which is then placed again at once`;
    ctx.emit({ type: 'bracket-alert', connectionId: ctx.conn.spec.connectionId, accountId: req.accountId, orderId: String(siblingId), ts: Date.now(), detail });
    throw err;
  }
  const survivor = ctx.model.record(siblingId)!;
  if (survivor.status === 'filled') {
    settled();
    return { ...base, order, brokerMs: since(t0) };
  }
  // A flatten of the position that was running before this cancel was asked for does not wait for
  // it: its end is waited for here, and the position it leaves decides. Closed, nothing is owed (a
  // survivor placed meanwhile went out 2 ms after the liquidation filled and, touched, made the flat
  // account short 2: money probe); still open (the flatten failed), the survivor goes back (re-probe:
  // dropped for a flatten that then failed, the position was left without its stop). A flatten begun
  // after it waits for this cancel (cancelsSettled) and cancels the survivor with the rest.
  await flattensBefore(ctx, req.accountId, sibling.symbol, askedAt);
  // The position as it stands once orders sent meanwhile (an exit) have reached the broker: a
  // survivor re-placed onto a flat account, or one on the position's own side, would open a
  // position when it fired; one larger than the position is cut to it.
  await placementsSettled(ctx, req.accountId, forPlacement);
  const position = ctx.model.netPosition(req.accountId, sibling.symbol);
  const reduces = position > 0 ? sibling.side === 'sell' : position < 0 && sibling.side === 'buy';
  if (!reduces) {
    settled();
    return { ...base, order, removedLegIds: [String(siblingId)], brokerMs: since(t0) };
  }
  const open = Math.min(sibling.qty - survivor.filledQty, Math.abs(position));
  const leg = { ...sibling, filledQty: survivor.filledQty, qty: survivor.filledQty + open };
  let newId: number;
  try {
    newId = await replaceLeg(ctx, leg, bracket.entryId, siblingRole);
    settled();
  } catch (err) {
    // The cancel itself is done; what failed is the survivor's way back, and the position is
    // exposed until it is there.
    const rejected = err instanceof AppError && err.code === 'BROKER_REJECTED';
    const brokerReason = reasonOf(err);
    if (rejected) settled();
    else {
      ctx.owedLegs.set(owedKey, { accountId: req.accountId, leg, entryId: bracket.entryId, role: siblingRole, attempts: 1 });
      void ctx.keepOwedLegs?.(req.accountId);
    }
    const detail = rejected
      ? `leg ${order.orderId} cancelled, but the broker rejected re-placing ${siblingRole} ${siblingId} (${brokerReason}): the ${sibling.symbol} position is unprotected`
      : `leg ${order.orderId} cancelled, but re-placing ${siblingRole} ${siblingId} did not complete (${brokerReason}): ` +
        'it is re-placed once the connection is back, unless the broker has it already or the position is gone';
    ctx.logger.error({ orderId: siblingId, err }, 'bracket leg re-place failed');
    ctx.emit({ type: 'bracket-alert', connectionId: ctx.conn.spec.connectionId, accountId: req.accountId, orderId: String(siblingId), ts: Date.now(), detail });
    throw rejected ? new AppError('BROKER_REJECTED', detail, { brokerReason, order }) : new AppError('BROKER_TIMEOUT', detail, { order });
  }
  return { ...base, order, replaced: { replacedOrderId: String(siblingId), newOrderId: String(newId) }, brokerMs: since(t0) };
}

/**
 * A leg owed back whose sibling's cancel timed out is placed again as soon as the broker reports
 * it cancelled (the late cancel's OCO), not at the next reconnect: the position has no stop
 * meanwhile. Feed it every mirror change.
 */
export function watchOwedLegs(ctx: ActorContext, connectionId: string): (change: MirrorChange) => void {
  return (change) => {
    if (change.entityType !== 'order' || change.entity?.ordStatus !== 'Canceled') return;
    const owed = ctx.owedLegs.get(String(change.entity.id));
    if (!owed?.cancelPending) return;
    // After the change is applied (it is being applied now), and never twice at once.
    setTimeout(() => void resumeOwedLegs(ctx, owed.accountId, connectionId).catch((err: unknown) => ctx.logger.warn({ err }, 'owed leg re-place failed')), 0);
  };
}
