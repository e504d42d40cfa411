/**
 * Bench output: `bench/results/<ISO date>.json|.md|.svg`, and `latest.json` rewritten on
 * every run. The Markdown puts each latency next to the harness floor and the raw broker
 * round trip, and states every correctness check with its result.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Percentiles } from './hdr.js';
import { GET_FRONT_GOAL_US, type GoalResult, type GoalStatus } from './goals.js';
import type { BenchSummary, Check, CpuPerRequest, PlotSeries, ScenarioOutcome } from './summary.js';
import { SCENARIOS } from './summary.js';
import { renderLatencySvg } from './svg-plot.js';

function ms(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '–';
  if (n >= 100) return n.toFixed(0);
  if (n >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

/** Escapes a Markdown table cell. */
export function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function latencyRow(label: string, p: Percentiles | undefined, note = ''): string {
  if (!p) return `| ${cell(label)} | – | – | – | – | – | – | ${cell(note)} |`;
  return `| ${cell(label)} | ${p.count} | ${ms(p.p50)} | ${ms(p.p90)} | ${ms(p.p99)} | ${ms(p.p999)} | ${ms(p.max)} | ${cell(note)} |`;
}

/** One row per measured phase: µs of CPU per request on each thread. */
function cpuRows(s: BenchSummary): string[] {
  const phases: [string, Record<string, CpuPerRequest> | undefined][] = [
    ['orders', s.orders?.cpuUsPerRequest],
    ['webhooks', s.webhooks?.cpuUsPerRequest],
    ['reads', s.reads?.cpuUsPerRequest],
  ];
  const rows: string[] = [];
  for (const [scenario, byPhase] of phases) {
    for (const [phase, c] of Object.entries(byPhase ?? {})) {
      rows.push(`| ${scenario} | ${cell(phase)} | ${c.requests} | ${c.front.toFixed(1)} | ${c.actors.toFixed(1)} | ${c.paperBroker.toFixed(1)} | ${c.process.toFixed(1)} |${c.source === 'elu' ? ' event-loop time (no /proc) |' : ' |'}`);
    }
  }
  if (rows.length === 0) return [];
  return [
    '## CPU per request per thread (µs)',
    '',
    'Each thread of the service reads its own CPU time (/proc/thread-self/stat) and reports it on /metrics; a phase divides the growth by the requests it sent. ' +
      '`process` is the whole service process (all threads, GC, LMDB writer, uWS I/O). CPU time does not depend on how busy the machine is. ' +
      'The `shapeFloor…` phases are the shape floor (bench/shape-floor-main.ts: a bare uWS front, a worker with a WebSocket, a broker thread answering the same 21 events) under the same generator at the same rate: the least the fixed shape costs on this machine.',
    '',
    '| scenario | phase | requests | front | actors | paper broker | process | note |',
    '|---|---|---:|---:|---:|---:|---:|---|',
    ...rows,
    '',
  ];
}

const STATUS_TEXT: Record<GoalStatus, string> = {
  met: '✅ met',
  'out-of-reach': '⛔ out of reach here: the shape floor misses it too',
  'not-met': '❌ not met',
  'not-measured': '– not measured',
};

/** A goal's verdict, naming its floor when that is more than the shape floor. */
function statusText(g: GoalResult): string {
  if (g.status === 'out-of-reach' && g.floorIs) return `⛔ out of reach here: the ${g.floorIs} misses it too`;
  return STATUS_TEXT[g.status];
}

