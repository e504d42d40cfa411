/**
 * What the route modules share: their dependencies, ownership lookups (a user's accounts
 * are their connections' accounts as the actors report them), list pagination and the
 * documented error responses.
 */
import type { AccountRecord, OrderLimits } from '../../domain/orders.js';
import type { ActorGateway, ActorRequest, ResultFor } from '../../actors/protocol.js';
import { connectionFailed, onFirstAttempt } from '../../domain/connections.js';
import type { Config } from '../../config.js';
import { AppError, type ProblemCode, PROBLEMS, RequestNotSentError } from '../../domain/problems.js';
import type { Store } from '../../store/index.js';
import { GoesOnError, type AuthContext, type ResponseDoc, type RouteContext } from '../route-types.js';
import { CLUSTER } from '../../tuning.js';
import { createWebSessions, type WebSessions } from '../session-auth.js';
import type { PlaceOrderRequest } from '../../actors/protocol.js';
import { QuotaGate } from '../quotas.js';
import type { SseHub } from '../sse-hub.js';
import type { ListQuery } from '../schemas.js';

/** The embedded paper broker, when `serve --paper` runs one (POST /connections opens logins on it). */
export interface PaperBroker {
  restUrl: string;
  wsUrl: string;
  /** Opens a login with these accounts at the paper broker (and remembers it for the next start). */
  openLogin(login: { name: string; password: string; accounts: string[] }): Promise<void>;
  /** Removes a login at the paper broker and forgets it (a refused create's, a deleted connection's) unless a stored connection still uses it. */
  closeLogin(name: string): Promise<void>;
  /** Opens a stored paper connection's login if the broker lacks it (one the CLI added without a password, fixed since); true when it has it. */
  ensureLogin?(connectionId: string): Promise<boolean>;
}

/** Everything the routes need; passed once to buildRoutes. */
export interface RouteDeps {
  config: Config;
  store: Store;
  gateway: ActorGateway;
  /** Clock for symbol resolution and alert delays (tests inject one). */
  now?: () => Date;
  paper?: PaperBroker;
  /** The URL the server actually listens on (known only after listen when port is 0). */
  listenUrl?: () => string | undefined;
  /** Web-app sessions; the same object must be the engine's `sessionAuth` (serve wires both). */
  sessions?: WebSessions;
  /**
   * Ends open health streams whose credential stopped holding: routes that revoke a key,
   * change a password or end a session call it (serve wires it to the server's hub).
   */
  streams?: Pick<SseHub, 'closeStreams'>;
  /** Cluster mode: this node's id (what it journals for its own restart to take up). */
  nodeId?: string;
}

const defaultSessions = new WeakMap<RouteDeps, WebSessions>();

/** The deps' session machinery (one default per deps when none was given). */
export function webSessions(deps: RouteDeps): WebSessions {
  if (deps.sessions) return deps.sessions;
  let made = defaultSessions.get(deps);
  if (!made) {
    made = createWebSessions(deps.config, deps.store);
    defaultSessions.set(deps, made);
  }
  return made;
}

/** The base URL clients reach the service at (for webhook URLs): --base-url, else where we listen. */
export function baseUrl(config: Config, listenUrl?: string): string {
  if (config.baseUrl) return config.baseUrl.replace(/\/+$/, '');
  if (listenUrl) return listenUrl.replace(/\/+$/, '');
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
}

/** A user's account, with the connection that reports it. */
export interface OwnedAccount {
  account: AccountRecord;
  connectionId: string;
}

/** Every account the user's connections report (inactive ones included). */
export function userAccounts(deps: RouteDeps, userId: string): OwnedAccount[] {
  const out: OwnedAccount[] = [];
  for (const conn of deps.store.connections.listByUser(userId)) {
    for (const account of deps.gateway.accounts(conn.id)) out.push({ account, connectionId: conn.id });
  }
  return out;
}

/**
 * 503 for a request to a disabled connection: only an operator enabling it helps, so its
 * Retry-After (every 503 carries one, DESIGN §3) is a minute, not the default second.
 */
