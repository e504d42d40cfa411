/**
 * The endpoint table shared by REST (`/v1/<endpoint>`) and WebSocket (`<endpoint>\n<id>\n…`):
 * entity reads (`list`, `item`, `items`, `deps`, `ldeps`, `find`), contracts and products,
 * `user/syncrequest`, cash snapshots and the order endpoints. Keys are lower case.
 */
import type { SimCore, WsClient } from './core.js';
import { marketDataHandlers } from './md.js';
import * as orders from './order-requests.js';
import { COLLECTION_OF, ENTITY_TYPES, MASTER_FIELD, type Entity, type EntityType } from './state.js';
import { asBody, num, ok, WireError, type WireResult } from './wire.js';

/** What a handler gets. `client` exists on WebSocket calls only (sync and quote subscriptions). */
export interface HandlerContext {
  core: SimCore;
  userId: number;
  query: URLSearchParams;
  body: unknown;
  client?: WsClient;
}

/** A synchronous endpoint implementation. */
export type Handler = (ctx: HandlerContext) => WireResult;

/** Endpoints subject to order p-tickets. */
export const ORDER_ENDPOINTS = new Set([
  'order/placeorder', 'order/placeoso', 'order/placeoco', 'order/modifyorder', 'order/cancelorder',
  'order/liquidateposition', 'order/liquidatepositions', 'orderstrategy/startorderstrategy',
]);

/** Every collection a Tradovate sync snapshot carries (empty arrays where the sim has none). */
const SNAPSHOT_COLLECTIONS = [
  'users', 'accounts', 'accountRiskStatuses', 'marginSnapshots', 'userAccountAutoLiqs', 'cashBalances', 'currencies',
  'positions', 'fillPairs', 'orders', 'contracts', 'contractMaturities', 'products', 'exchanges', 'spreadDefinitions',
  'commands', 'commandReports', 'executionReports', 'orderVersions', 'fills', 'fillFees', 'orderStrategies',
  'orderStrategyLinks', 'orderStrategyTypes', 'userProperties', 'properties', 'userPlugins', 'userReadStatuses', 'contractGroups',
];

const notFound = (): WireResult => ({ s: 404, d: 'Not found' });

function idParam(q: URLSearchParams, name: string): number {
  const v = Number(q.get(name));
  if (!q.has(name) || !Number.isFinite(v)) throw new WireError(400, `No usable value for ${name}\nDid not find value which can be converted into long`);
  return v;
}

function idsParam(q: URLSearchParams, name: string): number[] {
  const raw = q.get(name);
  if (!raw) throw new WireError(400, `No usable value for ${name}\nDid not find value which can be converted into long`);
  return raw.split(',').map(Number).filter(Number.isFinite);
}

function userEntity(core: SimCore, userId: number): Entity {
  const u = core.engine.state.users.get(userId)!;
  return { id: u.id, name: u.name, timestamp: new Date(0).toISOString(), status: 'Active', professional: false };
}

function entityHandlers(table: Map<string, Handler>, type: EntityType): void {
  const lower = type.toLowerCase();
  const visible = (c: HandlerContext) => c.core.engine.state.visibleAccounts(c.userId);
  const entities = (c: HandlerContext) => c.core.engine.state.list(type, visible(c));
  const byId = (c: HandlerContext, id: number) => {
    const state = c.core.engine.state;
    const e = state.get(type, id);
    return e && visible(c).has(state.accountOf(type, id)!) ? e : undefined;
  };
  table.set(`${lower}/list`, (c) => ok(entities(c)));
  table.set(`${lower}/item`, (c) => {
    const e = byId(c, idParam(c.query, 'id'));
    return e ? ok(e) : notFound();
  });
  table.set(`${lower}/items`, (c) => ok(idsParam(c.query, 'ids').map((id) => byId(c, id)).filter(Boolean)));
  const master = MASTER_FIELD[type];
  table.set(`${lower}/deps`, (c) => {
    const id = idParam(c.query, 'masterid');
    return ok(entities(c).filter((e) => e[master] === id));
  });
  table.set(`${lower}/ldeps`, (c) => {
    const ids = new Set(idsParam(c.query, 'masterids'));
    return ok(entities(c).filter((e) => ids.has(e[master] as number)));
  });
}

