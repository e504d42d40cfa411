/**
 * `sse`: S health-stream subscribers (default 10,000; capped by the open-file limit, since
 * the service and the bench each hold one descriptor per stream) wait with their snapshot;
 * then the paper broker drops the service's connection and each subscriber notes when its
 * `status` event arrives. Reports the fan-out time distribution and the service's RSS per
 * subscriber. Streams per key are capped by the service (SSE_MAX_STREAMS_PER_KEY, 5), so
 * the bench spreads subscribers over ceil(S/5) read keys.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createHistogram, recordMs } from '../hdr.js';
import { epochNow } from '../http-load.js';
import { check } from '../report.js';
import { measured, r2, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import { Service } from '../service.js';
import { measureSseFloor } from '../shape-floor.js';
import type { SseSummary } from '../summary.js';
import { createApiKeys, demoAccounts, waitForKey } from '../fixtures.js';

const STREAMS_PER_KEY = 5;
/** Descriptors kept free for everything else each process does. */
const FD_RESERVE = 1_000;

/** Runs the scenario on its own service. */
export async function runSse(ctx: ScenarioContext): Promise<ScenarioRun<SseSummary>> {
  const requested = ctx.quick ? 1_000 : 10_000;
  const byFiles = Math.max(100, ctx.fileLimit - FD_RESERVE);
  const subscribers = Math.min(requested, byFiles);
  const cap =
    subscribers < requested
      ? `capped by the open-file limit ${ctx.fileLimit}`
      : `${ctx.quick ? 'quick mode' : 'default'}; open-file limit ${ctx.fileLimit} allows it`;
  const service = await Service.start();
  try {
    const demo = await service.demo();
    await demoAccounts(service, demo.apiKey);
    const keys = await createApiKeys(service, Math.ceil(subscribers / STREAMS_PER_KEY), ['read'], 'bench-sse');
    await waitForKey(service, keys[keys.length - 1]!);
    await sleep(500);
    const rssBefore = await service.rssKB();
    ctx.log(`sse: opening ${subscribers} streams over ${keys.length} keys`);

    let triggeredAt = Number.NaN;
    let rssAfter = 0;
    let trigger: Promise<void> = Promise.resolve();
    let triggerError: unknown;
    const results = await ctx.pool.sse({ kind: 'sse', origin: service.origin, keys, waitTimeoutMs: 60_000 }, subscribers, (open) => {
      trigger = (async () => {
        // Let the service settle after the ramp so RSS reflects held streams, not the handshakes.
        await sleep(1000);
        rssAfter = await service.rssKB();
        ctx.log(`sse: ${open} streams open; dropping the broker connection`);
        triggeredAt = epochNow();
        await service.control('POST', '/connections/drop', {});
      })().catch((err: unknown) => {
        // Kept until the subscribers return: a rejection nobody awaits yet would end the process.
        triggerError = err;
      });
    });
    await trigger;
    if (triggerError) throw triggerError;

    const open = results.reduce((n, r) => n + r.open, 0);
    const failed = results.reduce((n, r) => n + r.failed, 0);
    const errors: Record<string, number> = {};
    for (const r of results) for (const [k, n] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + n;
    const received = results.flatMap((r) => r.receivedAt);
    const early = received.filter((t) => t < triggeredAt).length;
    const h = createHistogram();
    for (const t of received) if (t >= triggeredAt) recordMs(h, t - triggeredAt);
    const fanout = measured(`SSE fan-out to ${open} subscribers`, h);
    const missing = open - received.length;
    const rssPerSubscriberKB = open > 0 ? r2((rssAfter - rssBefore) / open) : 0;

    const checks = [
      check('every stream opened with its snapshot', open === subscribers && failed === 0,
        `${open} of ${subscribers} open${failed ? `, ${failed} failed ${JSON.stringify(errors)}` : ''}`),
      check('every subscriber saw the status change', missing === 0 && early === 0,
        `${received.length - early} of ${open} saw it after the drop${early ? `; ${early} saw a status before the drop` : ''}`),
    ];
    const summary: SseSummary = {
      subscribers: open, requested, cap, fanoutMs: fanout.p, missing, rssPerSubscriberKB,
      serverRssMB: { before: r2(rssBefore / 1024), after: r2(rssAfter / 1024) },
    };
    return { summary, checks, notes: [], series: [fanout.series] };
  } finally {
    await service.stop();
  }
}

/** The scenario, then the same streams on the shape floor (after the service has stopped: its sockets are closed). */
export async function runSseWithFloor(ctx: ScenarioContext): Promise<ScenarioRun<SseSummary>> {
  const run = await runSse(ctx);
  ctx.log(`sse: shape floor (a bare uWS front) holding ${run.summary.subscribers} streams`);
  const floor = await measureSseFloor(ctx.pool, run.summary.subscribers);
  run.summary.shapeFloor = floor;
  run.checks.push(check('the shape floor held every stream', floor.subscribers === run.summary.subscribers && floor.fanoutMs.count === floor.subscribers,
    `${floor.subscribers} of ${run.summary.subscribers} open, ${floor.fanoutMs.count} saw the event`));
  return run;
}