export function connectionDisabled(connectionId: string): AppError {
  return new AppError(
    'BROKER_UNAVAILABLE',
    `Broker connection ${connectionId} is disabled: an operator enables it with \`tradegate connections enable ${connectionId}\``,
    { connectionId, connectionStatus: 'DISABLED' },
    DISABLED_RETRY_AFTER_S,
  );
}

const DISABLED_RETRY_AFTER_S = 60;

/**
 * Why an account id of the caller may simply not be known yet, as the error to answer instead
 * of 404: one of the user's enabled connections has not reported its accounts (just started,
 * or reconnecting after a restart) → 503 BROKER_UNAVAILABLE, retry; or one gave up before it
 * ever reported any → 409 CONNECTION_FAILED, retrying cannot help. Undefined when neither.
 * Given the account asked for, the connection that stored it as served answers first: its own
 * state says why (a collision refusal, a bad password), where the user's first FAILED connection
 * may be another one's.
 */
export function unsyncedAccountsError(deps: RouteDeps, userId: string, accountId?: string): AppError | undefined {
  const connections = deps.store.connections.listByUser(userId);
  const servedIt = accountId === undefined ? undefined : connections.find((c) => c.servedAccountIds?.includes(accountId) && deps.gateway.accounts(c.id).length === 0);
  if (servedIt) {
    const whyNot = notReporting(deps, servedIt);
    if (whyNot) return whyNot;
  }
  let failed: AppError | undefined;
  let disabled: AppError | undefined;
  for (const conn of connections) {
    if (deps.gateway.accounts(conn.id).length > 0) continue;
    const whyNot = notReporting(deps, conn);
    if (whyNot?.code === 'CONNECTION_FAILED') failed ??= whyNot;
    // Disabled before this process saw its accounts (a restart): its accounts are simply unknown (re-probe: 404).
    else if (conn.disabled) disabled ??= whyNot;
    else if (whyNot) return whyNot;
  }
  return failed ?? disabled;
}

/** Why a connection that reports no accounts reports none: disabled, FAILED, or not connected yet; undefined when CONNECTED. */
function notReporting(deps: RouteDeps, conn: { id: string; disabled?: boolean }): AppError | undefined {
  if (conn.disabled) return connectionDisabled(conn.id);
  const status = deps.gateway.status(conn.id);
  if (status?.status === 'FAILED') return connectionFailed(conn.id, status.detail, status.retryAt);
  // Which connection, and why (a login that cannot reach the broker stays CONNECTING: fuzz probe).
  if (status?.status !== 'CONNECTED') return notConnectedYet(conn.id, status);
  return undefined;
}

/**
 * 503 while one of the user's connections is still on its first attempt to get its accounts
 * (starting, after a restart too), or, until `startGraceUntil` (ACCOUNTS_START_GRACE_MS after the
 * service started), still trying: a list of accounts is not complete before (clients probe: 200
 * `[]` right after a restart, a bot concluded the user had none). A connection that failed, is
 * disabled, or has failed attempts past that (the broker unreachable: it retries, maybe for
 * hours) before it reported any does not hold the list back: its status says why (GET
 * /connections). Held, the list of every other connection was 503 for as long (fuzz probe).
 */
export function accountsSyncing(deps: RouteDeps, userId: string, startGraceUntil: number): AppError | undefined {
  // Just after a start a broker that is down fails the first attempt in a moment (connection
  // refused): held for the start's grace all the same, or the list read 200 `[]` (re-probe).
  const inGrace = nowOf(deps).getTime() < startGraceUntil;
  for (const conn of deps.store.connections.listByUser(userId)) {
    if (conn.disabled || deps.gateway.accounts(conn.id).length > 0) continue;
    const status = deps.gateway.status(conn.id);
    // No status at all past the start's grace: this process has not started it (added by the CLI
    // while the service runs, and its start refused: ACTORS_MAX, a paper login not opened). It may
    // stay so, and held the user's whole list at 503 meanwhile (docs probe).
    if (status === undefined && !inGrace) continue;
    const trying = status === undefined || status.status === 'CONNECTING' || status.status === 'RECONNECTING';
    if (!onFirstAttempt(status) && !(inGrace && trying)) continue;
    return notConnectedYet(conn.id, status);
  }
  return undefined;
}

