/**
 * Risk guards (README "Risk guards"): an account's guards (GET/PUT), the kill switch
 * (POST lock/unlock) and an API key's narrowing of the guards (GET/PUT, web session only, like
 * all key management). Guards and locks are stored records of (user, account): they are stored
 * and then handed to the connection's actor, which enforces them, in every connection state
 * (FAILED included: the actor answers guard requests without its broker). When no actor runs
 * the account, the record alone is written and every actor of the user starts with it. A
 * webhook token's narrowing is a field of the token (webhook-tokens.ts).
 */
import type { GuardStatus, LockRequest, LockResult, SetGuardsRequest } from '../../actors/protocol.js';
import { NO_GUARDS, type GuardNarrowing, type LockState } from '../../domain/guards.js';
import { AppError, type ProblemCode } from '../../domain/problems.js';
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
import { AUTH_ERRORS, callActor, errors, refuseNarrowedKey, mayBeAccountId, unsyncedAccountsError, userAccounts, type RouteDeps } from './common.js';
import { SESSION_ERRORS } from './api-keys.js';
import { positionOutcomes } from './flatten.js';

const iso = (ms: number) => new Date(ms).toISOString();

function lockView(lock: LockState | null | undefined) {
  return lock
    ? { guard: lock.guard, since: iso(lock.since), until: lock.until === null ? null : iso(lock.until), detail: lock.detail, flattenPending: lock.flattenOwed === true }
    : null;
}

/**
 * Whether the answer may show what the actor sees (day P&L, positions): a trade-only key changes
 * guards and locks, but cannot read the account (DESIGN §3), so its answers carry `live: null`.
 */
function mayRead(ctx: { auth: { scopes: readonly string[] } }): boolean {
  return ctx.auth.scopes.includes('read');
}

/**
 * The guards view: stored guards, the lock, and what the actor sees now (null when none runs the
 * account, or when `showLive` is false).
 */
function guardsView(deps: RouteDeps, userId: string, accountId: string, live: GuardStatus | null, showLive = true) {
  const stored = deps.store.guards.get(userId, accountId);
  return {
    accountId,
    guards: stored?.config ?? { ...NO_GUARDS },
    lock: lockView(live ? live.lock : stored?.lock),
    live:
      live && showLive
        ? {
            day: { start: iso(live.day.start), end: iso(live.day.end), realized: live.day.realized, fees: live.day.fees, open: live.day.open, pnl: live.day.pnl },
            inWindow: live.inWindow,
            positions: live.positions,
          }
        : null,
  };
}

/** An account the guard routes act on, and the connection whose actor runs it now (null: none does). */
interface GuardTarget {
  accountId: string;
  connectionId: string | null;
  /**
   * With no connection known for the account: the caller's running connections that have not
   * reported their accounts yet (just started, or waiting out a broker hold). The account may be
   * one of theirs: a lock or guards stored for it are relayed to their actors too.
   */
  relayTo?: string[];
}

/**
 * The caller's account for the guard routes. Guards and locks are records of (user, account),
 * so they do not need the connection to be CONNECTED: an account its connection reported is
 * served whatever that connection's state (FAILED included). An account no connection reported
 * since the service started is accepted too while a connection of the caller gave up before it
 * reported its accounts (FAILED): its guards and lock are stored and every actor of the user
 * starts with them, so they are in force from the first moment the account is back. Otherwise
 * the answer is ownedAccount's (503 while a connection is still connecting, 404).
 */
function guardTarget(deps: RouteDeps, userId: string, accountId: string): GuardTarget {
  const found = userAccounts(deps, userId).find((a) => a.account.id === accountId);
  if (found) return { accountId, connectionId: actorRuns(deps, found.connectionId) ? found.connectionId : null };
  // A connection of the caller that reports no accounts (still connecting after a restart, waiting
  // out a broker hold, FAILED before syncing, or disabled: a restart forgets what it reported): its
  // accounts' guards and locks are taken, so the kill switch works in every state (fault probe: 503
  // for the hour of a broker hold after a restart) and an operator arms it before enabling one.
  // Any well-formed id is taken then, whoever's connection reports it: the record is the caller's
  // own (user, account), relayed only to the caller's connections, so it touches no one else's
  // trading; answering 404 for ids other users' connections report told the caller which ids those
  // are (fuzz probe: an account-id oracle).
  if (!unsyncedAccountsError(deps, userId)) throw new AppError('NOT_FOUND', 'Not found');
  if (!mayBeAccountId(accountId)) throw new AppError('NOT_FOUND', 'Not found');
  if (!mayHoldAnother(deps, userId, accountId)) {
    throw new AppError('QUOTA_EXCEEDED', `At most ${MAX_GUARD_RECORDS} accounts' guards and locks per user; guards for accounts no connection reports count until one does`, { limit: MAX_GUARD_RECORDS });
  }
  const relayTo = deps.store.connections
    .listByUser(userId)
    .filter((c) => !c.disabled && deps.gateway.accounts(c.id).length === 0 && actorRuns(deps, c.id))
    .map((c) => c.id);
  return { accountId, connectionId: null, relayTo };
}

