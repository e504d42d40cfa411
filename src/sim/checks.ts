/**
 * Pre-trade checks of the paper broker: what the order itself must satisfy (a type the engine
 * matches, prices on the tick grid) and the account's risk limits (max order qty, max position).
 * A failure names the Tradovate `commandStatus`, `rejectReason` and text to report.
 */
import { isOnTick } from './contracts.js';
import { MATCHED_TYPES } from './matching.js';
import type { Positions } from './positions.js';
import type { Entity, SimState } from './state.js';

/** Why an order or a modify is refused. */
export interface CheckFailure {
  status: 'ExecutionRejected' | 'RiskRejected';
  reason: string;
  text: string;
}

/**
 * Order quantity limit of an account without its own: real accounts always have one, and
 * without it one absurd order (1e308 lots) would tie the matching engine up for good.
 */
export const SIM_MAX_ORDER_QTY = 10_000;

/** Checks an orderVersion: a type the sim matches and its prices above zero on the contract's tick grid. */
export function validateVersion(state: SimState, contractId: number, v: Entity): CheckFailure | undefined {
  const type = v.orderType as string;
  if (!MATCHED_TYPES.has(type)) return { status: 'ExecutionRejected', reason: 'Unsupported', text: `Order type ${type} is not supported by the paper broker` };
  const tick = state.contracts.productOf(contractId).tickSize;
  // A price at or below zero is refused as an exchange refuses it: a stop computed past zero
  // (an offset wider than the fill price) must never rest as if it protected anything.
  const onTick = (p: unknown) => typeof p === 'number' && p > 0 && isOnTick(p, tick);
  const distance = (p: unknown) => typeof p === 'number' && p !== 0 && isOnTick(Math.abs(p), tick);
  const price = v.price;
  const stop = v.stopPrice;
  const peg = v.pegDifference;
  let valid = true;
  if (type === 'Limit' || type === 'StopLimit' || type === 'TrailingStopLimit') valid &&= onTick(price);
  if (type === 'Stop' || type === 'StopLimit' || type === 'TrailingStopLimit') valid &&= onTick(stop);
  if (type === 'MIT') valid &&= onTick(price ?? stop);
  // A trailing stop needs its distance (pegDifference) or a starting stop to measure it from.
  if (type === 'TrailingStop') valid &&= peg !== undefined ? distance(peg) && (stop === undefined || onTick(stop)) : onTick(stop);
  if (type === 'TrailingStopLimit' && peg !== undefined) valid &&= distance(peg);
  if (valid) return undefined;
  const notPositive = [price, stop].some((p) => typeof p === 'number' && p <= 0);
  return { status: 'ExecutionRejected', reason: 'InvalidPrice', text: notPositive ? 'Price must be positive' : 'Invalid price increment' };
}

/** Account limits for an order of `orderQty` that adds `addedQty` contracts in its direction. */
export function riskCheck(
  state: SimState,
  positions: Positions,
  order: { accountId: number; contractId: number; buy: boolean },
  orderQty: number,
  addedQty: number,
): CheckFailure | undefined {
  const account = state.accounts.get(order.accountId);
  if (!account) return undefined;
  const maxOrderQty = account.maxOrderQty ?? SIM_MAX_ORDER_QTY;
  if (!Number.isSafeInteger(orderQty) || orderQty <= 0 || orderQty > maxOrderQty) {
    return { status: 'RiskRejected', reason: 'MaxOrderQtyLimitReached', text: 'Your maximum order quantity has been met.' };
  }
  if (account.maxPosition !== undefined) {
    const net = positions.netPos(order.accountId, order.contractId);
    const after = net + (order.buy ? addedQty : -addedQty);
    // Only an order that grows exposure past the limit is refused; reducing is always allowed.
    if (Math.abs(after) > account.maxPosition && Math.abs(after) > Math.abs(net)) {
      return { status: 'RiskRejected', reason: 'MaxPosLimitReached', text: 'Your maximum position has been met.' };
    }
  }
  return undefined;
}
