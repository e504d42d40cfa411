/**
 * Webhook tokens: one URL per account for charting-platform alerts. Create returns the URL
 * (with the secret token); the owner can read it again (GET one) with a credential that could
 * have created it. PATCH may rebind the token to another of the user's accounts — the way out of
 * `Account is inactive`.
 *
 * A webhook URL trades on its own, with the token's narrowing of the guards only. So the URL is
 * shown only to a caller that could trade without it: a web session, or an API key with the trade
 * scope that narrows nothing. A read-only key gets the token without its URL; a key that narrows
 * the guards can list, read (without URL) and delete tokens, but not create, change or rotate them,
 * since a URL it obtained would trade past its own narrowing.
 */
import { AppError } from '../../domain/problems.js';
import type { WebhookTokenPatch, WebhookTokenRecord } from '../../store/webhook-tokens.js';
import type { GuardNarrowing } from '../../domain/guards.js';
import { defineRoute, type AuthContext, type RouteDef } from '../route-types.js';
import { TRADINGVIEW_TEMPLATE } from '../webhook-payload.js';
import {
  createdWebhookTokenSchema,
  createWebhookTokenBodySchema,
  listOf,
  listQuerySchema,
  updateWebhookTokenBodySchema,
  webhookTokenSchema,
  type ListQuery,
} from '../schemas.js';
import { AUTH_ERRORS, baseUrl, errors, mayBeAccountId, oneAtATime, paginateByCreation, quotas, refuseNarrowedKey, unsyncedAccountsError, userAccounts, type RouteDeps } from './common.js';

/** The receiving URL of a token. */
export function webhookUrl(deps: RouteDeps, token: string): string {
  return `${baseUrl(deps.config, deps.listenUrl?.())}/api/v1/webhooks/${token}`;
}

/** The public view of a token (no secret). */
export function tokenView(deps: RouteDeps, t: WebhookTokenRecord) {
  const bound = userAccounts(deps, t.userId).find((a) => a.account.id === t.accountId);
  return {
    id: t.id,
    name: t.name,
    accountId: t.accountId,
    strategyId: t.strategyId,
    // Unknown (null) while its connection has not reported its accounts since the start: not inactive (clients probe).
    accountActive: t.inactiveReason ? false : bound ? bound.account.active : unsyncedAccountsError(deps, t.userId) ? null : false,
    guards: t.guards ?? null,
    inactiveReason: t.inactiveReason ?? null,
    rotatedAt: t.rotatedAt ?? null,
    createdAt: t.createdAt ?? null,
    lastUsedAt: t.lastUsedAt ?? null,
  };
}

function badReference(path: string, message: string): AppError {
  return new AppError('VALIDATION_FAILED', `${path}: ${message}`, { errors: [{ path, message }] });
}

/** A body's accountId must name a live account of the caller (same answer for foreign and unknown ids). */
function checkAccount(deps: RouteDeps, userId: string, accountId: string): void {
  const found = userAccounts(deps, userId).find((a) => a.account.id === accountId);
  // Not known yet because a connection of the user has not reported its accounts: 503 (retry) or 409, not a final 400 (clients probe).
  if (!found) throw (mayBeAccountId(accountId) && unsyncedAccountsError(deps, userId, accountId)) || badReference('accountId', 'not one of your accounts');
  if (!found.account.active) throw new AppError('ACCOUNT_INACTIVE', 'Account is inactive', { accountId });
}

/** The key under which a user's strategy deletes and token bindings run one at a time. */
export const strategyBindings = (userId: string): string => `strategy-bindings:${userId}`;

function checkStrategy(deps: RouteDeps, userId: string, strategyId: string | null | undefined): void {
  if (strategyId === null || strategyId === undefined) return;
  if (!deps.store.strategies.getForUser(userId, strategyId)) throw badReference('strategyId', 'not one of your strategies');
}

const notFound = () => new AppError('NOT_FOUND', 'Not found');

/** Whether the caller may see a webhook URL: it could trade as freely without one. */
export function mayHoldWebhookUrl(auth: AuthContext): boolean {
  if (auth.kind === 'session') return true;
  return auth.kind === 'api-key' && auth.scopes.includes('trade') && auth.narrowing === undefined;
}

/** What a strategy may set that the ready alert message then leaves out (qty stays: Pine's contracts size exits too). */
const STRATEGY_SET = ['symbol', 'orderType', 'takeProfit', 'stopLoss'] as const;

/**
 * The ready alert message for a token: TRADINGVIEW_TEMPLATE, less the fields its bound strategy
 * sets. An alert's own fields win over the strategy's, so the template's example legs (40/20
 * ticks) would otherwise silently replace the strategy's take-profit and stop-loss.
 */
export function alertMessageFor(deps: RouteDeps, t: WebhookTokenRecord): string {
  const strategy = t.strategyId ? deps.store.strategies.getForUser(t.userId, t.strategyId) : undefined;
  if (!strategy || STRATEGY_SET.every((f) => strategy[f] == null)) return TRADINGVIEW_TEMPLATE;
  const message = JSON.parse(TRADINGVIEW_TEMPLATE) as Record<string, unknown>;
  for (const field of STRATEGY_SET) if (strategy[field] != null) delete message[field];
  return JSON.stringify(message, null, 2);
}

/** Sent with every answer that holds a webhook URL: the URL is a credential. */
const NO_STORE = { 'Cache-Control': 'no-store' };

