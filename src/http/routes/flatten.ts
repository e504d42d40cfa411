/**
 * Flatten an account (DESIGN §6): cancel every resting order, then close every position.
 * With a `symbol`, the account must hold that contract (or nothing): otherwise 409
 * SYMBOL_MISMATCH and nothing is touched. Shared by the API route and the webhook receiver.
 */
import { AppError } from '../../domain/problems.js';
import { flattenClOrdIdPrefix } from '../../domain/order-plan.js';
import { resolveSymbol, type SymbolForm } from '../../domain/symbols.js';
import { defineRoute, type RouteContext, type RouteDef } from '../route-types.js';
import { flattenBodySchema, flattenResponseSchema } from '../schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, nowOf, ownedAccount, requireActive, type OwnedAccount, type RouteDeps } from './common.js';

/** Symbol forms that name a product, not a month (`ES`, `ES1!`, `ES!`, `CME_MINI:ES1!`): an exit of one closes every month of it. */
const PRODUCT_FORMS: ReadonlySet<SymbolForm> = new Set(['root', 'continuous', 'bang', 'exchange-continuous']);

/** Whether a symbol as sent names a product (every month of it), not one month. */
export function namesProduct(symbolInput: string, now: Date): boolean {
  const resolved = resolveSymbol(symbolInput, now);
  return resolved.ok && PRODUCT_FORMS.has(resolved.form);
}

/** Runs a flatten on an owned account; resolves the symbol first (UNKNOWN_SYMBOL, no broker traffic). */
export async function flattenAccount(
  deps: RouteDeps,
  ctx: RouteContext<unknown, unknown>,
  owned: OwnedAccount,
  symbolInput: string | undefined,
  opts?: { timeoutMs?: number; symbolOnly?: boolean; onTimeout?: (target: { symbol: string | null; product: boolean }) => void },
) {
  let symbol: string | null = null;
  let productNamed = false;
  if (symbolInput !== undefined) {
    const resolved = resolveSymbol(symbolInput, nowOf(deps));
    if (!resolved.ok) throw new AppError('UNKNOWN_SYMBOL', `Unknown symbol '${symbolInput}': ${resolved.reason}`, { symbol: symbolInput });
    symbol = resolved.contract;
    productNamed = PRODUCT_FORMS.has(resolved.form);
  }
  requireActive(owned);
  const productOnly = !!opts?.symbolOnly && symbol !== null && productNamed;
  const result = await callActor(
    deps,
    ctx,
    owned.connectionId,
    {
      type: 'flatten',
      accountId: owned.account.id,
      symbol,
      ...(opts?.symbolOnly && symbol !== null ? { symbolOnly: true, ...(productOnly && { productOnly: true }) } : {}),
      clOrdIdPrefix: flattenClOrdIdPrefix(ctx.auth.userId, ctx.idempotencyKey),
    },
    opts,
  ).catch((err: unknown) => {
    // The flatten goes on in the actor after the deadline: a caller may follow what it closes.
    if (err instanceof AppError && err.code === 'BROKER_TIMEOUT') opts?.onTimeout?.({ symbol, product: productOnly });
    throw err;
  });
  const view = { accountId: owned.account.id, symbol, cancelledOrderIds: result.cancelledOrderIds, positions: result.positions };
  return result.outstandingOrders ? Object.assign(view, { outstandingOrders: result.outstandingOrders }) : view;
}

/** POST /accounts/:id/flatten. */
export function flattenRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  return [
    defineRoute<{ symbol?: string | undefined } | undefined>({
      method: 'POST',
      path: '/accounts/:id/flatten',
      scope: 'trade',
      operationId: 'flattenAccount',
      summary: 'Cancel every resting order and close every position',
      description:
        'With `symbol`: only allowed when the account holds that contract (or is flat); if it holds a different contract → 409 ' +
        'SYMBOL_MISMATCH and nothing is closed. Honours Idempotency-Key.',
      tags: ['accounts'],
      body: flattenBodySchema,
      idempotent: true,
      responses: [
        { status: 200, description: 'Per-symbol outcomes', schema: flattenResponseSchema },
        ...errors('VALIDATION_FAILED', 'UNKNOWN_SYMBOL', 'INVALID_IDEMPOTENCY_KEY', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'SYMBOL_MISMATCH'),
        ...errors('IDEMPOTENCY_KEY_IN_USE', 'IDEMPOTENCY_KEY_REUSED', ...BROKER_ERRORS),
      ],
      async handler(ctx) {
        const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
        const body = await flattenAccount(deps, ctx as RouteContext<unknown, unknown>, owned, ctx.req.body?.symbol);
        return { status: 200, body };
      },
    }),
  ];
}
