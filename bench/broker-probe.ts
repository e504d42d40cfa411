/**
 * The raw broker round trip: a bare Tradovate-protocol WebSocket client (REST
 * `auth/accesstokenrequest`, WS `authorize`, then open-loop `order/placeorder` or
 * `order/placeoso`) straight to the paper broker. The service's added latency is the
 * service's end-to-end latency minus this, measured on the same machine in the same run.
 */
import WebSocket from 'ws';
import { formatRequest, parseFrame } from '../src/broker/tradovate/frames.js';
import { encodeHistogram } from './hdr.js';
import { encodeAll, epochToMonotonic } from './http-load.js';
import { runOpenLoop } from './open-loop.js';

/** A raw broker probe: which login, which request, at what rate. */
export interface BrokerProbeTask {
  kind: 'broker-ws';
  /** e.g. http://127.0.0.1:8091/v1 */
  restUrl: string;
  /** e.g. ws://127.0.0.1:8091/v1/websocket */
  wsUrl: string;
  credentials: { name: string; password: string };
  /** Which of the user's accounts receives the orders (default: the first). */
  accountName?: string;
  endpoint: 'order/placeorder' | 'order/placeoso';
  /** Order body without accountId/accountSpec/clOrdId, which the probe fills in. */
  body: Record<string, unknown>;
  ratePerSec: number;
  durationMs?: number;
  count?: number;
  startAtEpochMs?: number;
  /** Prefix of the clOrdId of every order the probe places (correctness check at the broker). */
  clOrdIdPrefix: string;
  timeoutMs?: number;
}

/** What a probe returns to the driver (histograms encoded). */
export interface BrokerProbeResult {
  kind: 'broker-ws';
  /** `ok` / `failed:<reason>` / `timeout` → encoded histogram (µs). */
  histograms: Record<string, string>;
  sendLag: string;
  sent: number;
  completed: number;
  timedOut: number;
  /** Broker order ids of accepted placements. */
  orderIds: number[];
  failures: Record<string, number>;
  elapsedMs: number;
}

interface Pending {
  resolve(message: { status: number; data: unknown }): void;
}

/** A minimal request/response client over one Tradovate WebSocket. */
class RawBrokerSocket {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private heartbeat: NodeJS.Timeout | undefined;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const frame = parseFrame(raw.toString());
      if (frame.kind !== 'data') return;
      for (const m of frame.messages) {
        if (m.kind !== 'response') continue;
        const p = this.pending.get(m.requestId);
        if (!p) continue;
        this.pending.delete(m.requestId);
        p.resolve({ status: m.status, data: m.data });
      }
    });
    ws.on('close', () => {
      for (const p of this.pending.values()) p.resolve({ status: 0, data: 'socket closed' });
      this.pending.clear();
      clearInterval(this.heartbeat);
    });
    // Tradovate closes sockets that stay silent; a bench phase can outlast that.
    this.heartbeat = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('[]'), 2500);
  }

  /** Connects, waits for the `o` frame and authorizes with the access token. */
  static async open(wsUrl: string, accessToken: string): Promise<RawBrokerSocket> {
    const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      ws.once('error', reject);
      ws.on('message', function onOpen(raw) {
        if (raw.toString() === 'o') {
          ws.off('message', onOpen);
          resolve();
        }
      });
    });
    const socket = new RawBrokerSocket(ws);
    const auth = await socket.request('authorize', '', accessToken);
    if (auth.status !== 200) throw new Error(`broker authorize answered ${auth.status}`);
    return socket;
  }

  request(endpoint: string, query: string, body?: unknown): Promise<{ status: number; data: unknown }> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, { resolve });
      this.ws.send(formatRequest(endpoint, id, query, body));
    });
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.ws.close();
  }
}

async function accessToken(restUrl: string, credentials: { name: string; password: string }): Promise<string> {
  const res = await fetch(`${restUrl.replace(/\/+$/, '')}/auth/accesstokenrequest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ ...credentials, appId: 'tradegate-bench', appVersion: '1.0', cid: 0, sec: '' }),
  });
  const body = (await res.json()) as { accessToken?: string; errorText?: string };
  if (!body.accessToken) throw new Error(`broker auth failed: ${body.errorText ?? res.status}`);
  return body.accessToken;
}

/** Places orders straight at the broker on an open-loop schedule. */
export async function runBrokerProbe(task: BrokerProbeTask): Promise<BrokerProbeResult> {
  const token = await accessToken(task.restUrl, task.credentials);
  const socket = await RawBrokerSocket.open(task.wsUrl, token);
  try {
    const list = await socket.request('account/list', '');
    const accounts = Array.isArray(list.data) ? (list.data as { id: number; name: string }[]) : [];
    const account = task.accountName ? accounts.find((a) => a.name === task.accountName) : accounts[0];
    if (!account) throw new Error('broker probe: the user has no account');
    const orderIds: number[] = [];
    const failures: Record<string, number> = {};
    const timeoutMs = task.timeoutMs ?? 30_000;

    const send = async (index: number): Promise<string> => {
      const body = { ...task.body, accountId: account.id, accountSpec: account.name, clOrdId: `${task.clOrdIdPrefix}-${index}`, isAutomated: true };
      let timer: NodeJS.Timeout | undefined;
      const answer = await Promise.race([
        socket.request(task.endpoint, '', body),
        new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs))),
      ]);
      clearTimeout(timer);
      if (answer === null) return 'timeout';
      const d = (answer.data ?? {}) as { orderId?: number; failureReason?: string };
      if (answer.status === 200 && typeof d.orderId === 'number') {
        orderIds.push(d.orderId);
        return 'ok';
      }
      const reason = `failed:${d.failureReason ?? answer.status}`;
      failures[reason] = (failures[reason] ?? 0) + 1;
      return reason;
    };

    const result = await runOpenLoop({
      ratePerSec: task.ratePerSec,
      count: task.count,
      durationMs: task.durationMs,
      startAt: task.startAtEpochMs === undefined ? undefined : epochToMonotonic(task.startAtEpochMs),
      drainTimeoutMs: timeoutMs + 1000,
      send,
    });
    return {
      kind: 'broker-ws',
      histograms: encodeAll(result.histograms),
      sendLag: encodeHistogram(result.sendLag),
      sent: result.sent,
      completed: result.completed,
      timedOut: result.timedOut,
      orderIds,
      failures,
      elapsedMs: result.finishedAt - result.startedAt,
    };
  } finally {
    socket.close();
  }
}
