/**
 * SSE health stream against `serve --paper`: a snapshot per owned connection, then
 * RECONNECTING and CONNECTED when the paper broker drops the connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { control, http, startServe, type Served } from './serve-harness.js';

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
        void control(s, '/connections/drop', {});
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

  it('requires the read scope', async () => {
    const res = await fetch(`${s.url}/api/v1/connection-health/stream`, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(401);
  });
});
