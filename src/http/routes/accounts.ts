/**
 * Accounts and positions. A user's accounts are what their connections' brokers report;
 * an account the broker stopped reporting stays listed with `active: false`.
 */
import type { AccountRecord } from '../../domain/orders.js';
import { JSON_HEADERS } from '../respond.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { accountSchema, listOf, listQuerySchema, positionSchema, type ListQuery } from '../schemas.js';
import { ACCOUNTS_START_GRACE_MS, accountsSyncing, AUTH_ERRORS, BROKER_ERRORS, callActor, errors, nowOf, ownedAccount, paginate, userAccounts, type RouteDeps } from './common.js';

/** Account and position routes. */
export function accountRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const graceUntil = nowOf(deps).getTime() + ACCOUNTS_START_GRACE_MS;
  const firstPages = new FirstPages(deps, graceUntil);
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/accounts',
    scope: 'read',
    operationId: 'listAccounts',
    summary: 'Accounts of every connection you own',
    tags: ['accounts'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Accounts', schema: listOf(accountSchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'BROKER_UNAVAILABLE')],
    // From memory: answered synchronously (no promise; the pipeline's fast path).
    handler(ctx) {
      const query = ctx.req.query;
      if (query.cursor === undefined && query.limit === undefined) return { status: 200, headers: JSON_HEADERS, body: firstPages.answer(ctx.auth.userId) };
      const syncing = accountsSyncing(deps, ctx.auth.userId, graceUntil);
      if (syncing) throw syncing;
      const accounts = userAccounts(deps, ctx.auth.userId).map((a) => a.account);
      return { status: 200, body: paginate(accounts, query, 'accounts') };
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/accounts/:id',
    scope: 'read',
    operationId: 'getAccount',
    summary: 'One account',
    tags: ['accounts'],
    responses: [{ status: 200, description: 'The account', schema: accountSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'CONNECTION_FAILED', 'BROKER_UNAVAILABLE')],
    handler(ctx) {
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
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const rows = await callActor(deps, ctx, owned.connectionId, { type: 'positions', accountId: owned.account.id });
      return { status: 200, body: paginate(rows, ctx.req.query, `positions/${owned.account.id}`) };
    },
  });

  return [list, get, positions];
}

/**
 * The answer text of each user's first page of accounts, kept while it cannot have changed: the
 * user's connection list (the store's cached list, a new array after any write) and every
 * connection's account list (the actor's last report, replaced whole on each) are the same
 * arrays it was built from. A dashboard polling its accounts costs two identity checks and no
 * serialization.
 */
class FirstPages {
  private readonly byUser = new Map<string, { connections: readonly { id: string }[]; lists: AccountRecord[][]; body: string; someEmpty: boolean }>();

  constructor(
    private readonly deps: RouteDeps,
    private readonly graceUntil: number,
  ) {}

  answer(userId: string): string {
    const connections = this.deps.store.connections.listByUser(userId);
    const kept = this.byUser.get(userId);
    if (kept && kept.connections === connections && this.unchanged(kept.lists, connections)) {
      // A connection with no accounts yet may be one still getting them (its state changes without its list).
      if (!kept.someEmpty) return kept.body;
      const syncing = accountsSyncing(this.deps, userId, this.graceUntil);
      if (syncing) throw syncing;
      return kept.body;
    }
    const lists = connections.map((c) => this.deps.gateway.accounts(c.id));
    const someEmpty = lists.some((l) => l.length === 0);
    const syncing = someEmpty ? accountsSyncing(this.deps, userId, this.graceUntil) : undefined;
    if (syncing) throw syncing;
    const body = JSON.stringify(paginate(lists.flat(), undefined, 'accounts'));
    this.byUser.set(userId, { connections, lists, body, someEmpty });
    return body;
  }

  private unchanged(lists: AccountRecord[][], connections: readonly { id: string }[]): boolean {
    for (let i = 0; i < connections.length; i++) {
      const now = this.deps.gateway.accounts(connections[i]!.id);
      // No report yet comes back as a new empty array each time.
      if (now !== lists[i] && (now.length > 0 || lists[i]!.length > 0)) return false;
    }
    return true;
  }
}