/** 503 for a connection that has not reported its accounts yet: which one, and why (a login that cannot reach the broker stays CONNECTING: fuzz probe). */
function notConnectedYet(connectionId: string, status: ReturnType<ActorGateway['status']>): AppError {
  const why = { connectionId, connectionStatus: status?.status ?? 'CONNECTING', ...(status?.detail !== undefined && { detail: status.detail }) };
  return new AppError('BROKER_UNAVAILABLE', 'Broker connection is not connected yet', why, 1);
}

/** How long after the service started the account list waits for a connection that cannot reach its broker yet (accountsSyncing). */
export const ACCOUNTS_START_GRACE_MS = 30_000;

/** An account id as brokers give them: a positive integer, written without leading zeros (`010000002` names none). */
const ACCOUNT_ID = /^[1-9][0-9]{0,18}$/;

/** Whether `id` can name an account at all; one that cannot is 404 whatever the connections' state. */
export function mayBeAccountId(id: string): boolean {
  return ACCOUNT_ID.test(id);
}

/**
 * The caller's account, or 404 NOT_FOUND (same answer for foreign and unknown ids). While a
 * connection of the caller has not synced yet the answer is unsyncedAccountsError's instead: a
 * client must not take "not found" as final for an order it should simply retry.
 */
export function ownedAccount(deps: RouteDeps, userId: string, accountId: string): OwnedAccount {
  const found = userAccounts(deps, userId).find((a) => a.account.id === accountId);
  if (found) return found;
  // `abc` or `-1` cannot be an account of a connection still connecting (fuzz probe: 503 and a retry a second, forever).
  if (!mayBeAccountId(accountId)) throw new AppError('NOT_FOUND', 'Not found');
  throw unsyncedAccountsError(deps, userId, accountId) ?? new AppError('NOT_FOUND', 'Not found');
}

/** Trading needs an account its broker still reports. */
export function requireActive(owned: OwnedAccount): void {
  if (!owned.account.active) throw new AppError('ACCOUNT_INACTIVE', 'Account is inactive', { accountId: owned.account.id });
}

const JOURNALED = new Set<ActorRequest['type']>(['place-order', 'cancel-order', 'flatten']);

/**
 * Requests an actor answers whatever its connection's state: guards and locks are its own
 * records (stored too), not broker reads, so they stay readable and settable while FAILED.
 */
const ANY_STATE = new Set<ActorRequest['type']>(['guard-status', 'set-guards', 'lock', 'unlock']);

/** What the journal keeps of an actor answer: ids and states, not whole records. */
function outcomeOf(result: unknown): unknown {
  const r = result as { order?: { orderId: string; status: string }; cancelledOrderIds?: string[]; positions?: unknown; reconciled?: boolean };
  if (r.order) return { orderId: r.order.orderId, status: r.order.status, ...(r.reconciled ? { reconciled: true } : {}) };
  return { cancelledOrderIds: r.cancelledOrderIds, positions: r.positions };
}

/**
 * Sends a request to the account's actor, records the broker time for Server-Timing and
 * journals trading actions with their outcome (fire-and-forget: never on the latency path).
 */