type CreateBody = { accountId: string; name: string; strategyId?: string | null | undefined; guards?: GuardNarrowing | null | undefined };
type UpdateBody = {
  accountId?: string | undefined;
  name?: string | undefined;
  strategyId?: string | null | undefined;
  guards?: GuardNarrowing | null | undefined;
};

/** Webhook token CRUD routes. */
export function webhookTokenRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/webhook-tokens',
    scope: 'read',
    operationId: 'listWebhookTokens',
    summary: 'Your webhook tokens (without their secret URLs)',
    tags: ['webhooks'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Tokens', schema: listOf(webhookTokenSchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS)],
    async handler(ctx) {
      const rows = deps.store.webhookTokens.listByUser(ctx.auth.userId).map((t) => tokenView(deps, t));
      return { status: 200, body: paginateByCreation(rows, ctx.req.query, 'webhook-tokens') };
    },
  });

  const create = defineRoute<CreateBody>({
    method: 'POST',
    path: '/webhook-tokens',
    scope: 'trade',
    operationId: 'createWebhookToken',
    refusesIdempotencyKey: true,
    summary: 'Create a webhook token for one account; returns the URL to paste into an alert',
    tags: ['webhooks'],
    body: createWebhookTokenBodySchema,
    responses: [
      { status: 201, description: 'Created; `url` contains the secret token', schema: createdWebhookTokenSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'QUOTA_EXCEEDED', 'CONNECTION_FAILED', 'BROKER_UNAVAILABLE'),
    ],
    async handler(ctx) {
      refuseNarrowedKey(ctx.auth, 'create webhook tokens');
      const { accountId, name, strategyId, guards } = ctx.req.body;
      checkAccount(deps, ctx.auth.userId, accountId);
      // The strategy checked and the token bound to it with no strategy delete between (strategies.ts).
      const { record, token } = await oneAtATime(deps, strategyBindings(ctx.auth.userId), () => {
        checkStrategy(deps, ctx.auth.userId, strategyId);
        return quotas(deps).create(ctx.auth.userId, 'webhookTokens', () =>
          deps.store.webhookTokens.create({ userId: ctx.auth.userId, name, accountId, strategyId: strategyId ?? null, guards: guards ?? null }),
        );
      });
      return { status: 201, headers: NO_STORE, body: { ...tokenView(deps, record), url: webhookUrl(deps, token), token, alertMessage: alertMessageFor(deps, record) } };
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/webhook-tokens/:id',
    scope: 'read',
    operationId: 'getWebhookToken',
    summary: 'One webhook token, with its URL for a caller that could have created it',
    description:
      'The URL trades on its own, so it is included only for a web session or an API key with the trade scope that narrows nothing; ' +
      'a read-only key, or a key that narrows the guards, gets the token without `url`.',
    tags: ['webhooks'],
    responses: [{ status: 200, description: 'The token', schema: webhookTokenSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const t = deps.store.webhookTokens.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!t) throw notFound();
      const token = mayHoldWebhookUrl(ctx.auth) ? deps.store.webhookTokens.reveal(ctx.auth.userId, t.id) : undefined;
      const body = { ...tokenView(deps, t), ...(token ? { url: webhookUrl(deps, token) } : {}), alertMessage: alertMessageFor(deps, t) };
      return token ? { status: 200, headers: NO_STORE, body } : { status: 200, body };
    },
  });

  const update = defineRoute<UpdateBody>({
    method: 'PATCH',
    path: '/webhook-tokens/:id',
    scope: 'trade',
    operationId: 'updateWebhookToken',
    summary: 'Rename, rebind to another of your accounts, change the strategy or the token’s narrowing of the risk guards',
    description:
      'Rebinding a token whose account became inactive to a live account makes the next alert go through; the URL does not change. ' +
      '`guards` narrows the account’s risk guards for this token’s alerts (the stricter value of each field wins; it never widens them).',
    tags: ['webhooks'],
    body: updateWebhookTokenBodySchema,
    responses: [
      { status: 200, description: 'Updated', schema: webhookTokenSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'CONNECTION_FAILED', 'BROKER_UNAVAILABLE'),
    ],
    async handler(ctx) {
      const b = ctx.req.body;
      if (!deps.store.webhookTokens.getForUser(ctx.auth.userId, ctx.req.params.id!)) throw notFound();
      refuseNarrowedKey(ctx.auth, 'change webhook tokens');
      if (b.accountId !== undefined) checkAccount(deps, ctx.auth.userId, b.accountId);
      const patch: WebhookTokenPatch = {};
      if (b.name !== undefined) patch.name = b.name;
      if (b.accountId !== undefined) patch.accountId = b.accountId;
      if (b.strategyId !== undefined) patch.strategyId = b.strategyId;
      if (b.guards !== undefined) patch.guards = b.guards;
      const t = await oneAtATime(deps, strategyBindings(ctx.auth.userId), () => {
        checkStrategy(deps, ctx.auth.userId, b.strategyId);
        return deps.store.webhookTokens.update(ctx.auth.userId, ctx.req.params.id!, patch);
      });
      if (!t) throw notFound();
      return { status: 200, body: tokenView(deps, t) };
    },
  });

  const remove = defineRoute({
    method: 'DELETE',
    path: '/webhook-tokens/:id',
    scope: 'trade',
    operationId: 'deleteWebhookToken',
    summary: 'Delete a webhook token; its URL stops working at once',
    tags: ['webhooks'],
    responses: [{ status: 204, description: 'Deleted' }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      if (!(await deps.store.webhookTokens.remove(ctx.auth.userId, ctx.req.params.id!))) throw notFound();
      return { status: 204 };
    },
  });

  return [list, create, get, update, remove];
}
