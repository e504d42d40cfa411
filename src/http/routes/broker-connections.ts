/**
 * Adding a Tradovate connection (demo or live) for the Connections page (under the same quota
 * and actor ceiling as paper connections; removal is DELETE /connections/{id} in connections.ts). Credentials are sealed in the store (AES-256-GCM, bound to the
 * connection id) before the actor starts, and never appear in a response or a log line.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { TRADOVATE_APP_DEFAULTS, TRADOVATE_URLS, type BrokerCredentials } from '../../domain/connections.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { connectionSchema, trimmedLabel } from '../schemas.js';
import { AUTH_ERRORS, errors, refuseNarrowedKey, type RouteDeps } from './common.js';
import { connectionView, startConnection } from './connections.js';

const createTradovateBodySchema = z
  .strictObject({
    name: trimmedLabel(100).optional(),
    environment: z.enum(['demo', 'live']),
    username: z.string().min(1).max(128).describe('Your Tradovate user name'),
    password: z.string().min(1).max(1024).describe('Stored sealed; never returned'),
    appId: z.string().min(1).max(100).optional(),
    appVersion: z.string().min(1).max(50).optional(),
    cid: z.union([z.string().regex(/^\d{1,12}$/), z.number().int().positive()]).optional().describe('API client id (with sec)'),
    sec: z.string().min(1).max(256).optional().describe('API secret (with cid); stored sealed'),
    deviceId: z.string().min(1).max(100).optional(),
  })
  .refine((b) => (b.cid === undefined) === (b.sec === undefined), { message: 'cid and sec go together', path: ['sec'] });

/** Tradovate connection routes and connection removal. */
export function brokerConnectionRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const addTradovate = defineRoute<z.output<typeof createTradovateBodySchema>>({
    method: 'POST',
    path: '/connections/tradovate',
    scope: 'trade',
    operationId: 'createTradovateConnection',
    refusesIdempotencyKey: true,
    summary: 'Add a Tradovate connection (demo or live); its status follows on the health stream',
    description:
      'The password (and API secret) are stored sealed and used only by the connection actor. The answer is CONNECTING: watch the health stream for CONNECTED, AUTH_EXPIRED or FAILED. ' +
      'One connection per broker login: a username (any case) that another of your connections already logs in as, in the same environment, is 409 CONFLICT naming it (`connectionId`). ' +
      'Each add is a broker login: a login added, changed (PATCH) or reconnected by hand less than RECONNECT_MIN_INTERVAL_S ago, however its connections were removed and added, ' +
      'and more than 10 adds by one user in 10 minutes, are 429 RATE_LIMITED with Retry-After (brokers lock a login out after repeated failures).',
    tags: ['connections'],
    body: createTradovateBodySchema,
    responses: [{ status: 201, description: 'The new connection', schema: connectionSchema }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'CONFLICT', 'QUOTA_EXCEEDED', 'ACTOR_LIMIT_REACHED', 'RATE_LIMITED')],
    async handler(ctx) {
      refuseNarrowedKey(ctx.auth, 'add connections');
      const b = ctx.req.body;
      const credentials: BrokerCredentials = {
        name: b.username,
        password: b.password,
        appId: b.appId ?? TRADOVATE_APP_DEFAULTS.appId,
        appVersion: b.appVersion ?? TRADOVATE_APP_DEFAULTS.appVersion,
        deviceId: b.deviceId ?? randomUUID(),
      };
      if (b.cid !== undefined && b.sec !== undefined) {
        credentials.cid = b.cid;
        credentials.sec = b.sec;
      }
      // A Tradovate connection never follows the paper broker's address (connectionSpecFor).
      const record = await startConnection(deps, ctx.auth.userId, {
        name: b.name ?? `Tradovate ${b.environment} (${b.username})`,
        broker: 'tradovate',
        environment: b.environment,
        ...TRADOVATE_URLS[b.environment],
        credentials,
      });
      deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'connection-add', request: { broker: 'tradovate', environment: b.environment, via: ctx.auth.kind, requestId: ctx.requestId }, outcome: { connectionId: record.id } });
      return { status: 201, body: connectionView(deps, record) };
    },
  });

  return [addTradovate];
}
