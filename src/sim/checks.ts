/**
 * Pre-trade checks of the paper broker: what the order itself must satisfy (supported type,
 * prices on the tick grid) and the account's risk limits (max order qty, max position).
 * A failure names the Tradovate `commandStatus`, `rejectReason` and text to report.
 */
import { isOnTick } from './contracts.js';
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

const SUPPORTED_TYPES = new Set(['Market', 'Limit', 'Stop', 'StopLimit']);

/** Checks an orderVersion: a type the sim supports and prices on the contract's tick grid. */
export function validateVersion(state: SimState, contractId: number, v: Entity): CheckFailure | undefined {
  const type = v.orderType as string;
  if (!SUPPORTED_TYPES.has(type)) return { status: 'ExecutionRejected', reason: 'Unsupported', text: `Order type ${type} is not supported by the paper broker` };
  const tick = state.contracts.productOf(contractId).tickSize;
  const needsPrice = type === 'Limit' || type === 'StopLimit';
  const needsStop = type === 'Stop' || type === 'StopLimit';
  if ((needsPrice && !isOnTick(v.price as number, tick)) || (needsStop && !isOnTick(v.stopPrice as number, tick))) {
    return { status: 'ExecutionRejected', reason: 'InvalidPrice', text: 'Invalid price increment' };
  }
  return undefined;
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
