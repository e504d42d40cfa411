/**
 * `orders`: K keys, each at exactly its 120/min limit, place resting bracket orders (half
 * with Idempotency-Key); a few more keys send at 10× their limit. Next to it, in the same
 * run: the harness floor (same generator against /healthz) and the raw broker round trip
 * (a bare WebSocket client placing orders at the paper broker). Afterwards every accepted
 * order is looked up at the broker, duplicates are counted by clOrdId, and a sample of
 * idempotent requests is replayed to prove a replay places nothing.
 */
import { cpuPerRequest, type CpuPerRequest } from '../cpu.js';
import { mergeHistograms, subtractPercentiles } from '../hdr.js';
import type { HttpRequestSpec } from '../http-load.js';
import { check } from '../report.js';
import { lagNote, measured, pick, r2, statusCounts, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import { resolveAll } from '../retry.js';
import { Service } from '../service.js';
import { measureShapeFloor } from '../shape-floor.js';
import { measureDurableCommit } from '../durable-probe.js';
import type { OrdersSummary } from '../summary.js';
import {
  accountAtBroker,
  brokerOrders,
  createApiKeys,
  demoAccounts,
  pinBenchContract,
  PINNED_PRICE,
  restingBracket,
  waitForKey,
  waitForQuiescence,
} from '../fixtures.js';

/** Requests per key per second at the default limit (120/min). */
const PER_KEY_RATE = 2;
const OVER_LIMIT_FACTOR = 10;
/** Full runs first measure a load the service can carry (when K is larger): 50 keys, 100/s. */
const LOW_LOAD_KEYS = 50;
const LOW_LOAD_MS = 20_000;
/** Records per second of the durable-commit probe: slow enough that two commits never overlap. */
const DURABLE_PROBE_RATE = 100;
/** Unanswered idempotent requests retried after the run (a sample when there are more). */
const MAX_RETRIED = 300;

/** At most `max` items, taken round-robin over their keys (`meta`), so no key's limit is hit by retries. */
function spreadOverKeys<T extends { meta?: string }>(items: T[], max: number): T[] {
  const byKey = new Map<string | undefined, T[]>();
  for (const item of items) {
    const list = byKey.get(item.meta) ?? [];
    list.push(item);
    byKey.set(item.meta, list);
  }
  const out: T[] = [];
  const lists = [...byKey.values()];
  for (let round = 0; out.length < max && lists.some((l) => l.length > round); round++) {
    for (const l of lists) if (l[round] && out.length < max) out.push(l[round]!);
  }
  return out;
}

/** Runs the scenario on its own service. */
export async function runOrders(ctx: ScenarioContext): Promise<ScenarioRun<OrdersSummary>> {
  const keysN = ctx.keys ?? (ctx.quick ? 50 : 500);
  const overN = ctx.quick ? 2 : 4;
  // Below 60 s so a key at 2/s never has 120 requests in one window: no in-limit 429.
  const durationMs = ctx.quick ? 8_000 : 55_000;
  const probeMs = ctx.quick ? 3_000 : 10_000;
  const rate = keysN * PER_KEY_RATE;
  const notes: string[] = [];

  const service = await Service.start();
  try {
    const demo = await service.demo();
    const [account] = await demoAccounts(service, demo.apiKey);
    const contract = await pinBenchContract(service, demo.apiKey, account!.id);
    const lowN = !ctx.quick && keysN > LOW_LOAD_KEYS ? LOW_LOAD_KEYS : 0;
    ctx.log(`orders: creating ${keysN + overN + lowN} API keys`);
    const keys = await createApiKeys(service, keysN + overN + lowN, ['read', 'trade'], 'bench-orders');
    await waitForKey(service, keys[0]!);
    const inLimit = keys.slice(0, keysN);
    const overLimit = keys.slice(keysN, keysN + overN);
    // Own keys: their requests must not count against the main run's keys' windows.
    const lowLoadKeys = keys.slice(keysN + overN);
    const rawLogin = { name: `bench-raw-${ctx.runId}`, password: `pw-${ctx.runId}` };
    await service.control('POST', '/users', { ...rawLogin, accounts: [{ name: `RAW${ctx.runId}`.slice(0, 30) }] });

    const cpu: Record<string, CpuPerRequest> = {};
    ctx.log(`orders: harness floor, GET /healthz at ${rate}/s`);
    const floorCpu = await service.cpu();
    const floor = await ctx.pool.http({
      kind: 'http', origin: service.origin, ratePerSec: rate, durationMs: probeMs, uniquePrefix: `${ctx.runId}-floor`,
      requests: [{ method: 'GET', path: '/healthz', tag: 'healthz' }],
    });
    cpu.floor = cpuPerRequest(floorCpu, await service.cpu(), floor.sent);

    const limitOrder = { action: 'Buy', symbol: contract, orderQty: 1, orderType: 'Limit', price: PINNED_PRICE * 0.8, timeInForce: 'GTC' };
    ctx.log(`orders: raw broker round trip at ${rate}/s`);
    const rawPlace = await ctx.pool.broker({
      kind: 'broker-ws', restUrl: service.paper.restUrl, wsUrl: service.paper.wsUrl, credentials: rawLogin,
      endpoint: 'order/placeorder', body: limitOrder, ratePerSec: rate, durationMs: probeMs, clOrdIdPrefix: `${ctx.runId}-raw`,
    });
    const rawOso = await ctx.pool.broker({
      kind: 'broker-ws', restUrl: service.paper.restUrl, wsUrl: service.paper.wsUrl, credentials: rawLogin,
      endpoint: 'order/placeoso',
      body: {
        ...limitOrder,
        bracket1: { action: 'Sell', orderType: 'Limit', price: PINNED_PRICE * 0.82 },
        bracket2: { action: 'Sell', orderType: 'Stop', stopPrice: PINNED_PRICE * 0.78 },
      },
      ratePerSec: rate, durationMs: probeMs, clOrdIdPrefix: `${ctx.runId}-rawoso`,
    });

    // One durable commit, the least an idempotent order's answer waits for its record (bench/durable-probe.ts).
    ctx.log(`orders: durable commit of one idempotency record at ${DURABLE_PROBE_RATE}/s`);
    const durableCommit = await measureDurableCommit({ ratePerSec: DURABLE_PROBE_RATE, durationMs: probeMs });

    // The shape's own floor on this machine, same generator, same rates: the least any
    // implementation of uWS front → actor worker → broker WebSocket costs (bench/shape-floor-main.ts).
    ctx.log(`orders: shape floor (bare uWS → worker → WebSocket → broker thread) at ${rate}/s`);
    const bracketBody = JSON.stringify(restingBracket());
    const shape = await measureShapeFloor(ctx.pool, ctx.runId, [
      { kind: 'get', ratePerSec: rate, durationMs: probeMs },
      { kind: 'order', ratePerSec: rate, durationMs: probeMs, body: bracketBody },
      ...(lowN > 0 ? [{ kind: 'orderLowLoad' as const, ratePerSec: lowN * PER_KEY_RATE, durationMs: probeMs, body: bracketBody }] : []),
    ]);
    if (shape.summary.get) cpu.shapeFloorGet = shape.summary.get.cpu;
    if (shape.summary.order) cpu.shapeFloorOrder = shape.summary.order.cpu;

    const path = `/api/v1/accounts/${account!.id}/orders`;
    const orderSpec = (key: string, i: number, tag: string, idempotent: boolean): HttpRequestSpec => ({
      method: 'POST', path, tag, collect: true, meta: String(i),
      headers: {
        'content-type': 'application/json', 'x-api-key': key,
        ...(idempotent ? { 'idempotency-key': 'bench-{{seq}}' } : {}),
      },
      body: JSON.stringify(restingBracket('{{seq}}')),
    });
    let low: Awaited<ReturnType<typeof ctx.pool.http>> | undefined;
    if (lowN > 0) {
      ctx.log(`orders: low load first, ${lowN} keys at 120/min (${lowN * PER_KEY_RATE}/s) for ${LOW_LOAD_MS / 1000} s`);
      const lowCpu = await service.cpu();
      low = await ctx.pool.http({
        kind: 'http', origin: service.origin, ratePerSec: lowN * PER_KEY_RATE, durationMs: LOW_LOAD_MS, uniquePrefix: `${ctx.runId}-l`,
        requests: lowLoadKeys.map((k, i) => orderSpec(k, keysN + overN + i, i % 2 === 0 ? 'plain' : 'idem', i % 2 === 1)),
      });
      cpu.lowLoad = cpuPerRequest(lowCpu, await service.cpu(), low.sent);
    }
    ctx.log(`orders: ${keysN} keys at 120/min (${rate}/s) + ${overN} keys at ${OVER_LIMIT_FACTOR}× for ${durationMs / 1000} s`);
    await ctx.pool.warm();
    const mainCpu = await service.cpu();
    const start = Date.now() + 300;
    const [main, over] = await Promise.all([
      ctx.pool.http({
        kind: 'http', origin: service.origin, ratePerSec: rate, durationMs, startAtEpochMs: start, uniquePrefix: `${ctx.runId}-o`,
        requests: inLimit.map((k, i) => orderSpec(k, i, i % 2 === 0 ? 'plain' : 'idem', i % 2 === 1)),
      }),
      ctx.pool.http({
        kind: 'http', origin: service.origin, ratePerSec: overN * PER_KEY_RATE * OVER_LIMIT_FACTOR, durationMs,
        startAtEpochMs: start, uniquePrefix: `${ctx.runId}-x`,
        requests: overLimit.map((k, i) => orderSpec(k, keysN + i, 'over', false)),
      }, 1),
    ]);

    // An overloaded service keeps working off requests whose clients gave up; let it finish
    // so that retries meet a settled service and the broker count below is final.
    // Read before the quiescence polls: they dump the broker's whole state, which is not order work.
    cpu.main = cpuPerRequest(mainCpu, await service.cpu(), main.sent + over.sent);
    const settledMs = await waitForQuiescence(service, [account!.id]);
    if (settledMs > 5_000) notes.push(`the service kept placing orders for ${(settledMs / 1000).toFixed(0)} s after the run (backlog of abandoned requests)`);

    // Replays: the same key, Idempotency-Key and body again → the stored answer, no order.
    const idem = main.collected.filter((c) => c.tag === 'idem' && c.status === 201).slice(0, 20);
    const replays = await Promise.all(
      idem.map(async (c) => {
        const key = inLimit[Number(c.meta)]!;
        const res = await service
          .api<{ orderId?: string }>('POST', path, key, restingBracket(c.seq), { 'idempotency-key': `bench-${c.seq}` })
          .catch(() => undefined);
        const first = (c.body as { orderId?: string }).orderId;
        return res?.status === 201 && res.headers.get('idempotent-replayed') === 'true' && res.body.orderId === first;
      }),
    );
    const replayedOk = replays.filter(Boolean).length;

    const accepted = [...main.collected, ...over.collected].filter((c) => c.status === 201);
    const lowAccepted = (low?.collected ?? []).filter((c) => c.status === 201);
    const ackIds = [...accepted, ...lowAccepted].map((c) => String((c.body as { orderId?: string }).orderId));
    const counts = statusCounts(main);
    const overCounts = statusCounts(over);
    // Idempotent requests without a final answer (504, 5xx, dropped): retry with the same key,
    // as the API tells clients to; each must resolve to exactly one order.
    // A bounded sample keeps the run's length bounded when the service was overloaded.
    const unanswered = main.collected.filter((c) => c.tag === 'idem' && c.status !== 201);
    const unresolvedIdem = spreadOverKeys(unanswered, MAX_RETRIED);
    if (unresolvedIdem.length) ctx.log(`orders: retrying ${unresolvedIdem.length} of ${unanswered.length} unanswered idempotent requests with their key`);
    const retried = await resolveAll(service, unresolvedIdem.map((c) => ({
      method: 'POST', path, key: inLimit[Number(c.meta)]!, body: restingBracket(c.seq), headers: { 'idempotency-key': `bench-${c.seq}` },
    })), { budgetMs: ctx.quick ? 20_000 : 60_000 });
    const idemResolved = retried.filter((a) => a.status === 201).length;
    const unresolvedStatuses: Record<string, number> = {};
    for (const a of retried) if (a.status !== 201) unresolvedStatuses[a.status] = (unresolvedStatuses[a.status] ?? 0) + 1;
    for (const a of retried) if (a.status === 201) ackIds.push(String((a.body as { orderId?: string }).orderId));
    // Without an answer the order may or may not be at the broker: plain requests that got
    // none, and idempotent ones that were not retried or did not resolve.
    const unknownOutcomes =
      [...main.collected, ...over.collected].filter((c) => c.tag !== 'idem' && (c.status === 0 || c.status >= 500)).length +
      (unanswered.length - idemResolved) +
      (low?.collected ?? []).filter((c) => c.status === 0 || c.status >= 500).length;
    const atBroker = accountAtBroker(await brokerOrders(service, [account!.id]), ackIds);

    const e2e = measured('POST order (201)', mergeHistograms(pick(main, (t, s) => t === 'plain' && s === '201')));
    const lowE2e = low ? measured(`POST order at ${lowN * PER_KEY_RATE}/s (201)`, mergeHistograms(pick(low, (t, s) => t === 'plain' && s === '201'))) : undefined;
    const lowIdem = low ? measured('idempotent at low load (201)', mergeHistograms(pick(low, (t, s) => t === 'idem' && s === '201'))) : undefined;
    const everyRequest = measured('POST order, every outcome', mergeHistograms(main.histograms.values()));
    const e2eIdem = measured('POST order + Idempotency-Key (201)', mergeHistograms(pick(main, (t, s) => t === 'idem' && s === '201')));
    const r429 = measured('rejected (429)', mergeHistograms([...pick(main, (_, s) => s === '429'), ...pick(over, (_, s) => s === '429')]));
    const floorM = measured('harness floor (GET /healthz)', mergeHistograms(pick(floor, (_, s) => s === '200')));
    const brokerM = measured('raw broker WS placeorder', mergeHistograms(Object.entries(rawPlace.histograms).filter(([l]) => l === 'ok').map(([, v]) => v)));
    const osoM = measured('raw broker WS placeoso', mergeHistograms(Object.entries(rawOso.histograms).filter(([l]) => l === 'ok').map(([, v]) => v)));

    // What the rate limiter admitted: every answer but 429 (an admitted request may still meet
    // a 503 from the per-connection in-flight cap; that is the broker side, not the limiter).
    const overAdmitted = over.collected.filter((c) => c.status !== 429);
    const overAccepted = overAdmitted.length;
    const overNot201 = overAdmitted.filter((c) => c.status !== 201).length;
    const expectedOverAccepted = overN * Math.min(120, Math.ceil((durationMs / 1000) * PER_KEY_RATE * OVER_LIMIT_FACTOR));
    const inLimit429 = counts['429'] ?? 0;
    const otherOutcomes: Record<string, number> = {};
    for (const c of [counts, overCounts]) {
      for (const [status, n] of Object.entries(c)) if (status !== '201' && status !== '429') otherOutcomes[status] = (otherOutcomes[status] ?? 0) + n;
    }

    const checks = [
      check('every accepted order is at the broker', atBroker.missing.length === 0,
        `${ackIds.length - atBroker.missing.length} of ${ackIds.length} acknowledged order ids found in the paper broker's state`),
      check('no duplicate broker orders', atBroker.duplicates === 0, `${atBroker.duplicates} broker entries share a clOrdId with another`),
      check('no order at the broker without an answer', atBroker.unacknowledged <= unknownOutcomes,
        `${atBroker.entries} entries at the broker, ${ackIds.length} acknowledged, ${unknownOutcomes} requests ended without an answer (5xx/timeout/error, not resolved by a retry)`),
      check('idempotent requests without an answer resolve by retrying', idemResolved === unresolvedIdem.length,
        `${idemResolved} of ${unresolvedIdem.length} retried (of ${unanswered.length} unanswered) resolved to an order with the same Idempotency-Key` +
          (idemResolved < unresolvedIdem.length ? `; last answers of the others: ${JSON.stringify(unresolvedStatuses)}` : '')),
      check('idempotent replays place nothing', replayedOk === idem.length,
        `${replayedOk} of ${idem.length} replays answered 201 with Idempotent-Replayed: true and the first order id`),
      check('keys within their limit are never limited', inLimit429 === 0, `${inLimit429} in-limit requests answered 429`),
      check('over-limit keys get exactly 120 per window', overAccepted === expectedOverAccepted,
        `${overAccepted} admitted by the limiter of ${over.sent} (expected ${expectedOverAccepted} = ${overN} keys × 120)` +
          (overNot201 ? `; ${overNot201} of them answered other than 201` : '')),
      check('the shape floor answered every request', Object.values(shape.summary).every((p) => p.allOk),
        Object.entries(shape.summary).map(([k, p]) => `${k} ${p.latencyMs.count}/${p.sent}`).join(', ')),
      check('raw broker placements succeeded', rawPlace.completed > 0 && Object.keys(rawPlace.failures).length === 0 && Object.keys(rawOso.failures).length === 0,
        `placeorder ${rawPlace.orderIds.length}/${rawPlace.sent}, placeoso ${rawOso.orderIds.length}/${rawOso.sent}${Object.keys(rawPlace.failures).length + Object.keys(rawOso.failures).length ? `; failures ${JSON.stringify({ ...rawPlace.failures, ...rawOso.failures })}` : ''}`),
    ];
    notes.push(...lagNote('orders', main.sendLag), ...lagNote('harness floor', floor.sendLag));
    if (Object.keys(main.errors).length) notes.push(`client errors: ${JSON.stringify(main.errors)}`);

    const acceptedPerSec = main.elapsedMs > 0 ? r2((accepted.length * 1000) / Math.max(main.elapsedMs, over.elapsedMs)) : 0;
    const offered = rate + (overN * 120) / 60;
    if (acceptedPerSec < 0.9 * offered) {
      notes.push(`the service did not keep up: ${acceptedPerSec} orders/s accepted of ~${offered} offered within the limits; latencies are mostly queueing`);
    }
    const summary: OrdersSummary = {
      keys: keysN, overLimitKeys: overN, ratePerSec: rate, durationMs,
      sent: main.sent + over.sent, accepted: accepted.length, rejected429: r429.p.count, otherOutcomes,
      acceptedPerSec,
      e2eMs: e2e.p, allRequestsMs: everyRequest.p, brokerRttMs: brokerM.p, brokerOsoRttMs: osoM.p, addedMs: subtractPercentiles(e2e.p, osoM.p),
      idempotent: { e2eMs: e2eIdem.p, addedMs: subtractPercentiles(e2eIdem.p, osoM.p) },
      rejected429Ms: r429.p, harnessFloorMs: floorM.p,
      ratios: {
        e2eOverBrokerP50: osoM.p.p50 > 0 ? r2(e2e.p.p50 / osoM.p.p50) : 0,
        e2eOverBrokerP99: osoM.p.p99 > 0 ? r2(e2e.p.p99 / osoM.p.p99) : 0,
        floorShareP50: e2e.p.p50 > 0 ? r2(floorM.p.p50 / e2e.p.p50) : 0,
        floorShareP99: e2e.p.p99 > 0 ? r2(floorM.p.p99 / e2e.p.p99) : 0,
      },
      sendLagP99Ms: r2(measured('lag', main.sendLag).p.p99),
      accountedAtBroker: atBroker.missing.length === 0 && atBroker.unacknowledged <= unknownOutcomes,
      duplicates: atBroker.duplicates,
      cpuUsPerRequest: cpu,
      shapeFloor: shape.summary,
      durableCommit,
    };
    if (low && lowE2e && lowIdem) {
      const lowCounts = statusCounts(low);
      summary.lowLoad = {
        keys: lowN, ratePerSec: lowN * PER_KEY_RATE, durationMs: LOW_LOAD_MS, outcomes: lowCounts,
        e2eMs: lowE2e.p, addedMs: subtractPercentiles(lowE2e.p, osoM.p),
        idempotent: { e2eMs: lowIdem.p, addedMs: subtractPercentiles(lowIdem.p, osoM.p) },
      };
      const others = Object.entries(lowCounts).filter(([status]) => status !== '201');
      checks.push(check(`at ${lowN * PER_KEY_RATE}/s every order is accepted`, others.length === 0, `outcomes ${JSON.stringify(lowCounts)}`));
    }
    const series = [floorM.series, brokerM.series, osoM.series, ...shape.series, ...(lowE2e ? [lowE2e.series] : []), e2e.series, e2eIdem.series, r429.series];
    return { summary, checks, notes, series };
  } finally {
    await service.stop();
  }
}
