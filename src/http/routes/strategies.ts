/**
 * Strategies: named order defaults (symbol, qty, order type, TP/SL) a webhook token may
 * point at, so an alert can leave those fields out.
 */
import { AppError } from '../../domain/problems.js';
import { checkStrategyLegs, type StrategyLegs } from '../../domain/strategy-legs.js';
import { resolveSymbol } from '../../domain/symbols.js';
import type { StrategyFields, StrategyPatch, StrategyRecord } from '../../store/strategies.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import {
  createStrategyBodySchema,
  listOf,
  listQuerySchema,
  strategySchema,
  updateStrategyBodySchema,
  type CreateStrategyBody,
  type ListQuery,
  type UpdateStrategyBody,
} from '../schemas.js';
import { AUTH_ERRORS, errors, nowOf, oneAtATime, orderLimits, paginateByCreation, quotas, refuseNarrowedKey, type RouteDeps } from './common.js';
import { strategyBindings } from './webhook-tokens.js';

/** The public view of a strategy (absent optionals as null). */
export function strategyView(s: StrategyRecord) {
  return {
    id: s.id,
    name: s.name,
    description: s.description || null,
    symbol: s.symbol ?? null,
    qty: s.qty ?? null,
    orderType: s.orderType ?? null,
    takeProfit: s.takeProfit ?? null,
    stopLoss: s.stopLoss ?? null,
    createdAt: s.createdAt ?? null,
    updatedAt: s.updatedAt ?? null,
  };
}

function checkSymbol(deps: RouteDeps, symbol: string | null | undefined): void {
  if (symbol === null || symbol === undefined) return;
  const resolved = resolveSymbol(symbol, nowOf(deps));
  if (!resolved.ok) throw new AppError('UNKNOWN_SYMBOL', `Unknown symbol '${symbol}': ${resolved.reason}`, { symbol });
}

/** The strategy's symbol and leg prices as they will be stored: each price one that can trade. */
function checkLegs(deps: RouteDeps, legs: StrategyLegs, qty?: number | null): void {
  // The schema takes quantities up to the ceiling ORDER_QTY_MAX may be raised to; this service's
  // limit is the planner's, which every alert of the strategy would meet (re-probe: 20,000 stored,
  // every alert 400).
  const max = orderLimits(deps.config).maxQty;
  if (qty != null && qty > max) {
    const message = `must be a whole number from 1 to ${max} (ORDER_QTY_MAX)`;
    throw new AppError('VALIDATION_FAILED', `qty: ${message}`, { errors: [{ path: 'qty', message }] });
  }
  checkSymbol(deps, legs.symbol);
  checkStrategyLegs(legs, nowOf(deps), orderLimits(deps.config).priceBandFactor);
}

const notFound = () => new AppError('NOT_FOUND', 'Not found');

const LEGS_DOC =
  'Leg prices are checked when the strategy is written: on the tick and inside the price band of the strategy’s symbol ' +
  '(400 PRICE_OUT_OF_RANGE or VALIDATION_FAILED naming the leg); without a symbol, each price must be one some product can trade, ' +
  'and both legs one product can trade together.';

