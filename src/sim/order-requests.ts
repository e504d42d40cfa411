/**
 * Order endpoints of the paper broker (`order/*`, `orderstrategy/*`): read the wire body the
 * way Tradovate does, resolve account and contract, and drive the engine. Results are shaped
 * as Tradovate's (`{orderId}`, `{orderId, oso1Id, oso2Id}`, `{commandId}`, failures in HTTP 200).
 */
import { validateVersion } from './checks.js';
import type { Engine, OrderAction, OrderRec, OrderSpec } from './engine.js';
import {
  accessDenied, asBody, failure, num, ok, oneOf, optBool, optNum, optStr, str, WireError, type WireResult,
} from './wire.js';

type Body = Record<string, unknown>;
const ACTIONS = ['Buy', 'Sell'] as const;

/** Resolves `accountId` / `accountSpec` to one of the user's visible accounts. */
function accountOf(engine: Engine, userId: number, body: Body): number | undefined {
  const visible = engine.state.visibleAccounts(userId);
  const id = optNum(body, 'accountId');
  const spec = optStr(body, 'accountSpec');
  if (id === undefined && spec === undefined) throw new WireError(400, 'No usable value for accountId\nDid not find value which can be converted into long');
  if (id !== undefined) return visible.has(id) ? id : undefined;
  for (const a of visible) if (engine.state.accounts.get(a)?.entity.name === spec) return a;
  return undefined;
}

function qtyOf(body: Body, field: string): number {
  const q = num(body, field);
  if (!Number.isInteger(q) || q <= 0) throw new WireError(400, `Invalid value for ${field}: ${q}`);
  return q;
}

/** Time-in-force values the paper broker implements (Tradovate's GTD is not among them). */
const TIME_IN_FORCE = ['Day', 'GTC', 'IOC', 'FOK'] as const;

/** The version fields common to orders and bracket legs. */
function versionFields(b: Body): Pick<OrderSpec, 'orderType' | 'price' | 'stopPrice' | 'pegDifference' | 'timeInForce' | 'clOrdId' | 'text'> {
  return {
    orderType: str(b, 'orderType'), price: optNum(b, 'price'), stopPrice: optNum(b, 'stopPrice'), pegDifference: optNum(b, 'pegDifference'),
    timeInForce: b.timeInForce === undefined || b.timeInForce === null ? 'Day' : oneOf(b, 'timeInForce', TIME_IN_FORCE),
    clOrdId: optStr(b, 'clOrdId'), text: optStr(b, 'text'),
  };
}

function resolveOrder(engine: Engine, userId: number, raw: unknown): { spec: OrderSpec } | WireResult {
  const body = asBody(raw);
  const action = oneOf(body, 'action', ACTIONS);
  const symbol = str(body, 'symbol');
  const orderQty = qtyOf(body, 'orderQty');
  const fields = versionFields(body);
  const accountId = accountOf(engine, userId, body);
  const contract = engine.state.contracts.find(symbol);
  if (accountId === undefined || !contract) return accessDenied();
  // Object.assign, not `{ ...fields, more }`: on Node 20 a literal that starts with a spread and
  // adds keys costs several µs per object, and an order builds three of them.
  return {
    spec: Object.assign({}, fields, {
      accountId, contractId: contract.id, action, orderQty,
      isAutomated: optBool(body, 'isAutomated'), customTag50: optStr(body, 'customTag50'),
    }),
  };
}

function legSpec(entry: OrderSpec, raw: unknown): OrderSpec {
  const b = asBody(raw);
  return Object.assign({}, entry, versionFields(b), { action: oneOf(b, 'action', ACTIONS) });
}

/** `order/placeorder` → `{orderId}`. */
export function placeOrder(engine: Engine, userId: number, raw: unknown): WireResult {
  const r = resolveOrder(engine, userId, raw);
  if (!('spec' in r)) return r;
  const rec = engine.create(r.spec);
  engine.submit(rec, { riskCheck: true });
  return ok({ orderId: rec.id });
}

