/**
 * Orders (DESIGN §4, §6): place (with dryRun), cancel one order, working orders, closed
 * trade history. Symbols are resolved and prices checked before any broker traffic.
 */
import type { PlaceOrderResult, WorkingOrdersPage } from '../../actors/protocol.js';
import { parseOrderId, type NewOrder } from '../../domain/orders.js';
import type { GuardRefusal } from '../../domain/guards.js';
import { AppError } from '../../domain/problems.js';
import { clOrdIdFor, dryRunBody, planOrder } from '../../domain/order-plan.js';
import { JSON_HEADERS } from '../respond.js';
import { defineRoute, type RouteContext, type RouteDef, type RouteResponse } from '../route-types.js';
import {
  cancelOrderResponseSchema,
  closedTradeSchema,
  dryRunResponseSchema,
  listOf,
  listQuerySchema,
  orderRecordSchema,
  placeOrderBodySchema,
  placeOrderQuerySchema,
  placeOrderResponseSchema,
  type ListQuery,
  type PlaceOrderBody,
} from '../schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, guardedBy, heldAfterOwnerChange, nowOf, orderLimits, ownedAccount, pageOf, paginate, requireActive, serializedPageAfter, type RouteDeps } from './common.js';

/** The 201 body: the order record, its legs as placed, and whether it was reconciled. */
export function placedOrderView(result: PlaceOrderResult) {
  const legs = result.legs ?? null;
  // Object.assign, not `{ ...order, more }`: on Node 20 a literal that starts with a spread and
  // adds keys costs several µs per object.
  const view = Object.assign({}, result.order, { legOrders: legs, reconciled: result.reconciled });
  if (legs) {
    view.legs = {
      takeProfit: view.legs.takeProfit ?? legs.takeProfit?.orderId ?? null,
      stopLoss: view.legs.stopLoss ?? legs.stopLoss?.orderId ?? null,
    };
  }
  return view;
}

/** Answer bytes of a working-orders page object (kept as long as the page itself is). */
const pageBodies = new WeakMap<WorkingOrdersPage, Buffer>();

function pageAnswer(page: WorkingOrdersPage, list: string): RouteResponse {
  let body = pageBodies.get(page);
  if (!body) {
    body = Buffer.from(serializedPageAfter(list, page.json, page.more && page.lastId !== undefined ? page.lastId : null));
    pageBodies.set(page, body);
  }
  return { status: 200, headers: JSON_HEADERS, body };
}

const isDryRun = (query: { dryRun?: string } | undefined): boolean => query?.dryRun === 'true' || query?.dryRun === '1';

/** What an order body means, without what it spells that leaving out would mean too: nulls and the defaults (market, day). */
function orderAsMeant(body: PlaceOrderBody | undefined): unknown {
  if (!body) return body;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (v === null || v === undefined || (k === 'type' && v === 'market') || (k === 'timeInForce' && v === 'day')) continue;
    out[k] = v;
  }
  return out;
}

