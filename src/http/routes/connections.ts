/**
 * Broker connections: list with live status, and (with the embedded paper broker) add a
 * paper connection. Credentials never appear in a response.
 */
import { AppError } from '../../domain/problems.js';
import { connectionSpecFor } from '../../actors/connection-spec.js';
import { randomBase62 } from '../../store/crypto.js';
import type { ConnectionRecord } from '../../store/connections.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { connectionSchema, createConnectionBodySchema, listOf, listQuerySchema, type ListQuery } from '../schemas.js';
import { AUTH_ERRORS, errors, paginate, type RouteDeps } from './common.js';

/** The public view of a connection with its current status. */
export function connectionView(deps: RouteDeps, record: ConnectionRecord) {
  const status = deps.gateway.status(record.id);
  return {
    id: record.id,
    name: record.name ?? null,
    broker: record.broker,
    environment: record.environment,
    status: record.disabled ? ('DISABLED' as const) : (status?.status ?? ('CONNECTING' as const)),
    since: status ? new Date(status.ts).toISOString() : null,
    reason: record.disabled ? 'disabled' : (status?.reason ?? null),
    accountIds: deps.gateway.accounts(record.id).map((a) => a.id),
  };
}

/** Connection routes. */
export function connectionRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const list = defineRoute<undefined, ListQuery>({
    method: 'GET',
    path: '/connections',
    scope: 'read',
    operationId: 'listConnections',
    summary: 'Your broker connections with their current status and account ids',
    tags: ['connections'],
    query: listQuerySchema,
    responses: [{ status: 200, description: 'Connections', schema: listOf(connectionSchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS)],
    async handler(ctx) {
      const rows = deps.store.connections.listByUser(ctx.auth.userId).map((r) => connectionView(deps, r));
      return { status: 200, body: paginate(rows, ctx.req.query) };
    },
  });

  const add = defineRoute<{ name?: string | undefined; accounts?: { name: string }[] | undefined }>({
    method: 'POST',
    path: '/connections',
    scope: 'trade',
    operationId: 'createPaperConnection',
    summary: 'Add a paper connection on the embedded paper broker (serve --paper)',
    description: 'Opens a login with the given accounts at the embedded paper broker and starts its connection. Tradovate connections are added with `tradegate connections add`.',
    tags: ['connections'],
    body: createConnectionBodySchema,
    responses: [
      { status: 201, description: 'The new connection (CONNECTING until the broker answers)', schema: connectionSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'CONFLICT', 'BROKER_REJECTED', 'BROKER_UNAVAILABLE'),
    ],
    async handler(ctx) {
      if (!deps.paper) throw new AppError('BROKER_UNAVAILABLE', 'No embedded paper broker: start the service with --paper');
      const suffix = randomBase62(8).toLowerCase();
      // Account names are unique across the paper broker: the default one is named after the login.
      const accounts = (ctx.req.body?.accounts ?? [{ name: `PAPER-${suffix.toUpperCase()}` }]).map((a) => a.name);
      const login = { name: `paper-${suffix}`, password: randomBase62(24), accounts };
      await deps.paper.openLogin(login);
      const record = await deps.store.connections.create({
        userId: ctx.auth.userId,
        name: ctx.req.body?.name ?? 'Paper',
        broker: 'paper',
        environment: 'paper',
        restUrl: deps.paper.restUrl,
        wsUrl: deps.paper.wsUrl,
        credentials: { name: login.name, password: login.password },
      });
      await deps.gateway.addConnection(connectionSpecFor(record, { name: login.name, password: login.password }, deps.paper));
      return { status: 201, body: connectionView(deps, record) };
    },
  });

  return [list, add];
}