/** Guard records a user may hold in all (only counted for accounts no connection reports). */
const MAX_GUARD_RECORDS = 200;

/** Made-up ids cannot fill the store: a record for an unreported account only within the cap. */
function mayHoldAnother(deps: RouteDeps, userId: string, accountId: string): boolean {
  return deps.store.guards.get(userId, accountId) !== undefined || deps.store.guards.listByUser(userId).length < MAX_GUARD_RECORDS;
}

/** Guard routes never answer CONNECTION_FAILED: a FAILED connection's actor still takes them. */
const GUARD_BROKER_ERRORS: ProblemCode[] = ['BROKER_UNAVAILABLE', 'BROKER_TIMEOUT'];

/** Whether an actor runs the connection now (any status but none yet and DISABLED). */
function actorRuns(deps: RouteDeps, connectionId: string): boolean {
  const status = deps.gateway.status(connectionId)?.status;
  return status !== undefined && status !== 'DISABLED';
}

/** The actor's status of an account; null while no actor can be asked (none runs it, it is restarting, or its connection is not live). */
async function liveStatus(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, target: GuardTarget, req: { type: 'guard-status' | 'set-guards' } & Record<string, unknown>) {
  if (!target.connectionId) return null;
  try {
    return (await callActor(deps, ctx, target.connectionId, { ...req, accountId: target.accountId } as never)) as GuardStatus;
  } catch (err) {
    // No live figures from a connection that is not CONNECTED (FAILED included) or whose broker went quiet: the stored guards still answer.
    if (err instanceof AppError && (err.code === 'BROKER_UNAVAILABLE' || err.code === 'BROKER_TIMEOUT' || err.code === 'CONNECTION_FAILED')) return null;
    throw err;
  }
}

/** What a lock's flatten answers when no actor runs the account: it is owed on the stored lock. */
/** How often, and how many times, a kill switch no actor could take is sent again (relayLock). */
const LOCK_RELAY_MS = 1_000;
const LOCK_RELAY_TRIES = 60;
/** How long a kill switch stored while no actor ran its connection is offered to one before the answer (deliverLock). */
const LOCK_DELIVER_MS = 5_000;
const LOCK_DELIVER_RETRY_MS = 200;

const FLATTEN_OWED_NO_ACTOR =
  'not flattened: no running connection reports this account now (its connection is FAILED, disabled or not started). ' +
  'The lock holds, and the flatten runs once its connection is CONNECTED again';

const GUARDS_DOC =
  'Entries that break a guard are refused with 403 RISK_GUARD naming the guard (`guard`), its limit (`limit`) and the value the order ' +
  'would have reached (`value`); nothing reaches the broker. Exits (orders that only reduce the position, counting working orders, and carry no take-profit or stop-loss), ' +
  'cancels and flatten are never refused. The actor of the account’s connection enforces them against the broker’s live positions and ' +
  'working orders, one order after the other, so a burst of alerts cannot overshoot a limit.';

