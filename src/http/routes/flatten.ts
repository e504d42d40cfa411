/**
 * Flatten an account (DESIGN §6): cancel every resting order, then close every position.
 * With a `symbol`, the account must hold that contract (or nothing): otherwise 409
 * SYMBOL_MISMATCH and nothing is touched. Shared by the API route and the webhook receiver.
 */
import { AppError } from '../../domain/problems.js';
import { flattenClOrdIdPrefix } from '../../domain/order-plan.js';
import { resolveSymbol, type SymbolForm } from '../../domain/symbols.js';
import { defineRoute, GoesOnError, type RouteContext, type RouteDef } from '../route-types.js';
import { valueWithin } from '../../wait.js';
import type { FlattenResult } from '../../actors/protocol.js';
import { flattenBodySchema, flattenResponseSchema } from '../schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, nowOf, ownedAccount, requireActive, type OwnedAccount, type RouteDeps } from './common.js';

/** Symbol forms that name a product, not a month (`ES`, `ES1!`, `ES!`, `CME_MINI:ES1!`): an exit of one closes every month of it. */
const PRODUCT_FORMS: ReadonlySet<SymbolForm> = new Set(['root', 'continuous', 'bang', 'exchange-continuous']);

/** Whether a symbol as sent names a product (every month of it), not one month. */
export function namesProduct(symbolInput: string, now: Date): boolean {
  const resolved = resolveSymbol(symbolInput, now);
  return resolved.ok && PRODUCT_FORMS.has(resolved.form);
}

/**
 * How long POST …/flatten waits before it answers: past the actor's wait for a lost connection to
 * come back (20 s, flatten.ts) and the cancels and liquidation after it. The default 15 s call
 * deadline answered 504 while the flatten was still waiting, and it then closed the position anyway.
 */
export const API_FLATTEN_ANSWER_MS = 30_000;

/**
 * How long the front follows a flatten answered 504 at API_FLATTEN_ANSWER_MS, so that its outcome
 * answers a retry with the same Idempotency-Key: the retry ran a second flatten, which closed a
 * position opened since the first.
 */
const API_FLATTEN_FOLLOW_MS = 120_000;

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
  // What the flatten closes, for a caller following it past a timeout: the symbol only for a
  // strategy's exit; otherwise it is a guard, and the whole account is closed (re-probe: a webhook
  // close answered 504 was later said to have closed the account while NQ, not the ES named, was open).
  const target = { symbol: opts?.symbolOnly ? symbol : null, product: productOnly };
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
    if (err instanceof AppError && err.code === 'BROKER_TIMEOUT') opts?.onTimeout?.(target);
    throw err;
  });
  const positions = positionOutcomes(result.positions);
  const view = { accountId: owned.account.id, symbol, cancelledOrderIds: result.cancelledOrderIds, positions };
  if (result.outstandingOrders) Object.assign(view, { outstandingOrders: result.outstandingOrders });
  const failed = result.positions.filter((p) => p.status === 'failed');
  if (failed.length === 0) return view;
  const err = notFlat(view, failed);
  if (err.code === 'BROKER_TIMEOUT') opts?.onTimeout?.(target);
  throw err;
}

/** A flatten's per-position outcomes as answers show them (a failed one's `code` says why; its retry hint is the answer's Retry-After). */
export function positionOutcomes(positions: FlattenResult['positions']) {
  return positions.map(({ retryAfterSeconds: _retry, ...p }) => p);
}

/**
 * A flatten that could not close a position is an error, never a 200: its cancels have taken the
 * position's stop-loss and take-profit, so the position is open and unprotected, or (its
 * liquidation sent as the connection dropped) may be closing. A 200 told a strategy's exit and a
 * reversal they were done while the account stayed long with nothing working (faults probe), and
 * an Idempotency-Key retry replayed that 200. The code is that of the liquidation's own failure:
 * 504 when it may have reached the broker, 503 when it never left, 422 when the broker refused it
 * or did not fill it. The problem carries the flatten's outcome (`cancelledOrderIds`, `positions`).
 */
