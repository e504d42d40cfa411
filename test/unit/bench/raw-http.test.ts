/**
 * The generator's keep-alive pool must not write a request on a connection the server is about
 * to close for idleness (uWS: 10 s): such a request is lost ("socket hang up") and a full bench
 * run counted two of those as admitted by the rate limiter. Idle connections past the pool's
 * reuse limit are closed and a fresh one carries the request.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawHttpPool } from '../../../bench/raw-http.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const s = http.createServer((_req, res) => res.end('ok'));
  s.keepAliveTimeout = 60_000;
  s.on('connection', () => connections++);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => s.close(() => r())));
  cleanups.push(() => s.closeAllConnections());
  return { port: (s.address() as AddressInfo).port, connections: () => connections };
}

const GET = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('RawHttpPool keep-alive reuse', () => {
  it('reuses a connection idle for less than the limit', async () => {
    const { port, connections } = await server();
    const pool = new RawHttpPool('127.0.0.1', port, 4, '', 1_000);
    cleanups.push(() => pool.destroy());
    expect((await pool.request(GET, false)).status).toBe(200);
    await sleep(50);
    expect((await pool.request(GET, false)).status).toBe(200);
    expect(connections()).toBe(1);
    expect(pool.socketsOpened).toBe(1);
  });

  it('retires a connection idle past the limit and sends on a new one', async () => {
    const { port, connections } = await server();
    const pool = new RawHttpPool('127.0.0.1', port, 4, '', 30);
    cleanups.push(() => pool.destroy());
    expect((await pool.request(GET, false)).status).toBe(200);
    await sleep(80);
    expect((await pool.request(GET, false)).status).toBe(200);
    expect(connections()).toBe(2);
    expect(pool.socketsOpened).toBe(2);
  });
});
