import { describe, expect, it } from 'vitest';
import { MAX_PARAM_LENGTH, Router, stripApiPrefix, type Routable } from '../../../src/http/router.js';

const routes: Routable[] = [
  { method: 'GET', path: '/accounts' },
  { method: 'GET', path: '/accounts/:id' },
  { method: 'GET', path: '/accounts/:id/orders' },
  { method: 'POST', path: '/accounts/:id/orders' },
  { method: 'DELETE', path: '/accounts/:id/orders/:orderId' },
  { method: 'GET', path: '/webhook-tokens/:id' },
  { method: 'GET', path: '/webhook-tokens/export' },
];
const router = new Router(routes);

describe('stripApiPrefix', () => {
  it('accepts /api/v1 and /v1 and nothing else', () => {
    expect(stripApiPrefix('/api/v1/accounts')).toBe('/accounts');
    expect(stripApiPrefix('/v1/accounts')).toBe('/accounts');
    expect(stripApiPrefix('/v1')).toBe('/');
    expect(stripApiPrefix('/v10/accounts')).toBeUndefined();
    expect(stripApiPrefix('/api/v2/accounts')).toBeUndefined();
    expect(stripApiPrefix('/accounts')).toBeUndefined();
  });
});

describe('Router', () => {
  it('matches exact and :param segments and decodes parameters', () => {
    expect(router.match('GET', '/accounts')).toMatchObject({ kind: 'found', params: {} });
    expect(router.match('DELETE', '/accounts/7/orders/a%2Fb')).toEqual({
      kind: 'found', route: routes[4], params: { id: '7', orderId: 'a/b' },
    });
  });

  it('tolerates a trailing slash and prefers literal segments over parameters', () => {
    expect(router.match('GET', '/accounts/7/')).toMatchObject({ kind: 'found', params: { id: '7' } });
    expect(router.match('GET', '/webhook-tokens/export')).toMatchObject({ kind: 'found', route: routes[6] });
    expect(router.match('GET', '/webhook-tokens/abc')).toMatchObject({ kind: 'found', route: routes[5] });
  });

  it('a path without parameters matches the same route whether looked up whole or walked segment by segment', () => {
    for (const [method, path] of [['GET', '/accounts'], ['GET', '/webhook-tokens/export']] as const) {
      const whole = router.match(method, path);
      expect(whole.kind).toBe('found');
      expect(router.match(method, `${path}/`)).toEqual(whole);
      expect(router.match(method, path.replace('/', '//'))).toEqual(whole);
    }
    expect(router.match('POST', '/accounts')).toEqual({ kind: 'method-not-allowed', allow: ['GET'] });
  });

  it('reports 405 with the allowed methods when only the method is wrong', () => {
    expect(router.match('PATCH', '/accounts/7/orders')).toEqual({ kind: 'method-not-allowed', allow: ['GET', 'POST'] });
  });

  it('reports not-found for unknown paths, extra segments and undecodable parameters', () => {
    for (const p of ['/nothing', '/accounts/7/orders/1/x', '/accounts/%E0%A4%A']) expect(router.match('GET', p)).toEqual({ kind: 'not-found' });
  });

  it('matches no route with a parameter longer than MAX_PARAM_LENGTH, decoded, so it never reaches a store lookup', () => {
    const longest = 'a'.repeat(MAX_PARAM_LENGTH);
    expect(router.match('GET', `/webhook-tokens/${longest}`)).toMatchObject({ kind: 'found', params: { id: longest } });
    expect(router.match('GET', `/webhook-tokens/${longest}a`)).toEqual({ kind: 'not-found' });
    expect(router.match('DELETE', `/accounts/7/orders/${'%41'.repeat(MAX_PARAM_LENGTH + 1)}`)).toEqual({ kind: 'not-found' });
    // Not a 405 either: no route of that shape takes such a parameter.
    expect(router.match('PATCH', `/accounts/${'7'.repeat(MAX_PARAM_LENGTH + 1)}/orders`)).toEqual({ kind: 'not-found' });
  });

  it('refuses a table with two routes of the same shape', () => {
    expect(() => new Router([{ method: 'GET', path: '/a/:x' }, { method: 'GET', path: '/a/:y' }])).toThrow(/duplicate/);
  });
});
