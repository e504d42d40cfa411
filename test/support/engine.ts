/**
 * The HTTP front on its own: a real LMDB store in a temp dir, a FakeGateway, a small sample
 * route table (one route per pipeline feature) and the real uWS server on 127.0.0.1:0.
 */
import { z } from 'zod';
import { configSchema, type ConfigInput } from '../../src/config.js';
import { AppError } from '../../src/domain/problems.js';
import { defineRoute, GoesOnError, type RouteDef, type RouteResponse } from '../../src/http/route-types.js';
import { startHttpServer, type HttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/log.js';
import type { Store } from '../../src/store/index.js';
import { FakeGateway } from './gateway.js';
import { tempStore } from './store.js';

/** A promise the test resolves by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export const orderBody = z.strictObject({ symbol: z.string().min(1), qty: z.number().int().positive(), note: z.string().optional() });

/** Counters and gates the sample handlers use. */
export interface SampleState {
  orderCalls: number;
  /** When set, the order handler waits for it before answering. */
  hold?: Promise<void>;
  /** When set, the goes-on handler answers 504 at once and its outcome is this promise's value. */
  goesOn?: Promise<AppError | RouteResponse | undefined>;
  goesOnCalls?: number;
  /** Status the failing handler throws with. */
  failCode: 'BROKER_TIMEOUT' | 'BROKER_UNAVAILABLE' | 'BROKER_REJECTED' | 'IDEMPOTENCY_KEY_REUSED';
  failCalls: number;
}

/** The sample route table: one route per engine feature under test. */
export function sampleRoutes(state: SampleState): RouteDef<any, any>[] {
  return [
    defineRoute({
      method: 'GET', path: '/things/:id', scope: 'read', operationId: 'getThing', summary: 'Read a thing',
      query: z.strictObject({ limit: z.coerce.number().int().min(1).max(500).optional() }),
      responses: [{ status: 200, description: 'The thing', schema: z.object({ id: z.string() }) }],
      handler: async (ctx) => ({ status: 200, body: { id: ctx.req.params['id'], limit: ctx.req.query?.limit ?? null } }),
    }),
    defineRoute({
      method: 'DELETE', path: '/things/:id', scope: 'trade', operationId: 'deleteThing', summary: 'Delete a thing',
      responses: [{ status: 204, description: 'Gone' }],
      handler: async () => ({ status: 204 }),
    }),
    defineRoute({
      method: 'POST', path: '/accounts/:id/orders', scope: 'trade', operationId: 'placeOrder', summary: 'Place',
      body: orderBody, idempotent: true,
      responses: [{ status: 201, description: 'Placed' }],
      handler: async (ctx) => {
        state.orderCalls++;
        const n = state.orderCalls;
        ctx.timing.add('broker', 1.5);
        if (state.hold) await state.hold;
        return { status: 201, body: { orderId: String(n), accountId: ctx.req.params['id'], ...ctx.req.body, key: ctx.idempotencyKey ?? null } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/accounts/:id/fail', scope: 'trade', operationId: 'fail', summary: 'Fails',
      body: orderBody, idempotent: true,
      responses: [{ status: 201, description: 'never' }],
      handler: async () => {
        state.failCalls++;
        throw new AppError(state.failCode, 'broker says no', {}, state.failCode === 'BROKER_UNAVAILABLE' ? 2 : undefined);
      },
    }),
    defineRoute({
      method: 'POST', path: '/accounts/:id/goes-on', scope: 'trade', operationId: 'goesOn', summary: 'Answers 504 and goes on',
      body: orderBody, idempotent: true,
      responses: [{ status: 200, description: 'Done' }],
      handler: async () => {
        state.goesOnCalls = (state.goesOnCalls ?? 0) + 1;
        throw new GoesOnError(new AppError('BROKER_TIMEOUT', 'still at work: it goes on'), state.goesOn ?? Promise.resolve(undefined));
      },
    }),
    defineRoute({
      method: 'GET', path: '/boom', scope: 'read', operationId: 'boom', summary: 'Throws',
      responses: [{ status: 200, description: 'never' }],
      handler: async () => {
        throw new TypeError('kaboom');
      },
    }),
    defineRoute({
      method: 'POST', path: '/webhooks/:token', scope: 'webhook', operationId: 'webhook', summary: 'Alert',
      body: z.looseObject({ action: z.string(), id: z.string().optional() }), lenientContentType: true, idempotent: true,
      idempotencyKeyFrom: (req) => req.body.id,
      responses: [{ status: 200, description: 'Accepted' }],
      handler: async (ctx) => ({ status: 200, body: { ok: true, principal: ctx.auth.principalId, key: ctx.idempotencyKey ?? null } }),
    }),
  ];
}

export interface EngineHarness {
  server: HttpServer;
  store: Store;
  gateway: FakeGateway;
  state: SampleState;
  /** Keys of user A: read+trade, read-only, trade-only; and user B's read+trade key. */
  keys: { rw: string; read: string; trade: string; other: string };
  userId: string;
  otherUserId: string;
  webhookToken: string;
  now: { value: number };
  url(path: string): string;
  stop(): Promise<void>;
}

/** Starts store + server; `clock` is a settable fake when `fakeClock` is true. */
export async function startEngine(
  config: Partial<ConfigInput> = {},
  opts: { fakeClock?: boolean; logTo?: NodeJS.WritableStream } = {},
): Promise<EngineHarness> {
  const now = { value: Date.UTC(2026, 10, 21, 12, 0, 0) };
  const clock = opts.fakeClock ? () => now.value : Date.now;
  const t = await tempStore({ clock });
  const { store, dir: dataDir } = t;
  const user = await store.users.create({ name: 'alice' });
  const other = await store.users.create({ name: 'bob' });
  const rw = await store.apiKeys.create({ userId: user.id, name: 'rw', scopes: ['read', 'trade'] });
  const read = await store.apiKeys.create({ userId: user.id, name: 'ro', scopes: ['read'] });
  const trade = await store.apiKeys.create({ userId: user.id, name: 'to', scopes: ['trade'] });
  const otherKey = await store.apiKeys.create({ userId: other.id, name: 'rw', scopes: ['read', 'trade'] });
  const hook = await store.webhookTokens.create({ userId: user.id, name: 'tv', accountId: '1001' });
  const gateway = new FakeGateway();
  const state: SampleState = { orderCalls: 0, failCode: 'BROKER_TIMEOUT', failCalls: 0 };
  const parsed = configSchema.parse({ port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent', ...config });
  const server = await startHttpServer({
    config: Object.freeze(parsed),
    store,
    gateway,
    routes: sampleRoutes(state),
    logger: opts.logTo ? createLogger('info', opts.logTo) : createLogger('silent'),
    ...(opts.fakeClock ? { clock } : {}),
  });
  return {
    server, store, gateway, state, now,
    keys: { rw: rw.key, read: read.key, trade: trade.key, other: otherKey.key },
    userId: user.id,
    otherUserId: other.id,
    webhookToken: hook.token,
    url: (path) => `${server.url}${path}`,
    async stop() {
      await server.close({ graceMs: 1000 });
      await t.cleanup();
    },
  };
}
