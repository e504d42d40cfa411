/**
 * `webhooks`: N alerts (1,000; quick 300) spread over 100 tokens (quick 30), all inside one second (open
 * loop, TradingView-style text/plain bodies for half of them), each with a unique `id`.
 * Then 10 % of the alerts are retried with the same `id`. Checks against the paper broker:
 * every acknowledged alert's order is there, nothing is there twice, retries placed nothing;
 * and how long until every order was at the broker. Then the same burst once more on the now warm
 * process (fresh ids), reported next to the first; the goals judge the first.
 */
import { cpuPerRequest, type CpuPerRequest } from '../cpu.js';
import { mergeHistograms } from '../hdr.js';
import type { HttpRequestSpec } from '../http-load.js';
import { check } from '../report.js';
import { lagNote, measured, pick, statusCounts, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import { resolveAll } from '../retry.js';
import { Service } from '../service.js';
import { measureShapeFloor } from '../shape-floor.js';
import type { WebhooksSummary } from '../summary.js';
import { accountAtBroker, BENCH_SYMBOL, brokerOrders, createApiKeys, demoAccounts, pinBenchContract, PINNED_PRICE, waitForKey } from '../fixtures.js';


function alertBody(id: string): string {
  return JSON.stringify({ action: 'buy', ticker: BENCH_SYMBOL, contracts: '1', orderType: 'limit', price: PINNED_PRICE * 0.8, id });
}

interface WebhookAnswer {
  order?: { orderId?: string } | null;
}

/** Runs the scenario on its own service. */
export async function runWebhooks(ctx: ScenarioContext): Promise<ScenarioRun<WebhooksSummary>> {
  // Quick mode keeps the shape (10 alerts per token inside 1 s) at a third of the size.
  const alerts = ctx.quick ? 300 : 1000;
  const tokensN = ctx.quick ? 30 : 100;
  const notes: string[] = [];
  const service = await Service.start();
  try {
    const demo = await service.demo();
    const [account] = await demoAccounts(service, demo.apiKey);
    await pinBenchContract(service, demo.apiKey, account!.id);
    // Token creations stay under 120/min per key by spreading them over 4 keys.
    const keys = await createApiKeys(service, 4, ['read', 'trade'], 'bench-webhooks');
    await waitForKey(service, keys[3]!);
    ctx.log(`webhooks: creating ${tokensN} webhook tokens`);
    const tokens: string[] = [];
    for (let i = 0; i < tokensN; i++) {
      const res = await service.api<{ token?: string }>('POST', '/api/v1/webhook-tokens', keys[i % keys.length], {
        accountId: account!.id,
        name: `bench-${i}`,
      });
      if (res.status !== 201 || !res.body.token) throw new Error(`webhook token creation answered ${res.status}: ${JSON.stringify(res.body)}`);
      tokens.push(res.body.token);
    }
    const before = (await brokerOrders(service, [account!.id])).length;

    const spec = (token: string, i: number): HttpRequestSpec => ({
      method: 'POST', path: `/api/v1/webhooks/${token}`, tag: 'alert', collect: true, meta: String(i),
      headers: { 'content-type': i % 2 === 0 ? 'text/plain; charset=utf-8' : 'application/json' },
      body: alertBody('{{seq}}'),
    });
    ctx.log(`webhooks: ${alerts} alerts over ${tokensN} tokens inside 1 s`);
    await ctx.pool.warm();
    /** All alerts inside 1 s from `startAt` (fresh ids per `prefix`), with the service's CPU per alert. */
    const sendBurst = async (prefix: string) => {
      const cpuBefore = await service.cpu();
      const startAt = Date.now() + 300;
      const run = await ctx.pool.http({
        kind: 'http', origin: service.origin, ratePerSec: alerts, count: alerts, startAtEpochMs: startAt,
        uniquePrefix: `${ctx.runId}-${prefix}`, requests: tokens.map((t, i) => spec(t, i)),
      });
      return { run, startAt, cpu: cpuPerRequest(cpuBefore, await service.cpu(), run.sent) };
    };
    const first = await sendBurst('wh');
    const burst = first.run;
    const burstStart = first.startAt;
    const cpu: Record<string, CpuPerRequest> = { burst: first.cpu };
    const answers = burst.collected;
    const acked = answers.filter((c) => c.status === 201);
    const orderIdOf = (body: unknown): string | undefined => {
      const id = (body as WebhookAnswer | null)?.order?.orderId;
      return id === undefined ? undefined : String(id);
    };
    // "All at the broker" is a broker-side time: when the broker created the last acknowledged
    // alert's order (its own timestamp, same clock as this process), not when a poll noticed.
    const created = new Map((await brokerOrders(service, [account!.id])).map((o) => [String(o.id), Date.parse(o.timestamp)]));
    const ackedAt = acked.map((c) => created.get(orderIdOf(c.body)!) ?? Number.NaN);
    const allAtBrokerMs = acked.length > 0 && ackedAt.every(Number.isFinite) ? Math.max(...ackedAt) - burstStart : Number.NaN;
    const lastAlertAt = ((alerts - 1) * 1000) / alerts;

    // A client that got no 201 (504 = outcome unknown, 5xx, dropped) retries with the same id.
    const unresolved = answers.filter((c) => c.status !== 201);
    ctx.log(`webhooks: ${acked.length} acknowledged; retrying ${unresolved.length} with the same id`);
    const retried = await resolveAll(service, unresolved.map((c) => ({
      method: 'POST', path: `/api/v1/webhooks/${tokens[Number(c.meta)]!}`, body: JSON.parse(alertBody(c.seq)) as unknown,
    })), { budgetMs: ctx.quick ? 20_000 : 60_000 });
    const finalIds = new Map<string, string>();
    for (const c of acked) finalIds.set(c.seq, orderIdOf(c.body)!);
    unresolved.forEach((c, i) => {
      const id = retried[i]!.status === 201 ? orderIdOf(retried[i]!.body) : undefined;
      if (id) finalIds.set(c.seq, id);
    });

    // Dedupe: 10 % of the acknowledged alerts again, same token, same `id`.
    const repeats = acked.slice(0, Math.ceil(alerts / 10));
    let deduped = 0;
    for (const c of repeats) {
      const res = await service
        .api<WebhookAnswer>('POST', `/api/v1/webhooks/${tokens[Number(c.meta)]!}`, undefined, JSON.parse(alertBody(c.seq)))
        .catch(() => undefined);
      if (res?.status === 201 && orderIdOf(res.body) === orderIdOf(c.body)) deduped++;
    }

    const orders = await brokerOrders(service, [account!.id]);
    const distinct = new Set(finalIds.values());
    const atBroker = accountAtBroker(orders, distinct);
    const newOrders = orders.length - before;
    const lost = alerts - finalIds.size;
    const duplicates = atBroker.duplicates + Math.max(0, newOrders - distinct.size) + (finalIds.size - distinct.size);
    const counts = statusCounts(burst);
    const ack = measured('webhook alert ack', mergeHistograms(pick(burst, (_, s) => s === '201')));

    const checks = [
      check('every alert acknowledged at first try', acked.length === alerts, `${acked.length} of ${alerts} answered 201 (${JSON.stringify(counts)})`),
      check('every alert placed after retries with the same id', lost === 0,
        `${finalIds.size} of ${alerts} alerts have an order (${unresolved.length} needed a retry)`),
      check('every acknowledged order is at the broker', atBroker.missing.length === 0, `${distinct.size - atBroker.missing.length} of ${distinct.size} found`),
      check('no duplicates at the broker', duplicates === 0,
        `${newOrders} new broker orders for ${distinct.size} distinct alert orders; ${atBroker.duplicates} clOrdId duplicates`),
      check('repeated alerts (same id) placed nothing new', deduped === repeats.length,
        `${deduped} of ${repeats.length} repeats answered with the first order id`),
      check("acknowledged inside TradingView's 3 s", acked.length > 0 && ack.p.max < 3000, `slowest acknowledgement ${ack.p.max.toFixed(1)} ms`),
    ];
    // The same burst again on this now warm process (fresh ids): the first burst meets a service
    // that has never placed an order (JIT, first use of every path) and is what the goal judges;
    // this one shows a service that has been running.
    ctx.log(`webhooks: a second burst of ${alerts} alerts, same process`);
    const second = await sendBurst('wh2');
    const burst2 = second.run;
    cpu.secondBurst = second.cpu;
    const acked2 = burst2.collected.filter((c) => c.status === 201);
    const ids2 = new Set(acked2.map((c) => orderIdOf(c.body)).filter((id): id is string => id !== undefined));
    const orders2 = await brokerOrders(service, [account!.id]);
    const atBroker2 = accountAtBroker(orders2, ids2);
    const ack2 = measured('second burst ack', mergeHistograms(pick(burst2, (_, s) => s === '201')));
    checks.push(
      check('second burst: every alert acknowledged, each with its own order at the broker', acked2.length === alerts && ids2.size === alerts && atBroker2.missing.length === 0 && atBroker2.duplicates === 0,
        `${acked2.length} of ${alerts} answered 201 (${JSON.stringify(statusCounts(burst2))}); ${ids2.size - atBroker2.missing.length} of ${ids2.size} orders found, ${atBroker2.duplicates} clOrdId duplicates`),
    );
    notes.push(...lagNote('webhooks, second burst', burst2.sendLag));

    // The shape's floor for the same burst: the same count of orders inside 1 s through a bare
    // uWS front, a worker and a broker WebSocket (bench/shape-floor-main.ts).
    ctx.log(`webhooks: shape floor, ${alerts} orders inside 1 s`);
    const shape = await measureShapeFloor(ctx.pool, ctx.runId, [{ kind: 'burst', ratePerSec: alerts, durationMs: 1000, body: alertBody('0') }]);
    const floorBurst = shape.summary.burst!;
    cpu.shapeFloorBurst = floorBurst.cpu;
    checks.push(check('the shape floor answered every order of its burst', floorBurst.allOk, `${floorBurst.latencyMs.count} of ${floorBurst.sent} answered 201`));
    notes.push(...lagNote('webhooks', burst.sendLag));
    if (Object.keys(burst.errors).length) notes.push(`client errors: ${JSON.stringify(burst.errors)}`);
    const summary: WebhooksSummary = {
      alerts, tokens: tokensN, acked: acked.length, duplicates, lost,
      allAtBrokerMs: Number.isFinite(allAtBrokerMs) ? allAtBrokerMs : -1,
      allAtBrokerAfterLastMs: Number.isFinite(allAtBrokerMs) ? Math.round(allAtBrokerMs - lastAlertAt) : -1,
      ackMs: ack.p, retriedDeduped: deduped, cpuUsPerRequest: cpu, shapeFloor: shape.summary,
      secondBurst: { acked: acked2.length, ackMs: ack2.p },
    };
    return { summary, checks, notes, series: [ack.series, ack2.series, ...shape.series] };
  } finally {
    await service.stop();
  }
}