function notFlat(view: { positions: { symbol: string }[]; cancelledOrderIds: string[] }, failed: FlattenResult['positions']): AppError {
  // Every one left because it changed while the connection was down (traded elsewhere): its orders
  // were not necessarily cancelled, and nothing was refused (re-probe 4: a 422 "cancelled …").
  if (failed.every((f) => f.code === 'CONFLICT')) {
    const which = failed.map((f) => `${f.symbol} (${f.detail ?? 'changed'})`).join('; ');
    const cancelled = view.cancelledOrderIds.length > 0 ? `${view.cancelledOrderIds.length} resting order(s) were cancelled, but ` : '';
    return new AppError('CONFLICT', `${cancelled}${which}: left open. Read the positions and working orders before flattening again`, view);
  }
  const sent = failed.find((f) => f.code === 'BROKER_TIMEOUT');
  const unsent = failed.find((f) => f.code === 'BROKER_UNAVAILABLE' || f.code === 'CONNECTION_FAILED');
  const which = failed.map((f) => `${f.symbol} (${f.detail ?? 'failed'})`).join('; ');
  if (sent) {
    return new AppError(
      'BROKER_TIMEOUT',
      `The resting orders were cancelled, but the broker did not confirm the liquidation of ${which}: the position may still close, or it is open without its protective orders. Read the positions before flattening again`,
      view,
      sent.retryAfterSeconds,
    );
  }
  const code = unsent?.code ?? 'BROKER_REJECTED';
  return new AppError(
    code,
    `The resting orders were cancelled, but ${which} could not be closed: the position is still open without its protective orders. Flatten again (a new Idempotency-Key) or protect it`,
    view,
    unsent?.retryAfterSeconds,
  );
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
        'SYMBOL_MISMATCH and nothing is closed. Honours Idempotency-Key. A position that could not be closed makes the answer an ' +
        'error (504 BROKER_TIMEOUT when its liquidation may have reached the broker, 503 when it was not sent, 422 when the broker ' +
        'refused or did not fill it) whose problem carries `cancelledOrderIds` and `positions`: its protective orders are cancelled. ' +
        'A flatten still at work after 30 s is answered 504 and goes on: a retry with the same Idempotency-Key is 409 ' +
        'IDEMPOTENCY_KEY_IN_USE until it has ended, then answered with its outcome (replayed; one that ended in a 5xx frees the key), never flattened again.',
      tags: ['accounts'],
      body: flattenBodySchema,
      idempotent: true,
      responses: [
        { status: 200, description: 'Per-symbol outcomes', schema: flattenResponseSchema },
        ...errors('VALIDATION_FAILED', 'UNKNOWN_SYMBOL', 'INVALID_IDEMPOTENCY_KEY', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'SYMBOL_MISMATCH'),
        ...errors('IDEMPOTENCY_KEY_IN_USE', 'IDEMPOTENCY_KEY_REUSED', 'BROKER_REJECTED', 'CONFLICT', ...BROKER_ERRORS),
      ],
      async handler(ctx) {
        const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
        const work = flattenAccount(deps, ctx as RouteContext<unknown, unknown>, owned, ctx.req.body?.symbol, { timeoutMs: API_FLATTEN_FOLLOW_MS });
        const body = await valueWithin(work, API_FLATTEN_ANSWER_MS);
        if (body === undefined) {
          // Still at work: it goes on, and says so (cluster probe: a bare "did not complete within
          // 15000 ms" while it waited for the connection, then closed 2). A retry with the same
          // Idempotency-Key meets 409 IDEMPOTENCY_KEY_IN_USE until it ends, then its outcome.
          const keyed = ctx.idempotencyKey !== undefined;
          throw new GoesOnError(
            new AppError(
              'BROKER_TIMEOUT',
              `The flatten did not finish within ${API_FLATTEN_ANSWER_MS / 1000} s and goes on in the service: GET …/positions and …/working-orders show what is left` +
                (keyed ? '; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE until it has ended, then with its outcome' : ''),
            ),
            work.then(
              (done) => ({ status: 200, body: done }),
              (err: unknown) => (err instanceof AppError ? err : undefined),
            ),
          );
        }
        return { status: 200, body };
      },
    }),
  ];
}
