/**
 * Risk guards (README "Risk guards"): an account's guards (GET/PUT), the kill switch
 * (POST lock/unlock) and an API key's narrowing of the guards (GET/PUT, web session only, like
 * all key management). Guards are stored
 * first (they must outlive a restart) and then handed to the connection's actor, which
 * enforces them; a webhook token's narrowing is a field of the token (webhook-tokens.ts).
 */
import type { GuardStatus, LockResult } from '../../actors/protocol.js';
import { NO_GUARDS, type GuardNarrowing, type LockState } from '../../domain/guards.js';
import { AppError } from '../../domain/problems.js';
import { defineRoute, type RouteContext, type RouteDef } from '../route-types.js';
import {
  guardConfigBodySchema,
  guardNarrowingSchema,
  guardsViewSchema,
  keyGuardsViewSchema,
  lockBodySchema,
  type GuardConfigBody,
  type GuardNarrowingBody,
  type LockBody,
} from '../guard-schemas.js';
import { AUTH_ERRORS, BROKER_ERRORS, callActor, errors, ownedAccount, type OwnedAccount, type RouteDeps } from './common.js';
import { SESSION_ERRORS } from './api-keys.js';

const iso = (ms: number) => new Date(ms).toISOString();


function lockView(lock: LockState | null | undefined) {
  return lock ? { guard: lock.guard, since: iso(lock.since), until: lock.until === null ? null : iso(lock.until), detail: lock.detail } : null;
}

/** The guards view: stored guards, the lock, and what the actor sees now (null when it is not running). */
function guardsView(deps: RouteDeps, userId: string, accountId: string, live: GuardStatus | null) {
  const stored = deps.store.guards.get(userId, accountId);
  return {
    accountId,
    guards: stored?.config ?? { ...NO_GUARDS },
    lock: lockView(live ? live.lock : stored?.lock),
    live: live && {
      day: { start: iso(live.day.start), end: iso(live.day.end), realized: live.day.realized, fees: live.day.fees, open: live.day.open, pnl: live.day.pnl },
      inWindow: live.inWindow,
      positions: live.positions,
    },
  };
}

/** The actor's status of an account; null while the actor cannot be asked (not running, restarting). */
async function liveStatus(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, owned: OwnedAccount, req: { type: 'guard-status' | 'set-guards' } & Record<string, unknown>) {
  try {
    return (await callActor(deps, ctx, owned.connectionId, { ...req, accountId: owned.account.id } as never)) as GuardStatus;
  } catch (err) {
    if (err instanceof AppError && (err.code === 'BROKER_UNAVAILABLE' || err.code === 'BROKER_TIMEOUT')) return null;
    throw err;
  }
}

const GUARDS_DOC =
  'Entries that break a guard are refused with 403 RISK_GUARD naming the guard (`guard`), its limit (`limit`) and the value the order ' +
  'would have reached (`value`); nothing reaches the broker. Exits (orders that only reduce the position, counting working orders), ' +
  'cancels and flatten are never refused. The actor of the account’s connection enforces them against the broker’s live positions and ' +
  'working orders, one order after the other, so a burst of alerts cannot overshoot a limit.';

