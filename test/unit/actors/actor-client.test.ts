/**
 * ActorClient over a real worker thread (an inline comlink worker): deadlines, pending calls
 * rejected on worker exit, errors rebuilt by code.
 */
import { Worker } from 'node:worker_threads';
import { afterEach, expect, test } from 'vitest';
import { ActorClient } from '../../../src/actors/actor-client.js';
import { AppError } from '../../../src/domain/problems.js';

const WORKER = `
const { parentPort } = require('node:worker_threads');
const Comlink = require('comlink');
const nodeEndpoint = require('comlink/dist/umd/node-adapter.js');
Comlink.expose({
  async request(connectionId, req) {
    if (req.type === 'accounts') return { ok: true, value: [{ id: connectionId }] };
    if (req.type === 'positions') return new Promise(() => {});
    if (req.type === 'flatten') { setTimeout(() => process.exit(3), 20); return new Promise(() => {}); }
    return { ok: false, error: { code: 'SYMBOL_MISMATCH', message: 'holds NQZ6', retryable: false, extensions: { held: ['NQZ6'] } } };
  },
  async add() {}, async remove() {}, async stats() { return { actors: 0, heapUsed: 0, rss: 0 }; },
}, nodeEndpoint(parentPort));
`;

let worker: Worker | undefined;

afterEach(async () => {
  await worker?.terminate();
  worker = undefined;
});

function client(timeoutMs = 2000): ActorClient {
  worker = new Worker(WORKER, { eval: true });
  return new ActorClient(worker, timeoutMs);
}

test('a value comes back from the worker', async () => {
  const c = client();
  expect(await c.request('c1', { type: 'accounts' })).toEqual([{ id: 'c1' }]);
  expect(c.alive).toBe(true);
});

test('errors as data keep their code and extensions', async () => {
  const c = client();
  const err = (await c.request('c1', { type: 'trade-history', accountId: 'a' }).catch((e: unknown) => e)) as AppError;
  expect(err).toBeInstanceOf(AppError);
  expect(err.code).toBe('SYMBOL_MISMATCH');
  expect(err.extensions).toEqual({ held: ['NQZ6'] });
});

test('a call past its deadline is BROKER_TIMEOUT', async () => {
  const c = client();
  const err = (await c.request('c1', { type: 'positions', accountId: 'a' }, 100).catch((e: unknown) => e)) as AppError;
  expect(err.code).toBe('BROKER_TIMEOUT');
});

test('when the worker dies every pending call rejects BROKER_UNAVAILABLE (retryable), and later calls fail fast', async () => {
  const c = client(10_000);
  const hanging = c.request('c1', { type: 'positions', accountId: 'a' }).catch((e: unknown) => e);
  const killer = c.request('c1', { type: 'flatten', accountId: 'a' }).catch((e: unknown) => e);
  const [a, b] = (await Promise.all([hanging, killer])) as AppError[];
  expect(a!.code).toBe('BROKER_UNAVAILABLE');
  expect(b!.code).toBe('BROKER_UNAVAILABLE');
  expect(c.alive).toBe(false);
  const later = (await c.request('c1', { type: 'accounts' }).catch((e: unknown) => e)) as AppError;
  expect(later.code).toBe('BROKER_UNAVAILABLE');
});
