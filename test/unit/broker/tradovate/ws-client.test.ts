/**
 * The socket client against a tiny fake Tradovate WebSocket server: authorize, request ids and
 * deadlines, late answers, client heartbeats, the silence watchdog, 401 handling, p-ticket resends.
 */
import { afterEach, expect, test } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { AuthRejectedError, TradovateSocket, type CloseReason, type LateAnswer } from '../../../../src/broker/tradovate/ws-client.js';
import { AppError } from '../../../../src/domain/problems.js';

let wss: WebSocketServer | undefined;
let client: TradovateSocket | undefined;

afterEach(async () => {
  client?.close();
  client = undefined;
  await new Promise<void>((r) => (wss ? wss.close(() => r()) : r()));
  wss = undefined;
});

type Handler = (ws: WebSocket, endpoint: string, id: number, body: string) => void;

/** Starts a fake broker: sends `o`, authorizes token "good", hands other requests to `onRequest`. */
async function fakeBroker(onRequest: Handler, opts: { sendOpen?: boolean; onRaw?: (text: string) => void } = {}): Promise<string> {
  wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  wss.on('connection', (ws) => {
    if (opts.sendOpen !== false) ws.send('o');
    ws.on('message', (raw) => {
      const text = raw.toString();
      opts.onRaw?.(text);
      if (text === '[]') return;
      const [endpoint = '', id = '', , body = ''] = text.split('\n');
      if (endpoint === 'authorize') {
        ws.send(`a[${JSON.stringify({ s: body === 'good' ? 200 : 401, i: Number(id), ...(body === 'good' ? {} : { d: 'Invalid access token' }) })}]`);
        return;
      }
      onRequest(ws, endpoint, Number(id), body);
    });
  });
  await new Promise<void>((r) => wss!.once('listening', () => r()));
  return `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/websocket`;
}

function connect(url: string, opts = {}, token = 'good') {
  const events: unknown[] = [];
  let closed!: (v: { reason: CloseReason; detail: string }) => void;
  const closedP = new Promise<{ reason: CloseReason; detail: string }>((r) => (closed = r));
  const p = TradovateSocket.connect(url, token, { onEvent: (m) => events.push(m), onClose: (reason, detail) => closed({ reason, detail }) }, opts);
  return { p, events, closedP };
}

test('requests carry ids and resolve with d; events are delivered separately', async () => {
  const url = await fakeBroker((ws, endpoint, id, body) => {
    ws.send(`a[{"e":"props","d":{"entityType":"order","eventType":"Created","entity":{"id":1}}},${JSON.stringify({ s: 200, i: id, d: { echo: endpoint, body: JSON.parse(body) } })}]`);
  });
  const c = connect(url);
  client = await c.p;
  const [a, b] = await Promise.all([client.request('x/one', { body: { n: 1 } }), client.request('x/two', { body: { n: 2 } })]);
  expect(a).toEqual({ echo: 'x/one', body: { n: 1 } });
  expect(b).toEqual({ echo: 'x/two', body: { n: 2 } });
  expect(c.events).toHaveLength(2);
});

test('authorize is sent even when the server never sends o', async () => {
  const url = await fakeBroker(() => {}, { sendOpen: false });
  client = await connect(url).p;
  expect(client.open).toBe(true);
});

test('a refused authorize is AuthRejectedError', async () => {
  const url = await fakeBroker(() => {});
  await expect(connect(url, {}, 'expired').p).rejects.toBeInstanceOf(AuthRejectedError);
});

