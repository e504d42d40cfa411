/**
 * Every HTTP request gets an answer or an immediate close, never a hang: raw sockets against
 * `serve --paper` (HEAD, keep-alive after bodiless answers, repeated credential headers,
 * unknown methods, and the request heads this uWebSockets.js build's parser swallows, whose
 * measured behaviour README documents).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';
import { header, parseResponses, rawExchange, rawRequest } from '../../support/raw-http.js';

let s: Served;
const key = (): [string, string] => ['X-API-Key', s.apiKey];

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', SSE_MAX_STREAMS_PER_KEY: '1' });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('HEAD (item 10)', () => {
  it('answers HEAD like GET without the body, and the connection serves the next request', async () => {
    const get = await http(s.url, 'GET', '/api/v1/me', { key: s.apiKey });
    const r = await rawExchange(s.url, [rawRequest('HEAD', '/api/v1/me', [key()]), rawRequest('GET', '/healthz'), rawRequest('HEAD', '/api-docs/openapi.json'), rawRequest('GET', '/healthz')]);
    const [head, next, docs, last] = parseResponses(r.text, ['HEAD', 'GET', 'HEAD', 'GET']);
    expect(r.closedAfterMs).toBeNull();
    expect(head).toMatchObject({ status: 200, body: '' });
    expect(header(head!, 'content-type')).toBe('application/json');
    expect(Number(header(head!, 'content-length'))).toBe(Buffer.byteLength(get.text));
    expect(next).toMatchObject({ status: 200, body: '{"status":"ok"}' });
    expect(docs!.status).toBe(200);
    expect(Number(header(docs!, 'content-length'))).toBeGreaterThan(1000);
    expect(last!.status).toBe(200);
  });

  it('answers HEAD on the health stream with its headers and opens no stream', async () => {
    const r = await rawExchange(s.url, [rawRequest('HEAD', '/api/v1/connection-health/stream', [key()]), rawRequest('GET', '/healthz')]);
    const [head, next] = parseResponses(r.text, ['HEAD', 'GET']);
    expect(head!.status).toBe(200);
    expect(header(head!, 'content-type')).toBe('text/event-stream; charset=utf-8');
    // The headers its GET would send: an open-ended body, not a Content-Length of 0 (client probe, RFC 9110 §9.3.2).
    expect(header(head!, 'content-length')).toBeUndefined();
    expect(header(head!, 'transfer-encoding')).toBe('chunked');
    expect(next!.status).toBe(200);
  });

  it('lists HEAD in Allow beside GET, and a 405 to HEAD has no body', async () => {
    const r = await rawExchange(s.url, [rawRequest('PUT', '/api/v1/me', [key()]), rawRequest('HEAD', `/api/v1/accounts/${s.accounts[0]}/flatten`, [key()]), rawRequest('GET', '/healthz')]);
    const [put, head, next] = parseResponses(r.text, ['PUT', 'HEAD', 'GET']);
    expect(put!.status).toBe(405);
    expect(header(put!, 'allow')).toBe('GET, HEAD');
    expect(JSON.parse(put!.body).code).toBe('METHOD_NOT_ALLOWED');
    expect(head).toMatchObject({ status: 405, body: '' });
    expect(header(head!, 'allow')).toBe('POST');
    expect(next!.status).toBe(200);
  });
});

describe('DNS rebinding: a server on loopback answers only its own names', () => {
  it('a request whose Host names another server is 421 MISDIRECTED_REQUEST, sign-in and the web app included; localhost and 127.0.0.1 are answered', async () => {
    const port = new URL(s.url).port;
    const login = JSON.stringify({ name: 'demo', password: 'not-the-password' });
    for (const [method, path, body] of [['POST', '/api/v1/session', login], ['GET', '/', ''], ['GET', '/api/v1/me', '']] as const) {
      const raw = `${method} ${path} HTTP/1.1\r\nHost: rebind.attacker.example:${port}\r\nOrigin: http://rebind.attacker.example:${port}\r\nContent-Type: application/json\r\n${body ? `Content-Length: ${body.length}\r\n` : ''}\r\n${body}`;
      const [res] = parseResponses((await rawExchange(s.url, [raw])).text, [method]);
      expect(res!.status, path).toBe(421);
      expect(JSON.parse(res!.body)).toMatchObject({ code: 'MISDIRECTED_REQUEST' });
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const r = await rawExchange(s.url, [`GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`]);
      expect(parseResponses(r.text, ['GET'])[0]!.status, host).toBe(200);
    }
  });
});

describe('bodiless answers keep the connection usable', () => {
  it('a 204 carries no bogus Content-Length and the next request on the connection is answered', async () => {
    const created = await http(s.url, 'POST', '/api/v1/strategies', { key: s.apiKey, body: { name: 'to delete' } });
    expect(created.status, created.text).toBe(201);
    const r = await rawExchange(s.url, [rawRequest('DELETE', `/api/v1/strategies/${created.json.id}`, [key()]), rawRequest('GET', '/healthz')]);
    const [deleted, next] = parseResponses(r.text, ['DELETE', 'GET']);
    expect(deleted!.status).toBe(204);
    expect(header(deleted!, 'content-length')).toBeUndefined();
    expect(next).toMatchObject({ status: 200, body: '{"status":"ok"}' });
  });
});

describe('repeated credential headers and stream limits (item 11)', () => {
  it('refuses two X-API-Key headers with 400 instead of letting the last one win', async () => {
    const r = await rawExchange(s.url, [rawRequest('GET', '/api/v1/me', [['X-API-Key', 'tgk_bogus_bogus'], key()])]);
    const [res] = parseResponses(r.text, ['GET']);
    expect(res!.status).toBe(400);
    expect(JSON.parse(res!.body)).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'header.x-api-key' }] });
  });

  it('refuses two Idempotency-Key headers', async () => {
    const body = JSON.stringify({ symbol: 'ES', side: 'buy', qty: 1 });
    const r = await rawExchange(s.url, [rawRequest('POST', `/api/v1/accounts/${s.accounts[0]}/orders`, [key(), ['Content-Type', 'application/json'], ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']], body)]);
    const [res] = parseResponses(r.text, ['POST']);
    expect(JSON.parse(res!.body)).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'header.idempotency-key' }] });
  });

  it('two Content-Length lines that disagree: the connection is closed unanswered, so bytes past the first length never run as a request of their own', async () => {
    const order = JSON.stringify({ symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4001, clientOrderId: 'smuggled' });
    const inner = rawRequest('POST', `/api/v1/accounts/${s.accounts[0]}/orders`, [key(), ['Content-Type', 'application/json']], order);
    const body = `{}${inner}`;
    for (const lengths of [[2, Buffer.byteLength(body)], [Buffer.byteLength(body), 2]]) {
      const outer = `POST /api/v1/me HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${lengths[0]}\r\nContent-Length: ${lengths[1]}\r\n\r\n${body}`;
      const r = await rawExchange(s.url, [outer], { waitMs: 1500 });
      expect(r.text).toBe('');
      expect(r.closedAfterMs).not.toBeNull();
    }
    const working = await http(s.url, 'GET', `/api/v1/accounts/${s.accounts[0]}/working-orders`, { key: s.apiKey });
    expect(working.status).toBe(200);
    expect(working.text).not.toContain('smuggled');
    // The same length twice frames the body one way only: 400, as for other repeated singletons.
    const same = await rawExchange(s.url, [`POST /api/v1/me HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}`]);
    expect(parseResponses(same.text, ['POST'])[0]!.status).toBe(400);
  });

  it('joins other repeated headers instead of refusing them', async () => {
    const r = await rawExchange(s.url, [rawRequest('GET', '/api/v1/me', [key(), ['Accept', 'application/json'], ['Accept', 'text/plain']])]);
    expect(parseResponses(r.text, ['GET'])[0]!.status).toBe(200);
  });

  it('TOO_MANY_STREAMS carries Retry-After', async () => {
    const first = await rawExchange(s.url, [rawRequest('GET', '/api/v1/connection-health/stream', [key()])], { waitMs: 300 });
    expect(first.text).toContain('text/event-stream');
    // The first socket is gone now; hold one open while the second asks.
    const holder = rawExchange(s.url, [rawRequest('GET', '/api/v1/connection-health/stream', [key()])], { waitMs: 1500 });
    await new Promise((r) => setTimeout(r, 300));
    const second = await http(s.url, 'GET', '/api/v1/connection-health/stream', { key: s.apiKey });
    await holder;
    expect(second.status).toBe(429);
    expect(second.json.code).toBe('TOO_MANY_STREAMS');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('what the HTTP library answers itself (items 5 and 10, README "HTTP edge cases")', () => {
  it('closes the connection at once for methods it does not know (QUERY, FOO)', async () => {
    for (const method of ['QUERY', 'FOO']) {
      const r = await rawExchange(s.url, [rawRequest(method, '/api/v1/me', [key()])]);
      expect(r.closedAfterMs, method).not.toBeNull();
      expect(r.closedAfterMs!, method).toBeLessThan(1000);
    }
  });

  it('closes request heads its parser refuses, unanswered, within its 10 s idle timeout', async () => {
    const many = Array.from({ length: 50 }, (_, i): [string, string] => [`X-H${i}`, 'v']);
    const heads = [
      'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n',
      'GET /healthz HTTP/1.1\r\n\r\n',
      // An empty line before the request line (RFC 9112 §2.2: a server should skip it; clients probe).
      '\r\nGET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n',
      rawRequest('GET', '/healthz', many),
      rawRequest('GET', '/healthz', [['X_Trace', '1']]),
      rawRequest('GET', '/healthz', [['a.b', '1']]),
    ];
    const results = await Promise.all(heads.map((h) => rawExchange(s.url, [h], { waitMs: 15_000 })));
    for (const [i, r] of results.entries()) {
      expect(r.text, JSON.stringify(heads[i])).toBe('');
      expect(r.closedAfterMs, JSON.stringify(heads[i])).not.toBeNull();
      expect(r.closedAfterMs!).toBeLessThan(13_000);
    }
  }, 20_000);
});
