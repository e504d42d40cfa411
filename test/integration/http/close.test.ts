/**
 * Graceful close: stop accepting, let in-flight requests finish, end SSE streams.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { deferred, startEngine, type EngineHarness } from '../../support/engine.js';

let h: EngineHarness;

beforeAll(async () => {
  h = await startEngine();
});
afterAll(async () => {
  await h.stop();
});

/** An order request the engine has handed to its (fake) actor, which holds it until `gate` resolves. */
async function orderHeldAtTheActor(e: EngineHarness) {
  const gate = deferred();
  e.state.hold = gate.promise;
  const calls = e.state.orderCalls;
  const inFlight = fetch(e.url('/v1/accounts/1/orders'), {
    method: 'POST',
    headers: { 'X-API-Key': e.keys.rw, 'Content-Type': 'application/json' },
    body: JSON.stringify({ symbol: 'ES', qty: 1 }),
  });
  while (e.state.orderCalls === calls) await new Promise((r) => setImmediate(r));
  return { gate, inFlight };
}

it('stops accepting, finishes the in-flight request, ends SSE streams, then resolves', async () => {
  const streamEnded = new Promise<string>((resolve, reject) => {
    const req = httpRequest(h.url('/v1/connection-health/stream'), { headers: { 'X-API-Key': h.keys.read } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
  while (h.server.sse.subscriberCount() === 0) await new Promise((r) => setImmediate(r));

  const { gate, inFlight } = await orderHeldAtTheActor(h);

  let closed = false;
  const closing = h.server.close({ graceMs: 10_000 }).then(() => {
    closed = true;
  });
  expect(await streamEnded).toContain('retry: 3000');
  expect(h.server.sse.subscriberCount()).toBe(0);
  await expect(fetch(h.url('/healthz'), { headers: { Connection: 'close' } })).rejects.toThrow();
  expect(closed).toBe(false);

  gate.resolve();
  const res = await inFlight;
  expect(res.status).toBe(201);
  await closing;
  expect(closed).toBe(true);
});

it('a request still in flight when the grace runs out is answered 504 (it may have reached the broker) before its connection closes, not reset (faults probe: UND_ERR_SOCKET after a flatten outlived the drain)', async () => {
  const h2 = await startEngine();
  try {
    const { gate, inFlight } = await orderHeldAtTheActor(h2);
    await h2.server.close({ graceMs: 100 });
    const res = await inFlight;
    expect(res.status).toBe(504);
    expect(res.headers.get('connection')).toBe('close');
    expect(await res.json()).toMatchObject({ code: 'BROKER_TIMEOUT', detail: expect.stringMatching(/^The service is stopping and this request had not finished: it may have reached the broker/) });
    gate.resolve();
  } finally {
    await h2.stop();
  }
});
