/**
 * `/metrics` of a real `serve --paper`, scraped on its own listener and read with a real
 * Prometheus text-format parser: request, actor RPC and broker histograms move under load,
 * every thread (front, actor worker, paper broker) reports CPU and event-loop use, and
 * replays, 429s, SSE subscribers and connection statuses are counted. Orders carry the
 * Server-Timing stages.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseScrape, type Scrape } from '../../../bench/prometheus-text.js';
import { http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;

async function scrape(): Promise<Scrape> {
  const res = await fetch(s.metricsUrl);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseScrape(await res.text());
}

const count = (m: Scrape, name: string, labels: Record<string, string>) => m.sum(`${name}_count`, labels);
const value = (m: Scrape, name: string, labels: Record<string, string> = {}) => m.sum(name, labels);

beforeAll(async () => {
  s = await startServe();
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('/metrics', () => {
  it('listens on its own loopback port, not on the API port', async () => {
    expect(new URL(s.metricsUrl).hostname).toBe('127.0.0.1');
    expect(new URL(s.metricsUrl).port).not.toBe(new URL(s.url).port);
    expect((await http(s.url, 'GET', '/metrics')).status).toBe(404);
  });

  it('on loopback, answers only requests that name it: a DNS-rebound page gets 421 (re-probe: it answered any Host)', async () => {
    const { request } = await import('node:http');
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const u = new URL(s.metricsUrl);
        request({ host: u.hostname, port: u.port, path: '/metrics', headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
          .on('error', reject)
          .end();
      });
    expect(await status(`evil.example:${new URL(s.metricsUrl).port}`)).toBe(421);
    expect(await status(`localhost:${new URL(s.metricsUrl).port}`)).toBe(200);
  });

  it('moves the request, actor RPC and broker histograms under load, and reports every thread', async () => {
    const before = await scrape();
    const route = { route: '/accounts/:id/orders', method: 'POST', status: '201' };
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000, takeProfit: { ticks: 20 }, stopLoss: { ticks: 10 } };
    const n = 12;
    const placed = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        http(s.url, 'POST', `/api/v1/accounts/${s.accounts[0]}/orders`, { key: s.apiKey, body, headers: { 'idempotency-key': `metrics-${i}` } }),
      ),
    );
    for (const r of placed) expect(r.status, r.text).toBe(201);
    // Server-Timing names where an order's time went.
    expect(placed[0]!.headers.get('server-timing')).toMatch(
      /^auth;dur=[\d.]+, validate;dur=[\d.]+, idem;dur=[\d.]+, actor;dur=[\d.]+, broker;dur=[\d.]+, settle;dur=[\d.]+, total;dur=[\d.]+$/,
    );
    const replay = await http(s.url, 'POST', `/api/v1/accounts/${s.accounts[0]}/orders`, { key: s.apiKey, body, headers: { 'idempotency-key': 'metrics-0' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    for (let i = 0; i < 5; i++) expect((await http(s.url, 'GET', '/api/v1/accounts', { key: s.apiKey })).status).toBe(200);
    expect((await http(s.url, 'GET', '/api/v1/accounts', { key: 'tgk_nope_nope' })).status).toBe(401);

    const after = await scrape();
    expect(after.types.get('tradegate_http_request_duration_seconds')).toBe('HISTOGRAM');
    // Buckets are cumulative: the +Inf bucket holds every observation.
    expect(after.sum('tradegate_http_request_duration_seconds_bucket', { ...route, le: '+Inf' })).toBe(count(after, 'tradegate_http_request_duration_seconds', route));
    // The idempotent replay is a 201 too: n + 1 answers.
    expect(count(after, 'tradegate_http_request_duration_seconds', route) - count(before, 'tradegate_http_request_duration_seconds', route)).toBe(n + 1);
    const reads = { route: '/accounts', method: 'GET', status: '200' };
    expect(count(after, 'tradegate_http_request_duration_seconds', reads) - count(before, 'tradegate_http_request_duration_seconds', reads)).toBe(5);
    expect(count(after, 'tradegate_http_request_duration_seconds', { route: '/accounts', status: '401' })).toBeGreaterThanOrEqual(1);
    const rpc = { type: 'place-order', outcome: 'ok' };
    expect(count(after, 'tradegate_actor_rpc_duration_seconds', rpc) - count(before, 'tradegate_actor_rpc_duration_seconds', rpc)).toBe(n);
    expect(count(after, 'tradegate_broker_round_trip_seconds', { type: 'place-order' }) - count(before, 'tradegate_broker_round_trip_seconds', { type: 'place-order' })).toBe(n);
    const sum = after.sum('tradegate_broker_round_trip_seconds_sum', { type: 'place-order' });
    expect(sum).toBeGreaterThan(0);
    expect(value(after, 'tradegate_idempotency_replays_total') - value(before, 'tradegate_idempotency_replays_total')).toBe(1);

    const threads = after.select('tradegate_thread_cpu_seconds_total').map((m) => m.labels.thread!);
    expect(threads).toContain('front');
    expect(threads).toContain('paper-broker');
    expect(threads.some((t) => /^actor-\d+$/.test(t))).toBe(true);
    for (const t of threads) {
      expect(value(after, 'tradegate_thread_cpu_seconds_total', { thread: t }), t).toBeGreaterThan(0);
      const elu = value(after, 'tradegate_thread_event_loop_utilization', { thread: t });
      expect(elu).toBeGreaterThanOrEqual(0);
      expect(elu).toBeLessThanOrEqual(1);
    }
    expect(value(after, 'tradegate_thread_cpu_seconds_total', { thread: 'front' })).toBeGreaterThan(value(before, 'tradegate_thread_cpu_seconds_total', { thread: 'front' }));
    expect(value(after, 'tradegate_connections', { status: 'CONNECTED' })).toBe(1);
  });

  it('reports the process’s resident memory and the front’s heap, within what the OS says', async () => {
    const m = await scrape();
    const rss = value(m, 'process_resident_memory_bytes');
    expect(rss).toBeGreaterThan(50 * 1024 * 1024);
    expect(rss).toBeLessThan(4 * 1024 * 1024 * 1024);
    expect(value(m, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(1024 * 1024);
    expect(value(m, 'nodejs_heap_size_used_bytes')).toBeLessThan(rss);
    expect(value(m, 'nodejs_external_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts 429s by limiter and open SSE subscribers', async () => {
    const before = await scrape();
    const ctrl = new AbortController();
    const stream = await fetch(`${s.url}/api/v1/connection-health/stream`, { headers: { 'x-api-key': s.apiKey }, signal: ctrl.signal });
    expect(stream.status).toBe(200);
    const during = await scrape();
    expect(value(during, 'tradegate_sse_subscribers')).toBe(value(before, 'tradegate_sse_subscribers') + 1);
    ctrl.abort();
    // Failed authentications from one address are limited after 30 a minute.
    for (let i = 0; i < 31; i++) await http(s.url, 'GET', '/api/v1/accounts', { key: `tgk_bad${i}_x` });
    const after = await scrape();
    expect(value(after, 'tradegate_rate_limited_total', { bucket: 'failed-auth' })).toBeGreaterThanOrEqual(1);
  });
});
