import { Writable } from 'node:stream';
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AppError } from '../../../src/domain/problems.js';
import { Authenticator, FAILED_AUTH_PER_MIN, type AuthStore } from '../../../src/http/auth.js';
import { IdempotencyGate, type IdempotencyRecord } from '../../../src/http/idempotency.js';
import {
  authStage,
  bodyStage,
  handlerStage,
  idempotencyStage,
  limitStage,
  replyStage,
  routeStage,
  keylessAdvice,
  runPipeline,
  validateStage,
  type Exchange,
  type PipelineDeps,
  type Stop,
} from '../../../src/http/pipeline.js';
import { SlidingLogLimiter, type RateLimiter } from '../../../src/http/rate-limit.js';
import { jsonReply, ResponseHandle } from '../../../src/http/respond.js';
import { defineRoute, type RouteContext, type RouteDef } from '../../../src/http/route-types.js';
import { Router } from '../../../src/http/router.js';
import { createLogger } from '../../../src/log.js';
import { FakeResponse } from '../../support/uws.js';

const KEYS: AuthStore = {
  apiKeys: {
    verify: (raw) =>
      raw === 'tgk_a_rw'
        ? { id: 'k-rw', userId: 'u1', name: 'rw', scopes: ['read', 'trade'] }
        : raw === 'tgk_a_ro'
          ? { id: 'k-ro', userId: 'u1', name: 'ro', scopes: ['read'] }
          : null,
  },
  webhookTokens: { verify: (raw) => (raw === 'whk_t_ok' ? { id: 't1', userId: 'u1', accountId: '7' } : null) },
};

const orderBody = z.strictObject({ symbol: z.string(), qty: z.number().int().positive() });

interface World {
  deps: PipelineDeps;
  stored: Map<string, IdempotencyRecord>;
  handled: RouteContext<any, any>[];
  log: string[];
  shuttingDown: { value: boolean };
  failPut: { value: boolean };
}

