/**
 * Route tests: a real store in a temp dir with two users and a connection each, the route
 * table over a FakeGateway, and a way to call a route's handler with a built context. The
 * pipeline's stages (auth, validation, idempotency) have their own tests; here the body is
 * validated with the route's own schema first, as the validate stage does.
 */
import { loadConfig } from '../../src/config.js';
import type { Scope } from '../../src/domain/connections.js';
import type { GuardNarrowing } from '../../src/domain/guards.js';
import type { AccountRecord, OrderRecord } from '../../src/domain/orders.js';
import { AppError } from '../../src/domain/problems.js';
import type { RouteContext, RouteDef, RouteResponse, WebhookPrincipal } from '../../src/http/route-types.js';
import type { RouteDeps } from '../../src/http/routes/common.js';
import { buildRoutes } from '../../src/http/routes/index.js';
import { createLogger } from '../../src/log.js';
import type { Store } from '../../src/store/index.js';
import { FakeGateway } from './gateway.js';
import { tempStore } from './store.js';

/** 2026-11-21: ES front month is ESZ6. */
export const NOW = new Date('2026-11-21T15:00:00Z');

/** An order record with defaults. */
export function orderRecord(patch: Partial<OrderRecord> = {}): OrderRecord {
  return {
    orderId: '9001',
    accountId: '101',
    symbol: 'ESZ6',
    requestedSymbol: 'ES1!',
    side: 'buy',
    type: 'market',
    qty: 1,
    filledQty: 0,
    avgFillPrice: null,
    price: null,
    stopPrice: null,
    timeInForce: 'day',
    status: 'working',
    role: 'single',
    bracketId: null,
    legs: { takeProfit: null, stopLoss: null },
    clientOrderId: null,
    createdAt: NOW.toISOString(),
    updatedAt: NOW.toISOString(),
    ...patch,
  };
}

export function account(id: string, connectionId: string, active = true): AccountRecord {
  return { id, name: `ACC${id}`, connectionId, broker: 'paper', environment: 'paper', active };
}

export interface World {
  store: Store;
  gateway: FakeGateway;
  deps: RouteDeps;
  routes: RouteDef<any, any>[];
  /** user A owns connection conA with accounts 101 (active) and 102 (inactive). */
  a: { userId: string; connectionId: string };
  /** user B owns connection conB with account 201. */
  b: { userId: string; connectionId: string };
  close(): Promise<void>;
}

/** The paper login password of every world connection: distinctive, so a test can look for it in answers (a random id may hold `pw`). */
export const WORLD_PAPER_PASSWORD = 'world-paper-password-7Qx';

/** Two users with one paper connection each, and the route table over them. */
export async function world(): Promise<World> {
  const t = await tempStore();
  t.now.value = NOW.getTime();
  const { store } = t;
  const gateway = new FakeGateway();
  const config = loadConfig({ 'data-dir': t.dir, 'base-url': 'https://trade.example.com' }, {});
  const mk = async (name: string) => {
    const user = await store.users.create({ name });
    const conn = await store.connections.create({
      userId: user.id,
      name: 'Paper',
      broker: 'paper',
      environment: 'paper',
      restUrl: 'http://127.0.0.1:1/v1',
      wsUrl: 'ws://127.0.0.1:1/v1/websocket',
      credentials: { name, password: WORLD_PAPER_PASSWORD },
    });
    gateway.statusOf.set(conn.id, { type: 'status', connectionId: conn.id, status: 'CONNECTED', reason: 'connect', ts: NOW.getTime() });
    return { userId: user.id, connectionId: conn.id };
  };
  const a = await mk('alice');
  const b = await mk('bob');
  gateway.accountsOf.set(a.connectionId, [account('101', a.connectionId), account('102', a.connectionId, false)]);
  gateway.accountsOf.set(b.connectionId, [account('201', b.connectionId)]);
  const deps: RouteDeps = { config, store, gateway, now: () => NOW };
  return {
    store,
    gateway,
    deps,
    routes: buildRoutes(deps),
    a,
    b,
    close: () => t.cleanup(),
  };
}

export interface CallOptions {
  userId: string;
  /** The request's id (X-Request-Id); 'req-1' when not given. */
  requestId?: string;
  params?: Record<string, string>;
  body?: unknown;
  query?: Record<string, string>;
  scopes?: Scope[];
  kind?: 'api-key' | 'webhook' | 'session';
  principalId?: string;
  webhook?: WebhookPrincipal;
  idempotencyKey?: string;
  /** The request's fingerprint under that key (the pipeline's; default 64 × 'f'). */
  idempotencyFingerprint?: string;
  /** Lower-case request headers (e.g. the session cookie). */
  headers?: Record<string, string>;
  ip?: string;
  /** The credential's narrowing of the account guards. */
  narrowing?: GuardNarrowing;
}

export interface CallResult extends RouteResponse {
  timing: [string, number][];
}

/** Finds a route by method and path. */
export function route(w: World, method: string, path: string): RouteDef<any, any> {
  const r = w.routes.find((x) => x.method === method && x.path === path);
  if (!r) throw new Error(`no route ${method} ${path}`);
  return r;
}

const silent = createLogger('silent');

/** Validates body and query with the route's schemas (as the engine does) and runs the handler. */
export async function call(w: World, method: string, path: string, opts: CallOptions): Promise<CallResult> {
  const r = route(w, method, path);
  const body = r.body ? r.body.parse(opts.body) : undefined;
  const query = r.query ? r.query.parse(opts.query ?? {}) : (opts.query ?? {});
  const timing: [string, number][] = [];
  const ctx: RouteContext<any, any> = {
    req: { method: r.method, path, params: opts.params ?? {}, query, headers: opts.headers ?? {}, body, rawBody: Buffer.alloc(0), ip: opts.ip ?? '127.0.0.1' },
    auth: {
      userId: opts.userId,
      principalId: opts.principalId ?? 'key1',
      scopes: opts.scopes ?? ['read', 'trade'],
      kind: opts.kind ?? 'api-key',
      ...(opts.webhook ? { webhook: opts.webhook } : {}),
      ...(opts.narrowing ? { narrowing: opts.narrowing } : {}),
    },
    requestId: opts.requestId ?? 'req-1',
    timing: { add: (name, ms) => timing.push([name, ms]) },
    log: silent,
  };
  if (opts.idempotencyKey !== undefined) {
    ctx.idempotencyKey = opts.idempotencyKey;
    ctx.idempotencyFingerprint = opts.idempotencyFingerprint ?? 'f'.repeat(64);
  }
  const res = await r.handler(ctx);
  // A route that answers JSON text it serialized itself (a kept page) reads like any other here.
  const text = typeof res.body === 'string' && res.headers?.['Content-Type'] === 'application/json';
  return { ...res, ...(text && { body: JSON.parse(res.body as string) }), timing };
}

/** The AppError a call throws. */
export async function callError(w: World, method: string, path: string, opts: CallOptions): Promise<AppError> {
  try {
    await call(w, method, path, opts);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
}
