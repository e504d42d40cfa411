import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('buildRoutes', () => {
  it('covers every endpoint of DESIGN §4 and the web app with the documented scope', () => {
    const table = Object.fromEntries(w.routes.map((r) => [`${r.method} ${r.path}`, r.scope]));
    expect(table).toEqual({
      'POST /accounts/:id/orders': 'trade',
      'DELETE /accounts/:id/orders/:orderId': 'trade',
      'GET /accounts/:id/working-orders': 'read',
      'GET /accounts/:id/orders': 'read',
      'GET /accounts': 'read',
      'GET /accounts/:id': 'read',
      'GET /accounts/:id/positions': 'read',
      'POST /accounts/:id/flatten': 'trade',
      'GET /me': 'read',
      'GET /connections': 'read',
      'POST /connections': 'trade',
      'PATCH /connections/:id': 'trade',
      'POST /connections/:id/reconnect': 'trade',
      'DELETE /connections/:id': 'trade',
      'GET /strategies': 'read',
      'POST /strategies': 'trade',
      'GET /strategies/:id': 'read',
      'PATCH /strategies/:id': 'trade',
      'DELETE /strategies/:id': 'trade',
      'GET /webhook-tokens': 'read',
      'POST /webhook-tokens': 'trade',
      'GET /webhook-tokens/:id': 'read',
      'PATCH /webhook-tokens/:id': 'trade',
      'DELETE /webhook-tokens/:id': 'trade',
      'POST /webhooks/:token': 'webhook',
      // The web app's API: sessions and key management are session-only.
      'POST /session': 'none',
      'GET /session': 'session',
      'DELETE /session': 'session',
      'POST /me/password': 'session',
      'GET /api-keys': 'session',
      'POST /api-keys': 'session',
      'DELETE /api-keys/:id': 'session',
      'GET /webhook-tokens/:id/alerts': 'read',
      'POST /webhook-tokens/:id/rotate': 'trade',
      'POST /connections/tradovate': 'trade',
      'GET /accounts/:id/guards': 'read',
      'PUT /accounts/:id/guards': 'trade',
      'POST /accounts/:id/lock': 'trade',
      'POST /accounts/:id/unlock': 'trade',
      'GET /api-keys/:id/guards': 'session',
      'PUT /api-keys/:id/guards': 'session',
    });
  });

  it('documents a success schema and unique operation ids for every route', () => {
    const ids = new Set<string>();
    for (const r of w.routes) {
      expect(ids.has(r.operationId)).toBe(false);
      ids.add(r.operationId);
      const ok = r.responses.filter((d) => d.status < 300);
      expect(ok.length).toBeGreaterThan(0);
      for (const d of ok) if (d.status !== 204) expect(d.schema, `${r.operationId} ${d.status}`).toBeDefined();
    }
  });

  it('generates JSON Schema from every request and response schema (for /api-docs)', () => {
    for (const r of w.routes) {
      for (const s of [r.body, r.query, ...r.responses.map((d) => d.schema)]) {
        if (s) expect(() => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' })).not.toThrow();
      }
    }
  });

  it('makes every API write body strict except the lenient webhook payload', () => {
    for (const r of w.routes) {
      if (!r.body) continue;
      const probe = r.body.safeParse({ surelyNotAField: 1 });
      const issues = probe.success ? [] : probe.error.issues;
      const unknownKey = issues.some((i) => i.code === 'unrecognized_keys');
      if (r.path === '/webhooks/:token') expect(unknownKey).toBe(false);
      else expect(unknownKey, r.operationId).toBe(true);
    }
  });
});
