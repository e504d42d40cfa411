/**
 * The shape floor: the least work the service's fixed shape can do for one bracket order,
 * run in its own process next to the real service so the bench can put every CPU and latency
 * goal next to what the shape itself costs on the same machine in the same run.
 *
 * The same threads and hops as `serve --paper`, with nothing of ours in them:
 *
 *   front (uWS): read the POST body, JSON.parse it, postMessage it to the actor thread;
 *     answer the actor's reply as a 201 of the size tradegate answers (~1.3 KB of JSON).
 *     `GET /healthz` answers "ok" (a bare uWS GET); `GET /bytes/<n>` an n-byte JSON body built
 *     once (a read's floor); `GET /api/v1/connection-health/stream` holds an event stream with
 *     its snapshot, and `POST /broadcast` writes one status event to every stream (SSE's floor).
 *   actor (worker thread, a `ws` client): send `order/placeoso` on the broker WebSocket;
 *     JSON.parse each frame; post the response back to the front.
 *   broker (worker thread, a `ws` server): JSON.parse the request body, answer with the
 *     response and the 21 entity events the paper broker sends for a bracket order (5.5 KB),
 *     in one frame, as the paper broker does.
 *
 * No validation, authentication, rate limit, idempotency, journal, mirror, order book or
 * logging: whatever the real service spends above this is ours; this much any implementation
 * of the shape spends on this machine. `GET /cpu` answers each thread's CPU time
 * (/proc/thread-self/stat), read by bench/shape-floor.ts.
 *
 * Run: node bench/shape-floor-main.js <port> (prints `listening <port>` when ready).
 */
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import uWS from 'uWebSockets.js';
import WebSocket, { WebSocketServer } from 'ws';
import { procThreadCpu } from '../src/thread-usage.js';

interface Role {
  role: 'actor' | 'broker';
  brokerPort?: number;
}

/** CPU ms of the calling thread. */
const cpuMs = (): number => procThreadCpu()?.cpuMs ?? 0;

if (isMainThread) await front(Number(process.argv[2] ?? 0));
else if ((workerData as Role).role === 'broker') broker();
else actor((workerData as Role).brokerPort!);

