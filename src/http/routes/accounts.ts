/**
 * Accounts and positions. A user's accounts are what their connections' brokers report;
 * an account the broker stopped reporting stays listed with `active: false`.
 */
import { defineRoute, type RouteDef } from '../route-types.js';
import { accountSchema, listOf, listQuerySchema, positionSchema, type ListQuery } from '../schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, ownedAccount, paginate, userAccounts, type RouteDeps } from './common.js';

/** Account and position routes. */
export function accountRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/accounts',
    scope: 'read',
    operationId: 'listAccounts',
    summary: 'Accounts of every connection you own',
    tags: ['accounts'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Accounts', schema: listOf(accountSchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS)],
    async handler(ctx) {
      const accounts = userAccounts(deps, ctx.auth.userId).map((a) => a.account);
      return { status: 200, body: paginate(accounts, ctx.req.query) };
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/accounts/:id',
    scope: 'read',
    operationId: 'getAccount',
    summary: 'One account',
    tags: ['accounts'],
    responses: [{ status: 200, description: 'The account', schema: accountSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      return { status: 200, body: ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!).account };
    },
  });

  const positions = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/accounts/:id/positions',
    scope: 'read',
    operationId: 'listPositions',
    summary: 'Open positions of an account',
    tags: ['accounts'],
    query: listQuerySchema,
    responses: [
      { status: 200, description: 'Open positions', schema: listOf(positionSchema) },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const rows = await callActor(deps, ctx, owned.connectionId, { type: 'positions', accountId: owned.account.id });
      return { status: 200, body: paginate(rows, ctx.req.query) };
    },
  });

  return [list, get, positions];
}
