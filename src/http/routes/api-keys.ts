/**
 * API key management for the web app's API Keys page: list, create (the key is returned
 * once), revoke. Session only: an API key — leaked or not — can never mint or revoke keys.
 * Revocation is effective on the key's next request (the key store is read per request) and
 * ends the key's open health streams at once.
 */
import { z } from 'zod';
import { AppError } from '../../domain/problems.js';
import type { ApiKeyView } from '../../store/index.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { listOf, listQuerySchema, trimmedLabel, type ListQuery } from '../schemas.js';
import { errors, paginateByCreation, quotas, type RouteDeps } from './common.js';
import { guardNarrowingSchema } from '../guard-schemas.js';

/** What a session-only route may answer besides its own outcomes. */
export const SESSION_ERRORS = ['UNAUTHENTICATED', 'SESSION_REQUIRED', 'RATE_LIMITED'] as const;

const scopeSchema = z.enum(['read', 'trade']);

const createApiKeyBodySchema = z.strictObject({
  name: trimmedLabel(100),
  scopes: z.array(scopeSchema).min(1).max(2).describe('read: every GET; trade: every write'),
});

/** A key as listed: never the key itself. */
export const apiKeySchema = z.object({
  id: z.string(),
  name: z.string(),
  scopes: z.array(scopeSchema),
  prefix: z.string().describe('tgk_<id>: the start of the key, to recognise it'),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable().describe('Recorded at most once a minute'),
  revokedAt: z.string().nullable(),
  guards: guardNarrowingSchema.nullable().describe('The key’s narrowing of the account risk guards (PUT /api-keys/{id}/guards)'),
});

const createdApiKeySchema = apiKeySchema.extend({ key: z.string().describe('The key; shown only in this response') });

function keyView(k: ApiKeyView) {
  return { id: k.id, name: k.name, scopes: k.scopes, prefix: k.prefix, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, revokedAt: k.revokedAt, guards: k.guards ?? null };
}

/** API key routes (session scope). */
export function apiKeyRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/api-keys',
    scope: 'session',
    operationId: 'listApiKeys',
    summary: 'Your API keys, revoked ones included (never the key values)',
    tags: ['api-keys'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Keys, newest first', schema: listOf(apiKeySchema) }, ...errors('VALIDATION_FAILED', ...SESSION_ERRORS)],
    async handler(ctx) {
      const rows = deps.store.apiKeys.listByUser(ctx.auth.userId).reverse().map(keyView);
      return { status: 200, body: paginateByCreation(rows, ctx.req.query, 'api-keys', true) };
    },
  });

  const create = defineRoute<z.output<typeof createApiKeyBodySchema>>({
    method: 'POST',
    path: '/api-keys',
    scope: 'session',
    operationId: 'createApiKey',
    refusesIdempotencyKey: true,
    summary: 'Create an API key; the key is in this response only',
    tags: ['api-keys'],
    body: createApiKeyBodySchema,
    responses: [
      { status: 201, description: 'Created', schema: createdApiKeySchema },
      ...errors('VALIDATION_FAILED', ...SESSION_ERRORS, 'CSRF_REJECTED', 'QUOTA_EXCEEDED'),
    ],
    async handler(ctx) {
      const { name, scopes } = ctx.req.body;
      // Live keys per user: QUOTA_API_KEYS, the same quota `tradegate keys create` checks.
      const { record, key } = await quotas(deps).create(ctx.auth.userId, 'apiKeys', () => deps.store.apiKeys.create({ userId: ctx.auth.userId, name, scopes }));
      deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'api-key-create', request: { name, scopes, via: ctx.auth.kind, requestId: ctx.requestId }, outcome: { keyId: record.id } });
      return { status: 201, headers: { 'Cache-Control': 'no-store' }, body: { ...keyView(record), key } };
    },
  });

  const revoke = defineRoute({
    method: 'DELETE',
    path: '/api-keys/:id',
    scope: 'session',
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key: its next request gets 401',
    description: 'Revoking a key that is already revoked changes nothing and answers 204 again.',
    tags: ['api-keys'],
    responses: [{ status: 204, description: 'Revoked' }, ...errors(...SESSION_ERRORS, 'CSRF_REJECTED', 'NOT_FOUND')],
    async handler(ctx) {
      const id = ctx.req.params.id!;
      const key = deps.store.apiKeys.getForUser(ctx.auth.userId, id);
      if (!key) throw new AppError('NOT_FOUND', 'Not found');
      if (!key.revokedAt && (await deps.store.apiKeys.revoke(ctx.auth.userId, id))) {
        // Its open health streams end now, with a last message saying why.
        deps.streams?.closeStreams({ principalId: id }, 'key-revoked');
        deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'api-key-revoke', request: { keyId: id, via: ctx.auth.kind, requestId: ctx.requestId }, outcome: { revoked: true } });
      }
      return { status: 204 };
    },
  });

  return [list, create, revoke];
}