/** `order/placeoso` → `{orderId, oso1Id, oso2Id?}`; legs wait `Suspended` for the entry, which is refused with a refused leg. */
export function placeOso(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  if (!body.bracket1) throw new WireError(400, 'No usable value for bracket1\nDid not find value which can be converted into RestrainedOrderVersion');
  const r = resolveOrder(engine, userId, body);
  if (!('spec' in r)) return r;
  const specs = [legSpec(r.spec, body.bracket1), ...(body.bracket2 ? [legSpec(r.spec, body.bracket2)] : [])];
  const entry = engine.create(r.spec);
  const legs = specs.map((s) => engine.create(Object.assign({}, s, { customTag50: undefined }), { parentId: entry.id }));
  entry.legIds = legs.map((l) => l.id);
  if (legs.length === 2) engine.pair(legs[0]!, legs[1]!);
  // Legs first: an entry that fills on arrival activates legs that must already be Suspended.
  const refused = legs.map((l) => validateVersion(engine.state, l.contractId, l.version)).find((p) => p !== undefined);
  for (const leg of legs) engine.submit(leg, { riskCheck: false, suspended: true });
  // An entry whose protection was refused (a price at or below zero, off the tick) never trades unprotected.
  if (refused) engine.reject(entry, refused.status, refused.reason, `Bracket refused: ${refused.text}`);
  else engine.submit(entry, { riskCheck: true });
  return ok({ orderId: entry.id, oso1Id: legs[0]!.id, ...(legs[1] ? { oso2Id: legs[1].id } : {}) });
}

/** `order/placeoco` → `{orderId, ocoId}`: two working orders, one cancels the other. */
export function placeOco(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  if (!body.other) throw new WireError(400, 'No usable value for other\nDid not find value which can be converted into RestrainedOrderVersion');
  const r = resolveOrder(engine, userId, body);
  if (!('spec' in r)) return r;
  const otherSpec = legSpec(r.spec, body.other);
  const first = engine.create(r.spec);
  const other = engine.create(otherSpec);
  engine.pair(first, other);
  engine.submit(first, { riskCheck: true });
  engine.submit(other, { riskCheck: true });
  return ok({ orderId: first.id, ocoId: other.id });
}

/** `order/cancelorder` → `{commandId}`; the outcome arrives as events. */
export function cancelOrder(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  const rec = visibleOrder(engine, userId, num(body, 'orderId'));
  if (!rec) return accessDenied();
  return ok({ commandId: engine.cancel(rec, { clOrdId: optStr(body, 'clOrdId'), isAutomated: optBool(body, 'isAutomated') }) });
}

/** `order/modifyorder` → `{commandId}`. */
export function modifyOrder(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  const orderId = num(body, 'orderId');
  const orderQty = qtyOf(body, 'orderQty');
  const fields = versionFields(body);
  const rec = visibleOrder(engine, userId, orderId);
  if (!rec) return accessDenied();
  return ok({ commandId: engine.modify(rec, { ...fields, orderQty, isAutomated: optBool(body, 'isAutomated') }) });
}

/** `order/liquidateposition` → `{orderId}`: cancels the contract's orders, then closes at market. */
export function liquidatePosition(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  const accountId = num(body, 'accountId');
  const contractId = num(body, 'contractId');
  if (!engine.state.visibleAccounts(userId).has(accountId) || !engine.state.contracts.item(contractId)) return accessDenied();
  return liquidate(engine, accountId, contractId, optBool(body, 'admin') ?? false, optBool(body, 'isAutomated') ?? false);
}

/** `order/liquidatepositions` → `{ok:true}` after liquidating each listed position. */
export function liquidatePositions(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  const ids = Array.isArray(body.positions) ? body.positions : [];
  const visible = engine.state.visibleAccounts(userId);
  for (const id of ids) {
    const pos = engine.positions.byId(Number(id));
    if (!pos || !visible.has(pos.accountId as number)) return { s: 200, d: { ok: false, errorText: 'Access is denied' } };
  }
  for (const id of ids) {
    const pos = engine.positions.byId(Number(id))!;
    liquidate(engine, pos.accountId as number, pos.contractId as number, optBool(body, 'admin') ?? false, optBool(body, 'isAutomated') ?? false);
  }
  return ok({ ok: true });
}

