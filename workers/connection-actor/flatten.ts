/**
 * Flatten an account: cancel every resting order, then liquidate every open position, on all
 * symbols. With a symbol: if the account holds positions and none is in that contract, refuse
 * with SYMBOL_MISMATCH and touch nothing. With `symbolOnly` (a strategy's exit), only that
 * contract's orders and position, whatever else the account holds.
 */
import { AppError } from '../../src/domain/problems.js';
import { contractRoot } from '../../src/domain/symbols.js';
import { since, type ActorContext } from './context.js';
import { tracked } from './in-flight.js';
import { outstandingOrders, placementsSettled } from './place.js';
import { forgetOwedLegs } from './cancel.js';
import { onActiveAccount } from './access.js';
import type { Entity } from '../../src/broker/tradovate/mirror.js';
import { contractName, isFinal, rejectReasonOf } from '../../src/broker/tradovate/order-records.js';
import { cancelOrderBody, checkAnswer, liquidatePositionBody } from '../../src/broker/tradovate/requests.js';
import type { FlattenRequest, FlattenResult } from '../../src/actors/protocol.js';
import type { OrderRecord } from '../../src/domain/orders.js';

/** Flattens one account. */
export async function flatten(ctx: ActorContext, req: FlattenRequest): Promise<FlattenResult> {
  ctx.conn.requireFresh();
  const account = ctx.model.account(req.accountId);
  const positions = ctx.model.openPositionEntities(req.accountId);
  if (req.symbol && !req.symbolOnly && positions.length > 0) {
    const held = positions.map((p) => contractName(ctx.mirror, p.contractId) ?? String(p.contractId));
    if (!held.includes(req.symbol)) {
      throw new AppError('SYMBOL_MISMATCH', `account holds ${held.join(', ')}, not ${req.symbol}`, { symbol: req.symbol, held });
    }
  }
  return tracked(ctx.flattening, req.accountId, onActiveAccount(ctx, req.accountId, () => cancelAndLiquidate(ctx, req, account)));
}

/** How long a flatten waits for the events of a position whose liquidation the broker refused, before judging it still open. */
const REFUSED_FLAT_WAIT_MS = 500;

/** How long a flatten waits for the broker's one-cancels-other to take the legs it did not cancel itself. */
const OCO_WAIT_MS = 500;

/** Whether an order ended (rejected, cancelled, expired) without a fill. */
function endedUnfilled(ctx: ActorContext, orderId: number): boolean {
  return isFinal(ctx.mirror, orderId) && ctx.mirror.get('order', orderId)?.ordStatus !== 'Filled';
}

async function cancelAndLiquidate(ctx: ActorContext, req: FlattenRequest, account: Entity): Promise<FlattenResult> {
  const t0 = performance.now();
  await placementsSettled(ctx, req.accountId);
  const only = req.symbolOnly && req.symbol ? req.symbol : undefined;
  const product = only !== undefined && req.productOnly ? contractRoot(only)?.root : undefined;
  const inScope = (symbol: string) => only === undefined || symbol === only || (product !== undefined && contractRoot(symbol)?.root === product);
  forgetOwedLegs(ctx, req.accountId, inScope);
  const working = ctx.model.workingOrders(req.accountId).filter((o) => inScope(o.symbol));
  const ids = working.map((o) => Number(o.orderId));
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
          checkAnswer('cancelorder', await ctx.conn.send('order/cancelorder', cancelOrderBody(id, tag), { kind: 'order' }));
          failures.delete(id);
        } catch (err) {
          failures.set(id, err);
        }
      }),
    );
  const isLeg = (o: OrderRecord) => o.role === 'take_profit' || o.role === 'stop_loss';
  await cancelEach(working.filter((o) => !isLeg(o)));
  const oneLegEach = new Map<string, OrderRecord>();
  for (const o of working) if (isLeg(o) && !isFinal(ctx.mirror, Number(o.orderId)) && !oneLegEach.has(o.bracketId ?? o.orderId)) oneLegEach.set(o.bracketId ?? o.orderId, o);
  await cancelEach([...oneLegEach.values()]);
  await ctx.mirror.waitFor(() => (ids.every((id) => isFinal(ctx.mirror, id)) ? true : undefined), Math.min(ctx.settleMs, OCO_WAIT_MS));
  // The other legs, where the broker's OCO did not take them (a cancel already sent is not sent again).
  await cancelEach(working.filter((o) => !isFinal(ctx.mirror, Number(o.orderId))));
  await ctx.mirror.waitFor(() => (ids.every((id) => isFinal(ctx.mirror, id)) ? true : undefined), ctx.settleMs);
  for (const [id, err] of failures) if (!isFinal(ctx.mirror, id)) throw err;
  const cancelled = working.filter((o) => ctx.mirror.get('order', Number(o.orderId))?.ordStatus === 'Canceled').map((o) => o.orderId);

  const outcomes: FlattenResult['positions'] = [];
  const liquidations = new Map<string, number>();
  for (const p of ctx.model.openPositionEntities(req.accountId)) {
    const symbol = contractName(ctx.mirror, p.contractId) ?? String(p.contractId);
    if (!inScope(symbol)) continue;
    const closedQty = Math.abs(Number(p.netPos));
    try {
      const answer = checkAnswer(
        'liquidateposition',
        await ctx.conn.send('order/liquidateposition', liquidatePositionBody(account.id, p.contractId), { kind: 'order' }),
      ) as { orderId?: unknown };
      outcomes.push({ symbol, closedQty, status: 'liquidated' });
      if (typeof answer?.orderId === 'number') liquidations.set(symbol, answer.orderId);
    } catch (err) {
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
  const outstanding = outstandingOrders(ctx, req.accountId);
  return { cancelledOrderIds: cancelled, positions: outcomes, ...(outstanding > 0 && { outstandingOrders: outstanding }), brokerMs: since(t0) };
}