/**
 * `user/syncrequest`: the snapshot now, `props` events after (WebSocket only). Without
 * `entityTypes` — what the public tutorials, the trading-strategy bot and community SDKs send —
 * it is everything: every entity collection, the contracts, maturities and products in use.
 * With `entityTypes` (the partner rule) only those are synced; an empty list syncs nothing.
 */
function syncRequest(c: HandlerContext): WireResult {
  const body = c.body === undefined ? {} : asBody(c.body);
  const state = c.core.engine.state;
  const visible = state.visibleAccounts(c.userId);
  const wanted = Array.isArray(body.accounts) ? new Set(body.accounts.map(Number)) : undefined;
  const accounts = wanted ? new Set([...visible].filter((a) => wanted.has(a))) : visible;
  const requested = Array.isArray(body.entityTypes) ? new Set(body.entityTypes.map(String)) : undefined;
  const wants = (type: string) => !requested || requested.has(type);
  const types = new Set(ENTITY_TYPES.filter(wants));
  const d: Record<string, unknown[]> = {};
  for (const name of SNAPSHOT_COLLECTIONS) d[name] = [];
  d.users = [userEntity(c.core, c.userId)];
  for (const t of types) d[COLLECTION_OF[t]] = state.list(t, accounts);
  const contracts = state.contracts;
  if (wants('contract')) d.contracts = contracts.contracts();
  if (wants('contractMaturity')) d.contractMaturities = contracts.contracts().map((k) => contracts.maturityEntity(k, state.clock()));
  if (wants('product')) {
    const ids = new Set(contracts.contracts().map((k) => contracts.productOf(k.id).id));
    d.products = [...ids].map((id) => contracts.productEntity(contracts.productById(id)!));
  }
  if (wants('currency')) d.currencies = [USD];
  if (wants('userAccountAutoLiq')) d.userAccountAutoLiqs = [...accounts].flatMap((id) => autoLiqEntity(c.core, id));
  c.client?.sync(types, wanted ? accounts : undefined);
  return ok(d);
}

const USD = { id: 1, name: 'USD', symbol: '$' };

/** The account's evaluation rules as Tradovate's `userAccountAutoLiq` (none when it has no rules). */
function autoLiqEntity(core: SimCore, accountId: number): Entity[] {
  const rules = core.engine.state.accounts.get(accountId)?.rules;
  if (!rules || (rules.dailyLossLimit === undefined && rules.trailingDrawdown === undefined)) return [];
  return [{
    id: accountId, dailyLossAutoLiq: rules.dailyLossLimit ?? null, trailingMaxDrawdown: rules.trailingDrawdown ?? null,
    changesLocked: true, doNotUnlock: true,
  }];
}

function cashSnapshot(c: HandlerContext): WireResult {
  const accountId = num(asBody(c.body), 'accountId');
  const state = c.core.engine.state;
  const account = state.accounts.get(accountId);
  if (!account || !state.visibleAccounts(c.userId).has(accountId)) return ok({ errorText: 'Access is denied' });
  const cash = state.get('cashBalance', account.cashBalanceId)!;
  const openPnL = Math.round(c.core.engine.positions.openPnL(accountId) * 100) / 100;
  const amount = cash.amount as number;
  return ok({
    totalCashValue: amount, totalPnL: (cash.realizedPnL as number) + openPnL, initialMargin: 0, maintenanceMargin: 0,
    netLiq: Math.round((amount + openPnL) * 100) / 100, openPnL, realizedPnL: cash.realizedPnL, weekRealizedPnL: cash.weekRealizedPnL,
  });
}

