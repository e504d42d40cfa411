/**
 * GET /me: who the credential belongs to, which key this is, and the rate limit in force.
 */
import { AppError } from '../../domain/problems.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { meResponseSchema } from '../schemas.js';
import { AUTH_ERRORS, errors, type RouteDeps } from './common.js';

/** The user-info route. */
export function meRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/me',
      scope: 'read',
      operationId: 'getMe',
      summary: 'User info: the user, this API key and the rate limit',
      tags: ['user'],
      responses: [{ status: 200, description: 'User info', schema: meResponseSchema }, ...errors(...AUTH_ERRORS)],
      async handler(ctx) {
        const user = deps.store.users.byId(ctx.auth.userId);
        if (!user) throw new AppError('NOT_FOUND', 'Not found');
        const key = ctx.auth.kind === 'api-key' ? deps.store.apiKeys.getForUser(user.id, ctx.auth.principalId) : undefined;
        return {
          status: 200,
          body: {
            user: { id: user.id, name: user.name },
            key: key
              ? { id: key.id, name: key.name, scopes: key.scopes, prefix: key.prefix }
              : { id: ctx.auth.principalId, name: null, scopes: [...ctx.auth.scopes], prefix: ctx.auth.kind },
            rateLimit: { limit: deps.config.rateLimitPerMin, windowSeconds: 60 },
          },
        };
      },
    }),
  ];
}