export async function callActor<R extends ActorRequest>(
  deps: RouteDeps,
  ctx: RouteContext<unknown, unknown>,
  connectionId: string,
  req: R,
  opts?: { timeoutMs?: number },
): Promise<ResultFor<R>> {
  const journal = (outcome: unknown) => {
    if (!JOURNALED.has(req.type)) return;
    const accountId = 'accountId' in req ? req.accountId : null;
    deps.store.journal.append({ userId: ctx.auth.userId, accountId, kind: req.type, request: Object.assign({}, req, { via: ctx.auth.kind, requestId: ctx.requestId }), outcome });
  };
  let result: ResultFor<R>;
  const t0 = performance.now();
  try {
    // A connection that gave up is answered here, without a round trip into its actor.
    const status = deps.gateway.status(connectionId);
    if (status?.status === 'FAILED' && !ANY_STATE.has(req.type)) throw connectionFailed(connectionId, status.detail, status.retryAt);
    // A disabled connection has no actor to ask: 503 saying so (was 404 "connection … not found", read by bots as "no such account").
    if ((status?.status === 'DISABLED' || deps.store.connections.byId(connectionId)?.disabled) && !ANY_STATE.has(req.type)) throw connectionDisabled(connectionId);
    // A trading action (each route's first and only side effect) is withdrawn if its client is gone before it is sent.
    const cancelled = JOURNALED.has(req.type) ? ctx.clientGone : undefined;
    result = await deps.gateway.request(connectionId, req, cancelled ? { ...opts, cancelled } : opts);
  } catch (err) {
    journal(err instanceof AppError ? { error: err.code, detail: err.message } : err instanceof RequestNotSentError ? { error: 'NOT_SENT', detail: err.message } : { error: 'INTERNAL' });
    throw err;
  }
  const actorMs = performance.now() - t0;
  // Only trading actions are journaled; other answers may be anything, null included.
  if (JOURNALED.has(req.type)) journal(outcomeOf(result));
  const { brokerMs, settleMs } = result as { brokerMs?: unknown; settleMs?: unknown };
  if (JOURNALED.has(req.type)) ctx.timing.add('actor', actorMs);
  if (typeof brokerMs === 'number') ctx.timing.add('broker', brokerMs);
  if (typeof settleMs === 'number') ctx.timing.add('settle', settleMs);
  return result;
}

/** Chains of work per store and key (oneAtATime). */
const chains = new WeakMap<object, Map<string, Promise<unknown>>>();

/**
 * Runs `fn` once every earlier call with the same key (in this process) has settled: a check
 * and the write it allows happen with no other such pair between them (a strategy deleted while
 * a token is bound to it). Across cluster nodes it is not a lock; the readers stay defensive.
 */
export function oneAtATime<T>(deps: RouteDeps, key: string, fn: () => Promise<T>): Promise<T> {
  let byKey = chains.get(deps.store);
  if (!byKey) chains.set(deps.store, (byKey = new Map()));
  const before = byKey.get(key) ?? Promise.resolve();
  const run = before.then(fn, fn);
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  byKey.set(key, settled);
  void settled.then(() => {
    if (byKey.get(key) === settled) byKey.delete(key);
  });
  return run;
}

const DEFAULT_LIMIT = 100;

/**
 * Opaque cursor: the list it pages and a value in it (an offset, a key, a journal position). A
 * malformed cursor, or one another list issued (its value means nothing here), is a 400, never a
 * silent restart or a wrong page.
 */
function cursorValue(cursor: string, list: string, shape: RegExp): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  // Decoding is lenient (junk after the text, standard base64): only a cursor this list wrote passes.
  const canonical = Buffer.from(text).toString('base64url') === cursor;
  // The value follows the last colon: a list name may hold one (an account id), a value never.
  const sep = text.lastIndexOf(':');
  const value = text.slice(sep + 1);
  if (!canonical || sep < 0 || text.slice(0, sep) !== list || !shape.test(value)) {
    throw new AppError('VALIDATION_FAILED', 'query.cursor: not a cursor returned by this list', { errors: [{ path: 'query.cursor', message: 'not a cursor returned by this list' }] });
  }
  return value;
}

function decodeCursor(cursor: string | undefined, list: string): number {
  if (cursor === undefined || cursor === '') return 0;
  return Number(cursorValue(cursor, list, /^\d{1,15}$/));
}

