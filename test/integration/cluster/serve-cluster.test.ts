/**
 * Three `tradegate serve --cluster` processes and one paper broker process on loopback,
 * sharing one nats-server: what a client sees whichever node it calls. Keys and revocations
 * reach every node at once; one idempotent order stays one broker order whichever nodes its
 * retries reach; the rate limit is exact across nodes; a webhook trades once; the health stream
 * resumes on another node; risk guards work through nodes that do not run the connection;
 * trading actions land in the cluster's journal; alerts for one account sent to different nodes
 * take turns with each other.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addClusterUser,
  brokerOrders,
  connectedOn,
  openClusterRecords,
  ownersOf,
  startClusterNode,
  type ClusterNodeProcess,
  type ClusterRecords,
  type ClusterUser,
} from '../../support/cluster.js';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { eventually, http } from '../../support/http.js';
import { control } from '../../support/sim.js';
import { filledTemplate } from '../../support/tradingview.js';
import { startNats, type NatsServer } from '../../support/nats.js';
import { startSimProcess, type SimProcess } from '../../support/processes.js';
import { openHealthStream } from '../../support/sse.js';

/** Reconnects by hand and new credentials: one broker login per this many seconds (RECONNECT_MIN_INTERVAL_S). */
const RECONNECT_INTERVAL_S = 3;

let nats: NatsServer & { stopAndRemove(): Promise<void> };
let sim: SimProcess;
let records: ClusterRecords;
let nodes: ClusterNodeProcess[] = [];
let alice: ClusterUser;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  sim = await startSimProcess();
  records = await openClusterRecords([nats.url]);
  nc = await connect({ servers: nats.url });
  alice = await addClusterUser(records.store, sim, 'alice');
  // Reconnects and new credentials are broker logins: one per interval, short here.
  nodes = await Promise.all(['node1', 'node2', 'node3'].map((id) => startClusterNode([nats.url], id, { RECONNECT_MIN_INTERVAL_S: String(RECONNECT_INTERVAL_S) })));
  for (const n of nodes) await connectedOn(n.url, alice.apiKey, 30_000);
}, 120_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await records?.close();
  await nc?.close();
  await sim?.stop();
  await nats?.stopAndRemove();
});

/** ms until `probe` answers `status` (polled as fast as the node answers). */
async function msUntilStatus(probe: () => Promise<number>, status: number, withinMs: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    if ((await probe()) === status) return performance.now() - start;
    if (performance.now() - start > withinMs) throw new Error(`no ${status} within ${withinMs} ms`);
  }
}

const me = (url: string, key: string) => () => http(url, 'GET', '/api/v1/me', { key }).then((r) => r.status);

