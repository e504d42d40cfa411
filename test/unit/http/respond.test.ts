/** Problem answers from thrown AppErrors (src/http/respond.ts). */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AppError, PROBLEMS } from '../../../src/domain/problems.js';
import { appErrorReply, DEFAULT_UNAVAILABLE_RETRY_AFTER_S, ResponseHandle, routeResponseReply, statusLine } from '../../../src/http/respond.js';
import { FakeResponse } from '../../support/uws.js';

describe('statusLine', () => {
  it('names the reason of every status a problem answers with (fuzz probe: `HTTP/1.1 412 Status`)', () => {
    for (const [code, { status }] of Object.entries(PROBLEMS)) expect(statusLine(status), code).not.toMatch(/ Status$/);
    expect(statusLine(412)).toBe('412 Precondition Failed');
  });
});

describe('appErrorReply', () => {
  it('carries the thrower’s Retry-After', () => {
    const r = appErrorReply(new AppError('RATE_LIMITED', 'slow down', {}, 7));
    expect(r.status).toBe(429);
    expect(r.headers['Retry-After']).toBe('7');
  });

  it('always tells a 503 client when to come back, even when the thrower did not say (DESIGN §3)', () => {
    const r = appErrorReply(new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING'));
    expect(r.status).toBe(503);
    expect(r.headers['Content-Type']).toBe('application/problem+json');
    expect(r.headers['Retry-After']).toBe(String(DEFAULT_UNAVAILABLE_RETRY_AFTER_S));
    expect(JSON.parse(String(r.body))).toMatchObject({ status: 503, code: 'BROKER_UNAVAILABLE' });
  });

  it('adds no Retry-After to other errors', () => {
    expect(appErrorReply(new AppError('NOT_FOUND', 'Not found')).headers['Retry-After']).toBeUndefined();
  });

  it('names how to authenticate on every 401 (RFC 9110 WWW-Authenticate), and only there', () => {
    expect(appErrorReply(new AppError('UNAUTHENTICATED', 'Send a valid API key in X-API-Key')).headers['WWW-Authenticate']).toBe('ApiKey realm="tradegate", header="X-API-Key"');
    expect(appErrorReply(new AppError('INSUFFICIENT_SCOPE', 'no')).headers['WWW-Authenticate']).toBeUndefined();
  });
});

describe('ResponseHandle.send', () => {
  it('writes the answer’s headers, then the request’s own (which win over the answer’s), then Server-Timing, each name once', () => {
    const fake = new FakeResponse();
    const handle = new ResponseHandle(fake.res);
    const reply = { status: 429, headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '5', 'Server-Timing': 'old' }, body: '{}' };
    expect(handle.send(reply, false, { 'X-Request-Id': 'r1', 'Retry-After': '7' }, 'total;dur=1.0')).toBe(true);
    expect(fake.headers).toEqual([
      ['Content-Type', 'application/problem+json'],
      ['Retry-After', '7'],
      ['Server-Timing', 'total;dur=1.0'],
      ['X-Request-Id', 'r1'],
    ]);
    expect(fake.body).toBe('{}');
    // The answer object itself is left as it was (idempotency records keep it).
    expect(reply.headers).toEqual({ 'Content-Type': 'application/problem+json', 'Retry-After': '5', 'Server-Timing': 'old' });
  });

  it('adds Server-Timing after the request’s headers when neither set has one; without extras it writes the answer as it is', () => {
    const a = new FakeResponse();
    new ResponseHandle(a.res).send({ status: 200, headers: { 'Content-Type': 'application/json' }, body: '[]' }, false, { 'X-Request-Id': 'r2' }, 'total;dur=0.1');
    expect(a.headers).toEqual([['Content-Type', 'application/json'], ['X-Request-Id', 'r2'], ['Server-Timing', 'total;dur=0.1']]);
    const b = new FakeResponse();
    new ResponseHandle(b.res).send({ status: 200, headers: { 'Content-Type': 'application/json', 'Server-Timing': 'x;dur=1' }, body: '[]' });
    expect(b.headers).toEqual([['Content-Type', 'application/json'], ['Server-Timing', 'x;dur=1']]);
  });
});