/** The issue's goals: measured, the shape floor of the same run, and what that makes of each. */
function goalRows(s: BenchSummary): string[] {
  const measuredAny = s.goals?.some((g) => g.status !== 'not-measured');
  if (!s.goals || !measuredAny) return [];
  const value = (v: number | undefined, unit: string) => (v === undefined ? '–' : `${v} ${unit}`);
  return [
    '## Goals against the shape floor',
    '',
    'The shape floor (bench/shape-floor-main.ts) runs the service’s fixed shape with none of tradegate’s work in it — a bare uWS front, ' +
      'a worker thread with a broker WebSocket, a broker thread answering the same 21 events — under the same generator at the same rates in this run. ' +
      'A goal the floor itself misses cannot be met on this machine by any implementation of the shape. The floor of an added latency is the floor’s ' +
      'order round trip minus the raw placeoso round trip (a lower bound: its broker thread does less than the paper broker); an idempotent order’s ' +
      'floor adds the fastest durable commit of one idempotency record measured in this run (its answer waits for that commit, DESIGN §3).' +
      (s.quick ? ' **Quick run: the loads are not the goals’ loads.**' : ''),
    '',
    '| measure | goal | measured | shape floor | × goal | × floor | status |',
    '|---|---:|---:|---:|---:|---:|---|',
    ...s.goals.map((g) =>
      `| ${cell(g.measure)} | ${g.kind === 'max' ? '≤' : '≥'} ${g.goal} ${g.unit} | ${value(g.measured, g.unit)} | ${value(g.floor, g.unit)} | ` +
        `${g.ofGoal ?? '–'} | ${g.ofFloor ?? '–'} | ${statusText(g)} |`),
    '',
  ];
}

const LATENCY_HEAD = ['| measure | n | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | note |', '|---|---:|---:|---:|---:|---:|---:|---|'];