/** Guard routes. */
export function guardRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const get = defineRoute({
    method: 'GET',
    path: '/accounts/:id/guards',
    scope: 'read',
    operationId: 'getGuards',
    summary: 'An account’s risk guards, its lock and what they see now (day P&L, exposure)',
    description: GUARDS_DOC,
    tags: ['guards'],
    responses: [{ status: 200, description: 'Guards', schema: guardsViewSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND', ...BROKER_ERRORS)],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const live = await liveStatus(deps, ctx as RouteContext<unknown, unknown>, owned, { type: 'guard-status' });
      return { status: 200, body: guardsView(deps, ctx.auth.userId, owned.account.id, live) };
    },
  });

  const put = defineRoute<GuardConfigBody>({
    method: 'PUT',
    path: '/accounts/:id/guards',
    scope: 'trade',
    operationId: 'putGuards',
    summary: 'Replace an account’s risk guards (a field left out = no such guard)',
    description: `${GUARDS_DOC} Changing the guards does not lift a lock.`,
    tags: ['guards'],
    body: guardConfigBodySchema,
    responses: [
      { status: 200, description: 'Guards in force', schema: guardsViewSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const config = ctx.req.body;
      await deps.store.guards.setConfig(ctx.auth.userId, owned.account.id, config);
      const live = await liveStatus(deps, ctx as RouteContext<unknown, unknown>, owned, { type: 'set-guards', config });
      ctx.log.info({ accountId: owned.account.id }, 'guards set');
      return { status: 200, body: guardsView(deps, ctx.auth.userId, owned.account.id, live) };
    },
  });

  const lock = defineRoute<LockBody | undefined>({
    method: 'POST',
    path: '/accounts/:id/lock',
    scope: 'trade',
    operationId: 'lockAccount',
    summary: 'Kill switch: refuse every entry until unlocked; flattens the account unless `{"flatten":false}`',
    description:
      'The lock is in force as soon as this answers; exits, cancels and flatten still work. With flatten (the default) working orders ' +
      'are cancelled and positions closed; if that fails (broker disconnected) the lock holds and the flatten is retried until it goes through.',
    tags: ['guards'],
    body: lockBodySchema.optional(),
    responses: [
      { status: 200, description: 'Locked', schema: guardsViewSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const body = ctx.req.body ?? { flatten: true };
      const detail = body.reason ?? `kill switch (${ctx.auth.kind})`;
      const result: LockResult = await callActor(deps, ctx as RouteContext<unknown, unknown>, owned.connectionId, {
        type: 'lock',
        accountId: owned.account.id,
        flatten: body.flatten,
        detail,
      });
      return { status: 200, body: { ...guardsView(deps, ctx.auth.userId, owned.account.id, result.status), flatten: result.flatten } };
    },
  });

  const unlock = defineRoute({
    method: 'POST',
    path: '/accounts/:id/unlock',
    scope: 'trade',
    operationId: 'unlockAccount',
    summary: 'Lift the kill switch',
    description: 'A lock set by the daily loss limit or the profit target lasts until the next trading day (17:00 America/Chicago): 409 CONFLICT with `lockedUntil`.',
    tags: ['guards'],
    responses: [
      { status: 200, description: 'Unlocked (or was not locked)', schema: guardsViewSchema },
      ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'CONFLICT', ...BROKER_ERRORS),
    ],
    async handler(ctx) {
      const owned = ownedAccount(deps, ctx.auth.userId, ctx.req.params.id!);
      const status = await callActor(deps, ctx as RouteContext<unknown, unknown>, owned.connectionId, { type: 'unlock', accountId: owned.account.id });
      return { status: 200, body: guardsView(deps, ctx.auth.userId, owned.account.id, status) };
    },
  });

  const keyGet = defineRoute({
    method: 'GET',
    path: '/api-keys/:id/guards',
    scope: 'session',
    operationId: 'getKeyGuards',
    summary: 'An API key’s narrowing of the account guards',
    tags: ['guards'],
    responses: [{ status: 200, description: 'Narrowing (null: none)', schema: keyGuardsViewSchema }, ...errors(...SESSION_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const key = deps.store.apiKeys.getForUser(ctx.auth.userId, ctx.req.params.id!);
      if (!key) throw new AppError('NOT_FOUND', 'Not found');
      return { status: 200, body: { keyId: key.id, guards: key.guards ?? null } };
    },
  });

  const keyPut = defineRoute<GuardNarrowingBody>({
    method: 'PUT',
    path: '/api-keys/:id/guards',
    scope: 'session',
    operationId: 'putKeyGuards',
    summary: 'Narrow the account guards for one API key’s orders (`{}` removes the narrowing)',
    description:
      'The narrowing only ever tightens the guards of the account an order goes to (the stricter value of each field wins). Like the rest ' +
      'of key management it takes the web session: no API key, leaked or not, can loosen its own narrowing (or another key’s).',
    tags: ['guards'],
    body: guardNarrowingSchema,
    responses: [
      { status: 200, description: 'Narrowing in force', schema: keyGuardsViewSchema },
      ...errors('VALIDATION_FAILED', ...SESSION_ERRORS, 'CSRF_REJECTED', 'NOT_FOUND'),
    ],
    async handler(ctx) {
      const id = ctx.req.params.id!;
      const next: GuardNarrowing | null = Object.keys(ctx.req.body).length ? ctx.req.body : null;
      const updated = await deps.store.apiKeys.setGuards(ctx.auth.userId, id, next);
      if (!updated) throw new AppError('NOT_FOUND', 'Not found');
      return { status: 200, body: { keyId: updated.id, guards: updated.guards ?? null } };
    },
  });

  return [get, put, lock, unlock, keyGet, keyPut];
}
