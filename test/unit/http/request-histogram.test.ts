/**
 * The lean request histogram must expose exactly what prom-client's own Histogram would for the
 * same observations (it replaced one on the hot path), parsed by a real Prometheus text parser.
 */
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestHistogram } from '../../../src/http/request-histogram.js';

const BUCKETS = [0.0001, 0.001, 0.01, 0.1, 1];
const OBSERVATIONS: [string, string, number, number][] = [
  ['/accounts', 'GET', 200, 0.00004],
  ['/accounts', 'GET', 200, 0.0001],
  ['/accounts', 'GET', 200, 0.0003],
  ['/accounts', 'GET', 401, 0.002],
  ['/accounts/:id/orders', 'POST', 201, 0.05],
  ['/accounts/:id/orders', 'POST', 201, 7],
  ['/healthz', 'GET', 200, 0.00002],
];

async function parsed(registry: Registry): Promise<unknown> {
  const families = parsePrometheusTextFormat(await registry.metrics()) as { name: string; metrics: { labels?: Record<string, string> }[] }[];
  // Series order is not part of the format.
  for (const f of families) f.metrics.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  return families;
}

describe('RequestHistogram', () => {
  it("exposes what prom-client's Histogram exposes for the same observations", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const lean = new RequestHistogram('http_duration_seconds', 'help text', BUCKETS, ours);
    const reference = new Histogram({ name: 'http_duration_seconds', help: 'help text', labelNames: ['route', 'method', 'status'], buckets: BUCKETS, registers: [theirs] });
    for (const [route, method, status, seconds] of OBSERVATIONS) {
      lean.observe(route, method, status, seconds);
      reference.observe({ route, method, status: String(status) }, seconds);
    }
    expect(await parsed(ours)).toEqual(await parsed(theirs));
    const text = await ours.metrics();
    expect(text).toContain('http_duration_seconds_bucket{route="/accounts",method="GET",status="200",le="0.0001"} 2');
    expect(text).toContain('http_duration_seconds_count{route="/accounts/:id/orders",method="POST",status="201"} 2');
  });

  it('forgets everything on a registry reset', async () => {
    const registry = new Registry();
    const lean = new RequestHistogram('d', 'h', BUCKETS, registry);
    lean.observe('/x', 'GET', 200, 0.5);
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('d_count');
  });
});
