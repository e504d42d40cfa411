/**
 * kill -9 safety (DESIGN §3 idempotency, §14; reliability-anchors R7): a retrying client
 * places N orders, each with its own Idempotency-Key, while the service is SIGKILLed at
 * seeded random moments and restarted on the same data dir. The paper broker runs as its
 * own process, so its ledger survives every crash and is the judge: exactly one order per
 * key (by the clOrdId derived from the key), none lost, none doubled, and every key's
 * answer replays byte-for-byte. The whole run's service output must hold no secret.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontOf } from '../../support/symbols.js';
import { clOrdIdFor } from '../../../src/domain/order-plan.js';
import { awaitConnected, secretsIn, startService, startSimProcess, wireUser, type ServiceProcess, type SimProcess, type WiredUser } from '../../support/processes.js';
import { seededRandom } from '../../../src/sim/prices.js';
import { http, type Reply } from '../../support/http.js';

const N = 40;
const CONCURRENCY = 2;
const KILLS = 4;
const SEED = Number(process.env.RELIABILITY_SEED ?? 20261121);
const ENV = { RATE_LIMIT_PER_MIN: '100000' };
/** Chatty on purpose: the more the service logs, the more the secrets check sees. */
const LOG_LEVEL = 'debug';
/** Answers after which the same request must be retried with the same key. */
const RETRYABLE = new Set([409, 429, 503, 504]);
const ES = frontOf('ES').contract;

let sim: SimProcess;
let dataDir: string;
let user: WiredUser;
let service: ServiceProcess | undefined;
/** Everything every service process printed, across crashes. */
const logs: string[] = [];

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tg-crash-'));
  sim = await startSimProcess();
  user = await wireUser(dataDir, sim, 'crashy');
  // The broker answers slowly, so kills land while orders are in flight at every stage.
  await http(sim.controlUrl, 'POST', '/faults', { body: { latencyMs: 250 } });
}, 60_000);

