/**
 * What scenarios set up on a fresh service: API keys in bulk, the demo accounts once the
 * paper connection is up, a pinned price, and the broker-side view used for correctness
 * checks (orders by clOrdId, duplicates).
 */
import { openStore } from '../src/store/index.js';
import type { Scope } from '../src/domain/connections.js';
import { waitFor, type Service } from './service.js';

/** Symbol every scenario trades; resolved once through `?dryRun=true`. */
export const BENCH_SYMBOL = 'ES1!';
/** Pinned last price: limit entries far below it rest forever, so nothing fills mid-run. */
export const PINNED_PRICE = 5000;

/** An account of the demo user, as the service lists it. */
export interface BenchAccount {
  id: string;
  name: string;
}

/**
 * Creates `count` API keys for the demo user directly in the service's LMDB environment
 * (multi-process: the running service sees them). One `tradegate keys create` process per
 * key would take minutes for 500 keys; the store call is what that command runs.
 */
export async function createApiKeys(service: Service, count: number, scopes: Scope[], name: string): Promise<string[]> {
  const store = await openStore({ dataDir: service.dataDir });
  try {
    const user = store.users.byName('demo');
    if (!user) throw new Error('demo user missing: did `serve --paper` bootstrap?');
    const keys: string[] = [];
    for (let i = 0; i < count; i += 100) {
      const batch = Array.from({ length: Math.min(100, count - i) }, (_, j) =>
        store.apiKeys.create({ userId: user.id, name: `${name}-${i + j}`, scopes }),
      );
      for (const created of await Promise.all(batch)) keys.push(created.key);
    }
    await store.flushed();
    return keys;
  } finally {
    await store.close();
  }
}

/** Waits until the service accepts `key` (a key written by another process is visible). */
export async function waitForKey(service: Service, key: string): Promise<void> {
  await waitFor('the service to accept a bench API key', 10_000, async () => {
    const res = await service.api('GET', '/api/v1/me', key);
    return res.status === 200 ? true : undefined;
  });
}

/** The demo user's active accounts once the paper connection is CONNECTED. */
export async function demoAccounts(service: Service, key: string): Promise<BenchAccount[]> {
  return waitFor('the paper connection to report its accounts', 30_000, async () => {
    const res = await service.api<{ data?: { id: string; name: string; active: boolean }[] }>('GET', '/api/v1/accounts', key);
    const active = res.status === 200 ? (res.body.data ?? []).filter((a) => a.active) : [];
    return active.length > 0 ? active.map((a) => ({ id: a.id, name: a.name })) : undefined;
  }, 200);
}

/** The front-month contract of BENCH_SYMBOL, pinned at PINNED_PRICE at the paper broker. */
export async function pinBenchContract(service: Service, key: string, accountId: string): Promise<string> {
  const plan = await service.api<{ symbol?: string }>('POST', `/api/v1/accounts/${accountId}/orders?dryRun=true`, key, {
    symbol: BENCH_SYMBOL,
    side: 'buy',
    qty: 1,
    type: 'market',
  });
  if (plan.status !== 200 || !plan.body.symbol) throw new Error(`dryRun answered ${plan.status}: ${JSON.stringify(plan.body)}`);
  await service.control('POST', '/prices', { symbol: plan.body.symbol, price: PINNED_PRICE });
  return plan.body.symbol;
}

/** A resting bracket: limit buy 20 % below the pinned price, TP and SL around it. */
export function restingBracket(clientOrderId?: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    symbol: BENCH_SYMBOL,
    side: 'buy',
    qty: 1,
    type: 'limit',
    price: PINNED_PRICE * 0.8,
    timeInForce: 'gtc',
    takeProfit: { price: PINNED_PRICE * 0.82 },
    stopLoss: { price: PINNED_PRICE * 0.78 },
  };
  if (clientOrderId !== undefined) body.clientOrderId = clientOrderId;
  return body;
}

/** An order as the paper broker's `GET /control/state` lists it. */
export interface BrokerOrder {
  id: number;
  accountId: number;
  ordStatus: string;
  parentId: number | null;
  clOrdId: string | null;
  /** When the broker created the order (ISO, ms). */
  timestamp: string;
}

/** Broker orders of the accounts named (all when `accountIds` is empty). */
export async function brokerOrders(service: Pick<Service, 'control'>, accountIds: string[] = []): Promise<BrokerOrder[]> {
  const state = await service.control<{ orders: BrokerOrder[] }>('GET', '/state');
  const wanted = new Set(accountIds.map(Number));
  return state.orders.filter((o) => wanted.size === 0 || wanted.has(o.accountId));
}

/**
 * Waits until the broker's order count for the accounts stops changing for `stableMs`
 * (the service has worked off its backlog), at most `timeoutMs`. Returns the time waited.
 */
export async function waitForQuiescence(service: Service, accountIds: string[], stableMs = 2_000, timeoutMs = 60_000): Promise<number> {
  const t0 = Date.now();
  let last = -1;
  let since = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    const n = (await brokerOrders(service, accountIds)).length;
    if (n !== last) {
      last = n;
      since = Date.now();
    } else if (Date.now() - since >= stableMs) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  return Date.now() - t0;
}

/** Broker-side accounting of entries (orders without a parent). */
export interface BrokerAccounting {
  /** Entries at the broker. */
  entries: number;
  /** Response order ids not found at the broker. */
  missing: string[];
  /** Extra broker orders sharing one clOrdId (each is a duplicate placement). */
  duplicates: number;
  /** Entries at the broker that no acknowledged response names. */
  unacknowledged: number;
}

/** Checks acknowledged order ids against the broker's orders (entries only). */
export function accountAtBroker(orders: BrokerOrder[], acknowledgedIds: Iterable<string>): BrokerAccounting {
  const entries = orders.filter((o) => o.parentId === null);
  const byId = new Set(orders.map((o) => String(o.id)));
  const ack = new Set(acknowledgedIds);
  const missing = [...ack].filter((id) => !byId.has(id));
  const perClOrdId = new Map<string, number>();
  for (const o of entries) if (o.clOrdId) perClOrdId.set(o.clOrdId, (perClOrdId.get(o.clOrdId) ?? 0) + 1);
  let duplicates = 0;
  for (const n of perClOrdId.values()) duplicates += n - 1;
  const unacknowledged = entries.filter((o) => !ack.has(String(o.id))).length;
  return { entries: entries.length, missing, duplicates, unacknowledged };
}