/** Strategy CRUD routes. */
export function strategyRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/strategies',
    scope: 'read',
    operationId: 'listStrategies',
    summary: 'Your strategies',
    tags: ['strategies'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Strategies', schema: listOf(strategySchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS)],
    async handler(ctx) {
      const rows = deps.store.strategies.listByUser(ctx.auth.userId).map(strategyView);
      return { status: 200, body: paginateByCreation(rows, ctx.req.query, 'strategies') };
    },
  });

  const create = defineRoute<CreateStrategyBody>({
    method: 'POST',
    path: '/strategies',
    scope: 'trade',
    operationId: 'createStrategy',
    refusesIdempotencyKey: true,
    summary: 'Create a strategy',
    description: LEGS_DOC,
    tags: ['strategies'],
    body: createStrategyBodySchema,
    responses: [
      { status: 201, description: 'Created', schema: strategySchema },
      ...errors('VALIDATION_FAILED', 'UNKNOWN_SYMBOL', 'PRICE_OUT_OF_RANGE', 'QUOTA_EXCEEDED', ...AUTH_ERRORS),
    ],
    async handler(ctx) {
      refuseNarrowedKey(ctx.auth, 'create strategies');
      const b = ctx.req.body;
      checkLegs(deps, b, b.qty);
      const fields: StrategyFields = { name: b.name, description: b.description ?? '' };
      if (b.symbol) fields.symbol = b.symbol;
      if (b.qty) fields.qty = b.qty;
      if (b.orderType) fields.orderType = b.orderType;
      if (b.takeProfit) fields.takeProfit = b.takeProfit;
      if (b.stopLoss) fields.stopLoss = b.stopLoss;
      const record = await quotas(deps).create(ctx.auth.userId, 'strategies', () => deps.store.strategies.create(ctx.auth.userId, fields));
      return { status: 201, body: strategyView(record) };
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/strategies/:id',
    scope: 'read',
    operationId: 'getStrategy',
    summary: 'One strategy',
    tags: ['strategies'],
    responses: [{ status: 200, description: 'The strategy', schema: strategySchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const s = deps.store.strategies.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!s) throw notFound();
      return { status: 200, body: strategyView(s) };
    },
  });

  const update = defineRoute<UpdateStrategyBody>({
    method: 'PATCH',
    path: '/strategies/:id',
    scope: 'trade',
    operationId: 'updateStrategy',
    summary: 'Change a strategy (null clears an optional field)',
    description: `${LEGS_DOC} A new symbol is checked against the legs kept, and new legs against the symbol kept.`,
    tags: ['strategies'],
    body: updateStrategyBodySchema,
    responses: [
      { status: 200, description: 'Updated', schema: strategySchema },
      ...errors('VALIDATION_FAILED', 'UNKNOWN_SYMBOL', 'PRICE_OUT_OF_RANGE', ...AUTH_ERRORS, 'NOT_FOUND'),
    ],
    async handler(ctx) {
      const b = ctx.req.body;
      const current = deps.store.strategies.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!current) throw notFound();
      refuseNarrowedKey(ctx.auth, 'change strategies');
      // A new symbol is checked against the legs kept, new legs against the symbol kept.
      const pick = <K extends keyof StrategyLegs>(k: K): StrategyLegs[K] => (b[k] !== undefined ? b[k] : current[k]);
      checkLegs(deps, { symbol: pick('symbol'), takeProfit: pick('takeProfit'), stopLoss: pick('stopLoss'), orderType: pick('orderType') }, b.qty);
      const patch: StrategyPatch = {};
      if (b.name !== undefined) patch.name = b.name;
      if (b.description !== undefined) patch.description = b.description ?? '';
      for (const k of ['symbol', 'qty', 'orderType', 'takeProfit', 'stopLoss'] as const) {
        if (b[k] !== undefined) (patch as Record<string, unknown>)[k] = b[k];
      }
      const s = await deps.store.strategies.update(ctx.auth.userId, ctx.req.params.id!, patch);
      if (!s) throw notFound();
      return { status: 200, body: strategyView(s) };
    },
  });

  const remove = defineRoute({
    method: 'DELETE',
    path: '/strategies/:id',
    scope: 'trade',
    operationId: 'deleteStrategy',
    summary: 'Delete a strategy',
    description:
      'A strategy webhook tokens are bound to is not deleted (409 CONFLICT naming them): their alerts leave out what it sets (the ready ' +
      'alert message does), so its take-profit and stop-loss would silently vanish from every later entry. Rebind or delete those tokens first.',
    tags: ['strategies'],
    responses: [{ status: 204, description: 'Deleted' }, ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'CONFLICT')],
    async handler(ctx) {
      const id = ctx.req.params.id!;
      if (!deps.store.strategies.getForUser(ctx.auth.userId, id)) throw notFound();
      refuseNarrowedKey(ctx.auth, 'delete strategies');
      // No token bound to it between the look and the delete (re-probe: both 2xx when sent together).
      const removed = await oneAtATime(deps, strategyBindings(ctx.auth.userId), () => {
        const bound = deps.store.webhookTokens.listByUser(ctx.auth.userId).filter((t) => t.strategyId === id);
        if (bound.length > 0) {
          const names = bound.map((t) => `${t.name} (${t.id})`).join(', ');
          throw new AppError(
            'CONFLICT',
            `Webhook tokens use this strategy: ${names}. Their alerts rely on its order defaults (take-profit, stop-loss): rebind them to another strategy or none, or delete them, first`,
            { tokenIds: bound.map((t) => t.id) },
          );
        }
        return deps.store.strategies.remove(ctx.auth.userId, id);
      });
      if (!removed) throw notFound();
      return { status: 204 };
    },
  });

  return [list, create, get, update, remove];
}
