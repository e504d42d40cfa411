/**
 * ActorClient over a real worker thread (an inline worker speaking the request plane on a
 * MessagePort and comlink for control): deadlines, pending calls rejected on worker exit,
 * errors rebuilt by code, many concurrent calls answered in batches and matched by id.
 */
import { MessageChannel, Worker } from 'node:worker_threads';
import { afterEach, expect, test } from 'vitest';
import { ActorClient } from '../../../src/actors/actor-client.js';
import { AppError } from '../../../src/domain/problems.js';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Comlink = require('comlink');
const nodeEndpoint = require('comlink/dist/umd/node-adapter.js');
Comlink.expose({ async add() {}, async remove() {}, async stats() { return { actors: 0, heapUsed: 0, rss: 0 }; } }, nodeEndpoint(parentPort));
async function answer(connectionId, req, waitsMs) {
  if (req.type === 'accounts') return { ok: true, value: [{ id: connectionId }] };
  if (req.type === 'find-by-clordid') {
    if (req.clOrdId === 'waits') return { ok: true, value: 'waits:' + waitsMs };
    await new Promise((r) => setTimeout(r, Number(req.clOrdId) % 7));
    return { ok: true, value: req.clOrdId };
  }
  if (req.type === 'positions' || req.type === 'cancel-order') return new Promise(() => {});
  if (req.type === 'flatten') { setTimeout(() => process.exit(3), 20); return new Promise(() => {}); }
  return { ok: false, error: { code: 'SYMBOL_MISMATCH', message: 'holds NQZ6', retryable: false, extensions: { held: ['NQZ6'] } } };
}
const port = workerData.requestPort;
port.on('message', (batch) => {
  for (const { id, connectionId, req, waitsMs } of batch) answer(connectionId, req, waitsMs).then((result) => port.postMessage([{ id, result }]));
});
`;

let worker: Worker | undefined;

afterEach(async () => {
  await worker?.terminate();
  worker = undefined;
});

function client(timeoutMs = 2000): ActorClient {
  const { port1, port2 } = new MessageChannel();
  worker = new Worker(WORKER, { eval: true, workerData: { requestPort: port2 }, transferList: [port2] });
  return new ActorClient(worker, timeoutMs, port1);
}

test('a value comes back from the worker', async () => {
  const c = client();
  expect(await c.request('c1', { type: 'accounts' })).toEqual([{ id: 'c1' }]);
  expect(c.alive).toBe(true);
});

test('many concurrent calls, answered out of order, each get their own answer', async () => {
  const c = client();
  const ids = Array.from({ length: 200 }, (_, i) => String(i));
  const answers = await Promise.all(ids.map((id) => c.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: id })));
  expect(answers).toEqual(ids);
});

test('errors as data keep their code and extensions', async () => {
  const c = client();
  const err = (await c.request('c1', { type: 'trade-history', accountId: 'a' }).catch((e: unknown) => e)) as AppError;
  expect(err).toBeInstanceOf(AppError);
  expect(err.code).toBe('SYMBOL_MISMATCH');
  expect(err.extensions).toEqual({ held: ['NQZ6'] });
});

test('a call past its deadline is BROKER_TIMEOUT; one that may act at the broker says it may still reach it (cluster probe: a bare "did not complete" 504 while the order filled)', async () => {
  const c = client();
  const err = (await c.request('c1', { type: 'positions', accountId: 'a' }, 100).catch((e: unknown) => e)) as AppError;
  expect(err.code).toBe('BROKER_TIMEOUT');
  expect(err.message).toBe('actor request positions did not complete within 100 ms');
  const cancel = (await c.request('c1', { type: 'cancel-order', accountId: 'a', orderId: '7' } as never, 100).catch((e: unknown) => e)) as AppError;
  expect(cancel.code).toBe('BROKER_TIMEOUT');
  expect(cancel.message).toBe('actor request cancel-order did not complete within 100 ms; the request may still reach the broker: retry with the same Idempotency-Key, never as a new request');
});

test('a request that cannot be passed to the worker fails alone (500, nothing sent); the rest of its batch is answered and the client lives on (fuzz probe: one alert stopped the service)', async () => {
  const c = client();
  const bad = c.request('c1', { type: 'accounts', oops: Object } as never).catch((e: unknown) => e);
  const good = c.request('c1', { type: 'accounts' });
  const err = (await bad) as AppError;
  expect(err.code).toBe('INTERNAL');
  expect(err.message).toMatch(/^request accounts could not be handed to the connection's actor \(nothing was sent\)/);
  expect(await good).toEqual([{ id: 'c1' }]);
  expect(c.alive).toBe(true);
  expect(await c.request('c1', { type: 'accounts' })).toEqual([{ id: 'c1' }]);
});

test('the worker is told how long the caller waits (an API order is not sent once that has run out)', async () => {
  const c = client();
  expect(await c.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: 'waits' } as never, 1234)).toBe('waits:1234');
});

test('when the worker dies a pending read rejects BROKER_UNAVAILABLE (retryable), a handed-over flatten BROKER_TIMEOUT (outcome unknown), and later calls fail fast', async () => {
  const c = client(10_000);
  const hanging = c.request('c1', { type: 'positions', accountId: 'a' }).catch((e: unknown) => e);
  const cancel = c.request('c1', { type: 'cancel-order', accountId: 'a', orderId: '7' } as never).catch((e: unknown) => e);
  const killer = c.request('c1', { type: 'flatten', accountId: 'a' }).catch((e: unknown) => e);
  const [a, x, b] = (await Promise.all([hanging, cancel, killer])) as AppError[];
  expect(a!.code).toBe('BROKER_UNAVAILABLE');
  expect(b!.code).toBe('BROKER_TIMEOUT');
  expect(b!.message).toMatch(/the request may have reached the broker/);
  // A cancel handed over may have been sent too: not "nothing sent".
  expect(x!.code).toBe('BROKER_TIMEOUT');
  expect(c.alive).toBe(false);
  const later = (await c.request('c1', { type: 'accounts' }).catch((e: unknown) => e)) as AppError;
  expect(later.code).toBe('BROKER_UNAVAILABLE');
});

test('a call whose caller is gone by the turn’s flush is withdrawn (RequestNotSentError); the rest of the batch is sent', async () => {
  const { RequestNotSentError } = await import('../../../src/domain/problems.js');
  const c = client();
  let gone = false;
  const withdrawn = c.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: '1' }, 2000, () => gone).catch((e: unknown) => e);
  const kept = c.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: '2' }, 2000, () => false);
  // The caller goes away later in the same turn (uWS closed its connection), before the flush.
  gone = true;
  expect(await withdrawn).toBeInstanceOf(RequestNotSentError);
  expect(await kept).toBe('2');
  // Asked only at the flush: once sent, a call runs to its answer.
  let later = false;
  const sent = c.request('c1', { type: 'find-by-clordid', accountId: 'a', clOrdId: '3' }, 2000, () => later);
  await new Promise((r) => setImmediate(r));
  later = true;
  expect(await sent).toBe('3');
});
