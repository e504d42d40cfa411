/**
 * The shape floor (bench/shape-floor-main.ts) is what the bench compares every CPU and latency
 * goal with: it must really run the fixed shape (uWS front → actor worker → broker WebSocket →
 * broker thread and back), route each answer to its own request, and report each thread's CPU
 * under the names the bench reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpuPerRequest } from '../../../bench/cpu.js';
import { restingBracket } from '../../../bench/fixtures.js';
import { ShapeFloor } from '../../../bench/shape-floor.js';

let floor: ShapeFloor;
beforeAll(async () => {
  floor = await ShapeFloor.start();
});
afterAll(async () => {
  await floor?.stop();
});

describe('shape floor', () => {
  it('answers a bare GET', async () => {
    const res = await fetch(`${floor.origin}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
  });

  it('answers each order through the broker thread with its own broker ids, as a tradegate 201 of entry and legs', async () => {
    const before = await floor.cpu();
    const answers = await Promise.all(
      Array.from({ length: 60 }, () =>
        fetch(`${floor.origin}/order`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(restingBracket()) }),
      ),
    );
    const bodies = await Promise.all(answers.map(async (r) => ({ status: r.status, body: (await r.json()) as any })));
    expect(bodies.every((b) => b.status === 201)).toBe(true);
    const ids = bodies.map((b) => b.body.orderId);
    expect(new Set(ids).size).toBe(60);
    for (const { body } of bodies) {
      expect(body.legOrders.takeProfit.orderId).toBe(String(Number(body.orderId) + 1));
      expect(body.legOrders.stopLoss.orderId).toBe(String(Number(body.orderId) + 2));
    }
    // Each of the three threads did the work; the names are the service's, so cpuPerRequest reads them.
    let cpu = cpuPerRequest(before, await floor.cpu(), 60);
    for (let i = 0; i < 20 && (cpu.front === 0 || cpu.actors === 0 || cpu.paperBroker === 0); i++) {
      // /proc counts in 10 ms ticks: more work until every thread has been charged one.
      await Promise.all(Array.from({ length: 100 }, () => fetch(`${floor.origin}/order`, { method: 'POST', body: '{}' }).then((r) => r.arrayBuffer())));
      cpu = cpuPerRequest(before, await floor.cpu(), 60);
    }
    expect(cpu.front).toBeGreaterThan(0);
    expect(cpu.actors).toBeGreaterThan(0);
    expect(cpu.paperBroker).toBeGreaterThan(0);
    expect(cpu.process).toBeGreaterThanOrEqual(cpu.front);
  });

  it('answers a read of the asked size, as JSON', async () => {
    const res = await fetch(`${floor.origin}/bytes/12558`);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(Buffer.byteLength(text)).toBe(12558);
    expect(typeof JSON.parse(text)).toBe('string');
  });

  it('holds event streams, each with its snapshot, and writes one status event to every stream', async () => {
    const controller = new AbortController();
    const streams = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const res = await fetch(`${floor.origin}/api/v1/connection-health/stream`, { signal: controller.signal });
        expect(res.headers.get('content-type')).toBe('text/event-stream');
        return res.body!.getReader();
      }),
    );
    const decoder = new TextDecoder();
    const readUntil = async (reader: ReadableStreamDefaultReader<Uint8Array>, type: string) => {
      let text = '';
      while (!text.includes(`"type":"${type}"`)) text += decoder.decode((await reader.read()).value);
      return text;
    };
    for (const r of streams) expect(await readUntil(r, 'snapshot')).toContain('retry: 3000');
    const sent = await fetch(`${floor.origin}/broadcast`, { method: 'POST' });
    expect(await sent.text()).toBe('5');
    for (const r of streams) expect(await readUntil(r, 'status')).toContain('RECONNECTING');
    controller.abort();
  });
});