function routes(w: Pick<World, 'handled'>): RouteDef<any, any>[] {
  return [
    defineRoute({
      method: 'GET', path: '/things/:id', scope: 'read', operationId: 'getThing', summary: 'thing', responses: [],
      query: z.strictObject({ limit: z.coerce.number().int().max(5).optional() }),
      handler: async (ctx) => {
        w.handled.push(ctx);
        return { status: 200, body: { id: ctx.req.params.id, limit: ctx.req.query.limit ?? null } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/orders', scope: 'trade', operationId: 'place', summary: 'place', responses: [], body: orderBody, idempotent: true,
      handler: async (ctx) => {
        w.handled.push(ctx);
        ctx.log.debug({ handled: w.handled.length }, 'placing');
        ctx.timing.add('broker', 2.25);
        return { status: 201, body: { ...ctx.req.body, key: ctx.idempotencyKey ?? null } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/slow-orders', scope: 'trade', operationId: 'placeSlow', summary: 'times out', responses: [], body: orderBody, idempotent: true,
      handler: async () => {
        throw new AppError('BROKER_TIMEOUT', 'broker did not answer order/placeorder within 5000 ms; the broker may still carry it out: retry with the same Idempotency-Key, never as a new request');
      },
    }),
    defineRoute({
      method: 'POST', path: '/hooks/:token', scope: 'webhook', operationId: 'hook', summary: 'hook', responses: [], lenientContentType: true,
      body: z.looseObject({ id: z.string().optional() }), idempotent: true, idempotencyKeyFrom: (req) => req.body.id,
      handler: async (ctx) => {
        w.handled.push(ctx);
        return { status: 200, body: { ok: true } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/cached/:how', scope: 'read', operationId: 'cached', summary: 'answers from memory', responses: [],
      handler: (ctx) => {
        if (ctx.req.params.how === 'coded') throw new AppError('NOT_FOUND');
        if (ctx.req.params.how === 'broken') throw new TypeError('kaboom');
        return { status: 200, body: { from: 'memory' } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/fails/:how', scope: 'read', operationId: 'fails', summary: 'fails', responses: [],
      handler: async (ctx) => {
        if (ctx.req.params.how === 'coded') throw new AppError('BROKER_REJECTED', 'no', { brokerReason: 'x' });
        throw new TypeError('kaboom');
      },
    }),
  ];
}

function world(opts: { keyLimit?: number; bodyLimit?: number } = {}): World {
  const stored = new Map<string, IdempotencyRecord>();
  const failPut = { value: false };
  const log: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      log.push(chunk.toString());
      done();
    },
  });
  const handled: RouteContext<any, any>[] = [];
  const shuttingDown = { value: false };
  const logger = createLogger('info', sink);
  const deps: PipelineDeps = {
    router: new Router(routes({ handled })),
    fixedRoute: (method, path) => (path === '/healthz' ? jsonReply(200, { status: 'ok', method }) : undefined),
    closing: () => shuttingDown.value,
    auth: new Authenticator(KEYS, () => 0, logger),
    limiters: { key: new SlidingLogLimiter(opts.keyLimit ?? 100), webhook: new SlidingLogLimiter(1) },
    gate: new IdempotencyGate({
      get: (scope, key) => stored.get(`${scope}/${key}`),
      put: async (scope, key, record) => {
        if (failPut.value) throw new Error('disk full');
        stored.set(`${scope}/${key}`, record);
      },
    }),
    bodyLimitBytes: opts.bodyLimit ?? 64,
    clock: () => 1_000,
    logger,
    stream: () => false,
  };
  return { deps, stored, handled, log, shuttingDown, failPut };
}

function exchange(method: string, path: string, headers: Record<string, string> = {}, query = ''): { ex: Exchange; res: FakeResponse } {
  const res = new FakeResponse();
  const ex: Exchange = {
    handle: new ResponseHandle(res.res),
    method, path, query, headers, requestId: 'req-1', startedAt: performance.now(), metrics: [],
    extra: { 'X-Request-Id': 'req-1' },
  };
  return { ex, res };
}

/** The AppError code a stage throws, or 'ok'. */
function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'ok';
  } catch (err) {
    return err instanceof AppError ? err.code : `not coded: ${String(err)}`;
  }
}

const json = (stop: Stop | undefined) => (stop?.reply.body === undefined ? undefined : JSON.parse(stop.reply.body.toString()));

let w: World;
beforeEach(() => {
  w = world();
});

describe('route stage', () => {
  it('matches under both API prefixes and hands on the route and its params', () => {
    for (const path of ['/api/v1/things/42', '/v1/things/42']) {
      const { ex } = exchange('GET', path);
      expect(routeStage(w.deps, ex)).toBeUndefined();
      expect(ex.route?.operationId).toBe('getThing');
      expect(ex.params).toEqual({ id: '42' });
    }
  });

  it('ends with 404 outside the prefixes or for an unknown path, and 405 with Allow for another method', () => {
    expect(routeStage(w.deps, exchange('GET', '/things/42').ex)?.reply.status).toBe(404);
    expect(routeStage(w.deps, exchange('GET', '/api/v1/nothing').ex)?.reply.status).toBe(404);
    const wrong = routeStage(w.deps, exchange('DELETE', '/api/v1/things/42').ex);
    expect(wrong?.reply.status).toBe(405);
    expect(wrong?.reply.headers.Allow).toBe('GET, HEAD');
  });

  it('serves the fixed pages, and once shutting down answers 503 with Retry-After and closes the connection', () => {
    expect(json(routeStage(w.deps, exchange('GET', '/healthz').ex))).toEqual({ status: 'ok', method: 'GET' });
    w.shuttingDown.value = true;
    const stop = routeStage(w.deps, exchange('GET', '/api/v1/things/1').ex);
    expect(stop?.reply.status).toBe(503);
    expect(stop?.reply.headers['Retry-After']).toBe('1');
    expect(stop?.closeConnection).toBe(true);
  });
});

describe('auth and limit stages', () => {
  const routed = (method: string, path: string, headers: Record<string, string> = {}) => {
    const { ex } = exchange(method, path, headers);
    routeStage(w.deps, ex);
    return ex;
  };

  it('authenticates by the route scope and records the principal', () => {
    expect(codeOf(() => authStage(w.deps, routed('GET', '/v1/things/1')))).toBe('UNAUTHENTICATED');
    expect(codeOf(() => authStage(w.deps, routed('POST', '/v1/orders', { 'x-api-key': 'tgk_a_ro' })))).toBe('INSUFFICIENT_SCOPE');
    const ex = routed('POST', '/v1/orders', { 'x-api-key': 'tgk_a_rw' });
    authStage(w.deps, ex);
    expect(ex.principal).toBe('k-rw');
    expect(ex.authd?.rateKey).toBe('k-rw');
  });

  it('a cluster node that cannot reach NATS, or is catching up with its records after an outage, refuses credentialed requests 503 (a key revoked meanwhile is never accepted)', () => {
    let reachable = false;
    const deps = { ...w.deps, reachable: () => reachable };
    const err = (() => {
      try {
        authStage(deps, routed('GET', '/v1/things/1', { 'x-api-key': 'tgk_a_rw' }));
      } catch (e) {
        return e as AppError;
      }
      return undefined;
    })();
    expect(err).toMatchObject({ code: 'CLUSTER_UNAVAILABLE', retryAfterSeconds: 1 });
    reachable = true;
    expect(codeOf(() => authStage(deps, routed('GET', '/v1/things/1', { 'x-api-key': 'tgk_a_rw' })))).toBe('ok');
  });

  it("reads the client's address only for a failed credential (uWS copies it per read), and the failure still counts per address", () => {
    const { ex: good, res: goodRes } = exchange('GET', '/v1/things/1', { 'x-api-key': 'tgk_a_rw' });
    routeStage(w.deps, good);
    authStage(w.deps, good);
    expect(goodRes.addressReads).toBe(0);
    const { ex: bad, res: badRes } = exchange('GET', '/v1/things/1', { 'x-api-key': 'tgk_nope' });
    badRes.remoteAddress = '6.6.6.6';
    routeStage(w.deps, bad);
    expect(codeOf(() => authStage(w.deps, bad))).toBe('UNAUTHENTICATED');
    expect(badRes.addressReads).toBe(1);
    expect(w.deps.auth.failures.isExhausted('6.6.6.6', 1_000)).toBeUndefined();
    for (let i = 1; i < FAILED_AUTH_PER_MIN; i++) w.deps.auth.failures.hit('6.6.6.6', 1_000);
    expect(w.deps.auth.failures.isExhausted('6.6.6.6', 1_000)).toBeDefined();
    expect(w.deps.auth.failures.isExhausted('10.0.0.1', 1_000)).toBeUndefined();
  });

  it('counts keyed requests, sets the RateLimit headers and refuses past the window with Retry-After', () => {
    w = world({ keyLimit: 2 });
    const hit = () => {
      const ex = routed('GET', '/v1/things/1', { 'x-api-key': 'tgk_a_rw' });
      authStage(w.deps, ex);
      const code = codeOf(() => limitStage(w.deps, ex));
      return { ex, code };
    };
    expect(hit().code).toBe('ok');
    const second = hit();
    expect(second.code).toBe('ok');
    expect(second.ex.extra['RateLimit-Policy']).toBe('"key";q=2;w=60');
    expect(second.ex.extra['X-RateLimit-Remaining']).toBe('0');
    expect(hit().code).toBe('RATE_LIMITED');
  });

  it('webhooks count against their token’s own window', () => {
    const first = routed('POST', '/v1/hooks/whk_t_ok');
    authStage(w.deps, first);
    limitStage(w.deps, first);
    expect(first.extra['RateLimit-Policy']).toMatch(/^"webhook"/);
    const second = routed('POST', '/v1/hooks/whk_t_ok');
    authStage(w.deps, second);
    expect(codeOf(() => limitStage(w.deps, second))).toBe('RATE_LIMITED');
  });
});

describe('body stage', () => {
  it('registers the reader before it first awaits, and collects the chunks', async () => {
    const { ex, res } = exchange('POST', '/v1/orders', { 'content-length': '25' });
    const reading = bodyStage(w.deps, ex);
    expect(res.reading).toBe(true);
    res.feed('{"symbol":"ES",', false);
    res.feed('"qty":1}', true);
    expect(await reading).toBeUndefined();
    expect(ex.rawBody?.toString()).toBe('{"symbol":"ES","qty":1}');
  });

  it('has nothing to read without a declared body', async () => {
    const { ex, res } = exchange('POST', '/v1/orders');
    expect(await bodyStage(w.deps, ex)).toBeUndefined();
    expect(res.reading).toBe(false);
    expect(ex.rawBody?.length).toBe(0);
  });

  it('refuses an announced or a streamed oversized body with 413 and closes the connection', async () => {
    const announced = await bodyStage(w.deps, exchange('POST', '/v1/orders', { 'content-length': '65' }).ex);
    expect(announced?.reply.status).toBe(413);
    expect(announced?.closeConnection).toBe(true);
    const { ex, res } = exchange('POST', '/v1/orders', { 'transfer-encoding': 'chunked' });
    const reading = bodyStage(w.deps, ex);
    res.feed('x'.repeat(40), false);
    res.feed('x'.repeat(40), false);
    const streamed = await reading;
    expect(streamed?.reply.status).toBe(413);
    expect(streamed?.closeConnection).toBe(true);
  });

  it('ends quietly when the client goes away mid-body', async () => {
    const { ex, res } = exchange('POST', '/v1/orders', { 'content-length': '20' });
    const reading = bodyStage(w.deps, ex);
    res.abort();
    expect((await reading)?.reply.status).toBe(500);
    expect(ex.handle.open).toBe(false);
  });
});

describe('validate stage', () => {
  const ready = (method: string, path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }, query = '') => {
    const { ex } = exchange(method, path, headers, query);
    routeStage(w.deps, ex);
    ex.rawBody = Buffer.from(body);
    return ex;
  };

  it('builds the validated request', () => {
    const ex = ready('POST', '/v1/orders', '{"symbol":"ES","qty":2}');
    validateStage(ex);
    expect(ex.request).toMatchObject({ method: 'POST', body: { symbol: 'ES', qty: 2 }, params: {} });
    // The client's address on demand; the request serializes without the uWS response under it.
    expect(ex.request!.ip).toBe('10.0.0.1');
    expect(Object.keys(JSON.parse(JSON.stringify(ex.request))).sort()).toEqual(['body', 'headers', 'method', 'params', 'path', 'query', 'rawBody']);
    const get = ready('GET', '/v1/things/9', '', {}, 'limit=3');
    validateStage(get);
    expect(get.request?.query).toEqual({ limit: 3 });
  });

  it('refuses unknown fields, bad queries and non-JSON bodies with their codes', () => {
    expect(codeOf(() => validateStage(ready('POST', '/v1/orders', '{"symbol":"ES","qty":2,"stopLos":1}')))).toBe('VALIDATION_FAILED');
    expect(codeOf(() => validateStage(ready('GET', '/v1/things/9', '', {}, 'limit=50')))).toBe('VALIDATION_FAILED');
    expect(codeOf(() => validateStage(ready('POST', '/v1/orders', '{"symbol":"ES","qty":2}', { 'content-type': 'text/plain' })))).toBe('UNSUPPORTED_MEDIA_TYPE');
    // A webhook route reads JSON whatever the declared type.
    expect(codeOf(() => validateStage(ready('POST', '/v1/hooks/whk_t_ok', '{"id":"a"}', { 'content-type': 'text/plain' })))).toBe('ok');
  });
});

describe('idempotency stage', () => {
  const ready = (body: string, key?: string) => {
    const headers: Record<string, string> = { 'x-api-key': 'tgk_a_rw', 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) };
    const { ex, res } = exchange('POST', '/v1/orders', headers);
    routeStage(w.deps, ex);
    authStage(w.deps, ex);
    ex.rawBody = Buffer.from(body);
    validateStage(ex);
    return { ex, res };
  };

  it('passes requests without a key untouched', async () => {
    const { ex } = ready('{"symbol":"ES","qty":1}');
    expect(await idempotencyStage(w.deps, ex)).toBeUndefined();
    expect(ex.ticket).toBeUndefined();
  });

  it('claims a key, refuses the same key in flight (409), replays it once stored, 422 for another request', async () => {
    const first = ready('{"symbol":"ES","qty":1}', 'k-1').ex;
    expect(await idempotencyStage(w.deps, first)).toBeUndefined();
    expect(first.ticket).toBeDefined();
    expect(first.idempotencyKey).toBe('k-1');
    await expect(idempotencyStage(w.deps, ready('{"symbol":"ES","qty":1}', 'k-1').ex)).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_USE' });
    await replyStage(w.deps, first, await handlerStage(w.deps, first));
    const replay = await idempotencyStage(w.deps, ready('{"qty":1,"symbol":"ES"}', 'k-1').ex);
    expect(replay?.reply.status).toBe(201);
    expect(replay?.reply.headers['Idempotent-Replayed']).toBe('true');
    await expect(idempotencyStage(w.deps, ready('{"symbol":"ES","qty":2}', 'k-1').ex)).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
  });

  it('refuses a malformed key', async () => {
    await expect(idempotencyStage(w.deps, ready('{"symbol":"ES","qty":1}', 'é'.repeat(3)).ex)).rejects.toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
  });

  it('takes the key from the route’s own source when there is no header (a webhook alert id)', async () => {
    const { ex } = exchange('POST', '/v1/hooks/whk_t_ok', {});
    routeStage(w.deps, ex);
    authStage(w.deps, ex);
    ex.rawBody = Buffer.from('{"id":"alert-7"}');
    validateStage(ex);
    await idempotencyStage(w.deps, ex);
    expect(ex.idempotencyKey).toBe('alert-7');
  });
});

describe('handler and reply stages', () => {
  const ready = (method: string, path: string, key?: string) => {
    const { ex, res } = exchange(method, path, { 'x-api-key': 'tgk_a_rw', 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) });
    routeStage(w.deps, ex);
    authStage(w.deps, ex);
    ex.rawBody = Buffer.from(method === 'POST' ? '{"symbol":"ES","qty":1}' : '');
    validateStage(ex);
    return { ex, res };
  };

  it('hands the route its context: request, caller, request id, key and a timing collector', async () => {
    const { ex } = ready('POST', '/v1/orders', 'k-9');
    await idempotencyStage(w.deps, ex);
    const stop = await handlerStage(w.deps, ex);
    expect(stop.reply.status).toBe(201);
    const ctx = w.handled[0]!;
    expect(ctx.auth).toMatchObject({ userId: 'u1', principalId: 'k-rw' });
    expect(ctx.requestId).toBe('req-1');
    expect(ctx.idempotencyKey).toBe('k-9');
    expect(ex.metrics).toEqual(['broker;dur=2.3']);
  });

  it('a trading route timing out without an Idempotency-Key answers 504 without advising a retry with one (re-probe: the advice came from the handler, past failedStage)', async () => {
    const keyless = await handlerStage(w.deps, ready('POST', '/v1/slow-orders').ex);
    expect(keyless.reply.status).toBe(504);
    expect(json(keyless).detail).toMatch(/it was sent without an Idempotency-Key, so sending it again is a new request/);
    const keyed = ready('POST', '/v1/slow-orders', 'k-slow');
    await idempotencyStage(w.deps, keyed.ex);
    expect(json(await handlerStage(w.deps, keyed.ex)).detail).toMatch(/retry with the same Idempotency-Key/);
  });

  it('turns a coded error into its problem answer and anything else into a 500 naming the request id', async () => {
    const coded = await handlerStage(w.deps, ready('GET', '/v1/fails/coded').ex);
    expect(coded.reply.status).toBe(422);
    expect(json(coded)).toMatchObject({ code: 'BROKER_REJECTED', brokerReason: 'x' });
    const crashed = await handlerStage(w.deps, ready('GET', '/v1/fails/boom').ex);
    expect(crashed.reply.status).toBe(500);
    expect(json(crashed)).toMatchObject({ code: 'INTERNAL', requestId: 'req-1' });
    expect(crashed.error).toBeInstanceOf(TypeError);
  });

  it('sends with the request’s headers and Server-Timing, and logs one line', async () => {
    const { ex, res } = ready('GET', '/v1/things/5');
    await replyStage(w.deps, ex, await handlerStage(w.deps, ex));
    expect(res.status).toBe('200 OK');
    expect(res.header('X-Request-Id')).toBe('req-1');
    expect(res.header('Server-Timing')).toMatch(/^total;dur=\d+\.\d$/);
    expect(w.log.filter((l) => l.includes('"reqId":"req-1"'))).toHaveLength(1);
  });

  it('stores an idempotent answer before sending it, and answers 500 when it cannot be stored', async () => {
    const { ex, res } = ready('POST', '/v1/orders', 'k-store');
    await idempotencyStage(w.deps, ex);
    await replyStage(w.deps, ex, await handlerStage(w.deps, ex));
    expect(w.stored.get('u1/k-store')).toMatchObject({ status: 201 });
    expect(res.status).toBe('201 Created');

    w.failPut.value = true;
    const failing = ready('POST', '/v1/orders', 'k-lost');
    await idempotencyStage(w.deps, failing.ex);
    await replyStage(w.deps, failing.ex, await handlerStage(w.deps, failing.ex));
    // It was carried out: outcome unknown to the client (504), never a 500 read as "nothing happened".
    expect(failing.res.status).toBe('504 Gateway Timeout');
    expect(failing.res.json()).toMatchObject({ code: 'BROKER_TIMEOUT', detail: expect.stringMatching(/carried out, but its answer could not be stored/) });
    // The key is free again: a retry runs instead of meeting 409 forever.
    expect(await idempotencyStage(w.deps, ready('POST', '/v1/orders', 'k-lost').ex)).toBeUndefined();
  });

  it('answers 504 (carried out, outcome unknown to the client) when a cluster store cannot keep a 201', async () => {
    const deps: PipelineDeps = {
      ...w.deps,
      gate: new IdempotencyGate({
        get: () => undefined,
        put: async () => {
          throw new AppError('CLUSTER_UNAVAILABLE', 'idempotency store: timeout', {}, 1);
        },
      }),
    };
    const { ex, res } = ready('POST', '/v1/orders', 'k-cluster');
    await idempotencyStage(deps, ex);
    await replyStage(deps, ex, await handlerStage(deps, ex));
    expect(res.status).toBe('504 Gateway Timeout');
    expect(res.json()).toMatchObject({ code: 'BROKER_TIMEOUT', detail: expect.stringMatching(/idempotency store: timeout/) });
  });

  it('logs 499 when the client left before the answer', async () => {
    const { ex, res } = ready('GET', '/v1/things/5');
    // Pending past the uWS callback: the front registers the abort handler then (server.ts accept).
    ex.handle.watchAbort();
    res.abort();
    await replyStage(w.deps, ex, await handlerStage(w.deps, ex));
    expect(res.ended).toBe(false);
    expect(w.log.some((l) => l.includes('"status":499'))).toBe(true);
  });
});

