/**
 * Puts a bracket's cancelled take-profit and stop-loss back on its position as the pair they were:
 * one `order/placeoco` at their prices (clOrdId `rr-<old take-profit id>`), filed as the bracket's
 * legs. Used where the service cancelled a whole bracket on a position it then did not close: an
 * exit refused after its room was made (orphan-legs.ts), a flatten cut short by a crash
 * (flatten-legs.ts). Two standalone orders would not cancel each other: once one fired, the
 * other would open a position the other way.
 */
import { AppError } from '../../src/domain/problems.js';
import { checkAnswer, restoreLegsOcoBody } from '../../src/broker/tradovate/requests.js';
import { rejectReasonOf } from '../../src/broker/tradovate/order-records.js';
import type { OrderRecord } from '../../src/domain/orders.js';
import type { ActorContext } from './context.js';
import { settle } from './place.js';

/** The clOrdId a restored pair is sent with: a restart finds a pair it sent before the crash by it. */
export function restoredPairClOrdId(takeProfit: Pick<OrderRecord, 'orderId'>): string {
  return `rr-${takeProfit.orderId}`;
}

/**
 * Places `tp` and `sl` again for `qty` as one-cancels-other legs of bracket `entryId`; answers
 * their new ids once the broker has accepted both (throws when it refused or rejected them).
 */
export async function restoreLegPair(ctx: ActorContext, accountId: string, entryId: string, tp: OrderRecord, sl: OrderRecord, qty: number): Promise<{ takeProfit: number; stopLoss: number }> {
  const account = ctx.model.account(accountId);
  const d = checkAnswer('placeoco', await ctx.conn.send('order/placeoco', restoreLegsOcoBody(tp, sl, qty, { id: account.id, name: String(account.name ?? account.id) }), { kind: 'order' }));
  const takeProfit = Number(d.orderId);
  const stopLoss = Number(d.ocoId);
  if (!takeProfit || !stopLoss) throw new AppError('BROKER_REJECTED', 'the broker returned no order ids for the legs', { brokerReason: 'no orderId' });
  adoptPair(ctx, entryId, { takeProfit, stopLoss }, tp, sl);
  // The answer is ids only: a risk check may still reject them.
  await Promise.all([settle(ctx, takeProfit), settle(ctx, stopLoss)]);
  const refused = [takeProfit, stopLoss].map((id) => ctx.model.record(id)).find((r) => r?.status === 'rejected');
  if (refused) {
    const brokerReason = refused.rejectReason ?? rejectReasonOf(ctx.mirror, Number(refused.orderId)) ?? 'rejected';
    throw new AppError('BROKER_REJECTED', `the broker rejected them: ${brokerReason}`, { brokerReason });
  }
  return { takeProfit, stopLoss };
}

/** Files a placed pair as bracket `entryId`'s legs in place of `tp` and `sl`. */
function adoptPair(ctx: ActorContext, entryId: string, ids: { takeProfit: number; stopLoss: number }, tp: OrderRecord, sl: OrderRecord): void {
  for (const [id, role, old] of [[ids.takeProfit, 'take_profit', tp], [ids.stopLoss, 'stop_loss', sl]] as const) {
    ctx.model.note(id, { role, bracketId: entryId, requestedSymbol: old.requestedSymbol, clientOrderId: old.clientOrderId });
  }
  ctx.model.note(Number(entryId), { legs: { takeProfit: String(ids.takeProfit), stopLoss: String(ids.stopLoss) } });
}
