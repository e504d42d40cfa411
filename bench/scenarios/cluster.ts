/**
 * `cluster`: the same open-loop load — resting bracket orders (half with Idempotency-Key) and
 * reads (accounts, working orders), every key at its 120/min limit — through a single-node
 * `serve` (LMDB), one `serve --cluster` node and three of them (load spread evenly over the
 * nodes, so two thirds of the calls hop to the node that runs the connection). All trade at
 * one paper broker process; the cluster nodes share one nats-server. What it shows: the
 * latency cluster mode adds at the same load (the shared rate limit's KV round trip, the
 * idempotency claim, the hop), and the ratio of 3 nodes to 1. On a machine with few cores every
 * process shares them, so 3 nodes cannot carry more than 1 here: the ratio is a cost, not a
 * scale-out figure; the report says how many cores the run had.
 */
import { cpus } from 'node:os';
import { mergeHistograms } from '../hdr.js';
import type { HttpRequestSpec } from '../http-load.js';
import { check } from '../report.js';
import { lagNote, measured, pick, r2, statusCounts, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import { mergeMerged, type MergedHttpResult } from '../pool.js';
import { clusterNodes, SimBroker, singleNode, type Deployment } from '../cluster-setup.js';
import { accountAtBroker, brokerOrders, PINNED_PRICE, restingBracket } from '../fixtures.js';
import { startNats } from '../nats-server.js';
import type { Check, ClusterRun, ClusterSummary, PlotSeries } from '../summary.js';

const PER_KEY_RATE = 2;
/** Connections per deployment: one per node of the largest. */
const USERS = 3;

/** The contract the bench trades, pinned at PINNED_PRICE so the resting orders never fill. */
async function pin(sim: SimBroker, d: Deployment): Promise<void> {
  const u = d.users[0]!;
  const plan = await d.nodes[0]!.api<{ symbol?: string }>('POST', `/api/v1/accounts/${u.accountId}/orders?dryRun=true`, u.keys[0], {
    symbol: 'ES1!', side: 'buy', qty: 1, type: 'market',
  });
  if (plan.status !== 200 || !plan.body.symbol) throw new Error(`dryRun answered ${plan.status}: ${JSON.stringify(plan.body)}`);
  await sim.control('POST', '/prices', { symbol: plan.body.symbol, price: PINNED_PRICE });
}

/** Runs one kind of load through every node of `d` at once (keys split evenly over the nodes). */
async function drive(ctx: ScenarioContext, d: Deployment, kind: 'orders' | 'reads', keysN: number, durationMs: number): Promise<MergedHttpResult> {
  const keys = d.users.flatMap((u) => u.keys.slice(0, Math.ceil(keysN / d.users.length)).map((key) => ({ key, accountId: u.accountId }))).slice(0, keysN);
  const template = ({ key, accountId }: { key: string; accountId: string }, i: number): HttpRequestSpec =>
    kind === 'orders'
      ? {
          method: 'POST', path: `/api/v1/accounts/${accountId}/orders`, tag: i % 2 ? 'idem' : 'plain', collect: true,
          headers: { 'x-api-key': key, 'content-type': 'application/json', ...(i % 2 ? { 'idempotency-key': 'bench-{{seq}}' } : {}) },
          body: JSON.stringify(restingBracket('{{seq}}')),
        }
      : i % 2
        ? { method: 'GET', path: `/v1/accounts/${accountId}/working-orders`, tag: 'working-orders', headers: { 'x-api-key': key } }
        : { method: 'GET', path: '/api/v1/accounts', tag: 'accounts', headers: { 'x-api-key': key } };
  const perNode = d.nodes.map((node, n) => {
    const mine = keys.filter((_, i) => i % d.nodes.length === n);
    return ctx.pool.http(
      { kind: 'http', origin: node.origin, ratePerSec: mine.length * PER_KEY_RATE, durationMs, uniquePrefix: `${ctx.runId}-${kind}-${d.nodes.length}-${n}`, requests: mine.map(template) },
      1,
    );
  });
  return mergeMerged(await Promise.all(perNode));
}

/** One deployment's numbers, and whether every order it acknowledged is at the broker exactly once. */
async function measure(
  ctx: ScenarioContext,
  sim: SimBroker,
  d: Deployment,
  keysN: number,
  durationMs: number,
): Promise<{ run: ClusterRun; ok: boolean; detail: string; notes: string[]; series: PlotSeries[] }> {
  ctx.log(`cluster: ${d.label}: orders then reads, ${keysN} keys at 120/min (${keysN * PER_KEY_RATE}/s) for ${durationMs / 1000} s each`);
  const orders = await drive(ctx, d, 'orders', keysN, durationMs);
  const reads = await drive(ctx, d, 'reads', keysN, durationMs);
  const ordersOk = mergeHistograms(pick(orders, (_, s) => s === '201'));
  const readsOk = mergeHistograms(pick(reads, (_, s) => s === '200'));
  const orderM = measured(`${d.label}: POST order (201)`, ordersOk);
  const readM = measured(`${d.label}: reads (200)`, readsOk);
  const acked = orders.collected.filter((c) => c.status === 201).map((c) => String((c.body as { orderId?: string }).orderId));
  const atBroker = accountAtBroker(await brokerOrders(sim, d.users.map((u) => u.accountId)), acked);
  const run: ClusterRun = {
    nodes: d.nodes.length,
    ordersPerSec: orders.elapsedMs > 0 ? r2((ordersOk.totalCount * 1000) / orders.elapsedMs) : 0,
    readsPerSec: reads.elapsedMs > 0 ? r2((readsOk.totalCount * 1000) / reads.elapsedMs) : 0,
    orderMs: orderM.p,
    idempotentOrderMs: measured(`${d.label}: idempotent (201)`, mergeHistograms(pick(orders, (t, s) => t === 'idem' && s === '201'))).p,
    readMs: readM.p,
    outcomes: { orders: statusCounts(orders), reads: statusCounts(reads) },
  };
  const ok = atBroker.missing.length === 0 && atBroker.duplicates === 0;
  return {
    run,
    ok,
    detail: `${d.label}: ${acked.length} acknowledged orders, ${atBroker.missing.length} missing at the broker, ${atBroker.duplicates} duplicates`,
    notes: [...lagNote(`${d.label} orders`, orders.sendLag), ...lagNote(`${d.label} reads`, reads.sendLag)],
    series: [orderM.series, readM.series],
  };
}

const diff = (a: number, b: number): number => r2(a - b);

/** Runs the scenario (see the module comment). */
export async function runCluster(ctx: ScenarioContext): Promise<ScenarioRun<ClusterSummary>> {
  const keysN = ctx.quick ? 15 : 60;
  const durationMs = ctx.quick ? 5_000 : 20_000;
  const keysPerUser = Math.ceil(keysN / USERS);
  let nats: Awaited<ReturnType<typeof startNats>>;
  try {
    nats = await startNats();
  } catch (err) {
    throw new Error(`cannot start nats-server (apt-get install nats-server): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  const sim = await SimBroker.start();
  const runs: ClusterRun[] = [];
  const checks: Check[] = [];
  const notes: string[] = [];
  const series: PlotSeries[] = [];
  try {
    for (const start of [() => singleNode(sim, USERS, keysPerUser), () => clusterNodes(nats.url, sim, 1, USERS, keysPerUser), () => clusterNodes(nats.url, sim, 3, USERS, keysPerUser)]) {
      const d = await start();
      try {
        if (runs.length === 0) await pin(sim, d);
        const m = await measure(ctx, sim, d, keysN, durationMs);
        runs.push(m.run);
        checks.push(check(`${d.label}: every acknowledged order at the broker once`, m.ok, m.detail));
        const bad = Object.entries({ ...m.run.outcomes.orders, ...m.run.outcomes.reads }).filter(([s]) => s !== '200' && s !== '201');
        checks.push(check(`${d.label}: every request within its limit answered 2xx`, bad.length === 0, `outcomes: orders ${JSON.stringify(m.run.outcomes.orders)}, reads ${JSON.stringify(m.run.outcomes.reads)}`));
        notes.push(...m.notes);
        series.push(...m.series);
      } finally {
        await d.stop();
      }
    }
  } finally {
    await sim.stop();
    await nats.stopAndRemove();
  }
  const [single, one, three] = runs as [ClusterRun, ClusterRun, ClusterRun];
  notes.push(
    `${cpus().length} CPU cores: the three nodes, nats-server, the paper broker and the load generator share them, so 3 nodes cannot carry more than 1 on this machine; ` +
      'the 3:1 ratios measure what spreading costs (the hop to the owning node), not what more machines would add.',
  );
  const summary: ClusterSummary = {
    keys: keysN,
    ratePerSec: keysN * PER_KEY_RATE,
    durationMs,
    cores: cpus().length,
    single,
    oneNode: one,
    threeNodes: three,
    ratios: {
      ordersPerSec3to1: one.ordersPerSec > 0 ? r2(three.ordersPerSec / one.ordersPerSec) : 0,
      readsPerSec3to1: one.readsPerSec > 0 ? r2(three.readsPerSec / one.readsPerSec) : 0,
    },
    addedMs: {
      orderP50: diff(one.orderMs.p50, single.orderMs.p50),
      orderP99: diff(one.orderMs.p99, single.orderMs.p99),
      idempotentOrderP50: diff(one.idempotentOrderMs.p50, single.idempotentOrderMs.p50),
      readP50: diff(one.readMs.p50, single.readMs.p50),
      readP99: diff(one.readMs.p99, single.readMs.p99),
      hopOrderP50: diff(three.orderMs.p50, one.orderMs.p50),
      hopReadP50: diff(three.readMs.p50, one.readMs.p50),
    },
  };
  return { summary, checks, notes, series };
}