describe('ResponseHandle.send: the head goes to uWS in one call', () => {
  it('writes the status line and every header as one head, in order', () => {
    const fake = new FakeResponse();
    const calls: string[] = [];
    const writeStatus = fake.writeStatus.bind(fake);
    fake.writeStatus = (status: string) => (calls.push(status), writeStatus(status));
    new ResponseHandle(fake.res).send({ status: 201, headers: { 'Content-Type': 'application/json', Location: '/x/1' }, body: '{}' }, false, { 'X-Request-Id': 'r3' }, 'total;dur=0.2');
    expect(calls).toEqual(['201 Created\r\nContent-Type: application/json\r\nLocation: /x/1\r\nX-Request-Id: r3\r\nServer-Timing: total;dur=0.2']);
    expect(fake.status).toBe('201 Created');
  });

  it('never splits the head on a line break in a header (response splitting): it becomes a space', () => {
    const fake = new FakeResponse();
    new ResponseHandle(fake.res).send({ status: 200, headers: { 'X-Note': 'a\r\nSet-Cookie: session=evil', 'X-Other': 'b\nc' }, body: '{}' });
    expect(fake.headers).toEqual([
      ['X-Note', 'a  Set-Cookie: session=evil'],
      ['X-Other', 'b c'],
    ]);
    expect(fake.header('Set-Cookie')).toBeUndefined();
  });
});

describe('ResponseHandle.send of a large body (load probe: a client that never read made the service queue every answer)', () => {
  afterEach(() => vi.useRealTimers());
  const big = JSON.stringify({ data: 'x'.repeat(100_000) });
  const sendBig = (fake: FakeResponse) => new ResponseHandle(fake.res).send({ status: 200, headers: { 'Content-Type': 'application/json' }, body: big });

  it('goes out as the socket drains, from where it stopped, whole and once', () => {
    const fake = new FakeResponse();
    fake.capacity = 10_000;
    expect(sendBig(fake)).toBe(true);
    expect(fake.ended).toBe(false);
    for (let i = 0; i < 20 && !fake.ended; i++) fake.drain(7_000);
    expect(fake.ended).toBe(true);
    expect(fake.body).toBe(big);
  });

  it('a body the client takes nothing of for 10 s is dropped with its connection; one it keeps taking is not', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const stalled = new FakeResponse();
    stalled.capacity = 10_000;
    sendBig(stalled);
    const slow = new FakeResponse();
    slow.capacity = 10_000;
    sendBig(slow);
    for (let s = 0; s < 4; s++) {
      vi.advanceTimersByTime(6_000);
      slow.drain(5_000);
    }
    expect(stalled.closedConnection).toBe(true);
    expect(slow.closedConnection).toBe(false);
    vi.advanceTimersByTime(10_000);
    expect(slow.closedConnection).toBe(true);
    expect(slow.ended).toBe(false);
  });

  it('a client gone meanwhile is not closed again; a small body is ended at once', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const gone = new FakeResponse();
    gone.capacity = 10_000;
    sendBig(gone);
    gone.abort();
    vi.advanceTimersByTime(20_000);
    expect(gone.closedConnection).toBe(false);
    const small = new FakeResponse();
    small.capacity = 0;
    new ResponseHandle(small.res).send({ status: 200, headers: {}, body: '{"ok":true}' });
    expect([small.ended, small.body]).toEqual([true, '{"ok":true}']);
  });
});

describe('routeResponseReply', () => {
  it('serializes bodies as JSON unless the handler set a Content-Type (any case), and copies the handler’s headers', () => {
    const headers = { 'Cache-Control': 'no-store' };
    const json = routeResponseReply({ status: 200, body: { a: 1 }, headers });
    expect(json).toEqual({ status: 200, headers: { 'Cache-Control': 'no-store', 'Content-Type': 'application/json' }, body: '{"a":1}' });
    expect(headers).toEqual({ 'Cache-Control': 'no-store' });
    const text = routeResponseReply({ status: 200, body: 'hi', headers: { 'content-type': 'text/plain' } });
    expect(text).toEqual({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'hi' });
    const problem = routeResponseReply({ status: 404, body: { code: 'NOT_FOUND', status: 404, title: 'Not Found' } });
    expect(problem.headers['Content-Type']).toBe('application/problem+json');
    expect(routeResponseReply({ status: 204, body: { a: 1 } })).toEqual({ status: 204, headers: {} });
  });
});