test('a request past its deadline is BROKER_TIMEOUT; a non-200 answer is a BrokerStatusError', async () => {
  const url = await fakeBroker((ws, endpoint, id) => {
    if (endpoint === 'bad') ws.send(`a[${JSON.stringify({ s: 400, i: id, d: 'No usable value for symbol' })}]`);
  });
  client = await connect(url).p;
  await expect(client.request('slow', { timeoutMs: 100 })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  await expect(client.request('bad')).rejects.toMatchObject({ status: 400, data: 'No usable value for symbol' });
});

/** A fake broker that keeps `order/*` requests unanswered until the test answers them (oldest first); anything else is answered at once. */
async function slowOrders(): Promise<{ url: string; answer(status: number, d: unknown): void }> {
  const waiting: { ws: WebSocket; id: number }[] = [];
  const url = await fakeBroker((ws, endpoint, id) => {
    if (endpoint.startsWith('order/')) waiting.push({ ws, id });
    else ws.send(`a[${JSON.stringify({ s: 200, i: id, d: 'pong' })}]`);
  });
  return {
    url,
    answer: (status, d) => {
      const w = waiting.shift()!;
      w.ws.send(`a[${JSON.stringify({ s: status, i: w.id, d })}]`);
    },
  };
}

test('an order request answered after its deadline: BROKER_TIMEOUT first, then the late answer reaches onLate', async () => {
  const broker = await slowOrders();
  client = await connect(broker.url).p;
  const seen: LateAnswer[] = [];
  await expect(client.request('order/placeorder', { body: {}, timeoutMs: 50, onLate: (a) => seen.push(a) })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  broker.answer(200, { orderId: 42 });
  // Frames are dispatched in order: once the next answer is in, the late one was routed.
  expect(await client.request('x/ping')).toBe('pong');
  expect(seen).toEqual([{ status: 200, data: { orderId: 42 } }]);
});

test('a late refusal reaches onLate as it came (status and d), and the socket goes on', async () => {
  const broker = await slowOrders();
  client = await connect(broker.url).p;
  const seen: LateAnswer[] = [];
  await expect(client.request('order/placeorder', { timeoutMs: 50, onLate: (a) => seen.push(a) })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  broker.answer(400, 'No usable value for symbol');
  expect(await client.request('x/ping')).toBe('pong');
  expect(seen).toEqual([{ status: 400, data: 'No usable value for symbol' }]);
  expect(client.open).toBe(true);
});

test('a late id is routed for lateAnswerMs only, and ends with its socket without being reported', async () => {
  const broker = await slowOrders();
  const c = connect(broker.url, { lateAnswerMs: 80 });
  client = await c.p;
  const seen: unknown[] = [];
  const onLate = (a: LateAnswer) => seen.push(a.data);
  await expect(client.request('order/placeorder', { timeoutMs: 20, onLate })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  await expect(client.request('order/placeorder', { timeoutMs: 20, onLate })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  broker.answer(200, { orderId: 1 });
  expect(await client.request('x/ping')).toBe('pong');
  // Past lateAnswerMs the id is forgotten: the answer of the second goes nowhere.
  await new Promise((r) => setTimeout(r, 150));
  broker.answer(200, { orderId: 2 });
  expect(await client.request('x/ping')).toBe('pong');
  expect(seen).toEqual([{ orderId: 1 }]);

  await expect(client.request('order/placeorder', { timeoutMs: 20, onLate })).rejects.toMatchObject({ code: 'BROKER_TIMEOUT' });
  client.close();
  expect((await c.closedP).reason).toBe('client');
  expect(seen).toEqual([{ orderId: 1 }]);
});

test('the client sends [] heartbeats on its own cadence', async () => {
  let beats = 0;
  let seen!: () => void;
  const threeBeats = new Promise<void>((r) => (seen = r));
  const url = await fakeBroker(() => {}, { onRaw: (t) => t === '[]' && ++beats === 3 && seen() });
  client = await connect(url, { heartbeatMs: 30 }).p;
  await threeBeats;
  expect(beats).toBe(3);
});

test('silence trips the watchdog: pending requests fail BROKER_UNAVAILABLE and onClose says silence', async () => {
  const url = await fakeBroker(() => {});
  const c = connect(url, { silenceMs: 200, heartbeatMs: 50 });
  client = await c.p;
  const pending = client.request('never', { timeoutMs: 5000 });
  const closed = await c.closedP;
  expect(closed.reason).toBe('silence');
  await expect(pending).rejects.toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  expect(client.open).toBe(false);
});

test('a 401 on a live socket closes it as unauthorized', async () => {
  const url = await fakeBroker((ws, _e, id) => ws.send(`a[${JSON.stringify({ s: 401, i: id, d: 'Access is denied' })}]`));
  const c = connect(url);
  client = await c.p;
  await expect(client.request('order/list')).rejects.toMatchObject({ status: 401 });
  expect((await c.closedP).reason).toBe('unauthorized');
});

test('a server drop closes with reason closed and rejects what is pending', async () => {
  const url = await fakeBroker((ws) => ws.terminate());
  const c = connect(url);
  client = await c.p;
  const err = await client.request('boom').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(AppError);
  expect((err as AppError).code).toBe('BROKER_UNAVAILABLE');
  expect((await c.closedP).reason).toBe('closed');
});

test('a drop with an order unanswered: its outcome is unknown (BROKER_TIMEOUT), never "nothing was sent" (BROKER_UNAVAILABLE)', async () => {
  let drop!: () => void;
  const url = await fakeBroker((ws) => {
    drop = () => ws.terminate();
  });
  const c = connect(url);
  client = await c.p;
  const order = client.request('order/placeorder', { body: { clOrdId: 'k1' }, onLate: () => {} }).catch((e: unknown) => e);
  const cancel = client.request('order/cancelorder', { body: { orderId: 1 }, mayExecute: true }).catch((e: unknown) => e);
  const read = client.request('order/list').catch((e: unknown) => e);
  await new Promise((r) => setTimeout(r, 50));
  drop();
  expect(await order).toMatchObject({ code: 'BROKER_TIMEOUT', message: expect.stringMatching(/connection lost \(closed\) before it answered: the order may have reached the broker/) });
  // A cancel (any change at the broker) written to the lost socket may have been carried out too.
  expect(await cancel).toMatchObject({ code: 'BROKER_TIMEOUT', message: expect.stringMatching(/before it answered: the request may have reached the broker/) });
  expect(await read).toMatchObject({ code: 'BROKER_UNAVAILABLE' });
});

test('a p-ticket answer is resent once with the ticket after p-time', async () => {
  const bodies: string[] = [];
  const url = await fakeBroker((ws, _e, id, body) => {
    bodies.push(body);
    const d = bodies.length === 1 ? { 'p-ticket': 'PT', 'p-time': 0, 'p-captcha': false } : { orderId: 9 };
    ws.send(`a[${JSON.stringify({ s: 200, i: id, d })}]`);
  });
  client = await connect(url).p;
  expect(await client.request('order/placeorder', { body: { a: 1 } })).toEqual({ orderId: 9 });
  expect(bodies.map((b) => JSON.parse(b))).toEqual([{ a: 1 }, { a: 1, 'p-ticket': 'PT' }]);
});

test('a new order under a p-ticket longer than 2 s is not waited out: 503 with the wait as Retry-After, nothing resent (it would fill long after its caller was answered)', async () => {
  const bodies: string[] = [];
  const url = await fakeBroker((ws, _e, id, body) => {
    bodies.push(body);
    ws.send(`a[${JSON.stringify({ s: 200, i: id, d: { 'p-ticket': 'PT', 'p-time': 40, 'p-captcha': false } })}]`);
  });
  client = await connect(url).p;
  const err = await client.request('order/placeorder', { body: { a: 1 }, onLate: () => undefined }).catch((e: unknown) => e as AppError);
  expect(err).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 40, message: expect.stringMatching(/wait 40 s before this order \(p-ticket\); nothing was sent/) });
  expect(bodies).toHaveLength(1);
  // A cancel or a liquidation likewise: run 40 s later, a close took a position opened since.
  const cancel = await client.request('order/cancelorder', { body: { orderId: 1 }, mayExecute: true }).catch((e: unknown) => e as AppError);
  expect(cancel).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 40, message: expect.stringMatching(/before order\/cancelorder \(p-ticket\)/) });
  expect(bodies).toHaveLength(2);
});

test('tolerates the real broker’s ordering: a quote before the answer, events before and after it, unknown event types and fields', async () => {
  const url = await fakeBroker((ws, endpoint, id) => {
    if (endpoint !== 'md/subscribeQuote') return;
    const quote = { e: 'md', d: { quotes: [{ id: 7, contractId: 7, entries: { Trade: { price: 1 } }, someNewField: true }] } };
    ws.send(`a[${JSON.stringify(quote)}]`);
    ws.send(`a[${JSON.stringify({ e: 'clock', d: '2026-11-20T15:00:00Z' })},${JSON.stringify({ s: 200, i: id, d: { mode: 'RealTime', subscriptionId: 7 }, extra: 'x' })}]`);
    ws.send(`a[${JSON.stringify({ e: 'props', d: { entityType: 'accountRiskStatus', eventType: 'Updated', entity: { id: 3, adminAction: 'Normal' } } })}]`);
  });
  const events: string[] = [];
  let third!: () => void;
  const threeEvents = new Promise<void>((r) => (third = r));
  client = await TradovateSocket.connect(url, 'good', { onEvent: (m) => events.push(m.event) === 3 && third(), onClose: () => {} });
  expect(await client.request('md/subscribeQuote', { body: { symbol: 'ESZ6' } })).toEqual({ mode: 'RealTime', subscriptionId: 7 });
  await threeEvents;
  expect(events).toEqual(['md', 'clock', 'props']);
});

test('delivers events the broker batches behind the authorize answer in the same frame', async () => {
  wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  wss.on('connection', (ws) => {
    ws.send('o');
    ws.on('message', (raw) => {
      if (!raw.toString().startsWith('authorize')) return;
      ws.send(`a[{"s":200,"i":0},{"e":"props","d":{"entityType":"account","eventType":"Updated","entity":{"id":1,"active":true}}}]`);
    });
  });
  await new Promise<void>((r) => wss!.once('listening', () => r()));
  const c = connect(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/websocket`);
  client = await c.p;
  expect(c.events).toEqual([{ kind: 'event', event: 'props', data: { entityType: 'account', eventType: 'Updated', entity: { id: 1, active: true } } }]);
});

test("the broker's 429 closes the socket (reason rate-limited): nothing more is sent inside the hour it asks, since each request would extend it", async () => {
  const seen: string[] = [];
  const url = await fakeBroker((ws, endpoint, id) => {
    seen.push(endpoint);
    ws.send(`a[${JSON.stringify(endpoint === 'order/placeorder' ? { s: 429, i: id } : { s: 200, i: id, d: {} })}]`);
  });
  const c = connect(url);
  client = await c.p;
  const first = await client.request('order/placeorder', { body: {} }).catch((e: unknown) => e);
  expect(first).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 3600, extensions: { brokerStatus: 429 } });
  expect(await c.closedP).toMatchObject({ reason: 'rate-limited', detail: expect.stringContaining('logs in again by itself once the hour has passed') });
  const next = await client.request('order/list').catch((e: unknown) => e);
  expect(next).toMatchObject({ code: 'BROKER_UNAVAILABLE' });
  expect(seen).toEqual(['order/placeorder']);
});

test('a 423 ("about to be locked out") on the socket stops it as a 429 does (protocol audit: read as a rejection, sending went on)', async () => {
  const url = await fakeBroker((ws, endpoint, id) => ws.send(`a[${JSON.stringify(endpoint === 'order/list' ? { s: 423, i: id } : { s: 200, i: id, d: {} })}]`));
  const c = connect(url);
  client = await c.p;
  expect(await client.request('order/list').catch((e: unknown) => e)).toMatchObject({ code: 'BROKER_UNAVAILABLE', extensions: { brokerStatus: 423 } });
  expect(await c.closedP).toMatchObject({ reason: 'rate-limited', detail: expect.stringContaining('broker rate limit (423)') });
});