/** The journal position a cursor of `list` continues below (undefined: the first page); 400 when not one of the list's. */
export function cursorPosition(cursor: string | undefined, list: string): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  return cursorValue(cursor, list, /^[0-9A-Za-z.]{1,64}$/);
}

/** The cursor of the page of `list` after the entry at `position`. */
export function positionCursor(list: string, position: string): string {
  return Buffer.from(`${list}:${position}`).toString('base64url');
}

/**
 * One page of `items` as `{ data, nextCursor }` (DESIGN §3 lists). `list` names the list in its
 * cursors: one name per route, with the account for an account's lists (`positions/<id>`).
 */
export function paginate<T>(items: readonly T[], query: ListQuery | undefined, list: string): { data: T[]; nextCursor: string | null } {
  const { offset, limit } = pageOf(query, list);
  const data = items.slice(offset, offset + limit);
  return { data, nextCursor: nextCursor(list, offset + data.length, items.length) };
}

/**
 * One page of records kept in creation order (oldest first; `newestFirst`: the reverse) as
 * `{ data, nextCursor }`. The cursor names the last record shown (its creation time and id), so
 * the next page continues after it whatever was created or deleted since: with an offset, a
 * script that deleted what it had read skipped a record on the next page (fuzz probe).
 */
export function paginateByCreation<T extends { id: string; createdAt: string }>(
  items: readonly T[],
  query: ListQuery | undefined,
  list: string,
  newestFirst = false,
): { data: T[]; nextCursor: string | null } {
  const limit = query?.limit ?? DEFAULT_LIMIT;
  let start = 0;
  if (query?.cursor !== undefined && query.cursor !== '') {
    const [ms, id] = cursorValue(query.cursor, list, /^\d{1,15}\.[0-9A-Za-z_-]{1,64}$/).split('.') as [string, string];
    const after = (x: T): boolean => {
      const t = Date.parse(x.createdAt);
      const order = t !== Number(ms) ? t - Number(ms) : x.id < id ? -1 : x.id > id ? 1 : 0;
      return newestFirst ? order < 0 : order > 0;
    };
    start = items.findIndex(after);
    if (start < 0) start = items.length;
  }
  const data = items.slice(start, start + limit);
  const last = data.at(-1);
  const more = start + data.length < items.length;
  return { data, nextCursor: more && last ? Buffer.from(`${list}:${Date.parse(last.createdAt)}.${last.id}`).toString('base64url') : null };
}

/** Where a page of `list` starts and how long it is (a malformed cursor, or another list's, is a 400). */
export function pageOf(query: ListQuery | undefined, list: string): { offset: number; limit: number } {
  return { offset: decodeCursor(query?.cursor, list), limit: query?.limit ?? DEFAULT_LIMIT };
}

function nextCursor(list: string, next: number, total: number): string | null {
  return next < total ? Buffer.from(`${list}:${next}`).toString('base64url') : null;
}

/**
 * The `{ data, nextCursor }` answer text of a list paged by key (working orders: the id of the
 * last order shown): `after` is the next page's key, null on the last page.
 */
export function serializedPageAfter(list: string, json: string, after: number | null): string {
  return `{"data":${json},"nextCursor":${after === null ? 'null' : JSON.stringify(Buffer.from(`${list}:${after}`).toString('base64url'))}}`;
}


/** Documented error responses for the OpenAPI document. */
export function errors(...codes: ProblemCode[]): ResponseDoc[] {
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of codes) {
    const { status } = PROBLEMS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return [...byStatus].map(([status, list]) => ({ status, description: list.join(', '), codes: list }));
}

/** Errors every authenticated API route can answer. */
export const AUTH_ERRORS: ProblemCode[] = ['UNAUTHENTICATED', 'INSUFFICIENT_SCOPE', 'RATE_LIMITED'];

/** Errors of routes that talk to a broker. */
export const BROKER_ERRORS: ProblemCode[] = ['CONNECTION_FAILED', 'BROKER_UNAVAILABLE', 'BROKER_TIMEOUT'];

