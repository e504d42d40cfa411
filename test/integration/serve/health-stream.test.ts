/**
 * SSE health stream against `serve --paper`: a snapshot per owned connection, then
 * RECONNECTING and CONNECTED when the paper broker drops the connection; while it is down,
 * reads and orders are 503 BROKER_UNAVAILABLE.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { control } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
beforeAll(async () => {
  s = await startServe();
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

/** Reads SSE messages (`data:` JSON) from a fetch body until `until` says stop. */
async function readEvents(res: Response, until: (events: any[]) => boolean, ms = 20_000): Promise<any[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: any[] = [];
  let buffer = '';
  const timer = setTimeout(() => void reader.cancel(), ms);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n');
        if (data) events.push(JSON.parse(data));
      }
      if (until(events)) break;
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => undefined);
  }
  return events;
}

describe('GET /api/v1/connection-health/stream', () => {
  it('sends a snapshot, then RECONNECTING and CONNECTED when the broker drops the connection', async () => {
    const connections = (await http(s.url, 'GET', '/api/v1/connections', { key: s.apiKey })).json.data;
    expect(connections).toHaveLength(1);
    const connectionId = connections[0].id;
    const res = await fetch(`${s.url}/api/v1/connection-health/stream`, { headers: { 'x-api-key': s.apiKey, accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    let dropped = false;
    const events = await readEvents(res, (evs) => {
      if (!dropped && evs.some((e) => e.type === 'snapshot')) {
        dropped = true;
        void control(s, 'POST', '/connections/drop', {});
      }
      return evs.some((e) => e.type === 'status' && e.status === 'CONNECTED');
    });
    expect(events[0]).toMatchObject({ type: 'snapshot', connectionId, status: 'CONNECTED' });
    expect(Number.isInteger(events[0].ts)).toBe(true);
    const statuses = events.filter((e) => e.type === 'status').map((e) => [e.status, e.reason]);
    expect(statuses).toEqual([
      ['RECONNECTING', 'disconnect'],
      ['CONNECTED', 'reconnect'],
    ]);
  });

  it('while the connection is down, reads and orders answer 503 BROKER_UNAVAILABLE (never stale data) until it is back', async () => {
    const acc = s.accounts[0]!;
    const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });
    const resting = await api('POST', `/api/v1/accounts/${acc}/orders`, { symbol: 'ES', side: 'buy', qty: 1, type: 'limit', price: 4000 });
    expect(resting.status, resting.text).toBe(201);
    // A silent broker cannot finish the resync, so the connection stays RECONNECTING until the fault clears.
    await control(s, 'POST', '/faults', { silent: true });
    await control(s, 'POST', '/connections/drop', {});
    await eventually(async () => (await api('GET', '/api/v1/connections')).json.data[0].status === 'RECONNECTING', 'RECONNECTING');
    const ordersBefore = (await http(s.controlUrl, 'GET', '/state')).json.orders.length;
    for (const [method, path, body] of [
      ['GET', `/v1/accounts/${acc}/working-orders`],
      ['GET', `/api/v1/accounts/${acc}/positions`],
      ['POST', `/api/v1/accounts/${acc}/orders`, { symbol: 'ES', side: 'buy', qty: 1 }],
      ['DELETE', `/v1/accounts/${acc}/orders/${resting.json.orderId}`],
      ['POST', `/api/v1/accounts/${acc}/flatten`, {}],
    ] as const) {
      const r = await api(method, path, body);
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(503);
      expect(r.json).toMatchObject({ code: 'BROKER_UNAVAILABLE', connectionStatus: 'RECONNECTING' });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect((await http(s.controlUrl, 'GET', '/state')).json.orders.length).toBe(ordersBefore);
    await http(s.controlUrl, 'DELETE', '/faults');
    const working = await eventually(async () => {
      const r = await api('GET', `/v1/accounts/${acc}/working-orders`);
      return r.status === 200 ? (r.json.data as { orderId: string }[]) : undefined;
    }, 'working orders after the resync');
    expect(working.map((o) => o.orderId)).toEqual([resting.json.orderId]);
  });

  it('requires the read scope', async () => {
    const res = await fetch(`${s.url}/api/v1/connection-health/stream`, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(401);
  });
});
