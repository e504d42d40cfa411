/**
 * Broker connections: list with live status, add a paper connection (with the embedded paper
 * broker; per-user quota and the service's actor ceiling), rename or give new credentials,
 * reconnect a FAILED one (or start one without an actor; at most once per RECONNECT_MIN_INTERVAL_S),
 * delete one (with its paper login). Credentials never appear in a response.
 */
import { AppError } from '../../domain/problems.js';
import { connectionSpecFor } from '../../actors/connection-spec.js';
import { ReconnectThrottle } from '../reconnect-throttle.js';
import { randomBase62 } from '../../store/crypto.js';
import { accountsLeaving, brokerLoginKey, connectionWithLogin, loginTaken, type ConnectionRecord, type NewConnection } from '../../store/connections.js';
import { defineRoute, type RouteContext, type RouteDef } from '../route-types.js';
import type { BrokerCredentials } from '../../domain/connections.js';
import {
  connectionSchema,
  createConnectionBodySchema,
  listOf,
  listQuerySchema,
  updateConnectionBodySchema,
  type ListQuery,
  type UpdateConnectionBody,
} from '../schemas.js';
import { AUTH_ERRORS, errors, paginateByCreation, quotas, refuseNarrowedKey, type RouteDeps } from './common.js';

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
    detail: record.disabled ? null : (status?.detail ?? null),
    retryAt: !record.disabled && status?.retryAt !== undefined ? new Date(status.retryAt).toISOString() : null,
    accountIds: deps.gateway.accounts(record.id).map((a) => a.id),
  };
}