const NARROWED_KEY_DOC = 'An API key that narrows the guards only trades within them: it gets 403 INSUFFICIENT_SCOPE here.';

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
    responses: [{ status: 200, description: 'Guards', schema: guardsViewSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'QUOTA_EXCEEDED', ...GUARD_BROKER_ERRORS)],
    async handler(ctx) {
      const target = guardTarget(deps, ctx.auth.userId, ctx.req.params.id!);
      const live = await liveStatus(deps, ctx as RouteContext<unknown, unknown>, target, { type: 'guard-status' });
      return { status: 200, body: guardsView(deps, ctx.auth.userId, target.accountId, live) };
    },
  });

  const put = defineRoute<GuardConfigBody>({
    method: 'PUT',
    path: '/accounts/:id/guards',
    scope: 'trade',
    operationId: 'putGuards',
    summary: 'Replace an account’s risk guards (a field left out = no such guard)',
    description: `${GUARDS_DOC} Changing the guards does not lift a lock. ${NARROWED_KEY_DOC}`,
    tags: ['guards'],
    body: guardConfigBodySchema,
    responses: [
      { status: 200, description: 'Guards in force', schema: guardsViewSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND', 'QUOTA_EXCEEDED', 'UNSUPPORTED_MEDIA_TYPE', ...GUARD_BROKER_ERRORS),
    ],
    async handler(ctx) {
      const target = guardTarget(deps, ctx.auth.userId, ctx.req.params.id!);
      refuseNarrowedKey(ctx.auth, 'change the account’s guards');
      const config = ctx.req.body;
      await deps.store.guards.setConfig(ctx.auth.userId, target.accountId, config);
      for (const id of target.relayTo ?? []) relay(id, { type: 'set-guards', accountId: target.accountId, config }, ctx.log);
      const live = await liveStatus(deps, ctx as RouteContext<unknown, unknown>, target, { type: 'set-guards', config });
      ctx.log.info({ accountId: target.accountId }, 'guards set');
      return { status: 200, body: guardsView(deps, ctx.auth.userId, target.accountId, live, mayRead(ctx)) };
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
      'are cancelled and positions closed. The lock works in every connection state: it is stored, and an actor that (re)starts ' +
      'starts with it. When the flatten cannot run now (the connection is RECONNECTING, FAILED, or not running) the answer is still ' +
      '200 with the lock, `flatten: {error}` says why, the lock shows `flattenPending: true`, and the flatten runs as soon as the ' +
      'connection is CONNECTED (after a reconnect or new credentials too), before anything else can trade. An unlock drops it.',
    tags: ['guards'],
    body: lockBodySchema.optional(),
    responses: [
      { status: 200, description: 'Locked', schema: guardsViewSchema },
      ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'QUOTA_EXCEEDED', ...GUARD_BROKER_ERRORS),
    ],
    async handler(ctx) {
      const { userId } = ctx.auth;
      const target = guardTarget(deps, userId, ctx.req.params.id!);
      const body = ctx.req.body ?? { flatten: true };
      const detail = body.reason ?? `kill switch (${ctx.auth.kind})`;
      if (target.connectionId) {
        const request = { type: 'lock' as const, accountId: target.accountId, flatten: body.flatten, detail };
        let result: LockResult;
        try {
          result = await callActor(deps, ctx as RouteContext<unknown, unknown>, target.connectionId, request);
        } catch (err) {
          // No actor can take it right now (a cluster node died and another has not taken its
          // connections over yet; a worker restarting): the kill switch must not be refused.
          // Stored as such (flatten owed), so the actor that starts next starts locked, and
          // sent again until a running actor has it (one that started before the write).
          // BROKER_TIMEOUT: the actor took the lock, its flatten outlasts the call (a slow broker): the
          // lock is in force and the flatten goes on (fault probe: 504 for a lock already in force).
          // Not when the connection changed node meanwhile: the node that had the call stopped (or
          // hangs), and the one running it now may have started without the lock; it is delivered
          // there below, before the answer (cluster probe: 200 "locked", and entries sent after it
          // filled on the new owner).
          const ownerChanged = err instanceof AppError && err.extensions['ownerChanged'] === true;
          if (err instanceof AppError && err.code === 'BROKER_TIMEOUT' && !ownerChanged) {
            await storeKillSwitch(ctx as RouteContext<unknown, unknown>, target.accountId, detail, body.flatten);
            ctx.log.warn({ accountId: target.accountId, err: err.message }, 'kill switch answered before its flatten finished');
            const why = `not confirmed yet: ${err.message}. The lock holds and the flatten goes on (GET …/guards shows the lock, GET …/positions what is left)`;
            return { status: 200, body: { ...guardsView(deps, userId, target.accountId, null), flatten: body.flatten ? { error: why } : null } };
          }
          if (!(err instanceof AppError) || (err.code !== 'BROKER_UNAVAILABLE' && !ownerChanged)) throw err;
          const lock = await storeKillSwitch(ctx as RouteContext<unknown, unknown>, target.accountId, detail, body.flatten);
          // An actor that started before the write (another node took the connection over a moment
          // ago) runs without it: delivered before the answer, so no entry sent after a 200 is
          // placed (cluster probe: the lock answered 200 during a handover, and entries sent after
          // it filled for a second until the relay delivered it).
          const delivered = await deliverLock(target.connectionId, { ...request, since: lock.since });
          if (delivered) {
            await deps.store.guards.setLock(userId, target.accountId, delivered.status.lock);
            return { status: 200, body: { ...guardsView(deps, userId, target.accountId, delivered.status, mayRead(ctx)), flatten: delivered.flatten && 'positions' in delivered.flatten ? { ...delivered.flatten, positions: positionOutcomes(delivered.flatten.positions) } : delivered.flatten } };
          }
          relay(target.connectionId, { ...request, since: lock.since }, ctx.log);
          ctx.log.warn({ accountId: target.accountId, flattenOwed: lock.flattenOwed === true, err: err.message }, 'account locked while its actor was unavailable');
          const why = `not flattened yet: ${err.message}. The lock holds, and the flatten runs as soon as an actor runs the connection`;
          return { status: 200, body: { ...guardsView(deps, userId, target.accountId, null), flatten: body.flatten ? { error: why } : null } };
        }
        // Stored before the answer (the actor's event stores it too, a moment later): a restart right after starts locked.
        await deps.store.guards.setLock(userId, target.accountId, result.status.lock);
        return { status: 200, body: { ...guardsView(deps, userId, target.accountId, result.status, mayRead(ctx)), flatten: result.flatten && 'positions' in result.flatten ? { ...result.flatten, positions: positionOutcomes(result.flatten.positions) } : result.flatten } };
      }
      const lock = await storeKillSwitch(ctx as RouteContext<unknown, unknown>, target.accountId, detail, body.flatten);
      // With the stored lock's time: the actor's copy is the same lock, not a second later one (re-probe).
      for (const id of target.relayTo ?? []) relay(id, { type: 'lock', accountId: target.accountId, flatten: body.flatten, detail, since: lock.since }, ctx.log);
      ctx.log.info({ accountId: target.accountId, flattenOwed: lock.flattenOwed === true }, 'account locked while no actor runs it');
      return { status: 200, body: { ...guardsView(deps, userId, target.accountId, null), flatten: body.flatten ? { error: FLATTEN_OWED_NO_ACTOR } : null } };
    },
  });

  const unlock = defineRoute({
    method: 'POST',
    path: '/accounts/:id/unlock',
    scope: 'trade',
    operationId: 'unlockAccount',
    summary: 'Lift the kill switch',
    description: `A lock set by the daily loss limit or the profit target lasts until the next trading day (17:00 America/Chicago): 409 CONFLICT with \`lockedUntil\`. ${NARROWED_KEY_DOC}`,
    tags: ['guards'],
    responses: [
      { status: 200, description: 'Unlocked (or was not locked)', schema: guardsViewSchema },
      ...errors(...AUTH_ERRORS, 'NOT_FOUND', 'QUOTA_EXCEEDED', 'CONFLICT', ...GUARD_BROKER_ERRORS),
    ],
    async handler(ctx) {
      const { userId } = ctx.auth;
      const target = guardTarget(deps, userId, ctx.req.params.id!);
      refuseNarrowedKey(ctx.auth, 'unlock the account');
      if (target.connectionId) {
        const status = await callActor(deps, ctx as RouteContext<unknown, unknown>, target.connectionId, { type: 'unlock', accountId: target.accountId });
        await deps.store.guards.setLock(userId, target.accountId, status.lock);
        return { status: 200, body: guardsView(deps, userId, target.accountId, status, mayRead(ctx)) };
      }
      const lock = deps.store.guards.get(userId, target.accountId)?.lock;
      if (lock) {
        // As the actor decides: a P&L lock lasts until the next trading day.
        if (lock.guard !== 'kill_switch' && (lock.until === null || lock.until > Date.now())) {
          const until = lock.until === null ? null : iso(lock.until);
          throw new AppError('CONFLICT', `the account is locked by ${lock.guard} until ${until}: such a lock lifts when the next trading day begins`, { guard: lock.guard, lockedUntil: until });
        }
        await deps.store.guards.setLock(userId, target.accountId, null);
        journalGuard(ctx as RouteContext<unknown, unknown>, target.accountId, lock.guard, 'unlocked', { detail: 'unlocked while no actor runs the account', lock: null });
        for (const id of target.relayTo ?? []) relay(id, { type: 'unlock', accountId: target.accountId }, ctx.log);
      }
      return { status: 200, body: guardsView(deps, userId, target.accountId, null) };
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
      // A revoked key is gone for its guards as for its requests: 404 like any use after delete.
      if (!key || key.revokedAt) throw new AppError('NOT_FOUND', 'Not found');
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
      // A revoked key cannot be used again, so narrowing it means nothing: 404, not a write that looks accepted.
      if (deps.store.apiKeys.getForUser(ctx.auth.userId, id)?.revokedAt) throw new AppError('NOT_FOUND', 'Not found');
      const next: GuardNarrowing | null = Object.keys(ctx.req.body).length ? ctx.req.body : null;
      const updated = await deps.store.apiKeys.setGuards(ctx.auth.userId, id, next);
      if (!updated) throw new AppError('NOT_FOUND', 'Not found');
      return { status: 200, body: { keyId: updated.id, guards: updated.guards ?? null } };
    },
  });

  /**
   * Sends a kill switch the actor could not take at once again, every LOCK_RELAY_MS for up to
   * LOCK_RELAY_TRIES tries, until a running actor has it (locking twice is harmless; a flatten of a
   * flat account does nothing).
   */
  function relay(connectionId: string, request: LockRequest | { type: 'unlock'; accountId: string } | SetGuardsRequest, log: RouteContext<unknown, unknown>['log']): void {
    let tries = 0;
    const attempt = () => {
      deps.gateway.request(connectionId, request).then(
        () => log.info({ accountId: request.accountId, request: request.type }, 'stored guard change delivered to the connection’s actor'),
        (err: unknown) => {
          // An actor that syncs and does not report the account: not its account, nothing to deliver.
          if (err instanceof AppError && err.code === 'NOT_FOUND') return;
          if (++tries < LOCK_RELAY_TRIES) setTimeout(attempt, LOCK_RELAY_MS).unref();
          else log.error({ accountId: request.accountId, request: request.type }, 'guard change not delivered to an actor: it holds as stored, for the next actor that starts');
        },
      );
    };
    setTimeout(attempt, LOCK_RELAY_MS).unref();
  }

  /**
   * Sends a stored kill switch to the connection's actor, again every LOCK_DELIVER_RETRY_MS while no
   * actor runs it, for up to LOCK_DELIVER_MS: its result once one has it, else undefined (the
   * relay goes on sending it, and an actor that starts later starts locked from the store).
   */
  async function deliverLock(connectionId: string, request: LockRequest): Promise<LockResult | undefined> {
    const deadline = Date.now() + LOCK_DELIVER_MS;
    for (;;) {
      try {
        return await deps.gateway.request(connectionId, request);
      } catch (err) {
        if (!(err instanceof AppError) || err.code !== 'BROKER_UNAVAILABLE' || Date.now() + LOCK_DELIVER_RETRY_MS > deadline) return undefined;
      }
      await new Promise((r) => setTimeout(r, LOCK_DELIVER_RETRY_MS));
    }
  }

  /** The kill switch as a stored record (no actor runs the account): in force when one starts with it, flatten owed if asked. */
  async function storeKillSwitch(ctx: RouteContext<unknown, unknown>, accountId: string, detail: string, flatten: boolean): Promise<LockState> {
    const { userId } = ctx.auth;
    const prev = deps.store.guards.get(userId, accountId)?.lock;
    const base: LockState = prev?.guard === 'kill_switch' ? prev : { guard: 'kill_switch', since: Date.now(), until: null, detail };
    const lock: LockState = flatten ? { ...base, flattenOwed: true } : base;
    await deps.store.guards.setLock(userId, accountId, lock);
    journalGuard(ctx, accountId, 'kill_switch', 'locked', { detail, lock });
    return lock;
  }

  /** Journals a guard change made without an actor (the actor's own events are journaled by guard-events.ts). */
  function journalGuard(ctx: RouteContext<unknown, unknown>, accountId: string, guard: string, action: string, outcome: unknown): void {
    deps.store.journal.append({ userId: ctx.auth.userId, accountId, kind: 'guard', request: { guard, action, via: ctx.auth.kind, requestId: ctx.requestId }, outcome });
  }

  return [get, put, lock, unlock, keyGet, keyPut];
}
