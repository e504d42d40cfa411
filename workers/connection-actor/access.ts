/**
 * "Access is denied" from the broker on an account's order usually means the broker has just
 * revoked the account (an evaluation breached or reset): its `account` Deleted event may still
 * be on its way, or never come (brokers that only drop it from `account/list`). The answer is
 * then 403 ACCOUNT_INACTIVE, as for any request on an inactive account, not a broker rejection.
 */
import { AppError } from '../../src/domain/problems.js';
import type { ActorContext } from './context.js';

/** Whether an error is the broker refusing access to the account (or its order). */
export function isAccessDenied(err: unknown): boolean {
  if (!(err instanceof AppError) || err.code !== 'BROKER_REJECTED') return false;
  return /access is denied/i.test(String(err.extensions.brokerReason ?? err.message));
}

/**
 * Runs an order operation on `accountId`; when the broker denies access, asks it for the
 * account list at once and answers ACCOUNT_INACTIVE if the account is gone (else the refusal).
 */
export async function onActiveAccount<T>(ctx: ActorContext, accountId: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (!isAccessDenied(err)) throw err;
    await ctx.conn.pollAccounts();
    ctx.model.refreshAccounts();
    ctx.model.account(accountId);
    throw err;
  }
}