/** Connection routes. */
export function connectionRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const throttle = (): ReconnectThrottle => manualLogins(deps);
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
      const page = paginateByCreation(deps.store.connections.listByUser(ctx.auth.userId), ctx.req.query, 'connections');
      return { status: 200, body: { data: page.data.map((r) => connectionView(deps, r)), nextCursor: page.nextCursor } };
    },
  });

  const add = defineRoute<{ name?: string | undefined; accounts?: { name: string }[] | undefined }>({
    method: 'POST',
    path: '/connections',
    scope: 'trade',
    operationId: 'createPaperConnection',
    refusesIdempotencyKey: true,
    summary: 'Add a paper connection on the embedded paper broker (serve --paper)',
    description: 'Opens a login with the given accounts at the embedded paper broker and starts its connection. Tradovate connections: POST /connections/tradovate, or `tradegate connections add`. Both count against QUOTA_CONNECTIONS.',
    tags: ['connections'],
    body: createConnectionBodySchema,
    responses: [
      { status: 201, description: 'The new connection (CONNECTING until the broker answers)', schema: connectionSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'CONFLICT', 'QUOTA_EXCEEDED', 'BROKER_REJECTED', 'BROKER_UNAVAILABLE', 'ACTOR_LIMIT_REACHED'),
    ],
    async handler(ctx) {
      refuseNarrowedKey(ctx.auth, 'add connections');
      const paper = deps.paper;
      // A standing state of this service, not a moment: 409 with no Retry-After (a 503 with
      // Retry-After: 1 had clients retrying it every second for good: client probe).
      if (!paper) throw new AppError('CONFLICT', 'No embedded paper broker: this service runs without --paper (a cluster node never has one); add Tradovate connections with POST /connections/tradovate or `tradegate connections add`');
      const suffix = randomBase62(8).toLowerCase();
      // Account names are unique across the paper broker: the default one is named after the login.
      const accounts = (ctx.req.body?.accounts ?? [{ name: `PAPER-${suffix.toUpperCase()}` }]).map((a) => a.name);
      const login = { name: `paper-${suffix}`, password: randomBase62(24), accounts };
      const record = await startConnection(
        deps,
        ctx.auth.userId,
        { name: ctx.req.body?.name ?? 'Paper', broker: 'paper', environment: 'paper', restUrl: paper.restUrl, wsUrl: paper.wsUrl, credentials: { name: login.name, password: login.password } },
        { open: () => paper.openLogin(login), close: () => paper.closeLogin(login.name) },
      );
      return { status: 201, body: connectionView(deps, record) };
    },
  });

  const remove = defineRoute({
    method: 'DELETE',
    path: '/connections/:id',
    scope: 'trade',
    operationId: 'deleteConnection',
    summary: 'Stop and delete a connection; tokens bound to its accounts become inactive with the reason',
    description:
      'Stops the connection’s actor (the health stream reports DISABLED), deletes the connection and frees its quota slot; ' +
      'a paper connection’s login at the embedded paper broker is removed with it. ' +
      'Webhook tokens bound to its accounts become inactive: their record carries `inactiveReason` and their alerts answer ' +
      '403 ACCOUNT_INACTIVE with that reason, until rebound (PATCH /webhook-tokens/{id} {accountId}). Resting orders at the ' +
      'broker are not touched: flatten the accounts first if that is what you want.',
    tags: ['connections'],
    responses: [{ status: 204, description: 'Deleted' }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const { userId } = ctx.auth;
      const id = ctx.req.params.id!;
      const record = deps.store.connections.getForUser(userId, id);
      if (!record) throw new AppError('NOT_FOUND', 'Not found');
      refuseNarrowedKey(ctx.auth, 'delete connections');
      const accountIds = accountsLeaving(record, deps.store.connections.listByUser(userId), (c) => deps.gateway.accounts(c).map((a) => a.id));
      const login = record.broker === 'paper' && deps.paper ? deps.store.connections.credentials(id).name : undefined;
      // The record goes first: the sync of other processes' changes (connection-sync.ts) starts
      // any stored connection without an actor, so it must not see this one stopped but stored.
      if (!(await deps.store.connections.remove(userId, id))) throw new AppError('NOT_FOUND', 'Not found');
      await deps.gateway.removeConnection(id);
      if (login) {
        await deps.paper!.closeLogin(login).catch((err: unknown) => ctx.log.warn({ err, connectionId: id }, 'paper login not removed'));
      }
      const tokens = await deps.store.webhookTokens.deactivateForAccounts(userId, accountIds, `its connection ${id} was deleted`);
      journal(ctx, 'connection-remove', { connectionId: id }, { removed: true, accountIds, inactiveTokenIds: tokens });
      return { status: 204 };
    },
  });

  const update = defineRoute<UpdateConnectionBody>({
    method: 'PATCH',
    path: '/connections/:id',
    scope: 'trade',
    operationId: 'updateConnection',
    summary: 'Rename a connection or give it new broker credentials (restarts it with them)',
    description:
      'New credentials are merged into the stored ones (sealed, never returned) and the connection restarts with them at once, ' +
      'whatever its status: the way out of FAILED after a password change. Watch the health stream for CONNECTED or FAILED. ' +
      'A username another of your connections already logs in as (same broker and environment) is 409 CONFLICT naming it: one connection per broker login. ' +
      'Each restart with credentials is a broker login: at most one per RECONNECT_MIN_INTERVAL_S with POST …/reconnect, and one per that interval as its username whichever connection of the user logs in as it (429 RATE_LIMITED with Retry-After within it; `limit` broker-login). ' +
      'A paper login another connection logs in as on the embedded paper broker is refused (400).',
    tags: ['connections'],
    body: updateConnectionBodySchema,
    responses: [{ status: 200, description: 'The connection', schema: connectionSchema }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND', 'CONFLICT', 'RATE_LIMITED')],
    async handler(ctx) {
      const { userId } = ctx.auth;
      const id = ctx.req.params.id!;
      const current = deps.store.connections.getForUser(userId, id);
      if (!current) throw new AppError('NOT_FOUND', 'Not found');
      refuseNarrowedKey(ctx.auth, 'change connections');
      const given = ctx.req.body.credentials;
      const stored = given ? deps.store.connections.credentials(id) : undefined;
      const credentials = given ? mergedCredentials(stored!, given) : undefined;
      // A paper login another connection (anyone's) logs in as on the embedded paper broker is not
      // this one's to take (attack probe: renamed to another user's paper login, it took that login
      // and its account over at the next restart).
      if (credentials && credentials.name !== stored!.name && embeddedPaper(current) && loggedInByAnother(id, credentials.name)) {
        const message = 'this paper login is not available: another connection logs in as it';
        throw new AppError('VALIDATION_FAILED', `credentials.username: ${message}`, { errors: [{ path: 'credentials.username', message }] });
      }
      const taken = credentials && connectionWithLogin(deps.store.connections, userId, { ...current, name: credentials.name }, id);
      if (taken) throw loginTaken(taken);
      // Every restart with credentials is a broker login: one per interval, like POST …/reconnect
      // (security probes: each PATCH was a login, for any username: ten in 3 s, and Tradovate locks
      // a login out for an hour on too many; someone else's username could be locked out that way).
      const unchanged = credentials !== undefined && sameCredentials(stored!, credentials);
      if (credentials && !current.disabled) throttle().takeRestart(id, userId, brokerLoginKey({ ...current, name: credentials.name }));
      const record = await deps.store.connections.update(userId, id, { ...(ctx.req.body.name !== undefined && { name: ctx.req.body.name }), ...(credentials && !unchanged && { credentials }) });
      if (!record) throw new AppError('NOT_FOUND', 'Not found');
      // A login by hand: in a cluster the owner throttles it too, so two nodes asked at once log in once.
      if (credentials && !record.disabled) await restart(record, credentials, true);
      journal(ctx, 'connection-update', { connectionId: id, fields: Object.keys(ctx.req.body) }, { restarted: !!credentials });
      return { status: 200, body: connectionView(deps, record) };
    },
  });

  const reconnect = defineRoute({
    method: 'POST',
    path: '/connections/:id/reconnect',
    scope: 'trade',
    operationId: 'reconnectConnection',
    summary: 'Restart a FAILED connection (or start one that has no actor) with its stored credentials',
    description:
      'A connection goes FAILED when the broker refuses its credentials or asks for a captcha, and then stops trying (retrying ' +
      'only extends a broker lockout); its requests answer 409 CONNECTION_FAILED. Once the cause is fixed at the broker, this ' +
      'starts it afresh: 202 with status CONNECTING, then CONNECTED (or FAILED again) on the health stream. It also starts a ' +
      'stored connection that runs no actor (one whose start failed, e.g. at the actor ceiling). Any other status is 409 ' +
      'CONFLICT: those reconnect by themselves, and one login is in flight at a time. Each reconnect is a broker login, so a ' +
      'connection is reconnected by hand at most once per RECONNECT_MIN_INTERVAL_S (default 30 s; a PATCH with new ' +
      'credentials starts the interval too), and its broker login once per that interval whichever connection of the user ' +
      'logs in as it (an add, PATCH or reconnect): 429 RATE_LIMITED with Retry-After within it.',
    tags: ['connections'],
    responses: [{ status: 202, description: 'Restarting', schema: connectionSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'CONFLICT', 'ACTOR_LIMIT_REACHED')],
    async handler(ctx) {
      const record = deps.store.connections.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!record) throw new AppError('NOT_FOUND', 'Not found');
      const live = deps.gateway.status(record.id);
      // No status: the connection runs no actor (the supervisor knows every one it started).
      if (record.disabled || (live && live.status !== 'FAILED')) {
        const status = connectionView(deps, record).status;
        throw new AppError('CONFLICT', `Connection is ${status}; only a FAILED connection (or one not running) is reconnected by hand`, { connectionStatus: status });
      }
      // Taken before the first await: concurrent reconnects cannot both pass.
      const credentials = deps.store.connections.credentials(record.id);
      throttle().takeRestart(record.id, ctx.auth.userId, brokerLoginKey({ ...record, name: credentials.name }));
      await restart(record, credentials, true);
      journal(ctx, 'connection-reconnect', { connectionId: record.id }, { restarted: true, started: !live });
      return { status: 202, body: connectionView(deps, record) };
    },
  });

  /** Journals a change to a connection with who asked for it. */
  function journal(ctx: RouteContext<unknown, unknown>, kind: string, request: Record<string, unknown>, outcome: unknown): void {
    deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind, request: { ...request, via: ctx.auth.kind, requestId: ctx.requestId }, outcome });
  }

  /** Starts the connection's actor afresh (the old one stops; status CONNECTING); `manual`: a reconnect by hand, throttled cluster-wide too. */
  /** A connection on the embedded paper broker. */
  function embeddedPaper(c: ConnectionRecord): boolean {
    return deps.paper !== undefined && c.broker === 'paper' && c.restUrl === deps.paper.restUrl;
  }

  /** Whether a connection other than `id`, of any user, logs in to the embedded paper broker as `name`. */
  function loggedInByAnother(id: string, name: string): boolean {
    return deps.store.connections.all().some((c) => {
      if (c.id === id || !embeddedPaper(c)) return false;
      try {
        return deps.store.connections.credentials(c.id).name === name;
      } catch {
        return false;
      }
    });
  }

  async function restart(record: ConnectionRecord, credentials: BrokerCredentials, manual: boolean): Promise<void> {
    // A connection of the embedded broker whose login it lacks (added by the CLI without a password,
    // then given one): opened first, or the restart failed to log in until the service restarted (docs probe).
    if (embeddedPaper(record)) await deps.paper!.ensureLogin?.(record.id);
    await deps.gateway.addConnection(connectionSpecFor(record, credentials, deps.paper), manual ? { manual } : undefined);
  }

  return [list, add, update, reconnect, remove];
}

