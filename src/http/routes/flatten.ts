/**
 * Flatten an account (DESIGN §6): cancel every resting order, then close every position.
 * With a `symbol`, the account must hold that contract (or nothing): otherwise 409
 * SYMBOL_MISMATCH and nothing is touched. Shared by the API route and the webhook receiver.
 */
import { AppError } from '../../domain/problems.js';
import { flattenClOrdIdPrefix } from '../../domain/order-plan.js';
import { contractRoot, resolveSymbol, type SymbolForm } from '../../domain/symbols.js';
import type { PositionRecord } from '../../domain/orders.js';
import { defineRoute, GoesOnError, type RouteContext, type RouteDef, type RouteResponse } from '../route-types.js';
import { valueWithin } from '../../wait.js';
import { CLUSTER } from '../../tuning.js';
import type { FlattenResult } from '../../actors/protocol.js';
import { flattenBodySchema, flattenResponseSchema } from '../schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, nowOf, ownedAccount, ownerChanged, requireActive, type OwnedAccount, type RouteDeps } from './common.js';

/** Symbol forms that name a product, not a month (`ES`, `ES1!`, `ES!`, `CME_MINI:ES1!`): an exit of one closes every month of it. */
const PRODUCT_FORMS: ReadonlySet<SymbolForm> = new Set(['root', 'continuous', 'bang', 'exchange-continuous']);

/** The contract a symbol as sent resolves to, or null. */
function resolvedContract(symbolInput: string, now: Date): string | null {
  const resolved = resolveSymbol(symbolInput, now);
  return resolved.ok ? resolved.contract : null;
}

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

/** What a flatten closes: every position (`symbol` null), one contract, or (`product`) every month of the symbol's product. */
export interface FlattenTarget {
  symbol: string | null;
  product: boolean;
}

/** Whether a flatten of `target` closes a position in `symbol`. */
export function closedBy(target: FlattenTarget, symbol: string): boolean {
  if (target.symbol === null || target.symbol === symbol) return true;
  return target.product && contractRoot(symbol)?.root === contractRoot(target.symbol)?.root;
}

/**
 * Whether a position's open lots began after `since` (ms, our clock): it went flat, or turned, since
 * then, so it is not the one a flatten sent at `since` was to close. The broker stamps fills with
 * its own clock: a second's margin keeps a position opened just before (a clock ahead of ours)
 * from reading as a new one.
 */
export function openedAfter(p: PositionRecord, since: number): boolean {
  return p.openedAt !== null && Date.parse(p.openedAt) > since + BROKER_CLOCK_MARGIN_MS;
}

const BROKER_CLOCK_MARGIN_MS = 1_000;

