import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createHistogram, percentiles, recordMs, spectrum } from '../../../bench/hdr.js';
import { fileStamp, renderMarkdown, writeReport } from '../../../bench/report.js';
import type { BenchSummary, PlotSeries } from '../../../bench/summary.js';
import { escapeXml, renderLatencySvg } from '../../../bench/svg-plot.js';

/**
 * Minimal XML well-formedness check: one root, every tag closed in order, attributes quoted,
 * no raw `<` or `&` outside markup/entities.
 */
function assertWellFormedXml(xml: string): void {
  const body = xml.replace(/^<\?xml[^?]*\?>\s*/, '');
  const stack: string[] = [];
  let roots = 0;
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  while (i < body.length) {
    const lt = body.indexOf('<', i);
    const text = body.slice(i, lt === -1 ? body.length : lt);
    expect(text).not.toMatch(/&(?!(amp|lt|gt|quot|apos);)/);
    if (lt === -1) break;
    tag.lastIndex = lt;
    const m = tag.exec(body);
    if (!m) throw new Error(`malformed tag at ${lt}: ${body.slice(lt, lt + 60)}`);
    const [, close, name, , selfClose] = m;
    if (close) expect(stack.pop()).toBe(name);
    else if (!selfClose) {
      if (stack.length === 0) roots++;
      stack.push(name!);
    } else if (stack.length === 0) roots++;
    i = tag.lastIndex;
  }
  expect(stack).toEqual([]);
  expect(roots).toBe(1);
}

function series(label: string, scaleMs: number): PlotSeries {
  const h = createHistogram();
  for (let i = 1; i <= 2000; i++) recordMs(h, (scaleMs * i) / 2000);
  return { label, points: spectrum(h) };
}

function summary(): BenchSummary {
  const h = createHistogram();
  for (let i = 1; i <= 1000; i++) recordMs(h, i / 100);
  const p = percentiles(h);
  return {
    machine: { cpus: 2, cpuModel: 'Test CPU', node: 'v20.0.0', platform: 'linux', arch: 'x64', memoryMB: 1024, fileLimit: 20000 },
    quick: true,
    startedAt: '2026-11-21T19:45:00.123Z',
    finishedAt: '2026-11-21T19:46:00.000Z',
    durationMs: 60_000,
    scenarios: {
      orders: { status: 'ok', durationMs: 30_000, checks: [{ name: 'every accepted order is at the broker', ok: true, detail: '990 of 990' }] },
      webhooks: { status: 'failed', durationMs: 5_000, checks: [{ name: 'no duplicates', ok: false, detail: '2 | duplicated' }] },
      actors: { status: 'error', durationMs: 10, checks: [], reason: 'bench/actors.js not built' },
      sse: { status: 'error', durationMs: 10, checks: [], reason: 'service exited\nSyntaxError: Unexpected token\n  at x (y.js:1)' },
      cluster: { status: 'ok', durationMs: 60_000, checks: [], notes: ['2 CPU cores: the three nodes … share them'] },
    },
    orders: {
      keys: 50, overLimitKeys: 2, ratePerSec: 100, durationMs: 10_000, sent: 1200, accepted: 990, rejected429: 210,
      acceptedPerSec: 99, otherOutcomes: {}, e2eMs: p, allRequestsMs: p, brokerRttMs: p, brokerOsoRttMs: p, addedMs: p, idempotent: { e2eMs: p, addedMs: p },
      rejected429Ms: p, harnessFloorMs: p, ratios: { e2eOverBrokerP50: 2, e2eOverBrokerP99: 3, floorShareP50: 0.1, floorShareP99: 0.2 }, sendLagP99Ms: 0.1,
      accountedAtBroker: true, duplicates: 0,
      cpuUsPerRequest: { main: { requests: 1200, front: 55.5, actors: 70, paperBroker: 90.2, process: 300, source: 'proc' } },
      lowLoad: { keys: 50, ratePerSec: 100, durationMs: 20_000, outcomes: { '201': 2000 }, e2eMs: p, addedMs: p, idempotent: { e2eMs: p, addedMs: p } },
    },
    webhooks: {
      alerts: 1000, tokens: 100, acked: 1000, duplicates: 2, lost: 0, allAtBrokerMs: 900, allAtBrokerAfterLastMs: -99, ackMs: p, retriedDeduped: 100,
      cpuUsPerRequest: { burst: { requests: 1000, front: 80, actors: 90, paperBroker: 100, process: 400, source: 'proc' } },
      secondBurst: { acked: 999, ackMs: p },
    },
    cluster: {
      keys: 60, ratePerSec: 120, durationMs: 20_000, cores: 2,
      single: clusterRun(1, p), oneNode: clusterRun(1, p), threeNodes: clusterRun(3, p),
      ratios: { ordersPerSec3to1: 0.98, readsPerSec3to1: 1.01 },
      addedMs: { orderP50: 1.2, orderP99: 3.4, idempotentOrderP50: 1.9, readP50: 0.8, readP99: 2.1, hopOrderP50: 0.6, hopReadP50: 0.5 },
    },
  };
}