describe('three serve --cluster nodes', () => {
  it('a key created through node 1 works on nodes 2 and 3 at once; revoked through node 3, it gets 401 on node 1 within 100 ms', async () => {
    const [n1, n2, n3] = nodes as [ClusterNodeProcess, ClusterNodeProcess, ClusterNodeProcess];
    const carol = await records.store.users.create({ name: 'carol', password: 'carol-password-1' });
    // The web app's key management: a session signed in on node 1 (sessions are shared records too).
    // The user was written a moment ago, through the store: node 1's mirror may not have it yet (CI:
    // 401 at once). Tried again a few times, well under the sign-in throttle's 5 failures per name.
    let signIn = await http(n1.url, 'POST', '/api/v1/session', { body: { name: 'carol', password: 'carol-password-1' } });
    for (let tries = 1; signIn.status === 401 && tries < 3; tries++) {
      await new Promise((r) => setTimeout(r, 500));
      signIn = await http(n1.url, 'POST', '/api/v1/session', { body: { name: 'carol', password: 'carol-password-1' } });
    }
    expect(signIn.status).toBe(200);
    const cookie = /^(tg_session=[^;]+);/.exec(signIn.headers.get('set-cookie') ?? '')![1]!;
    const session = { cookie, 'x-csrf-token': signIn.json.csrfToken as string };
    const visible: number[] = [];
    const revoked: number[] = [];
    for (let trial = 0; trial < 5; trial++) {
      const created = await http(n1.url, 'POST', '/api/v1/api-keys', { headers: session, body: { name: `t${trial}`, scopes: ['read'] } });
      expect(created.status).toBe(201);
      const key = created.json.key as string;
      // "At once": the mirrors apply a write within milliseconds (typically 2–20 ms here); the bound leaves room for a loaded machine's HTTP round trips.
      visible.push(await msUntilStatus(me(n2.url, key), 200, 250), await msUntilStatus(me(n3.url, key), 200, 250));
      const gone = await http(n3.url, 'DELETE', `/api/v1/api-keys/${created.json.id as string}`, { headers: session });
      expect(gone.status).toBe(204);
      revoked.push(await msUntilStatus(me(n1.url, key), 401, 100));
      expect((await http(n2.url, 'GET', '/api/v1/me', { key })).status).toBe(401);
    }
    expect(records.store.apiKeys.listByUser(carol.id)).toHaveLength(5);
    console.info(`key visible on the other nodes after ≤ ${Math.max(...visible).toFixed(1)} ms; revocation effective after ≤ ${Math.max(...revoked).toFixed(1)} ms`);
  });

  it('50 concurrent identical idempotent orders over the three nodes → exactly one broker order; every answer that order or 409', async () => {
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000 };
    const account = alice.accounts[0]!;
    const before = (await brokerOrders(sim, alice.brokerUser)).length;
    // Its own key: 50 requests must not eat the rate limit of the other tests.
    const { key } = await records.store.apiKeys.create({ userId: alice.userId, name: 'burst', scopes: ['read', 'trade'] });
    await msUntilStatus(me(nodes[2]!.url, key), 200, 1000);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        http(nodes[i % 3]!.url, 'POST', `/api/v1/accounts/${account}/orders`, { key, body, headers: { 'idempotency-key': 'same-order-1' } }),
      ),
    );
    const placed = answers.filter((a) => a.status === 201);
    expect(placed.length).toBeGreaterThanOrEqual(1);
    expect(answers.every((a) => a.status === 201 || a.status === 409)).toBe(true);
    expect(new Set(placed.map((a) => a.json.orderId)).size).toBe(1);
    const orders = (await brokerOrders(sim, alice.brokerUser)).slice(before);
    expect(orders).toHaveLength(1);
    expect(String(orders[0]!.id)).toBe(placed[0]!.json.orderId);
    // Replays from every node are byte-identical to the first answer.
    const first = placed.find((a) => a.headers.get('idempotent-replayed') === null) ?? placed[0]!;
    for (const n of nodes) {
      const replay = await http(n.url, 'POST', `/api/v1/accounts/${account}/orders`, { key, body, headers: { 'idempotency-key': 'same-order-1' } });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
    }
  });

  it('1,000 concurrent requests with one key over the three nodes → exactly 120 admitted', async () => {
    const { key } = await records.store.apiKeys.create({ userId: alice.userId, name: 'limit', scopes: ['read'] });
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => http(nodes[i % 3]!.url, 'GET', '/api/v1/me', { key })));
    const byStatus = new Map<number, number>();
    for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
    expect(Object.fromEntries(byStatus)).toEqual({ 200: 120, 429: 880 });
    const refused = answers.find((a) => a.status === 429)!;
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get('ratelimit-policy')).toBe('"key";q=120;w=60');
  });

  it('a webhook alert to any node trades on the bound account once', async () => {
    const account = alice.accounts[0]!;
    const { key } = await records.store.apiKeys.create({ userId: alice.userId, name: 'hooks', scopes: ['read', 'trade'] });
    await msUntilStatus(me(nodes[1]!.url, key), 200, 1000);
    const token = await http(nodes[1]!.url, 'POST', '/api/v1/webhook-tokens', { key, body: { accountId: account, name: 'tv' } });
    expect(token.status).toBe(201);
    const path = new URL(token.json.url as string).pathname;
    const before = (await brokerOrders(sim, alice.brokerUser)).length;
    const alert = { action: 'buy', symbol: 'ES1!', qty: 1, id: 'alert-1' };
    const first = await http(nodes[2]!.url, 'POST', path, { raw: JSON.stringify(alert), headers: { 'content-type': 'text/plain' } });
    expect(first.status).toBeLessThan(300);
    // TradingView retries the same alert on another node: replayed, nothing new at the broker.
    const again = await http(nodes[0]!.url, 'POST', path, { raw: JSON.stringify(alert), headers: { 'content-type': 'text/plain' } });
    expect(again.status).toBe(first.status);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const orders = (await brokerOrders(sim, alice.brokerUser)).slice(before);
    expect(orders).toHaveLength(1);
    expect(orders[0]!.accountId).toBe(Number(account));
  });

  it('resumes the health stream on another node from the id the first node sent (one id sequence cluster-wide)', async () => {
    const { key } = await records.store.apiKeys.create({ userId: alice.userId, name: 'sse', scopes: ['read'] });
    await msUntilStatus(me(nodes[0]!.url, key), 200, 1000);
    const first = await openHealthStream(nodes[0]!.url, key);
    const snap = await first.waitFor((e) => e.type === 'snapshot', 0, 5000);
    first.close();
    // While the client is away, the broker drops the connection: RECONNECTING, then CONNECTED.
    expect((await http(sim.controlUrl, 'POST', '/connections/drop', { body: { user: alice.brokerUser } })).status).toBe(200);
    await connectedOn(nodes[2]!.url, key, 15_000);
    await new Promise((r) => setTimeout(r, 300));
    const resumed = await openHealthStream(nodes[1]!.url, key, { lastEventId: snap.event.id! });
    const up = await resumed.waitFor((e) => e.type === 'status' && e.status === 'CONNECTED', 0, 5000);
    const statuses = resumed.events.slice(0, up.index + 1);
    resumed.close();
    // Exactly the missed events, in order, no snapshot: the ids mean the same on both nodes.
    expect(statuses.map((e) => `${e.type}:${e.status}`)).toEqual(['status:RECONNECTING', 'status:CONNECTED']);
    expect(statuses[0]!.id!).toBeGreaterThan(snap.event.id!);
    expect(statuses[1]!.id!).toBeGreaterThan(statuses[0]!.id!);
  });

  it('an account its broker stops reporting answers 403 Account is inactive on every node, whichever runs its connection', async () => {
    const bob = await addClusterUser(records.store, sim, 'bob');
    for (const n of nodes) await connectedOn(n.url, bob.apiKey, 30_000);
    const account = bob.accounts[0]!;
    expect((await http(sim.controlUrl, 'POST', `/accounts/${account}/deactivate`)).status).toBe(200);
    for (const n of nodes) {
      for (const deadline = Date.now() + 10_000; ; ) {
        const r = await http(n.url, 'POST', `/api/v1/accounts/${account}/orders`, { key: bob.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' } });
        if (r.status === 403) {
          expect(r.json).toMatchObject({ code: 'ACCOUNT_INACTIVE', detail: 'Account is inactive' });
          break;
        }
        if (Date.now() > deadline) throw new Error(`${n.nodeId}: ${r.status} ${r.text}`);
        await new Promise((res) => setTimeout(res, 50));
      }
    }
  });

  it('risk guards through nodes that do not run the connection: set, refuse, lock and unlock there; guard events on every node, journaled and stored once', async () => {
    const dave = await addClusterUser(records.store, sim, 'dave');
    for (const n of nodes) await connectedOn(n.url, dave.apiKey, 30_000);
    const owner = (await ownersOf(nc, [dave.connectionId])).get(dave.connectionId);
    const [a, b] = nodes.filter((n) => n.nodeId !== owner) as [ClusterNodeProcess, ClusterNodeProcess];
    expect(b).toBeDefined();
    const account = dave.accounts[0]!;
    const key = dave.apiKey;
    const order = (n: ClusterNodeProcess, qty: number) =>
      http(n.url, 'POST', `/api/v1/accounts/${account}/orders`, { key, body: { symbol: 'ES1!', side: 'buy', qty, type: 'limit', price: 4000 } });
    const streams = await Promise.all(nodes.map((n) => openHealthStream(n.url, key)));
    const guardEntries = async (action: string) =>
      (await records.store.journal.list({ userId: dave.userId, limit: 100 })).filter((e) => e.kind === 'guard' && (e.request as { action: string }).action === action);
    const eventually = async (what: string, check: () => Promise<boolean> | boolean) => {
      for (const deadline = Date.now() + 5000; !(await check()); await new Promise((r) => setTimeout(r, 25))) {
        if (Date.now() > deadline) throw new Error(`not within 5 s: ${what}`);
      }
    };
    try {
      // Set through a node that does not run the actor: stored, and the actor (asked over NATS) answers with them.
      const put = await http(a.url, 'PUT', `/api/v1/accounts/${account}/guards`, { key, body: { maxOrderQty: 2 } });
      expect(put.status).toBe(200);
      expect(put.json).toMatchObject({ guards: { maxOrderQty: 2 }, lock: null, live: { positions: [] } });
      for (const n of nodes) expect((await order(n, 3)).json).toMatchObject({ code: 'RISK_GUARD', guard: 'max_order_qty', limit: 2, value: 3, accountId: account });

      // The kill switch through the other such node: in force at once on every node.
      const locked = await http(b.url, 'POST', `/api/v1/accounts/${account}/lock`, { key, body: { flatten: false, reason: 'desk closed' } });
      expect(locked.status).toBe(200);
      expect(locked.json).toMatchObject({ lock: { guard: 'kill_switch', until: null, detail: 'desk closed' }, flatten: null });
      for (const n of nodes) expect((await order(n, 1)).json).toMatchObject({ code: 'RISK_GUARD', guard: 'kill_switch' });
      await eventually('the lock stored', () => records.store.guards.get(dave.userId, account)?.lock?.guard === 'kill_switch');
      for (const s of streams) await s.waitFor((e) => e.type === 'guard' && (e as { action?: string }).action === 'locked', 0, 5000);
      expect((await http(a.url, 'GET', `/api/v1/accounts/${account}/guards`, { key })).json).toMatchObject({ lock: { guard: 'kill_switch' } });

      const unlocked = await http(a.url, 'POST', `/api/v1/accounts/${account}/unlock`, { key });
      expect(unlocked.status).toBe(200);
      expect(unlocked.json).toMatchObject({ lock: null });
      expect((await order(b, 1)).status).toBe(201);
      await eventually('the unlock stored', () => records.store.guards.get(dave.userId, account)?.lock === null);
      for (const s of streams) await s.waitFor((e) => e.type === 'guard' && (e as { action?: string }).action === 'unlocked', 0, 5000);

      // Once in the journal per event, not once per node (every node sees every event).
      await eventually('guard events journaled', async () => (await guardEntries('unlocked')).length >= 1);
      await new Promise((r) => setTimeout(r, 500));
      expect(await guardEntries('refused')).toHaveLength(6);
      expect(await guardEntries('locked')).toHaveLength(1);
      expect(await guardEntries('unlocked')).toHaveLength(1);
    } finally {
      for (const s of streams) s.close();
    }
  });

  it('new credentials and a manual reconnect through nodes that do not run the connection restart it on its owner; disabled and enabled again it trades on every node (cluster probe: PATCH 200 and reconnect 202 left it FAILED for good)', async () => {
    const erin = await addClusterUser(records.store, sim, 'erin');
    for (const n of nodes) await connectedOn(n.url, erin.apiKey, 30_000);
    const owner = (await ownersOf(nc, [erin.connectionId])).get(erin.connectionId)!;
    const others = nodes.filter((n) => n.nodeId !== owner);
    const ownerNode = nodes.find((n) => n.nodeId === owner)!;
    expect(others).toHaveLength(2);
    const statusOn = async (n: ClusterNodeProcess) => ((await http(n.url, 'GET', '/api/v1/connections', { key: erin.apiKey })).json.data as { status: string }[])[0]!.status;
    const everywhere = async (status: string) => {
      for (const n of nodes) {
        for (const deadline = Date.now() + 20_000; (await statusOn(n)) !== status; ) {
          if (Date.now() > deadline) throw new Error(`${n.nodeId}: not ${status} but ${await statusOn(n)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    // A wrong password given through another node: the owner restarts with it, FAILED everywhere.
    const wrong = await http(others[0]!.url, 'PATCH', `/api/v1/connections/${erin.connectionId}`, { key: erin.apiKey, body: { credentials: { password: 'not-the-password' } } });
    expect(wrong.status, wrong.text).toBe(200);
    await everywhere('FAILED');
    // The right one through the third node: CONNECTED everywhere. Each is a login: within the
    // interval the owner refuses it, whichever node is asked.
    const early = await http(others[1]!.url, 'PATCH', `/api/v1/connections/${erin.connectionId}`, { key: erin.apiKey, body: { credentials: { password: erin.brokerPassword } } });
    expect(early.status, early.text).toBe(429);
    await new Promise((r) => setTimeout(r, RECONNECT_INTERVAL_S * 1000 + 200));
    const right = await http(others[1]!.url, 'PATCH', `/api/v1/connections/${erin.connectionId}`, { key: erin.apiKey, body: { credentials: { password: erin.brokerPassword } } });
    expect(right.status, right.text).toBe(200);
    await everywhere('CONNECTED');
    // FAILED again; the stored password fixed without a restart (as the CLI writes it), then a
    // manual reconnect on the owner itself.
    await new Promise((r) => setTimeout(r, RECONNECT_INTERVAL_S * 1000 + 200));
    expect((await http(others[0]!.url, 'PATCH', `/api/v1/connections/${erin.connectionId}`, { key: erin.apiKey, body: { credentials: { password: 'wrong-again' } } })).status).toBe(200);
    await everywhere('FAILED');
    await records.store.connections.update(erin.userId, erin.connectionId, { credentials: { name: erin.brokerUser, password: erin.brokerPassword } });
    await new Promise((r) => setTimeout(r, RECONNECT_INTERVAL_S * 1000 + 200));
    const reconnect = await http(ownerNode.url, 'POST', `/api/v1/connections/${erin.connectionId}/reconnect`, { key: erin.apiKey });
    expect(reconnect.status, reconnect.text).toBe(202);
    await everywhere('CONNECTED');
    // Disabled, then enabled again: it runs and trades through every node.
    await records.store.connections.setDisabled(erin.connectionId, true);
    await everywhere('DISABLED');
    await records.store.connections.setDisabled(erin.connectionId, false);
    await everywhere('CONNECTED');
    for (const n of nodes) {
      const r = await http(n.url, 'POST', `/api/v1/accounts/${erin.accounts[0]}/orders`, { key: erin.apiKey, body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'limit', price: 4000, clientOrderId: `erin-${n.nodeId}` } });
      expect(r.status, `${n.nodeId}: ${r.text}`).toBe(201);
    }
  });

  it('journals trading actions in the cluster’s journal stream, whichever node took them', async () => {
    const entries = await records.store.journal.list({ userId: alice.userId, limit: 100 });
    const places = entries.filter((e) => e.kind === 'place-order');
    expect(places.length).toBeGreaterThanOrEqual(2);
    expect(places.every((e) => e.accountId === alice.accounts[0])).toBe(true);
  });

  it('alerts for one account sent to different nodes take turns on the node that runs its connection: two reversals, then a reversal and an exit, 50 ms apart with 100 ms to the broker, end where the strategy is (each node kept its own turns: flat, short 1 with a new bracket)', async () => {
    const frank = await addClusterUser(records.store, sim, 'frank');
    for (const n of nodes) await connectedOn(n.url, frank.apiKey, 30_000);
    const owner = (await ownersOf(nc, [frank.connectionId])).get(frank.connectionId);
    const ownerNode = nodes.find((n) => n.nodeId === owner)!;
    const [a, b] = nodes.filter((n) => n.nodeId !== owner) as [ClusterNodeProcess, ClusterNodeProcess];
    expect(ownerNode && b).toBeDefined();
    const account = frank.accounts[0]!;
    const es = resolveSymbol('ES', new Date());
    if (!es.ok) throw new Error(es.reason);
    await control(sim, 'POST', '/prices', { symbol: es.contract, price: 5000 });
    const token = await http(a.url, 'POST', '/api/v1/webhook-tokens', { key: frank.apiKey, body: { accountId: account, name: 'tv' } });
    expect(token.status, token.text).toBe(201);
    const path = new URL(token.json.url as string).pathname;
    let n = 0;
    /** A strategy order as TradingView fills the README's template; `size` is the strategy's position after it. */
    const fire = (action: 'buy' | 'sell', contracts: number, size: number) =>
      filledTemplate({ orderId: `o${++n}`, action, ticker: 'ES1!', contracts: String(contracts), marketPosition: size > 0 ? 'long' : size < 0 ? 'short' : 'flat', positionSize: size, time: new Date().toISOString() });
    const alert = (node: ClusterNodeProcess, body: string) => http(node.url, 'POST', path, { raw: body, headers: { 'content-type': 'text/plain' } });
    /** The paper broker holds `qty` (signed) of the account's ES with legs for all of it (none when flat). */
    const holds = (qty: number) => async () => {
      const state = await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(frank.brokerUser)}`);
      const mine = <T extends { accountId: number }>(list: T[]) => list.filter((x) => x.accountId === Number(account));
      const net = mine(state.json.positions as { accountId: number; netPos: number }[]).reduce((sum, p) => sum + p.netPos, 0);
      const legs = mine(state.json.orders as { accountId: number; ordStatus: string; orderQty: number }[]).filter((o) => o.ordStatus === 'Working');
      return net === qty && legs.map((o) => o.orderQty).join() === (qty === 0 ? '' : `${Math.abs(qty)},${Math.abs(qty)}`);
    };
    /** Sends the alerts 50 ms apart, each to its node, with the broker 100 ms away; their answers' statuses. */
    const inTurn = async (...sends: [ClusterNodeProcess, string][]) => {
      await control(sim, 'POST', '/faults', { latencyMs: 100 });
      try {
        const sent = [];
        for (const [node, body] of sends) {
          sent.push(alert(node, body));
          await new Promise((r) => setTimeout(r, 50));
        }
        return (await Promise.all(sent)).map((r) => r.status);
      } finally {
        await control(sim, 'DELETE', '/faults');
      }
    };

    expect((await alert(a, fire('buy', 1, 1))).status).toBe(201);
    await eventually(holds(1), 'long 1 with its legs');
    // long 1 → short 1 → long 1, through the two nodes that do not run the connection: long 1.
    expect(await inTurn([a, fire('sell', 2, -1)], [b, fire('buy', 2, 1)])).toEqual([201, 201]);
    await eventually(holds(1), 'long 1 with legs for 1');
    // long 1 → short 1 on the node that runs it, then the strategy's exit through another: flat.
    expect(await inTurn([ownerNode, fire('sell', 2, -1)], [a, fire('buy', 1, 0)])).toEqual([201, 200]);
    await eventually(holds(0), 'flat, nothing working');
  }, 90_000);

  it('an alert answered 504 by a node SIGKILLed right after: restarted under its node id, that node takes up the follow-up, once (before, a cluster took up none: "it goes on" stayed the last word)', async () => {
    const gina = await addClusterUser(records.store, sim, 'gina');
    for (const n of nodes) await connectedOn(n.url, gina.apiKey, 30_000);
    const owner = (await ownersOf(nc, [gina.connectionId])).get(gina.connectionId);
    const at = nodes.findIndex((n) => n.nodeId !== owner);
    const a = nodes[at]!;
    const es = resolveSymbol('ES', new Date());
    if (!es.ok) throw new Error(es.reason);
    await control(sim, 'POST', '/prices', { symbol: es.contract, price: 5000 });
    const token = await http(a.url, 'POST', '/api/v1/webhook-tokens', { key: gina.apiKey, body: { accountId: gina.accounts[0]!, name: 'tv' } });
    expect(token.status, token.text).toBe(201);
    // The broker answers after 4 s, past the alert's 2.5 s: answered 504, the order placed after.
    await control(sim, 'POST', '/faults', { latencyMs: 4_000 });
    let answer;
    try {
      answer = await http(a.url, 'POST', new URL(token.json.url as string).pathname, { raw: JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, id: 'g-1' }), headers: { 'content-type': 'text/plain' } });
      await a.crash();
    } finally {
      await control(sim, 'DELETE', '/faults');
    }
    expect(answer.status, answer.text).toBe(504);
    const requestId = answer.headers.get('x-request-id');
    const restarted = await startClusterNode([nats.url], a.nodeId, { RECONNECT_MIN_INTERVAL_S: String(RECONNECT_INTERVAL_S) });
    nodes[at] = restarted;
    await connectedOn(restarted.url, gina.apiKey, 30_000);
    // A node just restarted may answer 503 CLUSTER_UNAVAILABLE while it catches up: no list yet.
    const followUps = async () =>
      (((await http(restarted.url, 'GET', `/api/v1/webhook-tokens/${token.json.id}/alerts`, { key: gina.apiKey })).json?.data ?? []) as { lateOutcomeOf?: string }[]).filter((e) => e.lateOutcomeOf === requestId);
    const [followUp] = await eventually(async () => ((await followUps()).length > 0 ? await followUps() : undefined), 'the follow-up of the 504', 30_000);
    expect(followUp).toMatchObject({ status: 201, detail: 'placed after this alert was answered 504' });
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await followUps()).toHaveLength(1);
  }, 120_000);
});
