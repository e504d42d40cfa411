/**
 * `reads`: K read keys (2,500; quick 250), each at its 120/min limit (5,000 req/s offered),
 * alternate GET /api/v1/accounts and GET /v1/accounts/{id}/working-orders (served from the
 * actor's live mirror of the broker) on an open-loop schedule. A few resting brackets are
 * placed first so the working-orders list holds 150 records, and its answer is checked
 * against the broker. Before the measured run, each endpoint alone for a few seconds gives
 * its CPU per request per thread.
 */
import { cpuPerRequest, type CpuPerRequest } from '../cpu.js';
import { mergeHistograms } from '../hdr.js';
import type { HttpRequestSpec } from '../http-load.js';
import { check } from '../report.js';
import { lagNote, measured, pick, r2, statusCounts, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import { Service } from '../service.js';
import { measureShapeFloor } from '../shape-floor.js';
import { frontWorkCalibration } from '../goals.js';
import type { ReadsSummary } from '../summary.js';
import { brokerOrders, createApiKeys, demoAccounts, pinBenchContract, restingBracket, waitForKey } from '../fixtures.js';

const PER_KEY_RATE = 2;
/** The busy-wait per request of the shape floor's calibration read (goals.ts frontWorkCalibration). */
const FRONT_WORK_CALIBRATION_US = 20;

/** Runs the scenario on its own service. */
export async function runReads(ctx: ScenarioContext): Promise<ScenarioRun<ReadsSummary>> {
  const keysN = ctx.keys ?? (ctx.quick ? 250 : 2500);
  const durationMs = ctx.quick ? 5_000 : 30_000;
  const aloneMs = ctx.quick ? 2_000 : 5_000;
  const seedOrders = ctx.quick ? 10 : 50;
  const rate = keysN * PER_KEY_RATE;
  const service = await Service.start();
  try {
    const demo = await service.demo();
    const [account] = await demoAccounts(service, demo.apiKey);
    await pinBenchContract(service, demo.apiKey, account!.id);
    const keys = await createApiKeys(service, keysN, ['read'], 'bench-reads');
    await waitForKey(service, keys[keys.length - 1]!);
    for (let i = 0; i < seedOrders; i++) {
      const res = await service.api('POST', `/api/v1/accounts/${account!.id}/orders`, demo.apiKey, restingBracket(`seed-${i}`));
      if (res.status !== 201) throw new Error(`seed order answered ${res.status}: ${JSON.stringify(res.body)}`);
    }

    const working = await service.api<{ data?: unknown[] }>('GET', `/v1/accounts/${account!.id}/working-orders?limit=500`, demo.apiKey);
    const atBroker = (await brokerOrders(service, [account!.id])).filter((o) => o.ordStatus === 'Working' || o.ordStatus === 'Suspended');
    const listed = working.body.data?.length ?? -1;

    const requests: HttpRequestSpec[] = keys.map((key, i) =>
      i % 2 === 0
        ? { method: 'GET', path: '/api/v1/accounts', tag: 'GET /api/v1/accounts', headers: { 'x-api-key': key } }
        : { method: 'GET', path: `/v1/accounts/${account!.id}/working-orders`, tag: 'GET /v1/accounts/{id}/working-orders', headers: { 'x-api-key': key } },
    );
    // A short warm-up (code still cold from start-up would count in the first phase), then
    // each endpoint alone (CPU per request per thread); every key stays below its 120 per 60 s:
    // 2/s over the warm-up, both phases and the run (84 requests at most).
    await ctx.pool.http({ kind: 'http', origin: service.origin, ratePerSec: rate, durationMs: ctx.quick ? 1_000 : 2_000, uniquePrefix: `${ctx.runId}-warm`, requests });
    const cpu: Record<string, CpuPerRequest> = {};
    for (const [phase, tag] of [['accounts', 'GET /api/v1/accounts'], ['workingOrders', 'GET /v1/accounts/{id}/working-orders']] as const) {
      const alone = keys.map((key) => ({ ...requests.find((r) => r.tag === tag)!, headers: { 'x-api-key': key } }));
      ctx.log(`reads: ${tag} alone at ${rate}/s for ${aloneMs / 1000} s`);
      const before = await service.cpu();
      const r = await ctx.pool.http({ kind: 'http', origin: service.origin, ratePerSec: rate, durationMs: aloneMs, uniquePrefix: `${ctx.runId}-${phase}`, requests: alone });
      cpu[phase] = cpuPerRequest(before, await service.cpu(), r.sent);
    }
    ctx.log(`reads: ${keysN} keys at 120/min (${rate}/s) for ${durationMs / 1000} s`);
    const mixedBefore = await service.cpu();
    const run = await ctx.pool.http({ kind: 'http', origin: service.origin, ratePerSec: rate, durationMs, uniquePrefix: `${ctx.runId}-r`, requests });
    cpu.mixed = cpuPerRequest(mixedBefore, await service.cpu(), run.sent);

    // The shape's floor for the same reads: a bare uWS answer of each endpoint's size, same rate.
    const bytesOf = async (path: string) => Buffer.byteLength(JSON.stringify((await service.api('GET', path, demo.apiKey)).body));
    const accountsBytes = await bytesOf('/api/v1/accounts');
    const workingBytes = await bytesOf(`/v1/accounts/${account!.id}/working-orders`);
    ctx.log(`reads: shape floor (bare uWS answers of ${accountsBytes} and ${workingBytes} bytes) at ${rate}/s`);
    const shape = await measureShapeFloor(ctx.pool, ctx.runId, [
      { kind: 'readsAccounts', ratePerSec: rate, durationMs: aloneMs, readBytes: [accountsBytes] },
      { kind: 'reads', ratePerSec: rate, durationMs: aloneMs * 2, readBytes: [accountsBytes, workingBytes] },
      { kind: 'readsAccountsWork', ratePerSec: rate, durationMs: aloneMs, readBytes: [accountsBytes], workUs: FRONT_WORK_CALIBRATION_US },
    ]);
    cpu.shapeFloorAccounts = shape.summary.readsAccounts!.cpu;
    cpu.shapeFloorAccountsWork = shape.summary.readsAccountsWork!.cpu;
    cpu.shapeFloorReads = shape.summary.reads!.cpu;

    const ok = mergeHistograms(pick(run, (_, s) => s === '200'));
    const all = measured('reads (200)', ok);
    const byEndpoint: Record<string, ReturnType<typeof measured>['p']> = {};
    for (const tag of new Set(requests.map((r) => r.tag))) {
      byEndpoint[tag] = measured(tag, mergeHistograms(pick(run, (t, s) => t === tag && s === '200'))).p;
    }
    const counts = statusCounts(run);
    const non2xx: Record<string, number> = {};
    for (const [s, n] of Object.entries(counts)) if (s !== '200') non2xx[s] = n;
    const reqPerSec = run.elapsedMs > 0 ? r2((ok.totalCount * 1000) / run.elapsedMs) : 0;

    const floorPhases = [shape.summary.reads!, shape.summary.readsAccounts!, shape.summary.readsAccountsWork!];
    const checks = [
      check('every read answered 200', Object.keys(non2xx).length === 0, `${ok.totalCount} of ${run.sent} answered 200${Object.keys(non2xx).length ? `; others ${JSON.stringify(non2xx)}` : ''}`),
      check('working orders match the broker', listed === atBroker.length,
        `the service listed ${listed} working orders; the broker holds ${atBroker.length} working/suspended orders on the account`),
      check('the shape floor answered every read', floorPhases.every((p) => p.allOk),
        `${floorPhases.reduce((n, p) => n + p.latencyMs.count, 0)} of ${floorPhases.reduce((n, p) => n + p.sent, 0)} answered 200`),
    ];
    const answeredShare = run.sent > 0 ? ok.totalCount / run.sent : 0;
    const summary: ReadsSummary = { keys: keysN, ratePerSec: rate, offeredPerSec: rate, durationMs, reqPerSec, answeredShare, latencyMs: all.p, byEndpoint, non2xx, cpuUsPerRequest: cpu, shapeFloor: shape.summary };
    const frontWork = frontWorkCalibration(FRONT_WORK_CALIBRATION_US, cpu.shapeFloorAccounts.front, cpu.shapeFloorAccountsWork.front, cpu.accounts?.front);
    if (frontWork) summary.frontWork = frontWork;
    return { summary, checks, notes: lagNote('reads', run.sendLag), series: [all.series, ...shape.series] };
  } finally {
    await service.stop();
  }
}