function clusterRun(nodes: number, p: ReturnType<typeof percentiles>) {
  return { nodes, ordersPerSec: 120, readsPerSec: 120, orderMs: p, idempotentOrderMs: p, readMs: p, outcomes: { orders: { '201': 2400 }, reads: { '200': 2400 } } };
}

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('bench report', () => {
  it('renders a well-formed SVG with one curve per series and escaped labels', () => {
    const svg = renderLatencySvg('latency <p99> & more', [series('orders & <idem>', 50), series('broker', 2)]);
    assertWellFormedXml(svg);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg).toContain('orders &amp; &lt;idem&gt;');
    expect(svg).toContain('99.9%');
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it('grows the canvas with the legend so every label of fifteen curves stays inside it', () => {
    const svg = renderLatencySvg('many', Array.from({ length: 15 }, (_, i) => series(`orders: a rather long curve label ${i}`, 1 + i)));
    const height = Number(/<svg [^>]*height="(\d+)"/.exec(svg)![1]);
    const ys = [...svg.matchAll(/<text [^>]*y="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(ys.length).toBeGreaterThan(15);
    for (const y of ys) expect(y).toBeLessThanOrEqual(height);
    assertWellFormedXml(svg);
  });

  it('renders a well-formed SVG even without samples', () => {
    const svg = renderLatencySvg('empty', [{ label: 'none', points: [] }]);
    assertWellFormedXml(svg);
    expect(svg).toContain('no latency samples');
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it('escapes every XML special character', () => {
    expect(escapeXml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;');
  });

  it('renders Markdown tables with a constant column count and states every check and error', () => {
    const md = renderMarkdown(summary());
    const tables = md.split('\n\n').filter((b) => b.startsWith('|'));
    expect(tables.length).toBeGreaterThanOrEqual(3);
    for (const table of tables) {
      const widths = table.split('\n').map((row) => row.replace(/\\\|/g, '').split('|').length);
      expect(new Set(widths).size).toBe(1);
    }
    expect(md).toContain('✅ every accepted order is at the broker: 990 of 990');
    expect(md).toContain('❌ no duplicates: 2 | duplicated');
    expect(md).toContain('**Did not run:** bench/actors.js not built');
    expect(md).toContain('**Did not run:** service exited\n\n```\nSyntaxError: Unexpected token\n  at x (y.js:1)\n```');
    expect(md).toMatch(/\| orders \| all checks passed \|/);
    expect(md).toMatch(/\| webhooks \| CHECK FAILED \|/);
    expect(md).toContain('harness floor');
    expect(md).toContain('raw broker round trip');
    expect(md).toContain('| POST order at 100 req/s (201) | 1000 |');
    // The warm burst is reported next to the first (which the goal judges).
    expect(md).toMatch(/\| alert acknowledgement \| \d+ \|.*\| the first orders this process places \(the goal\) \|\n\| … the same burst again, same process \| \d+ \|.*\| 999 of 1000 answered 201; a warm service \|/);
    expect(md).toContain('Cluster mode adds 1.20 ms (p50) / 3.40 ms (p99) to an order');
    expect(md).toContain('3 nodes : 1 node: orders 0.98, reads 1.01');
    expect(md).toMatch(/\| 3 cluster nodes \| 120 \| 120 \|/);
    expect(md).toContain('⚠️ 2 CPU cores');
  });

  it('writes dated json/md/svg and, for a full run, rewrites latest.json in the issue shape', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-bench-report-'));
    dirs.push(dir);
    const s = summary();
    const written = await writeReport(dir, s, [series('orders', 10)], { summaryFile: true });
    expect(written.json).toBe(join(dir, '2026-11-21T19-45-00Z.json'));
    const latest = JSON.parse(await readFile(written.latest!, 'utf8')) as BenchSummary;
    expect(latest.machine.cpus).toBe(2);
    expect(latest.quick).toBe(true);
    expect(latest.orders?.e2eMs.p99).toBeGreaterThan(0);
    expect(latest.orders?.accountedAtBroker).toBe(true);
    expect(latest.webhooks?.acked).toBe(1000);
    expect(latest).not.toHaveProperty('spectra');
    const dated = JSON.parse(await readFile(written.json, 'utf8')) as { spectra: PlotSeries[] };
    expect(dated.spectra[0]!.label).toBe('orders');
    assertWellFormedXml(await readFile(written.svg, 'utf8'));
    expect(await readFile(written.markdown, 'utf8')).toContain('![latency distribution](2026-11-21T19-45-00Z.svg)');
    expect(fileStamp('2026-01-02T03:04:05.678Z')).toBe('2026-01-02T03-04-05Z');
  });

  it('a partial run (one scenario) leaves latest.json, SUMMARY.md and latest.svg alone: they describe the last full run', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-bench-report-'));
    dirs.push(dir);
    const written = await writeReport(dir, summary(), [series('orders', 10)]);
    expect(written.summary).toBeUndefined();
    expect(written.latest).toBeUndefined();
    expect((await readdir(dir)).sort()).toEqual(['2026-11-21T19-45-00Z.json', '2026-11-21T19-45-00Z.md', '2026-11-21T19-45-00Z.svg']);
  });

  it('writes SUMMARY.md and latest.svg only when asked (full runs of every scenario)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-bench-report-'));
    dirs.push(dir);
    const written = await writeReport(dir, summary(), [series('orders', 10)], { summaryFile: true });
    expect(written.summary).toBe(join(dir, 'SUMMARY.md'));
    const md = await readFile(written.summary!, 'utf8');
    expect(md).toContain('## orders');
    expect(md).toContain('![latency distribution](latest.svg)');
    assertWellFormedXml(await readFile(join(dir, 'latest.svg'), 'utf8'));
  });
});
