import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { configSchema } from '../../../src/config.js';
import { PROBLEMS } from '../../../src/domain/problems.js';
import { escapeHtml, renderApiDocsPage } from '../../../src/http/api-docs-page.js';
import { HEALTH_STREAM_ROUTE } from '../../../src/http/health-stream.js';
import { TRADINGVIEW_TEMPLATE } from '../../../src/http/webhook-payload.js';
import { parseClock } from '../../../src/domain/trading-time.js';
import { buildOpenApiDocument, openApiPath } from '../../../src/http/openapi.js';
import { defineRoute, type RouteDef } from '../../../src/http/route-types.js';
import { AUTH_ERRORS, errors, type RouteDeps } from '../../../src/http/routes/common.js';
import { buildRoutes } from '../../../src/http/routes/index.js';

const order = z.strictObject({ symbol: z.string().describe('ES1!, ESZ6, …'), qty: z.number().int().positive() });
const routes: RouteDef<any, any>[] = [
  defineRoute({
    method: 'POST', path: '/accounts/:id/orders', scope: 'trade', operationId: 'placeOrder', summary: 'Place an order <now>', tags: ['Orders'],
    body: order, idempotent: true,
    responses: [{ status: 201, description: 'Placed', schema: z.object({ orderId: z.string() }) }, { status: 503, description: 'Broker unavailable' }],
    handler: async () => ({ status: 201 }),
  }),
  defineRoute({
    method: 'GET', path: '/accounts', scope: 'read', operationId: 'listAccounts', summary: 'Accounts', tags: ['Accounts'],
    query: z.strictObject({ limit: z.coerce.number().int().min(1).max(500).default(100), cursor: z.string().optional() }),
    responses: [{ status: 200, description: 'List' }],
    handler: async () => ({ status: 200 }),
  }),
  defineRoute({
    method: 'POST', path: '/webhooks/:token', scope: 'webhook', operationId: 'receiveWebhook', summary: 'Alert', tags: ['Webhooks'],
    body: z.looseObject({ action: z.string() }), lenientContentType: true, idempotent: true,
    responses: [{ status: 200, description: 'Accepted' }],
    handler: async () => ({ status: 200 }),
  }),
  defineRoute({
    method: 'POST', path: '/api-keys', scope: 'session', operationId: 'createApiKey', summary: 'Create a key', tags: ['api-keys'],
    body: z.strictObject({ name: z.string() }),
    responses: [{ status: 201, description: 'Created' }],
    handler: async () => ({ status: 201 }),
  }),
  HEALTH_STREAM_ROUTE,
];
const config = configSchema.parse({});
const doc = buildOpenApiDocument(routes, { config });