afterAll(async () => {
  if (service) {
    await service.stop();
    logs.push(service.output());
  }
  await sim?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The broker's ledger for the test user (control API). */
async function brokerState(): Promise<any> {
  return (await http(sim.controlUrl, 'GET', `/state?user=${encodeURIComponent(user.brokerUser)}`)).json;
}

interface Outcome {
  key: string;
  body: unknown;
  first?: Reply;
  attempts: number;
  networkErrors: number;
  unexpected?: string;
}

describe('kill -9 of the service while a retrying client places orders', () => {
  it('leaves exactly one broker order per Idempotency-Key, loses none, and replays every answer byte-for-byte', async () => {
    const random = seededRandom(SEED);
    // Clients wait for CONNECTED after each restart: before its connection has synced, the
    // service answers 404 for the user's own account (reported as a bug; see the report).
    const boot = async () => {
      const s = await startService(dataDir, ENV, LOG_LEVEL);
      await awaitConnected(s.url, user.apiKey);
      return s;
    };
    let up: Promise<ServiceProcess> = boot();
    service = await up;
    const account = user.accounts[0]!;
    const path = `/api/v1/accounts/${account}/orders`;
    const outcomes: Outcome[] = Array.from({ length: N }, (_, i) => ({
      key: `crash-${SEED}-${i}`,
      body: { symbol: 'ES1!', side: i % 2 === 0 ? 'buy' : 'sell', qty: 1 + (i % 3), type: 'market' },
      attempts: 0,
      networkErrors: 0,
    }));

    const placeUntilAnswered = async (o: Outcome) => {
      for (;;) {
        const svc = await up;
        o.attempts += 1;
        let r: Reply;
        try {
          r = await http(svc.url, 'POST', path, { key: user.apiKey, body: o.body, headers: { 'Idempotency-Key': o.key }, timeoutMs: 15_000 });
        } catch {
          o.networkErrors += 1;
          await new Promise((res) => setTimeout(res, 50));
          continue;
        }
        if (r.status === 201) {
          o.first = r;
          return;
        }
        if (!RETRYABLE.has(r.status)) {
          o.unexpected = `${r.status} ${r.text}`;
          return;
        }
        const wait = Math.min(Number(r.headers.get('retry-after') ?? 0) * 1000, 300);
        await new Promise((res) => setTimeout(res, Math.max(wait, 50)));
      }
    };

    let next = 0;
    const clients = Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) await placeUntilAnswered(outcomes[next++]!);
    });
    let allDone = false;
    const finished = Promise.all(clients).then(() => (allDone = true));

    let kills = 0;
    let inDoubt = 0;
    while (kills < KILLS && !allDone) {
      await Promise.race([new Promise((res) => setTimeout(res, 200 + random() * 1000)), finished]);
      if (allDone) break;
      let restarted!: (s: ServiceProcess) => void;
      up = new Promise((res) => (restarted = res));
      await service.crash();
      kills += 1;
      logs.push(service.output());
      // Keys the broker executed whose answer never reached the client: the dangerous window.
      const atBroker = new Set(((await brokerState()).orders as { clOrdId: string | null }[]).map((o) => o.clOrdId));
      inDoubt += outcomes.filter((o) => !o.first && o.attempts > 0 && atBroker.has(clOrdIdFor(user.userId, o.key))).length;
      service = await boot();
      restarted(service);
    }
    await finished;

    const reconciled = outcomes.filter((o) => o.first?.json.reconciled === true).length;
    const attempts = outcomes.reduce((n, o) => n + o.attempts, 0);
    const context = `seed ${SEED}: ${kills} kills, ${attempts} attempts, ${inDoubt} in doubt at a crash, ${reconciled} answered by reconciliation`;
    expect(kills, `${context}: the run must crash the service mid-load`).toBeGreaterThanOrEqual(2);
    expect(outcomes.reduce((n, o) => n + o.networkErrors, 0), `${context}: some requests must have been cut by a crash`).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o.unexpected).map((o) => `${o.key}: ${o.unexpected}`)).toEqual([]);
    expect(outcomes.filter((o) => !o.first).map((o) => o.key), `${context}: lost requests`).toEqual([]);

    // The broker's ledger: one order per key, nothing else.
    const state = await brokerState();
    const byClOrdId = new Map<string, { id: number }[]>();
    for (const order of state.orders as { id: number; clOrdId: string | null; parentId: number | null }[]) {
      const list = byClOrdId.get(order.clOrdId ?? '') ?? [];
      list.push(order);
      byClOrdId.set(order.clOrdId ?? '', list);
    }
    const problems: string[] = [];
    for (const o of outcomes) {
      const atBroker = byClOrdId.get(clOrdIdFor(user.userId, o.key)) ?? [];
      if (atBroker.length !== 1) problems.push(`${o.key}: ${atBroker.length} broker orders`);
      else if (String(atBroker[0]!.id) !== o.first!.json.orderId) problems.push(`${o.key}: answered ${o.first!.json.orderId}, broker has ${atBroker[0]!.id}`);
    }
    expect(problems, context).toEqual([]);
    expect(state.orders.length, `${context}: orders at the broker`).toBe(N);

    // Every answer the client saw replays byte-for-byte, even across restarts.
    for (const o of outcomes) {
      const again = await http(service.url, 'POST', path, { key: user.apiKey, body: o.body, headers: { 'Idempotency-Key': o.key } });
      expect(again.status, o.key).toBe(201);
      expect(again.headers.get('idempotent-replayed'), o.key).toBe('true');
      expect(again.text, o.key).toBe(o.first!.text);
    }
    expect((await brokerState()).orders.length, 'replays sent nothing to the broker').toBe(N);
  }, 85_000);

  it('answers a retry with the order the broker executed just before the crash, never a second one', async () => {
    // The crash window that random kills rarely hit: the broker has the order, the client no
    // answer. Reproduced exactly: the service is down, the order reaches the broker with the
    // clOrdId the service derives from (user, key), then the service restarts and the client retries.
    const key = `executed-before-crash-${SEED}`;
    const body = { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' };
    await service!.crash();
    logs.push(service!.output());
    const auth = await http(`${sim.baseUrl}/v1`, 'POST', '/auth/accesstokenrequest', { body: { name: user.brokerUser, password: user.brokerPassword } });
    expect(auth.json.accessToken, auth.text).toBeTruthy();
    const placed = await http(`${sim.baseUrl}/v1`, 'POST', '/order/placeorder', {
      headers: { authorization: `Bearer ${auth.json.accessToken}` },
      body: { accountId: Number(user.accounts[0]), action: 'Buy', symbol: ES, orderQty: 1, orderType: 'Market', isAutomated: true, clOrdId: clOrdIdFor(user.userId, key) },
    });
    expect(placed.json.orderId, placed.text).toBeTypeOf('number');
    const before = (await brokerState()).orders.length;
    service = await startService(dataDir, ENV, LOG_LEVEL);
    await awaitConnected(service.url, user.apiKey);
    const r = await http(service.url, 'POST', `/api/v1/accounts/${user.accounts[0]}/orders`, { key: user.apiKey, body, headers: { 'Idempotency-Key': key } });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ orderId: String(placed.json.orderId), reconciled: true, symbol: ES });
    expect((await brokerState()).orders.length).toBe(before);
    const again = await http(service.url, 'POST', `/api/v1/accounts/${user.accounts[0]}/orders`, { key: user.apiKey, body, headers: { 'Idempotency-Key': key } });
    expect(again.text).toBe(r.text);
  }, 40_000);

  it('never writes the API key, a webhook token or a broker password or token to its output or in plain text to disk', async () => {
    const svc = service!;
    const account = user.accounts[0]!;
    const token = await http(svc.url, 'POST', '/api/v1/webhook-tokens', { key: user.apiKey, body: { accountId: account, name: 'tv' } });
    expect(token.status, token.text).toBe(201);
    const secret = String(token.json.token);
    expect(secret).toMatch(/^whk_/);
    const alert = await http(svc.url, 'POST', `/api/v1/webhooks/${secret}`, {
      raw: JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, id: 'alert-1' }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(alert.status, alert.text).toBe(201);
    const wrong = await http(svc.url, 'GET', '/api/v1/me', { key: `${user.apiKey.slice(0, -4)}AAAA` });
    expect(wrong.status).toBe(401);
    await svc.stop();
    logs.push(svc.output());
    service = undefined;
    const all = logs.join('\n');
    // The run did log: connection status lines name the connection.
    expect(all).toContain(user.connectionId);
    const secrets = [user.apiKey, user.apiKey.split('_')[2]!, secret, secret.split('_')[2]!, user.brokerPassword];
    expect(secretsIn(all, secrets)).toEqual([]);
    // Nor in plain text at rest: every file of the data dir (LMDB included), read as bytes.
    let scanned = 0;
    for (const file of readdirSync(dataDir, { recursive: true, withFileTypes: true })) {
      if (!file.isFile()) continue;
      const bytes = readFileSync(join(file.parentPath, file.name)).toString('latin1');
      scanned += bytes.length;
      expect(secrets.filter((x) => bytes.includes(x)), file.name).toEqual([]);
    }
    expect(scanned).toBeGreaterThan(0);
  }, 30_000);
});