/** Order routes. */
export function orderRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  /**
   * A dry run asks the account's guards what they would say to the order now (a refusal is the
   * real order's 403 RISK_GUARD); true when they would admit it, false when they cannot be asked
   * (the connection is not CONNECTED): the plan alone is still the answer then.
   */
  async function checkGuards(deps: RouteDeps, ctx: RouteContext<PlaceOrderBody, unknown>, connectionId: string, order: Omit<NewOrder, 'clOrdId'>): Promise<boolean> {
    if (deps.gateway.status(connectionId)?.status !== 'CONNECTED') return false;
    let refusal: GuardRefusal | null;
    try {
      ({ refusal } = await callActor(deps, ctx as RouteContext<unknown, unknown>, connectionId, { type: 'check-order', ...order, ...guardedBy(ctx.auth, 'api') }));
    } catch (err) {
      if (err instanceof AppError && (err.code === 'BROKER_UNAVAILABLE' || err.code === 'BROKER_TIMEOUT' || err.code === 'CONNECTION_FAILED')) return false;
      throw err;
    }
    if (refusal) throw new AppError('RISK_GUARD', refusal.detail, { guard: refusal.guard, limit: refusal.limit, value: refusal.value, accountId: order.accountId });
    return true;
  }

  const place = defineRoute<PlaceOrderBody, { dryRun?: 'true' | 'false' | '1' | '0' }>({
    method: 'POST',
    path: '/accounts/:id/orders',
    scope: 'trade',
    operationId: 'placeOrder',
    summary: 'Place an order, optionally with a take-profit and a stop-loss',
    description:
      'Resolves the symbol (any accepted form) and checks prices against the contract tick before anything reaches the broker. ' +
      'Send an Idempotency-Key to make retries safe: the same key within 24 h replays the first response and never places a second order. ' +
      'An entry that breaks one of the account’s risk guards (or the key’s narrowing of them) is refused with 403 RISK_GUARD; exits never are (an exit with a take-profit or stop-loss counts as an entry: its legs would open a new position). ' +
      '`?dryRun=true` validates and returns the plan without sending anything; while the connection is CONNECTED it also asks the ' +
      'risk guards, and an order they would refuse is 403 RISK_GUARD as the real one (`guardsChecked` says whether they were asked). ' +
      'A dry run takes no Idempotency-Key: sent with one it is 400 VALIDATION_FAILED (nothing is placed, nothing to dedupe; a stored plan would hold the key for 24 h).',
    tags: ['orders'],
    body: placeOrderBodySchema,
    query: placeOrderQuerySchema,
    idempotent: true,
    // `?dryRun=false`, `"timeInForce": "day"`, `"clientOrderId": null` name the same order as leaving them out.
    fingerprintOf: (req) => ({ body: orderAsMeant(req.body), query: isDryRun(req.query) ? req.query : {} }),
    // A stored plan would hold the key for 24 h, so the real order sent next with that key would
    // meet 422 (the fingerprint covers the query). Refused before the key is looked up: a 400,
    // never stored, whether or not the key was used before.
    checkIdempotencyKey(_key, req) {
      if (isDryRun(req.query)) {
        throw new AppError('VALIDATION_FAILED', 'dryRun: send no Idempotency-Key with a dry run (nothing is placed, nothing to dedupe)', {
          errors: [{ path: 'dryRun', message: 'cannot be combined with Idempotency-Key' }],
        });
      }
    },
    responses: [
      { status: 201, description: 'The order as placed', schema: placeOrderResponseSchema },
      { status: 200, description: 'dryRun: the plan; nothing was sent', schema: dryRunResponseSchema },
      ...errors('VALIDATION_FAILED', 'UNKNOWN_SYMBOL', 'PRICE_OUT_OF_RANGE', 'INVALID_IDEMPOTENCY_KEY', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'RISK_GUARD', 'NOT_FOUND'),
      ...errors('IDEMPOTENCY_KEY_IN_USE', 'CONFLICT', 'SYMBOL_MISMATCH', 'IDEMPOTENCY_KEY_REUSED', 'BROKER_REJECTED', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const plan = planOrder(ctx.req.body, owned.account.id, nowOf(deps), orderLimits(deps.config));
      // A dry run answers what the real order would meet on our side, inactive account included.
      requireActive(owned);
      if (isDryRun(ctx.req.query)) {
        // (Under an Idempotency-Key it never gets here: checkIdempotencyKey refused it.)
        return { status: 200, body: dryRunBody(plan, await checkGuards(deps, ctx, owned.connectionId, plan.order)) };
      }
      const clOrdId = clOrdIdFor(ctx.auth.userId, ctx.idempotencyKey);
      const result = await callActor(deps, ctx, owned.connectionId, { type: 'place-order', ...plan.order, clOrdId, ...guardedBy(ctx.auth, 'api') }).catch((err: unknown) => {
        throw (ctx.idempotencyKey !== undefined && heldAfterOwnerChange(err)) || err;
      });
      return { status: 201, body: placedOrderView(result) };
    },
  });

  const cancel = defineRoute({
    method: 'DELETE',
    path: '/accounts/:id/orders/:orderId',
    scope: 'trade',
    operationId: 'cancelOrder',
    summary: 'Cancel one order (entry or a bracket leg)',
    description:
      'Cancels only the named order. An unfilled entry takes its TP/SL with it (`removedLegIds`); a partly filled entry has its ' +
      'remainder cancelled and the position stays; cancelling one leg of a filled bracket re-places the surviving leg under a new id ' +
      '(`replaced`) — re-read working orders afterwards. A final order answers 409 ORDER_NOT_WORKING with its state.',
    tags: ['orders'],
    responses: [
      { status: 200, description: 'Cancelled', schema: cancelOrderResponseSchema },
      ...errors(...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'ORDER_NOT_WORKING', 'CONFLICT', 'BROKER_REJECTED', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      // Ids are matched exactly, like account ids: `010000337` or `1e7` names no order.
      if (parseOrderId(ctx.req.params.orderId!) === undefined) throw new AppError('NOT_FOUND', 'Not found');
      const result = await callActor(deps, ctx, owned.connectionId, {
        type: 'cancel-order',
        accountId: owned.account.id,
        orderId: ctx.req.params.orderId!,
      });
      return {
        status: 200,
        body: {
          order: result.order,
          removedLegIds: result.removedLegIds,
          replaced: result.replaced,
          remainderCancelled: result.remainderCancelled,
          ...(result.warning !== undefined && { warning: result.warning }),
        },
      };
    },
  });

  const working = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/accounts/:id/working-orders',
    scope: 'read',
    operationId: 'listWorkingOrders',
    summary: 'Orders resting at the broker (unfilled entries, active TP/SL legs)',
    description:
      'Served from the connection’s live mirror of the broker; 503 while the connection is not CONNECTED (never stale data). ' +
      'Oldest first; `?limit=` (1..500, default 100) and `?cursor=` (the previous page’s nextCursor). A cursor continues after the last ' +
      'order its page showed: orders that end while a client pages (cancelled from an earlier page) never make it skip one.',
    tags: ['orders'],
    query: listQuerySchema,
    responses: [
      { status: 200, description: 'Working orders', schema: listOf(orderRecordSchema) },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', ...BROKER_ERRORS),
    ],
    handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const list = `working-orders-after/${owned.account.id}`;
      // The cursor holds the id of the last order the previous page showed (pageOf reads it as its number).
      const { offset: after, limit } = pageOf(ctx.req.query, list);
      // The actor answers the page as JSON text it keeps between changes, and the front keeps the
      // same page object until they change: an unchanged page is answered synchronously, its
      // answer bytes built once per page.
      const kept = deps.gateway.keptPage?.(owned.connectionId, owned.account.id, after, limit);
      if (kept) return pageAnswer(kept, list);
      return callActor(deps, ctx, owned.connectionId, { type: 'working-orders-page', accountId: owned.account.id, after, limit }).then((page) => pageAnswer(page, list));
    },
  });

  const history = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/accounts/:id/orders',
    scope: 'read',
    operationId: 'listTradeHistory',
    summary: 'Closed trade history (legacy path name; not working orders)',
    description: 'Fills paired FIFO into closed trades, newest last.',
    tags: ['orders'],
    query: listQuerySchema,
    responses: [
      { status: 200, description: 'Closed trades', schema: listOf(closedTradeSchema) },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const trades = await callActor(deps, ctx, owned.connectionId, { type: 'trade-history', accountId: owned.account.id });
      return { status: 200, body: paginate(trades, ctx.req.query, `trades/${owned.account.id}`) };
    },
  });

  return [place, cancel, working, history];
}