function checksBlock(outcome: ScenarioOutcome | undefined): string[] {
  if (!outcome) return [];
  const lines: string[] = [];
  if (outcome.status === 'error') {
    const [first, ...rest] = (outcome.reason ?? 'unknown error').split('\n');
    lines.push(`**Did not run:** ${first}`, '');
    // Process output (a stack, a log tail) stays verbatim in a code block.
    if (rest.some((l) => l.trim())) lines.push('```', ...rest.map((l) => l.replace(/```/g, "'''")), '```', '');
  }
  for (const c of outcome.checks) lines.push(`- ${c.ok ? '✅' : '❌'} ${c.name}: ${c.detail}`);
  for (const n of outcome.notes ?? []) lines.push(`- ⚠️ ${n}`);
  return lines.length ? [...lines, ''] : [];
}

function statusWord(outcome: ScenarioOutcome | undefined): string {
  if (!outcome) return 'not run';
  return outcome.status === 'ok' ? 'all checks passed' : outcome.status === 'failed' ? 'CHECK FAILED' : 'did not run';
}

/** The run as Markdown: machine, one section per scenario, checks. */
export function renderMarkdown(s: BenchSummary): string {
  const out: string[] = [];
  out.push(`# tradegate bench — ${s.startedAt}${s.quick ? ' (quick)' : ''}`, '');
  out.push(
    `Machine: ${s.machine.cpus} × ${s.machine.cpuModel}, ${s.machine.memoryMB} MB, Node ${s.machine.node} ` +
      `(${s.machine.platform}/${s.machine.arch}), open-file limit ${s.machine.fileLimit}. Run took ${(s.durationMs / 1000).toFixed(0)} s.`,
    '',
  );
  out.push(
    'Latencies are open-loop: arrivals at a fixed rate, each timed from its *intended* send time ' +
      '(no coordinated omission); percentiles from HdrHistogram. Load generators run in piscina worker threads of ' +
      'the bench process; the service runs in its own process (`tradegate serve --paper`).',
    '',
  );
  out.push('| scenario | result | time s |', '|---|---|---:|');
  for (const name of SCENARIOS) {
    const o = s.scenarios[name];
    if (o) out.push(`| ${name} | ${statusWord(o)} | ${(o.durationMs / 1000).toFixed(1)} |`);
  }
  out.push('');
  out.push(...goalRows(s));
  out.push(...cpuRows(s));
  if (s.profiles?.length) {
    out.push('CPU profiles of every service thread (open in Chrome DevTools → Performance → Load profile):', '');
    for (const p of s.profiles) out.push(`- ${p.scenario} / ${p.thread}: \`${p.file}\``);
    out.push('');
  }

  const o = s.orders;
  if (s.scenarios.orders) {
    out.push('## orders — bracket orders under the per-key rate limit', '');
    if (o) {
      out.push(
        `${o.keys} keys at 120/min each (${o.ratePerSec} req/s offered) for ${(o.durationMs / 1000).toFixed(0)} s, half with ` +
          `Idempotency-Key; ${o.overLimitKeys} more keys at 10× their limit. Sent ${o.sent}: ${o.accepted} accepted, ` +
          `${o.rejected429} answered 429; ${ms(o.acceptedPerSec)} accepted orders/s${Object.keys(o.otherOutcomes).length ? `, other: ${JSON.stringify(o.otherOutcomes)}` : ''}.`,
        '',
      );
      out.push(...LATENCY_HEAD);
      out.push(latencyRow('harness floor (GET /healthz, same generator)', o.harnessFloorMs));
      out.push(latencyRow('raw broker round trip (WS order/placeorder)', o.brokerRttMs));
      out.push(latencyRow('raw broker round trip (WS order/placeoso)', o.brokerOsoRttMs));
      const sf = o.shapeFloor;
      if (sf?.get) out.push(latencyRow(`shape floor: bare uWS GET at ${sf.get.ratePerSec}/s`, sf.get.latencyMs, 'the harness floor without tradegate'));
      if (sf?.orderLowLoad) out.push(latencyRow(`shape floor: order at ${sf.orderLowLoad.ratePerSec}/s`, sf.orderLowLoad.latencyMs, 'uWS → worker → WebSocket → broker thread and back, nothing else'));
      if (sf?.order) out.push(latencyRow(`shape floor: order at ${sf.order.ratePerSec}/s`, sf.order.latencyMs, 'uWS → worker → WebSocket → broker thread and back, nothing else'));
      const dc = o.durableCommit;
      if (dc) out.push(latencyRow(`durable commit: one idempotency record at ${dc.ratePerSec}/s`, dc.latencyMs, `the store's own LMDB commit and flush; fastest ${ms(dc.minMs)} ms from the call`));
      if (o.lowLoad) {
        const l = o.lowLoad;
        const note = `${l.keys} keys, ${l.durationMs / 1000} s, outcomes ${JSON.stringify(l.outcomes)}`;
        out.push(latencyRow(`POST order at ${l.ratePerSec} req/s (201)`, l.e2eMs, note));
        out.push(latencyRow(`… with Idempotency-Key at ${l.ratePerSec} req/s (201)`, l.idempotent.e2eMs));
        out.push(latencyRow(`service added latency at ${l.ratePerSec} req/s`, l.addedMs, 'e2e − raw placeoso'));
        out.push(latencyRow(`… idempotent, at ${l.ratePerSec} req/s`, l.idempotent.addedMs));
      }
      out.push(
        latencyRow(`POST order at ${o.ratePerSec} req/s, accepted (201)`, o.e2eMs,
          `${ms(o.ratios.e2eOverBrokerP50)}× raw placeoso at p50, ${ms(o.ratios.e2eOverBrokerP99)}× at p99; floor is ${Math.round(o.ratios.floorShareP50 * 100)} % of it at p50`),
      );
      out.push(latencyRow(`… with Idempotency-Key at ${o.ratePerSec} req/s (201)`, o.idempotent.e2eMs));
      out.push(latencyRow(`POST order at ${o.ratePerSec} req/s, every in-limit request`, o.allRequestsMs, 'all outcomes; a timeout counts as its 30 s deadline'));
      out.push(latencyRow('service added latency (e2e − raw placeoso)', o.addedMs, 'percentile-wise difference'));
      out.push(latencyRow('added latency, idempotent', o.idempotent.addedMs));
      out.push(latencyRow('rejected (429)', o.rejected429Ms));
      out.push('');
    }
    out.push(...checksBlock(s.scenarios.orders));
  }

  const w = s.webhooks;
  if (s.scenarios.webhooks) {
    out.push('## webhooks — alert burst', '');
    if (w) {
      out.push(
        `${w.alerts} alerts over ${w.tokens} tokens inside 1 s: ${w.acked} acknowledged, ${w.lost} lost, ${w.duplicates} duplicates at the broker; ` +
          `all at the broker ${ms(w.allAtBrokerAfterLastMs)} ms after the last alert (${ms(w.allAtBrokerMs)} ms after the first; the broker's own order timestamps); ${w.retriedDeduped} retried alerts deduplicated.`,
        '',
      );
      out.push(...LATENCY_HEAD, latencyRow('alert acknowledgement', w.ackMs, 'the first orders this process places (the goal)'));
      if (w.secondBurst) out.push(latencyRow('… the same burst again, same process', w.secondBurst.ackMs, `${w.secondBurst.acked} of ${w.alerts} answered 201; a warm service`));
      out.push('');
    }
    out.push(...checksBlock(s.scenarios.webhooks));
  }

  const e = s.sse;
  if (s.scenarios.sse) {
    out.push('## sse — health-stream fan-out', '');
    if (e) {
      out.push(
        `${e.subscribers} subscribers (${e.requested} requested; ${e.cap}). One broker drop → time until each stream sees the ` +
          `status event. Server RSS ${ms(e.serverRssMB.before)} → ${ms(e.serverRssMB.after)} MB: ${ms(e.rssPerSubscriberKB)} KB per subscriber; ${e.missing} streams missed the event.`,
        '',
      );
      if (e.shapeFloor) {
        out.push(`Shape floor (a bare uWS front holding the same ${e.shapeFloor.subscribers} streams, one event to each): ${ms(e.shapeFloor.rssPerSubscriberKB)} KB per subscriber.`, '');
      }
      out.push(...LATENCY_HEAD, latencyRow('fan-out (drop → event seen)', e.fanoutMs));
      if (e.shapeFloor) out.push(latencyRow('shape floor fan-out (broadcast → event seen)', e.shapeFloor.fanoutMs, 'bare uWS writes to every held stream'));
      out.push('');
    }
    out.push(...checksBlock(s.scenarios.sse));
  }

  const r = s.reads;
  if (s.scenarios.reads) {
    out.push('## reads — accounts and working orders', '');
    if (r) {
      out.push(
        `${r.keys} keys, ${r.ratePerSec} req/s offered for ${(r.durationMs / 1000).toFixed(0)} s: ${ms(r.reqPerSec)} req/s completed` +
          `${Object.keys(r.non2xx).length ? `; non-2xx: ${JSON.stringify(r.non2xx)}` : ''}.`,
        '',
      );
      out.push(...LATENCY_HEAD, latencyRow('all reads', r.latencyMs));
      for (const [name, p] of Object.entries(r.byEndpoint)) out.push(latencyRow(name, p));
      if (r.shapeFloor?.reads) out.push(latencyRow(`shape floor: bare uWS answers of the same sizes at ${r.shapeFloor.reads.ratePerSec}/s`, r.shapeFloor.reads.latencyMs, 'the floor of these reads on this machine'));
      out.push('');
      const w = r.frontWork;
      if (w) {
        out.push(
          `What a µs of work costs the front here: the shape floor's accounts-size GET costs its front ${w.floorUs} µs, and ${w.withWorkUs} µs ` +
            `when each request first busy-waits ${w.workUs} µs, so each µs of work costs ${w.factor} µs of front CPU` +
            `${w.factor >= 1.1 ? ' (system calls and the client’s wake-up cost more when a request holds the thread longer)' : ''}. ` +
            `The goal of ${GET_FRONT_GOAL_US} µs leaves ${w.budgetUs} µs of work per request on this machine; tradegate's front does ${w.oursUs} µs by the same measure.`,
          '',
        );
      }
    }
    out.push(...checksBlock(s.scenarios.reads));
  }

  const a = s.actors;
  if (s.scenarios.actors) {
    out.push('## actors — cost of a connection actor', '');
    if (a) {
      out.push(`One actor starts (addConnection → CONNECTED) in ${ms(a.startMs)} ms; a bare actor worker answers its first RPC ${ms(a.workerStartMs)} ms after spawn.`, '');
      out.push('| connections | RSS growth MB | RSS per actor MB | start ms (all) | start per actor ms |', '|---:|---:|---:|---:|---:|');
      for (const run of a.runs) {
        out.push(`| ${run.connections} | ${ms(run.rssDeltaMB)} | ${ms(run.rssPerActorMB)} | ${ms(run.startMs)} | ${ms(run.startPerActorMs)} |`);
      }
      out.push('');
    }
    out.push(...checksBlock(s.scenarios.actors));
  }
  const c = s.cluster;
  if (s.scenarios.cluster) {
    out.push('## cluster — single node vs one and three cluster nodes', '');
    if (c) {
      out.push(
        `${c.keys} keys at 120/min (${c.ratePerSec} req/s) for ${(c.durationMs / 1000).toFixed(0)} s of orders, then of reads, through each deployment; ` +
          `${c.cores} cores shared by every process. Cluster mode adds ${ms(c.addedMs.orderP50)} ms (p50) / ${ms(c.addedMs.orderP99)} ms (p99) to an order, ` +
          `${ms(c.addedMs.readP50)} ms (p50) to a read; spreading the load over three nodes adds ${ms(c.addedMs.hopOrderP50)} ms (p50) to an order. ` +
          `Completed per second, 3 nodes : 1 node: orders ${c.ratios.ordersPerSec3to1}, reads ${c.ratios.readsPerSec3to1}.`,
        '',
        '| deployment | orders/s | reads/s | order p50 | order p99 | idempotent p50 | read p50 | read p99 |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
      );
      for (const [label, r] of [['single node (LMDB)', c.single], ['1 cluster node', c.oneNode], ['3 cluster nodes', c.threeNodes]] as const) {
        out.push(`| ${label} | ${ms(r.ordersPerSec)} | ${ms(r.readsPerSec)} | ${ms(r.orderMs.p50)} | ${ms(r.orderMs.p99)} | ${ms(r.idempotentOrderMs.p50)} | ${ms(r.readMs.p50)} | ${ms(r.readMs.p99)} |`);
      }
      out.push('');
    }
    out.push(...checksBlock(s.scenarios.cluster));
  }
  return `${out.join('\n')}\n`;
}

/** File-name-safe ISO timestamp, e.g. 2026-11-21T19-45-00Z. */
export function fileStamp(iso: string): string {
  return iso.replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
}

/** Paths of the files a report run wrote. */
export interface WrittenReport {
  json: string;
  markdown: string;
  svg: string;
  /** latest.json, written with SUMMARY.md (full runs). */
  latest?: string;
  /** SUMMARY.md, written for full runs of every scenario (the committed summary). */
  summary?: string;
}

/**
 * Writes the dated JSON (summary + plotted spectra), Markdown and SVG; with `summaryFile` (a
 * full run), also latest.json (summary only), SUMMARY.md and latest.svg, so the three committed
 * files always describe the same run.
 */
export async function writeReport(
  dir: string,
  summary: BenchSummary,
  series: PlotSeries[],
  opts: { summaryFile?: boolean } = {},
): Promise<WrittenReport> {
  await mkdir(dir, { recursive: true });
  const stamp = fileStamp(summary.startedAt);
  const paths: WrittenReport = {
    json: join(dir, `${stamp}.json`),
    markdown: join(dir, `${stamp}.md`),
    svg: join(dir, `${stamp}.svg`),
  };
  const title = `tradegate latency distribution — ${summary.startedAt}${summary.quick ? ' (quick)' : ''}`;
  await writeFile(paths.json, `${JSON.stringify({ ...summary, spectra: series }, null, 2)}\n`);
  await writeFile(paths.markdown, renderMarkdown(summary).replace(/\n$/, `\n![latency distribution](${stamp}.svg)\n`));
  await writeFile(paths.svg, renderLatencySvg(title, series));
  if (opts.summaryFile) {
    paths.latest = join(dir, 'latest.json');
    await writeFile(paths.latest, `${JSON.stringify(summary, null, 2)}\n`);
    paths.summary = join(dir, 'SUMMARY.md');
    await writeFile(join(dir, 'latest.svg'), renderLatencySvg(title, series));
    await writeFile(paths.summary, renderMarkdown(summary).replace(/\n$/, `\n![latency distribution](latest.svg)\n`));
  }
  return paths;
}

/** All checks of all scenarios passed (and none errored). */
export function allPassed(summary: BenchSummary): boolean {
  return Object.values(summary.scenarios).every((o) => o && o.status === 'ok');
}

/** A check helper: `ok` with a detail line. */
export function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}