/** Runs a flatten on an owned account; resolves the symbol first (UNKNOWN_SYMBOL, no broker traffic). */
export async function flattenAccount(
  deps: RouteDeps,
  ctx: RouteContext<unknown, unknown>,
  owned: OwnedAccount,
  symbolInput: string | undefined,
  opts?: { timeoutMs?: number; symbolOnly?: boolean; onTimeout?: (target: FlattenTarget) => void },
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
  const target: FlattenTarget = { symbol: opts?.symbolOnly ? symbol : null, product: productOnly };
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

/** How often a flatten whose liquidation the broker did not confirm is looked at. */
const UNCONFIRMED_LOOK_EVERY_MS = 1_000;

/** A flatten that ended with every position it could not close sent and unconfirmed (504): the liquidations may still fill. */
function unconfirmed(err: AppError): boolean {
  const positions = (err.extensions as { positions?: { status: string; code?: string }[] }).positions;
  if (err.code !== 'BROKER_TIMEOUT' || !positions) return false;
  const failed = positions.filter((p) => p.status === 'failed');
  return failed.length > 0 && failed.every((p) => p.code === 'BROKER_TIMEOUT');
}

/**
 * Watches the positions a flatten's unconfirmed liquidations were to close (those held since it
 * was sent, at `from`) until they are closed: then its outcome is a 200, the flatten's own with
 * those positions closed, for a retry with the same Idempotency-Key. Still open after
 * API_FLATTEN_FOLLOW_MS: undefined, and the key is free (the position needs another flatten).
 */
async function closedLater(deps: RouteDeps, owned: OwnedAccount, err: AppError, from: number): Promise<RouteResponse | undefined> {
  const view = err.extensions as { positions: { symbol: string; closedQty: number; status: string; detail?: string; code?: string }[] };
  const watched = new Set(view.positions.filter((p) => p.status === 'failed').map((p) => p.symbol));
  const seen = new Map<string, number>();
  const looks = Math.max(1, Math.ceil((from + API_FLATTEN_FOLLOW_MS - nowOf(deps).getTime()) / UNCONFIRMED_LOOK_EVERY_MS));
  for (let look = 0; look < looks; look++) {
    await new Promise((resolve) => setTimeout(resolve, UNCONFIRMED_LOOK_EVERY_MS).unref());
    let rows: PositionRecord[];
    try {
      rows = await positionsConfirmedWhen(deps, owned.connectionId, owned.account.id, (r) => !r.some((p) => p.netQty !== 0 && watched.has(p.symbol) && !openedAfter(p, from)));
    } catch {
      continue; // Not CONNECTED now: looked at again in a second.
    }
    const open = rows.filter((p) => p.netQty !== 0 && watched.has(p.symbol) && !openedAfter(p, from));
    // What a look saw still open is what closed (re-probe: 0 where its liquidation closed 1); one closed before the first look stays 0.
    for (const p of open) seen.set(p.symbol, Math.abs(p.netQty));
    if (open.length > 0) continue;
    const positions = view.positions.map((p) =>
      watched.has(p.symbol)
        ? { symbol: p.symbol, closedQty: seen.get(p.symbol) ?? p.closedQty, status: 'liquidated', detail: 'closed after this flatten was answered 504 (by its liquidation, or another exit)' }
        : p,
    );
    return { status: 200, body: { ...view, positions } };
  }
  return undefined;
}

/**
 * An account's positions for a follow-up that concludes from them: read from the service's state,
 * and where `concludes` holds of that read, confirmed with the broker's own list (`verified`):
 * lost events leave the service flat where the broker is not (re-probe: a follow-up said "flat"
 * while the broker was long). Only a conclusion costs a broker request (Tradovate allows 80 a minute).
 */
export async function positionsConfirmedWhen(deps: RouteDeps, connectionId: string, accountId: string, concludes: (rows: PositionRecord[]) => boolean): Promise<PositionRecord[]> {
  const rows = await deps.gateway.request(connectionId, { type: 'positions', accountId });
  return concludes(rows) ? deps.gateway.request(connectionId, { type: 'positions', accountId, verified: true }) : rows;
}

/**
 * The outcome of a flatten whose node stopped answering (a cluster owner that hangs: its cancels
 * and liquidation may still be on its broker socket, and a slow broker may carry them out later).
 * Waits CLUSTER.ownerChangeHoldMs for that, then looks at the positions until API_FLATTEN_FOLLOW_MS
 * from the flatten: none left of those held before it, a 200 for a retry with the same key (those
 * `before` it, when known, shown closed); still open then, undefined and the key is free. Freed at
 * once, the retry flattened again, and the hung node's late liquidation closed a position opened
 * after it (cluster re-probe).
 */
async function flatAfterOwnerChange(deps: RouteDeps, owned: OwnedAccount, symbol: string | null, from: number, before: Promise<PositionRecord[] | undefined>): Promise<RouteResponse | undefined> {
  await new Promise((resolve) => setTimeout(resolve, CLUSTER.ownerChangeHoldMs).unref());
  const held = ((await before) ?? []).filter((p) => p.netQty !== 0);
  const looks = Math.max(1, Math.ceil((from + API_FLATTEN_FOLLOW_MS - nowOf(deps).getTime()) / UNCONFIRMED_LOOK_EVERY_MS));
  for (let look = 0; look < looks; look++) {
    let rows: PositionRecord[];
    try {
      rows = await positionsConfirmedWhen(deps, owned.connectionId, owned.account.id, (r) => !r.some((p) => p.netQty !== 0 && !openedAfter(p, from)));
    } catch {
      await new Promise((resolve) => setTimeout(resolve, UNCONFIRMED_LOOK_EVERY_MS).unref());
      continue;
    }
    if (rows.some((p) => p.netQty !== 0 && !openedAfter(p, from))) {
      await new Promise((resolve) => setTimeout(resolve, UNCONFIRMED_LOOK_EVERY_MS).unref());
      continue;
    }
    const detail = 'closed after this flatten was answered 504: the cluster node running its connection stopped answering, and the position was closed (by its liquidation, or another exit)';
    const positions = held.map((p) => ({ symbol: p.symbol, closedQty: Math.abs(p.netQty), status: 'liquidated', detail }));
    return { status: 200, body: { accountId: owned.account.id, symbol, cancelledOrderIds: [], positions } };
  }
  return undefined;
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
        'IDEMPOTENCY_KEY_IN_USE until it has ended, then answered with its outcome (replayed; one that ended in a 5xx frees the key), never flattened again. ' +
        'A 504 whose liquidation the broker did not confirm holds its Idempotency-Key while the service watches the position, up to 2 minutes ' +
        'from the flatten: a same-key retry is 409 IDEMPOTENCY_KEY_IN_USE, then 200 (the position shown closed) once it is; still open then, the key is free.',
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
        // When it was sent: a position whose lots began after this is not one it was to close.
        const from = nowOf(deps).getTime();
        // What it is to close, read just before (from memory), for the answer of a flatten whose node stops answering.
        const before = ctx.idempotencyKey === undefined ? Promise.resolve(undefined) : deps.gateway.request(owned.connectionId, { type: 'positions', accountId: owned.account.id }).catch(() => undefined);
        const work = flattenAccount(deps, ctx as RouteContext<unknown, unknown>, owned, ctx.req.body?.symbol, { timeoutMs: API_FLATTEN_FOLLOW_MS });
        const keyed = ctx.idempotencyKey !== undefined;
        /** Its outcome for a retry with the same key: a liquidation the broker did not confirm is followed first. */
        const outcome = (err: unknown) => {
          if (!(err instanceof AppError)) return undefined;
          return keyed && unconfirmed(err) ? closedLater(deps, owned, err, from) : err;
        };
        const body = await valueWithin(work, API_FLATTEN_ANSWER_MS).catch((err: unknown) => {
          if (keyed && ownerChanged(err)) {
            const hold = `; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE for ${CLUSTER.ownerChangeHoldMs / 1000} s while the broker may still carry out what that node sent, then 200 once the positions it was to close are closed (watched up to ${API_FLATTEN_FOLLOW_MS / 60_000} minutes); still open then, the key is free`;
            const symbol = ctx.req.body?.symbol === undefined ? null : resolvedContract(ctx.req.body.symbol, nowOf(deps));
            throw new GoesOnError(new AppError(err.code, err.message.replace(/; retry with the same Idempotency-Key.*$/, '') + hold, err.extensions, err.retryAfterSeconds), flatAfterOwnerChange(deps, owned, symbol, from, before));
          }
          if (!(err instanceof AppError) || !keyed || !unconfirmed(err)) throw err;
          // Its liquidation may still close the position: the key is held while that is watched
          // (cluster probe: a same-key retry freed by the 504 sent another liquidation, which would
          // close a position opened in between).
          const advice = `; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE while the service watches the position (up to ${API_FLATTEN_FOLLOW_MS / 60_000} minutes), then 200 once it is closed; a flatten with a new key acts at once`;
          throw new GoesOnError(new AppError(err.code, err.message + advice, err.extensions, err.retryAfterSeconds), closedLater(deps, owned, err, from));
        });
        if (body === undefined) {
          // Still at work: it goes on, and says so (cluster probe: a bare "did not complete within
          // 15000 ms" while it waited for the connection, then closed 2). A retry with the same
          // Idempotency-Key meets 409 IDEMPOTENCY_KEY_IN_USE until it ends, then its outcome.
          throw new GoesOnError(
            new AppError(
              'BROKER_TIMEOUT',
              `The flatten did not finish within ${API_FLATTEN_ANSWER_MS / 1000} s and goes on in the service: GET …/positions and …/working-orders show what is left` +
                (keyed ? '; a retry with the same Idempotency-Key is answered 409 IDEMPOTENCY_KEY_IN_USE until it has ended, then with its outcome' : ''),
            ),
            work.then((done) => ({ status: 200, body: done }), outcome),
          );
        }
        return { status: 200, body };
      },
    }),
  ];
}
