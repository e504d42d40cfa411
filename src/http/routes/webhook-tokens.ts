/**
 * Webhook tokens: one URL per account for charting-platform alerts. Create returns the URL
 * (with the secret token); the owner can read it again (GET one). PATCH may rebind the
 * token to another of the user's accounts — the way out of `Account is inactive`.
 */
import { AppError } from '../../domain/problems.js';
import type { WebhookTokenPatch, WebhookTokenRecord } from '../../store/webhook-tokens.js';
import type { GuardNarrowing } from '../../domain/guards.js';
import { defineRoute, type RouteDef } from '../route-types.js';
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
import { AUTH_ERRORS, baseUrl, errors, paginate, quotas, userAccounts, type RouteDeps } from './common.js';

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
    accountActive: !t.inactiveReason && (bound?.account.active ?? false),
    guards: t.guards ?? null,
    inactiveReason: t.inactiveReason ?? null,
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
  if (!found) throw badReference('accountId', 'not one of your accounts');
  if (!found.account.active) throw new AppError('ACCOUNT_INACTIVE', 'Account is inactive', { accountId });
}

function checkStrategy(deps: RouteDeps, userId: string, strategyId: string | null | undefined): void {
  if (strategyId === null || strategyId === undefined) return;
  if (!deps.store.strategies.getForUser(userId, strategyId)) throw badReference('strategyId', 'not one of your strategies');
}

const notFound = () => new AppError('NOT_FOUND', 'Not found');

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
      return { status: 200, body: paginate(rows, ctx.req.query) };
    },
  });

  const create = defineRoute<CreateBody>({
    method: 'POST',
    path: '/webhook-tokens',
    scope: 'trade',
    operationId: 'createWebhookToken',
    summary: 'Create a webhook token for one account; returns the URL to paste into an alert',
    tags: ['webhooks'],
    body: createWebhookTokenBodySchema,
    responses: [
      { status: 201, description: 'Created; `url` contains the secret token', schema: createdWebhookTokenSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'QUOTA_EXCEEDED'),
    ],
    async handler(ctx) {
      const { accountId, name, strategyId, guards } = ctx.req.body;
      checkAccount(deps, ctx.auth.userId, accountId);
      checkStrategy(deps, ctx.auth.userId, strategyId);
      const { record, token } = await quotas(deps).create(ctx.auth.userId, 'webhookTokens', () =>
        deps.store.webhookTokens.create({ userId: ctx.auth.userId, name, accountId, strategyId: strategyId ?? null, guards: guards ?? null }),
      );
      return { status: 201, body: { ...tokenView(deps, record), url: webhookUrl(deps, token), token, alertMessage: TRADINGVIEW_TEMPLATE } };
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/webhook-tokens/:id',
    scope: 'read',
    operationId: 'getWebhookToken',
    summary: 'One webhook token, with its URL (owner only)',
    tags: ['webhooks'],
    responses: [{ status: 200, description: 'The token', schema: webhookTokenSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const t = deps.store.webhookTokens.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!t) throw notFound();
      const token = deps.store.webhookTokens.reveal(ctx.auth.userId, t.id);
      return { status: 200, body: { ...tokenView(deps, t), ...(token ? { url: webhookUrl(deps, token) } : {}), alertMessage: TRADINGVIEW_TEMPLATE } };
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
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND'),
    ],
    async handler(ctx) {
      const b = ctx.req.body;
      if (!deps.store.webhookTokens.getForUser(ctx.auth.userId, ctx.req.params.id!)) throw notFound();
      if (b.accountId !== undefined) checkAccount(deps, ctx.auth.userId, b.accountId);
      checkStrategy(deps, ctx.auth.userId, b.strategyId);
      const patch: WebhookTokenPatch = {};
      if (b.name !== undefined) patch.name = b.name;
      if (b.accountId !== undefined) patch.accountId = b.accountId;
      if (b.strategyId !== undefined) patch.strategyId = b.strategyId;
      if (b.guards !== undefined) patch.guards = b.guards;
      const t = await deps.store.webhookTokens.update(ctx.auth.userId, ctx.req.params.id!, patch);
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