function buildTable(): Map<string, Handler> {
  const t = new Map<string, Handler>();
  for (const type of ENTITY_TYPES) entityHandlers(t, type);
  t.set('account/find', (c) => {
    const name = c.query.get('name');
    const state = c.core.engine.state;
    const hit = [...state.visibleAccounts(c.userId)].map((id) => state.accounts.get(id)!.entity).find((a) => a.name === name);
    return hit ? ok(hit) : notFound();
  });
  t.set('auth/me', (c) => ok({ userId: c.userId, name: c.core.engine.state.users.get(c.userId)!.name, emailVerified: true, isTrial: false }));
  t.set('user/syncrequest', syncRequest);
  t.set('contract/find', (c) => {
    const k = c.core.engine.state.contracts.find(c.query.get('name') ?? '');
    return k ? ok(k) : notFound();
  });
  t.set('contract/item', (c) => {
    const k = c.core.engine.state.contracts.item(idParam(c.query, 'id'));
    return k ? ok(k) : notFound();
  });
  t.set('contract/items', (c) => ok(idsParam(c.query, 'ids').map((id) => c.core.engine.state.contracts.item(id)).filter(Boolean)));
  t.set('contract/suggest', (c) => {
    const limit = Math.min(Math.max(Math.trunc(Number(c.query.get('l') ?? 10)) || 10, 1), 100);
    return ok(c.core.engine.state.contracts.suggest(c.query.get('t') ?? '', limit, c.core.engine.state.clock()));
  });
  t.set('contract/deps', (c) => {
    const k = c.core.engine.state.contracts.byMaturity(idParam(c.query, 'masterid'));
    return ok(k ? [k] : []);
  });
  const maturity = (c: HandlerContext, id: number) => {
    const state = c.core.engine.state;
    const k = state.contracts.byMaturity(id);
    return k ? state.contracts.maturityEntity(k, state.clock()) : undefined;
  };
  t.set('contractmaturity/item', (c) => {
    const m = maturity(c, idParam(c.query, 'id'));
    return m ? ok(m) : notFound();
  });
  t.set('contractmaturity/items', (c) => ok(idsParam(c.query, 'ids').map((id) => maturity(c, id)).filter(Boolean)));
  t.set('contractmaturity/deps', (c) => {
    const productId = idParam(c.query, 'masterid');
    const state = c.core.engine.state;
    return ok(state.contracts.contracts().filter((k) => state.contracts.productOf(k.id).id === productId).map((k) => state.contracts.maturityEntity(k, state.clock())));
  });
  t.set('product/list', (c) => {
    const contracts = c.core.engine.state.contracts;
    return ok(contracts.allProducts().map((p) => contracts.productEntity(p)));
  });
  t.set('product/find', (c) => {
    const p = c.core.engine.state.contracts.product(c.query.get('name') ?? '');
    return p ? ok(c.core.engine.state.contracts.productEntity(p)) : notFound();
  });
  t.set('product/item', (c) => {
    const p = c.core.engine.state.contracts.productById(idParam(c.query, 'id'));
    return p ? ok(c.core.engine.state.contracts.productEntity(p)) : notFound();
  });
  t.set('cashbalance/getcashbalancesnapshot', cashSnapshot);
  for (const [endpoint, handler] of marketDataHandlers()) t.set(endpoint, handler);
  t.set('order/placeorder', (c) => orders.placeOrder(c.core.engine, c.userId, c.body));
  t.set('order/placeoso', (c) => orders.placeOso(c.core.engine, c.userId, c.body));
  t.set('order/placeoco', (c) => orders.placeOco(c.core.engine, c.userId, c.body));
  t.set('order/cancelorder', (c) => orders.cancelOrder(c.core.engine, c.userId, c.body));
  t.set('order/modifyorder', (c) => orders.modifyOrder(c.core.engine, c.userId, c.body));
  t.set('order/liquidateposition', (c) => orders.liquidatePosition(c.core.engine, c.userId, c.body));
  t.set('order/liquidatepositions', (c) => orders.liquidatePositions(c.core.engine, c.userId, c.body));
  t.set('orderstrategy/startorderstrategy', (c) => orders.startOrderStrategy(c.core.engine, c.userId, c.body));
  t.set('orderstrategy/interruptorderstrategy', (c) => orders.interruptOrderStrategy(c.core.engine, c.userId, c.body));
  return t;
}

/** Endpoint name (lower case, no leading slash, no `/v1`) → handler. */
export const HANDLERS: ReadonlyMap<string, Handler> = buildTable();