/**
 * A key that narrows the risk guards trades within them: it may place (narrowed), cancel, flatten,
 * lock and reconnect, but not change what bounds trading, since each would let it or a URL trade
 * past its narrowing: the account's guards, an unlock, strategies (a webhook URL trades with
 * them), connections, webhook tokens. Called after the object's lookup, so another user's ids
 * stay 404. `what` completes "… in the web app".
 */
export function refuseNarrowedKey(auth: AuthContext, what: string): void {
  if (auth.kind === 'api-key' && auth.narrowing !== undefined) {
    throw new AppError(
      'INSUFFICIENT_SCOPE',
      `This API key narrows the risk guards and only trades within them: ${what} in the web app, or with a key that narrows nothing`,
      { requiredScope: 'trade' },
    );
  }
}

/** What the actor's guards need to know of who places an order: where it came from and the credential's narrowing. */
export function guardedBy(auth: AuthContext, origin: 'api' | 'webhook'): Pick<PlaceOrderRequest, 'origin' | 'narrowing'> {
  return auth.narrowing ? { origin, narrowing: [auth.narrowing] } : { origin };
}

const gates = new WeakMap<RouteDeps, QuotaGate>();

/** The per-user quota gate of these routes (one per route table). */
export function quotas(deps: RouteDeps): QuotaGate {
  let gate = gates.get(deps);
  if (!gate) gates.set(deps, (gate = new QuotaGate(deps.store, deps.config)));
  return gate;
}

/** The per-order limits of this deployment (ORDER_QTY_MAX, PRICE_BAND_FACTOR). */
export function orderLimits(config: Config): OrderLimits {
  return { maxQty: config.orderQtyMax, priceBandFactor: config.priceBandFactor };
}

/** The clock in force. */
export function nowOf(deps: RouteDeps): Date {
  return deps.now ? deps.now() : new Date();
}

/**
 * A trading request whose cluster node stopped answering before another node took the connection
 * over (the gateway's `ownerChanged`): that node may hang rather than be dead, and the order on its
 * still-open broker socket may yet be carried out. Its key stays in flight for
 * CLUSTER.ownerChangeHoldMs, so a retry with it (what the 504 says to do) answers 409
 * IDEMPOTENCY_KEY_IN_USE meanwhile and then reconciles with whatever the broker did, never placing
 * it a second time (cluster re-probe: the retry on the new owner filled, then the first did too).
 * Undefined for anything else.
 */
/**
 * A key's hold after a broker call that timed out (BROKER_TIMEOUT: the order may still be placed,
 * by this node's actor or, in a cluster, by a node that stopped answering): a promise that frees it
 * after `holdMs`, for an outcome (GoesOnError); undefined for any other failure, which frees it at
 * once. Meanwhile a repeat is 409 IDEMPOTENCY_KEY_IN_USE; after it, it reconciles by clOrdId with
 * what the broker did.
 */
export function heldAfterTimeout(err: unknown, holdMs = CLUSTER.ownerChangeHoldMs): Promise<undefined> | undefined {
  if (!(err instanceof AppError) || err.code !== 'BROKER_TIMEOUT') return undefined;
  return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), holdMs).unref());
}

/** A call that ended because the cluster node running its connection stopped answering (the gateway's 504 `ownerChanged`): that node may only hang. */
export function ownerChanged(err: unknown): err is AppError {
  return err instanceof AppError && err.code === 'BROKER_TIMEOUT' && err.extensions['ownerChanged'] === true;
}

export function heldAfterOwnerChange(err: unknown, holdMs = CLUSTER.ownerChangeHoldMs): GoesOnError | undefined {
  if (!ownerChanged(err)) return undefined;
  const s = Math.ceil(holdMs / 1000);
  const answer = new AppError(err.code, `${err.message}; the node that had it may only hang, so a retry with it waits ${s} s for what the broker does (409 IDEMPOTENCY_KEY_IN_USE meanwhile)`, err.extensions, err.retryAfterSeconds);
  return new GoesOnError(answer, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), holdMs).unref()));
}