async function front(port: number): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const brokerThread = new Worker(self, { workerData: { role: 'broker' } satisfies Role });
  const brokerPort = await new Promise<number>((resolve) => brokerThread.once('message', (m: { port: number }) => resolve(m.port)));
  const actorThread = new Worker(self, { workerData: { role: 'actor', brokerPort } satisfies Role });
  await new Promise((resolve) => actorThread.once('message', resolve));

  let nextId = 1;
  const waiting = new Map<number, uWS.HttpResponse & { aborted?: boolean }>();
  // A thread answers `{cpu: true}` with its CPU ms; one question per thread at a time.
  const cpuAnswers = new Map<Worker, (cpuMs: number) => void>();
  const askCpu = (thread: Worker) =>
    new Promise<number>((resolve) => {
      cpuAnswers.set(thread, resolve);
      thread.postMessage({ cpu: true });
    });
  brokerThread.on('message', (m: { cpuMs?: number }) => {
    if (m.cpuMs !== undefined) cpuAnswers.get(brokerThread)?.(m.cpuMs);
  });
  actorThread.on('message', (m: { id: number; order: unknown; cpuMs?: number }) => {
    if (m.cpuMs !== undefined) return cpuAnswers.get(actorThread)?.(m.cpuMs);
    const res = waiting.get(m.id);
    waiting.delete(m.id);
    if (!res || res.aborted) return;
    const body = JSON.stringify(orderView(m.order as Record<string, number>));
    res.cork(() => res.writeStatus('201 Created').writeHeader('Content-Type', 'application/json').end(body));
  });

  const app = uWS.App();
  app.get('/healthz', (res) => {
    res.end('ok');
  });
  // A read's floor: an answer of `n` bytes of JSON, built once per size (tradegate caches its read answers too).
  const bodies = new Map<number, Buffer>();
  app.get('/bytes/:n', (res, req) => {
    const n = Math.min(Number(req.getParameter(0)) || 2, 1 << 20);
    // `?work=<µs>`: busy-waits that long first, standing in for a request's own work on the front
    // (the reads scenario's calibration: what one µs of JS costs the front thread in all).
    const work = Math.min(Number(/(?:^|&)work=(\d+)/.exec(req.getQuery() ?? '')?.[1] ?? 0), 10_000) / 1000;
    if (work > 0) {
      const start = performance.now();
      while (performance.now() - start < work);
    }
    let body = bodies.get(n);
    if (!body) bodies.set(n, (body = Buffer.from(JSON.stringify('x'.repeat(Math.max(0, n - 2))))));
    res.cork(() => res.writeHeader('Content-Type', 'application/json').end(body));
  });
  // The health stream's floor: a held event-stream response per subscriber, a snapshot on open,
  // and one status event to every stream on `POST /broadcast`.
  const streams = new Set<uWS.HttpResponse>();
  app.get('/api/v1/connection-health/stream', (res) => {
    res.onAborted(() => streams.delete(res));
    streams.add(res);
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('Content-Type', 'text/event-stream').writeHeader('Cache-Control', 'no-store');
      res.write(`retry: 3000\n\nid: 1\ndata: {"type":"snapshot","connectionId":"floor","status":"CONNECTED","ts":"${new Date().toISOString()}"}\n\n`);
    });
  });
  app.post('/broadcast', (res) => {
    const event = `id: 2\ndata: {"type":"status","connectionId":"floor","status":"RECONNECTING","ts":"${new Date().toISOString()}"}\n\n`;
    for (const stream of streams) stream.cork(() => stream.write(event));
    res.end(String(streams.size));
  });
  app.get('/cpu', (res) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    void Promise.all([askCpu(actorThread), askCpu(brokerThread)]).then(([actor, broker]) => {
      if (!aborted) res.cork(() => res.writeHeader('Content-Type', 'application/json').end(JSON.stringify({ front: cpuMs(), actor, broker })));
    });
  });
  app.post('/order', (res: uWS.HttpResponse & { aborted?: boolean }) => {
    res.onAborted(() => {
      res.aborted = true;
    });
    let chunks: Buffer | undefined;
    res.onData((chunk, last) => {
      const part = Buffer.from(chunk);
      chunks = chunks ? Buffer.concat([chunks, part]) : Buffer.from(part);
      if (!last) return;
      const id = nextId++;
      waiting.set(id, res);
      actorThread.postMessage({ id, body: JSON.parse(chunks.toString()) });
    });
  });
  app.listen('127.0.0.1', port, (socket) => {
    if (!socket) throw new Error(`shape floor: cannot listen on ${port}`);
    process.stdout.write(`listening ${uWS.us_socket_local_port(socket)}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}

function actor(brokerPort: number): void {
  const ws = new WebSocket(`ws://127.0.0.1:${brokerPort}/`);
  let requestId = 0;
  const frontIds = new Map<number, number>();
  ws.on('message', (data: Buffer) => {
    const messages = JSON.parse(data.toString().slice(1)) as { s?: number; i?: number; d?: unknown }[];
    for (const m of messages) {
      if (m.i === undefined) continue;
      const id = frontIds.get(m.i)!;
      frontIds.delete(m.i);
      parentPort!.postMessage({ id, order: m.d });
    }
  });
  ws.on('open', () => parentPort!.postMessage({ ready: true }));
  parentPort!.on('message', (m: { id: number; body: Record<string, unknown>; cpu?: boolean }) => {
    if (m.cpu) return parentPort!.postMessage({ cpuMs: cpuMs() });
    const i = ++requestId;
    frontIds.set(i, m.id);
    ws.send(`order/placeoso\n${i}\n\n${JSON.stringify({ ...m.body, accountId: 1, accountSpec: 'FLOOR', isAutomated: true })}`);
  });
}

function broker(): void {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  let nextOrderId = 1;
  wss.on('listening', () => parentPort!.postMessage({ port: (wss.address() as { port: number }).port }));
  wss.on('connection', (ws) => {
    ws.on('message', (data: Buffer) => {
      const text = data.toString();
      const [, id, , body] = text.split('\n', 4);
      const req = JSON.parse(body!) as Record<string, unknown>;
      const orderId = nextOrderId;
      nextOrderId += 9;
      const out = [JSON.stringify({ s: 200, i: Number(id), d: { orderId, oso1Id: orderId + 1, oso2Id: orderId + 2 } })];
      for (const d of bracketEvents(orderId, req)) out.push(JSON.stringify({ e: 'props', d }));
      ws.send(`a[${out.join(',')}]`);
    });
  });
  parentPort!.on('message', (m: { cpu?: boolean }) => {
    if (m.cpu) parentPort!.postMessage({ cpuMs: cpuMs() });
  });
}

/**
 * The 21 entity events of a bracket order (entry `id`, legs `id + 1` and `id + 2`) with the
 * fields the paper broker sends, in its order: three orders, their commands and versions
 * created, then for each leg and the entry a command report, the command updated, an
 * execution report and the order updated (5.5 KB in one frame).
 */
function bracketEvents(id: number, req: Record<string, unknown>): { entityType: string; eventType: string; entity: Record<string, unknown> }[] {
  const timestamp = new Date().toISOString();
  const accountId = 1;
  const contractId = 4000001;
  const tradeDate = { year: 2026, month: 11, day: 26 };
  const entry = { action: String(req.action ?? 'Buy'), orderQty: Number(req.orderQty ?? 1), orderType: String(req.orderType ?? 'Limit'), price: Number(req.price ?? 0) };
  const order = (oid: number, action: string, ordStatus: string, more: Record<string, unknown> = {}) => ({
    id: oid, accountId, contractId, timestamp, action, ordStatus, executionProviderId: 1, admin: false, archived: false, external: false, ...more,
  });
  const command = (oid: number, commandStatus: string) => ({ id: oid, orderId: oid, timestamp, commandType: 'New', commandStatus, senderId: 7, userSessionId: 0, isAutomated: true });
  const report = (rid: number, oid: number, action: string, execType: string, ordStatus: string) => ({
    id: rid, commandId: oid, name: String(oid), accountId, contractId, timestamp, tradeDate, orderId: oid, action, cumQty: 0, execType, ordStatus,
  });
  const ev = (entityType: string, eventType: string, entity: Record<string, unknown>) => ({ entityType, eventType, entity });
  const [tp, sl] = [id + 1, id + 2];
  return [
    ev('order', 'Created', order(id, entry.action, 'PendingNew')),
    ev('command', 'Created', command(id, 'Pending')),
    ev('orderVersion', 'Created', { id, orderId: id, orderQty: entry.orderQty, orderType: entry.orderType, timeInForce: 'GTC', price: entry.price }),
    ev('order', 'Created', order(tp, 'Sell', 'PendingNew', { parentId: id })),
    ev('command', 'Created', command(tp, 'Pending')),
    ev('orderVersion', 'Created', { id: tp, orderId: tp, orderQty: 1, orderType: 'Limit', timeInForce: 'Day', price: 4100 }),
    ev('order', 'Created', order(sl, 'Sell', 'PendingNew', { parentId: id })),
    ev('command', 'Created', command(sl, 'Pending')),
    ev('orderVersion', 'Created', { id: sl, orderId: sl, orderQty: 1, orderType: 'Stop', timeInForce: 'Day', stopPrice: 3900 }),
    ev('commandReport', 'Created', { id: id + 3, commandId: tp, timestamp, commandStatus: 'RiskPassed' }),
    ev('command', 'Updated', command(tp, 'RiskPassed')),
    ev('executionReport', 'Created', report(id + 4, tp, 'Sell', 'Suspended', 'Suspended')),
    ev('order', 'Updated', order(tp, 'Sell', 'Suspended', { parentId: id, ocoId: sl })),
    ev('commandReport', 'Created', { id: id + 5, commandId: sl, timestamp, commandStatus: 'RiskPassed' }),
    ev('command', 'Updated', command(sl, 'RiskPassed')),
    ev('executionReport', 'Created', report(id + 6, sl, 'Sell', 'Suspended', 'Suspended')),
    ev('order', 'Updated', order(sl, 'Sell', 'Suspended', { parentId: id, ocoId: tp })),
    ev('commandReport', 'Created', { id: id + 7, commandId: id, timestamp, commandStatus: 'RiskPassed' }),
    ev('command', 'Updated', command(id, 'RiskPassed')),
    ev('executionReport', 'Created', report(id + 8, id, entry.action, 'New', 'Working')),
    ev('order', 'Updated', order(id, entry.action, 'Working')),
  ];
}

/** The 201 body's shape and size (~1.3 KB): the entry and both legs. */
function orderView(d: Record<string, number>): Record<string, unknown> {
  const now = new Date().toISOString();
  const order = (orderId: number, role: string) => ({
    orderId: String(orderId), accountId: '1', symbol: 'ESZ6', requestedSymbol: 'ESZ6', side: 'buy', type: 'limit', qty: 1, filledQty: 0,
    avgFillPrice: null, price: 4000, stopPrice: null, timeInForce: 'gtc', status: 'working', role, bracketId: String(d.orderId),
    legs: { takeProfit: null, stopLoss: null }, clientOrderId: null, createdAt: now, updatedAt: now,
  });
  return Object.assign(order(d.orderId!, 'entry'), {
    legOrders: { takeProfit: order(d.oso1Id!, 'take_profit'), stopLoss: order(d.oso2Id!, 'stop_loss') },
    reconciled: false,
  });
}
