/** Reading of 4-line WebSocket requests, including Tradovate's handling of missing lines. */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { normaliseEndpoint, parseRequest } from '../../../src/sim/ws-session.js';

it('splits endpoint, id, query and body; the body may contain newlines', () => {
  expect(parseRequest('order/placeorder\n4\n\n{"a":1}')).toEqual({ endpoint: 'order/placeorder', id: '4', query: '', body: '{"a":1}' });
  expect(parseRequest('x\n1\nq=1\n{\n}')).toEqual({ endpoint: 'x', id: '1', query: 'q=1', body: '{\n}' });
});

it('reads a request missing its empty query line as query=body, body empty (the ISS#32 behaviour)', () => {
  expect(parseRequest('md/subscribeQuote\n3\n{"symbol":"ESM8"}')).toEqual({ endpoint: 'md/subscribeQuote', id: '3', query: '{"symbol":"ESM8"}', body: '' });
  expect(parseRequest('authorize')).toEqual({ endpoint: 'authorize', id: '', query: '', body: '' });
});

it('round-trips any endpoint/id/query without newlines and any body', () => {
  const line = fc.string().filter((s) => !s.includes('\n'));
  fc.assert(fc.property(line, line, line, fc.string(), (endpoint, id, query, body) => {
    expect(parseRequest(`${endpoint}\n${id}\n${query}\n${body}`)).toEqual({ endpoint, id, query, body });
  }));
});

it('normalises endpoint case, leading slashes and a v1 prefix', () => {
  expect(normaliseEndpoint('/v1/Order/PlaceOrder')).toBe('order/placeorder');
  expect(normaliseEndpoint('auth/accessTokenRequest')).toBe('auth/accesstokenrequest');
});
