import { afterEach, expect, test } from 'vitest';
import type { ActorRequest } from '../../../../src/actors/protocol.js';
import { startActorHarness, type ActorHarness } from '../../../support/actor.js';

let h: ActorHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

test('answers every request as data: a coded error comes back as ErrorData, never as a throw', async () => {
  h = await startActorHarness();
  const before = await h.actor.handle({ type: 'working-orders', accountId: '1' });
  expect(before).toEqual({ ok: false, error: expect.objectContaining({ code: 'BROKER_UNAVAILABLE', retryable: true, extensions: { connectionStatus: 'CONNECTING' } }) });
  const unknown = await h.actor.handle({ type: 'bogus' } as unknown as ActorRequest);
  expect(unknown).toEqual({ ok: false, error: expect.objectContaining({ code: 'VALIDATION_FAILED', message: 'unknown actor request bogus' }) });
});

test('once connected: reports its accounts, serves reads only for them, and finds orders by clOrdId', async () => {
  h = await startActorHarness({ accounts: ['X1'] });
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const accounts = await h.call({ type: 'accounts' });
  expect(accounts).toEqual([expect.objectContaining({ name: `X1_${h.user.name}`, connectionId: h.spec.connectionId, active: true })]);
  expect(h.events).toContainEqual(expect.objectContaining({ type: 'accounts', connectionId: h.spec.connectionId }));
  const account = accounts[0]!.id;
  expect(await h.call({ type: 'positions', accountId: account })).toEqual([]);
  expect((await h.callError({ type: 'positions', accountId: '999999' })).code).toBe('NOT_FOUND');
  expect(await h.call({ type: 'find-by-clordid', accountId: account, clOrdId: 'never-sent' })).toBeNull();
  const placed = await h.call({
    type: 'place-order', accountId: account, symbol: 'ESZ6', requestedSymbol: 'ES', side: 'buy', qty: 1, orderType: 'limit', price: 4900,
    timeInForce: 'day', clOrdId: 'tg-k-actor-unit',
  });
  expect(await h.call({ type: 'find-by-clordid', accountId: account, clOrdId: 'tg-k-actor-unit' })).toMatchObject({ orderId: placed.order.orderId });
});

test('stopping is silent: the supervisor, not the actor, announces DISABLED', async () => {
  h = await startActorHarness();
  h.actor.start();
  await h.nextStatus('CONNECTED');
  const seen = h.events.length;
  await h.actor.stop();
  expect(h.events.slice(seen).filter((e) => e.type === 'status')).toEqual([]);
  expect(h.actor.conn.status).toBe('DISABLED');
});