/**
 * Stores a new connection and starts its actor, under the user's connection quota and the
 * service's actor ceiling, both admitted before anything is opened at a broker. `open` runs
 * first (the paper login) and `close` undoes it: a connection whose actor cannot start is not
 * kept, and neither is its paper login.
 */
export async function startConnection(
  deps: RouteDeps,
  userId: string,
  input: Omit<NewConnection, 'userId'>,
  login?: { open(): Promise<void>; close(): Promise<void> },
): Promise<ConnectionRecord> {
  const gate = quotas(deps);
  const brokerLogin = { ...input, name: input.credentials.name };
  const existing = connectionWithLogin(deps.store.connections, userId, brokerLogin);
  if (existing) throw loginTaken(existing);
  // Taken before the first await: two concurrent adds of one login cannot both pass.
  const starting = `${userId}\n${brokerLoginKey(brokerLogin)}`;
  if (loginsStarting.has(starting)) throw new AppError('CONFLICT', `A connection for this ${input.broker} ${input.environment} user is being added: one connection per broker login`);
  // A real broker's login by hand (reconnect-throttle.ts); the paper broker's are ours. Given back
  // when the add is refused before its actor was started (a quota, the actor ceiling).
  const giveBack = input.broker === 'tradovate' ? manualLogins(deps).takeAdd(userId, brokerLoginKey(brokerLogin)) : undefined;
  let loginTried = false;
  loginsStarting.add(starting);
  return gate
    .create(userId, 'connections', () =>
      gate.actor(async () => {
        await login?.open();
        let record: ConnectionRecord | undefined;
        try {
          record = await deps.store.connections.create({ ...input, userId });
          loginTried = true;
          // A connection the sync of another process's changes started already is left running.
          await deps.gateway.addConnection(connectionSpecFor(record, input.credentials, deps.paper), { ifStopped: true });
          return record;
        } catch (err) {
          if (record) await deps.store.connections.remove(userId, record.id);
          await login?.close().catch(() => undefined);
          throw err;
        }
      }),
    )
    .catch((err: unknown) => {
      if (!loginTried) giveBack?.();
      throw err;
    })
    .finally(() => loginsStarting.delete(starting));
}

