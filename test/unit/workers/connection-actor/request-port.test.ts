/**
 * The worker side of the request plane: requests come in batches on a MessagePort, answers go
 * back by id, and an order learns when its caller stops waiting (place.ts sends none after that).
 */
import { MessageChannel } from 'node:worker_threads';
import { expect, test } from 'vitest';
import type { ActorRequest, ReplyEnvelope } from '../../../../src/actors/protocol.js';
import { serveRequests } from '../../../../workers/connection-actor/request-port.js';
import { newOrder } from '../../../support/broker-link.js';

test('each request is answered by id; a placement carries when its caller stops waiting, measured from its arrival', async () => {
  const { port1, port2 } = new MessageChannel();
  const seen: ActorRequest[] = [];
  serveRequests(port2, async (_connectionId, req) => {
    seen.push(req);
    if (req.type === 'positions') return { ok: true, value: [] };
    return { ok: true, value: 'placed' };
  });
  const replies = new Promise<ReplyEnvelope[]>((resolve) => {
    const got: ReplyEnvelope[] = [];
    port1.on('message', (batch: ReplyEnvelope[]) => {
      got.push(...batch);
      if (got.length === 2) resolve(got);
    });
  });
  const before = performance.now();
  port1.postMessage([
    { id: 1, connectionId: 'c1', req: newOrder(), waitsMs: 15_000 },
    { id: 2, connectionId: 'c1', req: { type: 'positions', accountId: '7' }, waitsMs: 15_000 },
  ]);
  const answers = await replies;
  port1.close();
  expect(answers.sort((a, b) => a.id - b.id)).toEqual([
    { id: 1, result: { ok: true, value: 'placed' } },
    { id: 2, result: { ok: true, value: [] } },
  ]);
  const order = seen.find((r) => r.type === 'place-order') as ActorRequest & { callerGoneAt?: number };
  expect(order.callerGoneAt).toBeGreaterThanOrEqual(before + 15_000);
  expect(order.callerGoneAt).toBeLessThan(performance.now() + 15_000);
  expect('callerGoneAt' in seen.find((r) => r.type === 'positions')!).toBe(false);
});

test('an answer that cannot be cloned comes back as an error, alone; the others in its batch as they are', async () => {
  const { port1, port2 } = new MessageChannel();
  serveRequests(port2, async (_connectionId, req) => (req.type === 'positions' ? { ok: true, value: () => 1 } : { ok: true, value: [] }));
  const replies = new Promise<ReplyEnvelope[]>((resolve) => {
    const got: ReplyEnvelope[] = [];
    port1.on('message', (batch: ReplyEnvelope[]) => {
      got.push(...batch);
      if (got.length === 2) resolve(got);
    });
  });
  port1.postMessage([
    { id: 1, connectionId: 'c1', req: { type: 'positions', accountId: '7' }, waitsMs: 1000 },
    { id: 2, connectionId: 'c1', req: { type: 'working-orders', accountId: '7' }, waitsMs: 1000 },
  ]);
  const answers = (await replies).sort((a, b) => a.id - b.id);
  port1.close();
  expect(answers[0]).toMatchObject({ id: 1, result: { ok: false, error: { code: 'INTERNAL', message: expect.stringMatching(/could not be passed back/) } } });
  expect(answers[1]).toEqual({ id: 2, result: { ok: true, value: [] } });
});