describe('runPipeline', () => {
  it('answers a read whose handler answers from memory before it returns: no promise, no input hold', () => {
    const { ex, res } = exchange('GET', '/api/v1/cached/ok', { 'x-api-key': 'tgk_a_rw' });
    expect(runPipeline(w.deps, ex)).toBeUndefined();
    expect(res.status).toBe('200 OK');
    expect(res.json()).toEqual({ from: 'memory' });
    expect(res.header('X-Request-Id')).toBe('req-1');
    expect(res.header('RateLimit-Policy')).toBe('"key";q=100;w=60');
    expect(res.reads).toEqual([]);
    expect(w.log.some((l) => l.includes('"path":"/api/v1/cached/ok"') && l.includes('"status":200'))).toBe(true);
  });

  it("a synchronous handler's coded error is its problem answer and anything else a 500, in the same turn", () => {
    const coded = exchange('GET', '/api/v1/cached/coded', { 'x-api-key': 'tgk_a_rw' });
    expect(runPipeline(w.deps, coded.ex)).toBeUndefined();
    expect(coded.res.status).toBe('404 Not Found');
    const broken = exchange('GET', '/api/v1/cached/broken', { 'x-api-key': 'tgk_a_rw' });
    expect(runPipeline(w.deps, broken.ex)).toBeUndefined();
    expect(broken.res.status).toBe('500 Internal Server Error');
    expect(broken.res.json()).toMatchObject({ code: 'INTERNAL', requestId: 'req-1' });
    expect(w.log.some((l) => l.includes('kaboom'))).toBe(true);
  });

  it('runs the stages in order to the answer', async () => {
    const { ex, res } = exchange('POST', '/api/v1/orders', { 'x-api-key': 'tgk_a_rw', 'content-type': 'application/json', 'content-length': '23' });
    const done = runPipeline(w.deps, ex);
    // Still inside the uWS callback: the body reader is already registered.
    expect(res.reading).toBe(true);
    res.feed('{"symbol":"ES","qty":1}', true);
    await done;
    expect(res.status).toBe('201 Created');
    expect(res.json()).toEqual({ symbol: 'ES', qty: 1, key: null });
    expect(res.header('RateLimit-Policy')).toBe('"key";q=100;w=60');
  });

  it('frees a claimed key when a step after the claim fails unexpectedly, and answers 500', async () => {
    const logger = w.deps.logger;
    const broken: PipelineDeps = { ...w.deps, logger: Object.assign(Object.create(logger), { child: () => { throw new Error('no logger'); } }) };
    const headers = { 'x-api-key': 'tgk_a_rw', 'idempotency-key': 'k-x', 'content-type': 'application/json', 'content-length': '23' };
    const { ex, res } = exchange('POST', '/api/v1/orders', headers);
    const done = runPipeline(broken, ex);
    res.feed('{"symbol":"ES","qty":1}', true);
    await done;
    expect(res.status).toBe('500 Internal Server Error');
    expect(w.deps.gate.inFlightCount()).toBe(0);
    expect(w.stored.size).toBe(0);
  });

  it('with a shared (asynchronous) limiter: reads the body while the limit is decided, then answers 429 when refused', async () => {
    const decisions: ((allowed: boolean) => void)[] = [];
    const sync = new SlidingLogLimiter(100);
    const shared: RateLimiter = {
      limit: 1,
      sweep: () => undefined,
      hit: () => new Promise((resolve) => decisions.push((allowed) => resolve({ ...sync.hit('x', 0), allowed, limit: 1, retryAfterSeconds: 7 }))),
    };
    const deps: PipelineDeps = { ...w.deps, limiters: { key: shared, webhook: shared } };
    const headers = { 'x-api-key': 'tgk_a_rw', 'content-type': 'application/json', 'content-length': '23' };
    const refused = exchange('POST', '/api/v1/orders', headers);
    const done = runPipeline(deps, refused.ex);
    // The body reader is registered inside the uWS callback although the limiter has not answered.
    expect(refused.res.reading).toBe(true);
    refused.res.feed('{"symbol":"ES","qty":1}', true);
    decisions.shift()!(false);
    await done;
    expect(refused.res.status).toBe('429 Too Many Requests');
    expect(refused.res.header('Retry-After')).toBe('7');
    expect(w.handled).toHaveLength(0);

    const admitted = exchange('POST', '/api/v1/orders', headers);
    const next = runPipeline(deps, admitted.ex);
    decisions.shift()!(true);
    admitted.res.feed('{"symbol":"ES","qty":1}', true);
    await next;
    expect(admitted.res.status).toBe('201 Created');
    expect(admitted.res.header('RateLimit-Policy')).toBe('"key";q=1;w=60');
  });

  it('does not start a write whose client left while its key was claimed (a cluster store answers later), and frees the key', async () => {
    const deps: PipelineDeps = {
      ...w.deps,
      gate: new IdempotencyGate({ get: () => new Promise((r) => setTimeout(() => r(undefined), 5)), put: async () => undefined }),
    };
    const headers = { 'x-api-key': 'tgk_a_rw', 'idempotency-key': 'k-gone', 'content-type': 'application/json', 'content-length': '23' };
    const { ex, res } = exchange('POST', '/api/v1/orders', headers);
    const done = runPipeline(deps, ex);
    res.feed('{"symbol":"ES","qty":1}', true);
    await new Promise((r) => setTimeout(r, 1));
    res.abort();
    await done;
    expect(w.handled).toHaveLength(0);
    expect(deps.gate.inFlightCount()).toBe(0);
    expect(w.log.some((l) => l.includes('"status":499'))).toBe(true);
  });

  it('a write whose client is gone when it reaches the actor is withdrawn: not run, key freed, 499', async () => {
    const { RequestNotSentError } = await import('../../../src/domain/problems.js');
    const seen: boolean[] = [];
    let uwsParsesThePipelinedRequest = () => undefined as void;
    const deps: PipelineDeps = {
      ...w.deps,
      router: new Router([
        defineRoute({
          method: 'POST', path: '/orders', scope: 'trade', operationId: 'place', summary: 'place', responses: [], body: orderBody, idempotent: true,
          // What callActor does: the gateway asks clientGone at the turn's flush.
          handler: async (ctx) => {
            // The handler runs before uWS reads on; then it parses the next request and closes.
            seen.push(ctx.clientGone!());
            uwsParsesThePipelinedRequest();
            await new Promise((r) => setImmediate(r));
            seen.push(ctx.clientGone!());
            if (ctx.clientGone!()) throw new RequestNotSentError('gone');
            return { status: 201, body: {} };
          },
        }),
      ]),
    };
    const headers = { 'x-api-key': 'tgk_a_rw', 'idempotency-key': 'k-flush', 'content-type': 'application/json', 'content-length': '23' };
    const { ex, res } = exchange('POST', '/api/v1/orders', headers);
    uwsParsesThePipelinedRequest = () => res.abort();
    const done = runPipeline(deps, ex);
    res.feed('{"symbol":"ES","qty":1}', true);
    await done;
    expect(seen).toEqual([false, true]);
    expect(res.ended).toBe(false);
    expect(deps.gate.inFlightCount()).toBe(0);
    expect(w.stored.size).toBe(0);
    expect(w.log.some((l) => l.includes('"status":499'))).toBe(true);
  });

  it('holds the connection’s input while an answer is pending past the turn, and resumes it before the answer', async () => {
    const slow: PipelineDeps = {
      ...w.deps,
      router: new Router([
        defineRoute({
          method: 'GET', path: '/slow', scope: 'read', operationId: 'slow', summary: 'slow', responses: [],
          handler: async () => {
            await new Promise((r) => setTimeout(r, 5));
            return { status: 200, body: {} };
          },
        }),
      ]),
    };
    const pending = exchange('GET', '/api/v1/slow', { 'x-api-key': 'tgk_a_rw' });
    await runPipeline(slow, pending.ex);
    expect(pending.res.reads).toEqual(['pause', 'resume', 'end']);
    // Answered within the turn: never paused.
    const quick = exchange('GET', '/api/v1/things/1', { 'x-api-key': 'tgk_a_rw' });
    await runPipeline(w.deps, quick.ex);
    await new Promise((r) => setImmediate(r));
    expect(quick.res.ended).toBe(true);
    expect(quick.res.reads).toEqual([]);
  });

  it('answers a stage’s coded error with its problem body', async () => {
    const { ex, res } = exchange('GET', '/api/v1/things/1', {});
    await runPipeline(w.deps, ex);
    expect(res.status).toBe('401 Unauthorized');
    expect(res.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
  });
});

describe('keylessAdvice', () => {
  const timeout = new AppError('BROKER_TIMEOUT', 'broker did not answer order/placeorder within 5000 ms; the broker may still carry it out: retry with the same Idempotency-Key, never as a new request');
  const trading = { idempotent: true } as RouteDef<any, any>;

  it('a 504 on a trading request sent without an Idempotency-Key does not advise retrying with one (money probe): it says to look at the account first', () => {
    const advised = keylessAdvice({ route: trading }, timeout);
    expect(advised.code).toBe('BROKER_TIMEOUT');
    expect(advised.message).not.toContain('retry with the same Idempotency-Key');
    expect(advised.message).toMatch(/may still carry it out: it was sent without an Idempotency-Key, so sending it again is a new request: look at the account first/);
  });

  it("an actor call's own timeout on an order says it may still reach the broker, and without a key what to do instead (cluster probe: a bare 'did not complete' 504 while the order filled)", () => {
    const actor = new AppError('BROKER_TIMEOUT', 'actor request place-order did not complete within 15000 ms; the order may still reach the broker: retry with the same Idempotency-Key, never as a new request');
    expect(keylessAdvice({ route: trading }, actor).message).toBe(
      'actor request place-order did not complete within 15000 ms; the order may still reach the broker: it was sent without an Idempotency-Key, so sending it again is a new request: look at the account first (GET /api/v1/accounts/{id}/orders or working-orders), and send an Idempotency-Key with trading requests',
    );
  });

  it("leaves a webhook alert's answer alone: its key is the alert's id, and the answer says not to resend it", () => {
    const alert = new AppError('BROKER_TIMEOUT', 'The broker did not confirm the order (actor request place-order did not complete within 2500 ms; the order may still reach the broker) and may still place it: do not resend the alert.');
    expect(keylessAdvice({ route: { idempotent: true, idempotencyKeyFrom: () => undefined } as unknown as RouteDef<any, any> }, alert)).toBe(alert);
  });

  it('keeps the advice for a request that sent a key, and leaves other errors alone', () => {
    expect(keylessAdvice({ route: trading, idempotencyKey: 'k1' }, timeout)).toBe(timeout);
    const other = new AppError('BROKER_UNAVAILABLE', 'not connected', {}, 1);
    expect(keylessAdvice({ route: trading }, other)).toBe(other);
  });
});