const throttles = new WeakMap<RouteDeps, ReconnectThrottle>();

/** The throttle of broker logins by hand of these routes (one per route table, made at first use). */
function manualLogins(deps: RouteDeps): ReconnectThrottle {
  let throttle = throttles.get(deps);
  if (!throttle) throttles.set(deps, (throttle = new ReconnectThrottle(deps.config.reconnectMinIntervalS * 1000, deps.now ? () => deps.now!().getTime() : Date.now)));
  return throttle;
}

/** Broker logins (`userId` + brokerLoginKey) whose connection is being added. */
const loginsStarting = new Set<string>();

/** Whether two sets of credentials say the same in every field. */
function sameCredentials(a: BrokerCredentials, b: BrokerCredentials): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if ((a as unknown as Record<string, unknown>)[k] !== (b as unknown as Record<string, unknown>)[k]) return false;
  return true;
}

/** The stored credentials with the given fields replaced (`username` is the broker's `name`). */
export function mergedCredentials(stored: BrokerCredentials, given: NonNullable<UpdateConnectionBody['credentials']>): BrokerCredentials {
  const { username, ...rest } = given;
  const merged: BrokerCredentials = { ...stored, ...(username !== undefined && { name: username }) };
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) (merged as unknown as Record<string, unknown>)[k] = v;
  return merged;
}
