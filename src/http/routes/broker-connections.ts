/**
 * Adding a Tradovate connection (demo or live) and removing any connection, for the
 * Connections page. Credentials are sealed in the store (AES-256-GCM, bound to the
 * connection id) before the actor starts, and never appear in a response or a log line.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { connectionSpecFor } from '../../actors/connection-spec.js';
import { TRADOVATE_APP_DEFAULTS, TRADOVATE_URLS, type BrokerCredentials } from '../../domain/connections.js';
import { AppError } from '../../domain/problems.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { connectionSchema } from '../schemas.js';
import { AUTH_ERRORS, errors, type RouteDeps } from './common.js';
import { connectionView } from './connections.js';

const createTradovateBodySchema = z
  .strictObject({
    name: z.string().trim().min(1).max(100).optional(),
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
    summary: 'Add a Tradovate connection (demo or live); its status follows on the health stream',
    description: 'The password (and API secret) are stored sealed and used only by the connection actor. The answer is CONNECTING: watch the health stream for CONNECTED, AUTH_EXPIRED or FAILED.',
    tags: ['connections'],
    body: createTradovateBodySchema,
    responses: [{ status: 201, description: 'The new connection', schema: connectionSchema }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS)],
    async handler(ctx) {
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
      const record = await deps.store.connections.create({
        userId: ctx.auth.userId,
        name: b.name ?? `Tradovate ${b.environment} (${b.username})`,
        broker: 'tradovate',
        environment: b.environment,
        ...TRADOVATE_URLS[b.environment],
        credentials,
      });
      // A Tradovate connection never follows the paper broker's address.
      await deps.gateway.addConnection(connectionSpecFor(record, credentials));
      deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'connection-add', request: { broker: 'tradovate', environment: b.environment, via: ctx.auth.kind, requestId: ctx.requestId }, outcome: { connectionId: record.id } });
      return { status: 201, body: connectionView(deps, record) };
    },
  });

  const remove = defineRoute({
    method: 'DELETE',
    path: '/connections/:id',
    scope: 'trade',
    operationId: 'deleteConnection',
    summary: 'Stop and delete a connection; its accounts disappear and tokens bound to them report Account is inactive',
    description: 'Resting orders at the broker are not touched: flatten the accounts first if that is what you want.',
    tags: ['connections'],
    responses: [{ status: 204, description: 'Deleted' }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const id = ctx.req.params.id!;
      if (!deps.store.connections.getForUser(ctx.auth.userId, id)) throw new AppError('NOT_FOUND', 'Not found');
      await deps.gateway.removeConnection(id);
      if (!(await deps.store.connections.remove(ctx.auth.userId, id))) throw new AppError('NOT_FOUND', 'Not found');
      deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'connection-remove', request: { connectionId: id, via: ctx.auth.kind, requestId: ctx.requestId }, outcome: { removed: true } });
      return { status: 204 };
    },
  });

  return [addTradovate, remove];
}