/** Every `$ref` in the document points at something that exists. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refs(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe('buildOpenApiDocument', () => {
  it('is an OpenAPI 3.1 document with both API prefixes as servers and the X-API-Key scheme', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc['servers']).toEqual([expect.objectContaining({ url: '/api/v1' }), expect.objectContaining({ url: '/v1' })]);
    expect(doc['components']).toMatchObject({ securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } } });
    expect(openApiPath('/a/:id/b/:orderId')).toBe('/a/{id}/b/{orderId}');
  });

  it('has one operation per route with path params, query params, the Idempotency-Key header and the zod body schema', () => {
    const place = doc.paths['/accounts/{id}/orders']!['post']!;
    expect(place['operationId']).toBe('placeOrder');
    expect(place['x-required-scope']).toBe('trade');
    const params = place['parameters'] as { name: string; in: string }[];
    expect(params.map((p) => `${p.in}:${p.name}`)).toEqual(['path:id', 'header:Idempotency-Key']);
    expect(place['requestBody']).toMatchObject({
      content: { 'application/json': { schema: { type: 'object', additionalProperties: false, required: ['symbol', 'qty'], properties: { qty: { type: 'integer' } } } } },
    });
    const responses = place['responses'] as Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }>;
    expect(Object.keys(responses).sort()).toEqual(['201', '400', '401', '403', '404', '409', '412', '413', '415', '421', '422', '429', '500', '503', 'default']);
    expect(responses['default']).toEqual({ $ref: '#/components/responses/Problem' });
    expect(responses['201']!.content!['application/json']).toMatchObject({ schema: { properties: { orderId: { type: 'string' } } } });
    expect(responses['409']!.content!['application/problem+json']).toEqual({ schema: { $ref: '#/components/schemas/Problem' } });
    expect(Object.keys(responses['201']!.headers!)).toEqual(expect.arrayContaining(['Idempotent-Replayed', 'RateLimit', 'RateLimit-Policy']));
    expect(Object.keys(responses['429']!.headers!)).toContain('Retry-After');

    const list = doc.paths['/accounts']!['get']!;
    expect((list['parameters'] as { name: string; in: string; required: boolean }[]).map((p) => [p.name, p.in, p.required])).toEqual([
      ['limit', 'query', false],
      ['cursor', 'query', false],
    ]);
  });

  it('documents the session cookie: session-only routes need it (and X-CSRF-Token on writes), keyed routes take either', () => {
    expect(doc['components']).toMatchObject({ securitySchemes: { SessionCookie: { type: 'apiKey', in: 'cookie', name: 'tg_session' } } });
    expect(doc['security']).toEqual([{ ApiKey: [] }, { SessionCookie: [] }]);
    const op = doc.paths['/api-keys']!['post']!;
    expect(op['security']).toEqual([{ SessionCookie: [] }]);
    expect(op['parameters']).toEqual([expect.objectContaining({ name: 'X-CSRF-Token', in: 'header', required: true })]);
    expect(Object.keys(op['responses'] as object)).toEqual(expect.arrayContaining(['401', '403', '429']));
    expect(doc.paths['/accounts']!['get']!['security']).toBeUndefined();
  });

  it('marks webhook and public operations as needing no API key; webhooks also accept text/plain', () => {
    const hook = doc.paths['/webhooks/{token}']!['post']!;
    expect(hook['security']).toEqual([]);
    expect(Object.keys((hook['requestBody'] as { content: object }).content)).toEqual(['application/json', 'text/plain']);
    expect(doc.paths['/healthz']!['get']!['security']).toEqual([]);
    expect(doc.paths['/api-docs/openapi.json']).toBeDefined();
  });

  it('documents the SSE stream formats and the whole error catalogue', () => {
    const sse = doc.paths['/connection-health/stream']!['get']!;
    expect((sse['responses'] as Record<string, { content: object }>)['200']!.content).toHaveProperty('text/event-stream');
    const schemas = (doc['components'] as { schemas: Record<string, { properties?: Record<string, { enum?: string[] }> }> }).schemas;
    expect(Object.keys(schemas)).toEqual(expect.arrayContaining(['Problem', 'SnapshotMessage', 'StatusMessage', 'HeartbeatMessage', 'BracketAlertMessage']));
    expect(schemas['Problem']!.properties!['code']!.enum).toEqual(Object.keys(PROBLEMS));
    expect(doc['x-problem-codes']).toHaveLength(Object.keys(PROBLEMS).length);
  });

  it('describes every message the stream sends (guard and gap too) and how to resume it', () => {
    const sse = doc.paths['/connection-health/stream']!['get']! as any;
    const refs = (sse.responses['200'].content['text/event-stream'].schema.oneOf as { $ref: string }[]).map((r) => r.$ref.split('/').at(-1));
    expect(refs).toEqual(expect.arrayContaining(['GuardMessage', 'GapMessage', 'RevokedMessage', 'BracketAlertMessage']));
    const schemas = (doc['components'] as any).schemas;
    expect(schemas.GuardMessage.properties.guard.enum).toContain('kill_switch');
    const params = (sse.parameters as { name: string; in: string }[]).map((p) => `${p.in}:${p.name}`);
    expect(params).toEqual(expect.arrayContaining(['header:Last-Event-ID', 'query:lastEventId']));
    expect(sse.responses['429'].description).toMatch(/TOO_MANY_STREAMS/);
    expect(sse.responses['401'].headers).toHaveProperty('WWW-Authenticate');
  });

  it('keeps both entries of a status a route lists twice (its own 409 and a shared one)', () => {
    const twice = buildOpenApiDocument(
      [
        defineRoute({
          method: 'POST', path: '/accounts/:id/flatten', scope: 'trade', operationId: 'flatten', summary: 'Flatten', tags: ['orders'],
          responses: [{ status: 200, description: 'Flattened' }, { status: 409, description: 'SYMBOL_MISMATCH' }, { status: 409, description: 'CONNECTION_FAILED' }],
          handler: async () => ({ status: 200 }),
        }),
      ],
      { config },
    ) as any;
    expect(twice.paths['/accounts/{id}/flatten'].post.responses['409'].description).toBe('SYMBOL_MISMATCH; CONNECTION_FAILED');
  });

  it('resolves every $ref', () => {
    for (const ref of refs(doc)) {
      const target = ref.replace(/^#\//, '').split('/').reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], doc);
      expect(target, ref).toBeDefined();
    }
  });

  it('carries the guide: symbol forms, products, rate limits as configured and a TradingView template that is valid JSON', () => {
    const ids = doc['x-guide'].map((s) => s.id);
    expect(ids).toEqual(expect.arrayContaining(['authentication', 'rate-limits', 'idempotency', 'errors', 'health-stream', 'symbols', 'products', 'webhooks']));
    const symbols = doc['x-guide'].find((s) => s.id === 'symbols')!;
    expect(symbols.table!.rows.map((r) => r[1])).toEqual(['ESZ6', 'ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', 'ESZ26', 'ESZ2026', 'ES 12-26']);
    expect(doc['x-guide'].find((s) => s.id === 'products')!.table!.rows.map((r) => r[0])).toEqual(expect.arrayContaining(['ES', 'MNQ', 'CL', '6E']));
    expect(JSON.stringify(doc['x-guide'])).toContain('q=120;w=60');
    expect(JSON.parse(TRADINGVIEW_TEMPLATE)).toMatchObject({ action: '{{strategy.order.action}}', symbol: '{{ticker}}' });
  });
});

describe('what the document says of bodies that the server checks in code', () => {
  const full = buildOpenApiDocument(buildRoutes({} as RouteDeps), { config });
  const body = (path: string, method: string) => JSON.stringify((full.paths[path]![method] as { requestBody: unknown }).requestBody);
  it('states the rules a client generating requests from it must follow (clock times, time zones, a non-empty PATCH)', () => {
    expect(body('/accounts/{id}/guards', 'put')).toContain('"pattern":"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"');
    expect(body('/accounts/{id}/guards', 'put')).toMatch(/"timeZone":\{[^}]*"minLength":1/);
    expect(body('/connections/{id}', 'patch')).toContain('"minProperties":1');
    // The pattern says what parseClock accepts, no more, no less.
    const pattern = /^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$/;
    for (const t of ['00:00', '09:30', '23:59', '24:00', '24:01', '9:30', '25:00', '12:60', '']) expect(pattern.test(t), t).toBe(parseClock(t) !== null);
  });

  it('a body its schema accepts is one the server takes: the prices each order type takes, a window that cannot start at 24:00 (clients probe: four schema-valid bodies were 400)', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    const schemaOf = (path: string, method: string) =>
      (full.paths[path]![method] as { requestBody: { content: Record<string, { schema: object }> } }).requestBody.content['application/json']!.schema;
    const order = ajv.compile({ ...schemaOf('/accounts/{id}/orders', 'post'), components: full.components });
    const base = { symbol: 'ES1!', side: 'buy', qty: 1 };
    const cases: [object, boolean][] = [
      [{ ...base }, true],
      [{ ...base, type: 'market' }, true],
      [{ ...base, price: 5000 }, false],
      [{ ...base, type: 'market', price: 5000, stopPrice: null }, false],
      [{ ...base, type: 'limit' }, false],
      [{ ...base, type: 'limit', price: 5000 }, true],
      [{ ...base, type: 'limit', price: 5000, stopPrice: 5100 }, false],
      [{ ...base, type: 'stop', price: 5000, stopPrice: 5100 }, false],
      [{ ...base, type: 'stop', stopPrice: 5100, price: null }, true],
      [{ ...base, type: 'stop_limit', stopPrice: 5100 }, false],
      [{ ...base, type: 'stop_limit', price: 5101, stopPrice: 5100 }, true],
    ];
    for (const [b, ok] of cases) expect(order(b), JSON.stringify(b)).toBe(ok);
    const guards = ajv.compile({ ...schemaOf('/accounts/{id}/guards', 'put'), components: full.components });
    const windows = (start: string, end: string) => ({ tradingWindows: { timeZone: 'America/Chicago', windows: [{ days: ['mon'], start, end }] } });
    expect(guards(windows('08:30', '24:00'))).toBe(true);
    expect(guards(windows('24:00', '08:30'))).toBe(false);
  });

  it('asks something to see of names, not of descriptions (fuzz probe: it promised it of a strategy description, which may be blank)', () => {
    const strategy = JSON.parse(body('/strategies', 'post')) as { content: Record<string, { schema: { properties: Record<string, { description?: string; anyOf?: { description?: string }[] }> } }> };
    const props = strategy.content['application/json']!.schema.properties;
    const said = (p: { description?: string; anyOf?: { description?: string }[] } | undefined) => JSON.stringify(p);
    expect(said(props['name'])).toContain('and something to see');
    expect(said(props['description'])).toContain('line breaks and tabs allowed');
    expect(said(props['description'])).not.toContain('something to see');
  });
});

describe('what the document lists of refusals the pipeline makes', () => {
  it('every create that refuses an Idempotency-Key lists INVALID_IDEMPOTENCY_KEY under its 400, also beside codes of its own (clients probe: four did not)', () => {
    const full = buildOpenApiDocument(buildRoutes({} as RouteDeps), { config });
    const creates = buildRoutes({} as RouteDeps).filter((r) => r.refusesIdempotencyKey === true);
    expect(creates.length).toBeGreaterThanOrEqual(6);
    for (const route of creates) {
      const path = route.path.replace(/:([A-Za-z_]\w*)/g, '{$1}');
      const op = full.paths[path]![route.method.toLowerCase()] as { responses: Record<string, { description: string }> };
      expect(op.responses['400']?.description, `${route.method} ${route.path}`).toContain('INVALID_IDEMPOTENCY_KEY');
    }
  });
});

describe('what the document promises of bodies and rate-limit headers', () => {
  const lockBody = z.strictObject({ flatten: z.boolean().default(true) });
  const doc = buildOpenApiDocument(
    [
      defineRoute({
        method: 'POST', path: '/accounts/:id/lock', scope: 'trade', operationId: 'lockAccount', summary: 'Lock',
        body: lockBody.optional(),
        responses: [{ status: 200, description: 'Locked' }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND')],
        handler: async () => ({ status: 200 }),
      }),
      defineRoute({
        method: 'PUT', path: '/accounts/:id/guards', scope: 'trade', operationId: 'putGuards', summary: 'Guards',
        body: lockBody,
        responses: [{ status: 200, description: 'Set' }, ...errors(...AUTH_ERRORS, 'RISK_GUARD')],
        handler: async () => ({ status: 200 }),
      }),
      defineRoute({
        method: 'GET', path: '/api-keys', scope: 'session', operationId: 'listApiKeys', summary: 'Keys',
        responses: [{ status: 200, description: 'Keys' }, ...errors('UNAUTHENTICATED', 'SESSION_REQUIRED', 'RATE_LIMITED')],
        handler: async () => ({ status: 200 }),
      }),
      defineRoute({
        method: 'POST', path: '/webhooks/:token', scope: 'webhook', operationId: 'receiveWebhook', summary: 'Alert',
        body: z.looseObject({ action: z.string() }),
        responses: [{ status: 201, description: 'Placed' }, ...errors('VALIDATION_FAILED', 'ACCOUNT_INACTIVE', 'NOT_FOUND', 'RATE_LIMITED')],
        handler: async () => ({ status: 201 }),
      }),
    ],
    { config },
  );
  const op = (path: string, method: string) => doc.paths[path]![method]! as { requestBody?: { required: boolean }; responses: Record<string, { headers?: Record<string, unknown> }> };
  const rated = (path: string, method: string) =>
    Object.entries(op(path, method).responses)
      .filter(([, r]) => r.headers && 'RateLimit' in r.headers)
      .map(([status]) => status);

  it('a body the route takes or leaves out is not required; a body schema that needs one is', () => {
    expect(op('/accounts/{id}/lock', 'post').requestBody!.required).toBe(false);
    expect(op('/accounts/{id}/guards', 'put').requestBody!.required).toBe(true);
    expect(op('/webhooks/{token}', 'post').requestBody!.required).toBe(true);
  });

  it('lists the rate-limit headers only on answers given after the limiter counted the request', () => {
    // 401 and INSUFFICIENT_SCOPE are answered while authenticating: no key bucket to report.
    expect(rated('/accounts/{id}/lock', 'post')).toEqual(['200', '400', '404', '412', '413', '415', '429', '500']);
    // A 403 the handler answers (RISK_GUARD) was counted.
    expect(rated('/accounts/{id}/guards', 'put')).toEqual(expect.arrayContaining(['200', '403']));
    expect(rated('/accounts/{id}/guards', 'put')).not.toContain('401');
    // Session routes: SESSION_REQUIRED and CSRF_REJECTED are authentication's too.
    expect(rated('/api-keys', 'get')).toEqual(['200', '400', '413', '429', '500']);
    // A webhook's 404 is its unknown token; its 403 (inactive account) comes from the handler.
    expect(rated('/webhooks/{token}', 'post')).toEqual(['201', '400', '403', '412', '413', '415', '429', '500']);
    expect(Object.keys(op('/webhooks/{token}', 'post').responses)).toContain('404');
  });
});

describe('renderApiDocsPage', () => {
  const html = renderApiDocsPage(doc);

  it('is self-contained: no scripts, stylesheets or fonts from elsewhere', () => {
    expect(html).not.toMatch(/<script|<link|@import|url\(/i);
    expect(html).not.toMatch(/(src|href)="https?:/i);
  });

  it('has an anchor for every problem type URI and every operation, and escapes text', () => {
    for (const code of Object.keys(PROBLEMS)) expect(html).toContain(`id="problem-${code.toLowerCase().replace(/_/g, '-')}"`);
    expect(html).toContain('id="op-placeOrder"');
    expect(html).toContain('Place an order &lt;now&gt;');
    expect(html).toContain('/api/v1/accounts/{id}/orders');
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });
});

describe('the served document lists the hardening routes and codes', () => {
  it('has the connection routes, the new problem codes with their statuses, and the revoked stream message', async () => {
    const { world } = await import('../../support/routes.js');
    const w = await world();
    try {
      const doc = buildOpenApiDocument([...w.routes, HEALTH_STREAM_ROUTE], { config: configSchema.parse({}) }) as any;
      expect(Object.keys(doc.paths['/connections/{id}'])).toEqual(['patch', 'delete']);
      expect(doc.paths['/connections/{id}/reconnect'].post.responses['202']).toBeDefined();
      expect(doc.paths['/connections'].post.responses['409'].description).toContain('QUOTA_EXCEEDED');
      expect(doc.paths['/connections'].post.responses['503'].description).toContain('ACTOR_LIMIT_REACHED');
      expect(doc.paths['/accounts/{id}/orders'].post.responses['400'].description).toContain('PRICE_OUT_OF_RANGE');
      expect(doc.paths['/accounts/{id}/orders'].post.responses['409'].description).toContain('CONNECTION_FAILED');
      const text = JSON.stringify(doc);
      for (const code of ['PRICE_OUT_OF_RANGE', 'CONNECTION_FAILED', 'QUOTA_EXCEEDED', 'ACTOR_LIMIT_REACHED']) expect(text).toContain(code);
      expect(PROBLEMS).toMatchObject({ PRICE_OUT_OF_RANGE: { status: 400 }, CONNECTION_FAILED: { status: 409 }, QUOTA_EXCEEDED: { status: 409 }, ACTOR_LIMIT_REACHED: { status: 503 } });
      expect(doc.components.schemas.RevokedMessage.properties.reason.enum).toEqual(['key-revoked', 'user-deleted', 'password-changed', 'session-ended']);
    } finally {
      await w.close();
    }
  });

  it('every operation that takes an idempotency key lists its three refusals; a leg cancel lists CONFLICT', async () => {
    const { world } = await import('../../support/routes.js');
    const w = await world();
    try {
      const doc = buildOpenApiDocument([...w.routes, HEALTH_STREAM_ROUTE], { config: configSchema.parse({}) }) as any;
      const idempotent = w.routes.filter((r) => r.idempotent);
      expect(idempotent.map((r) => r.operationId).sort()).toEqual(['flattenAccount', 'placeOrder', 'receiveWebhook'].sort());
      for (const r of idempotent) {
        const responses = doc.paths[openApiPath(r.path)][r.method.toLowerCase()].responses;
        expect(responses['400'].description, r.operationId).toContain('INVALID_IDEMPOTENCY_KEY');
        expect(responses['409'].description, r.operationId).toContain('IDEMPOTENCY_KEY_IN_USE');
        expect(responses['422'].description, r.operationId).toContain('IDEMPOTENCY_KEY_REUSED');
      }
      expect(doc.paths['/accounts/{id}/orders/{orderId}'].delete.responses['409'].description).toContain('CONFLICT');
    } finally {
      await w.close();
    }
  });
});

describe('portable to other tools (client probe)', () => {
  const real = buildOpenApiDocument(buildRoutes({} as RouteDeps), { config });
  const all = JSON.stringify(real);
  it('carries no JavaScript-only regex syntax (\\p{…}, \\u{…}): Python re and ajv without unicodeRegExp could not compile the name patterns', () => {
    const patterns: string[] = [];
    const walk = (n: unknown): void => {
      if (Array.isArray(n)) n.forEach(walk);
      else if (n && typeof n === 'object') for (const [k, v] of Object.entries(n)) k === 'pattern' && typeof v === 'string' ? patterns.push(v) : walk(v);
    };
    walk(real);
    expect(patterns.filter((p) => /\\[pPu]\{/.test(p))).toEqual([]);
    expect(all).toContain('Plain text: no control, invisible or bidirectional-override characters');
  });

  it('says the configured ORDER_QTY_MAX as the maximum of every order and strategy quantity', () => {
    // Nullable ones too (strategies: an anyOf of the number and null; re-probe).
    const qtyMaxima = (d: unknown): number[] => [...JSON.stringify(d).matchAll(/"qty":\{(?:"anyOf":\[\{)?[^{}]*"maximum":(\d+)/g)].map((m) => Number(m[1]));
    expect(new Set(qtyMaxima(real))).toEqual(new Set([10_000]));
    const raised = buildOpenApiDocument(buildRoutes({} as RouteDeps), { config: configSchema.parse({ orderQtyMax: 20_000 }) });
    expect(new Set(qtyMaxima(raised))).toEqual(new Set([20_000]));
  });
});