/** Cancels an account's orders in a contract, then closes its position there at market → `{orderId}`. */
export function liquidate(engine: Engine, accountId: number, contractId: number, admin: boolean, isAutomated: boolean): WireResult {
  // Cancelling one OCO leg ends its sibling too, so re-check liveness before each cancel.
  for (const rec of engine.liveOrders(accountId, contractId)) if (engine.isLive(rec)) engine.cancel(rec, { isAutomated });
  const net = engine.positions.netPos(accountId, contractId);
  if (net === 0) return failure('UnknownReason', 'No position to liquidate');
  const action: OrderAction = net > 0 ? 'Sell' : 'Buy';
  const rec = engine.create({ accountId, contractId, action, orderQty: Math.abs(net), orderType: 'Market', timeInForce: 'Day', admin, isAutomated });
  engine.submit(rec, { riskCheck: false });
  return ok({ orderId: rec.id });
}

/** `orderstrategy/startorderstrategy` (multibracket, type 2) → `{orderStrategy}`. */
export function startOrderStrategy(engine: Engine, userId: number, raw: unknown): WireResult {
  const body = asBody(raw);
  const action = oneOf(body, 'action', ACTIONS);
  const symbol = str(body, 'symbol');
  const typeId = num(body, 'orderStrategyTypeId');
  const invalid = ok({ errorText: 'Invalid or missed parameters' });
  if (typeId !== 2 || typeof body.params !== 'string') return invalid;
  let params: Body;
  try {
    params = asBody(JSON.parse(body.params));
  } catch {
    return invalid;
  }
  const entryVersion = params.entryVersion && typeof params.entryVersion === 'object' ? (params.entryVersion as Body) : undefined;
  const brackets = Array.isArray(params.brackets) ? (params.brackets as unknown[]) : [];
  if (!entryVersion || !brackets.every((b): b is Body => b !== null && typeof b === 'object' && !Array.isArray(b))) return invalid;
  if (brackets.some((b) => b.autoTrail)) return ok({ errorText: 'autoTrail brackets are not supported by the paper broker' });
  const accountId = accountOf(engine, userId, body);
  const contract = engine.state.contracts.find(symbol);
  if (accountId === undefined || !contract) return ok({ errorText: 'Access is denied' });
  // Every field is read before anything is created, so a 400 leaves no orphan strategy or order.
  const uuid = optStr(body, 'uuid');
  const customTag50 = optStr(body, 'customTag50');
  const entryFields = { orderQty: qtyOf(entryVersion, 'orderQty'), ...versionFields(entryVersion) };
  const bracketSpecs = brackets.map((b) => ({
    qty: qtyOf(b, 'qty'), profitTarget: optNum(b, 'profitTarget'), stopLoss: optNum(b, 'stopLoss'), trailingStop: optBool(b, 'trailingStop') ?? false,
  }));
  const s = engine.state;
  const strategy = s.create('orderStrategy', {
    id: s.id(), accountId, timestamp: s.timestamp(), contractId: contract.id, orderStrategyTypeId: 2, action,
    params: body.params, uuid, status: 'ActiveStrategy', senderId: s.accounts.get(accountId)?.userId,
    customTag50, archived: false,
  }, accountId);
  const entry = engine.create({
    accountId, contractId: contract.id, action, ...entryFields, isAutomated: true, customTag50,
  }, { strategyId: strategy.id });
  entry.strategyBrackets = bracketSpecs;
  s.create('orderStrategyLink', { id: s.id(), orderStrategyId: strategy.id, orderId: entry.id, label: 'entry' }, accountId);
  engine.submit(entry, { riskCheck: true });
  return ok({ orderStrategy: { ...strategy } });
}

/** `orderstrategy/interruptorderstrategy` → `{orderStrategy}`: cancels its live orders. */
export function interruptOrderStrategy(engine: Engine, userId: number, raw: unknown): WireResult {
  const id = num(asBody(raw), 'orderStrategyId');
  const strategy = engine.state.get('orderStrategy', id);
  if (!strategy || !engine.state.visibleAccounts(userId).has(strategy.accountId as number)) return ok({ errorText: 'Access is denied' });
  if (strategy.status === 'ActiveStrategy') {
    engine.state.update('orderStrategy', strategy, { status: 'ExecutionInterrupted', timestamp: engine.state.timestamp() });
    for (const rec of engine.strategyOrders.get(id) ?? []) if (engine.isLive(rec)) engine.cancel(rec);
  }
  return ok({ orderStrategy: { ...strategy } });
}

function visibleOrder(engine: Engine, userId: number, orderId: number): OrderRec | undefined {
  const rec = engine.orders.get(orderId);
  return rec && engine.state.visibleAccounts(userId).has(rec.accountId) ? rec : undefined;
}
