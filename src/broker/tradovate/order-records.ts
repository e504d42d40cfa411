/**
 * Broker entities → the service's records: an order (with its latest orderVersion, fills,
 * executionReports and strategy links) becomes an OrderRecord with bracket role and
 * linkage. Pure over the mirror: nothing here talks to the broker. (The opposite direction,
 * records → request bodies, is requests.ts.)
 */
import { FINAL_STATUSES, type OrderRecord, type OrderRole, type OrderStatus, type OrderType, type TimeInForce } from '../../domain/orders.js';
import type { Entity, Mirror } from './mirror.js';

/** What tradegate remembers about orders it placed (the broker has no field for these). */
export interface OrderNote {
  requestedSymbol?: string | null;
  clientOrderId?: string | null;
  /** A re-placed bracket leg keeps its role and bracket. */
  role?: OrderRole;
  bracketId?: string | null;
  /** For an entry whose leg was re-placed: the current leg ids. */
  legs?: { takeProfit: string | null; stopLoss: string | null };
  rejectReason?: string | null;
  /** A partial exit (a webhook's reduce-only order): it must never outlive the position it reduces. */
  reduceOnly?: boolean;
}

const TYPE_FROM_BROKER: Record<string, OrderType> = { Market: 'market', Limit: 'limit', Stop: 'stop', StopLimit: 'stop_limit' };
const TIF_FROM_BROKER: Record<string, TimeInForce> = { Day: 'day', GTC: 'gtc', IOC: 'ioc', FOK: 'fok', GTD: 'gtc' };

/** Maps a broker ordStatus (+ filled qty) to the service status. */
export function statusOf(ordStatus: unknown, filledQty: number): OrderStatus {
  switch (ordStatus) {
    case 'Filled':
    case 'Completed':
      return 'filled';
    case 'Canceled':
      return 'cancelled';
    case 'Rejected':
      return 'rejected';
    case 'Expired':
      return 'expired';
    case 'Working':
    case 'PendingCancel':
    case 'PendingReplace':
      return filledQty > 0 ? 'partially_filled' : 'working';
    default:
      // PendingNew, Suspended (bracket legs before the entry fills), Unknown
      return filledQty > 0 ? 'partially_filled' : 'pending';
  }
}

/** Filled quantity and average price from fills; falls back to executionReport cumQty/avgPx. */
export function fillsOf(mirror: Mirror, orderId: number): { qty: number; avg: number | null; lastAt: string | null } {
  let qty = 0;
  let value = 0;
  let lastAt: string | null = null;
  for (const f of mirror.by('fill', 'orderId', orderId)) {
    if (f.active === false) continue;
    const q = Number(f.qty ?? 0);
    qty += q;
    value += q * Number(f.price ?? 0);
    if (typeof f.timestamp === 'string' && (!lastAt || f.timestamp > lastAt)) lastAt = f.timestamp;
  }
  if (qty > 0) return { qty, avg: value / qty, lastAt };
  let best: Entity | undefined;
  for (const r of mirror.by('executionReport', 'orderId', orderId)) {
    if (Number(r.cumQty ?? 0) > Number(best?.cumQty ?? 0)) best = r;
  }
  if (best) return { qty: Number(best.cumQty), avg: best.avgPx == null ? null : Number(best.avgPx), lastAt: (best.timestamp as string) ?? null };
  return { qty: 0, avg: null, lastAt: null };
}

/** The service status of a mirrored order. */
export function orderStatus(mirror: Mirror, order: Entity): OrderStatus {
  return statusOf(order.ordStatus, fillsOf(mirror, order.id).qty);
}

/** True once the order can no longer change (filled, cancelled, rejected, expired). */
export function isFinal(mirror: Mirror, orderId: number): boolean {
  const o = mirror.get('order', orderId);
  return !!o && FINAL_STATUSES.has(orderStatus(mirror, o));
}

/** Contract name for a contract id, when the mirror knows it. */
export function contractName(mirror: Mirror, contractId: unknown): string | null {
  const c = typeof contractId === 'number' ? mirror.get('contract', contractId) : undefined;
  return typeof c?.name === 'string' ? c.name : null;
}

/** The strategy an order belongs to (via orderStrategyLink), if any. */
function strategyOf(mirror: Mirror, orderId: number): number | null {
  const link = mirror.by('orderStrategyLink', 'orderId', orderId)[0];
  return link ? Number(link.orderStrategyId) : null;
}

/** The bracket an order strategy was started with, from its params as the broker holds them: signed points from the fill, null for a leg not asked for. */
export interface StrategyBracket {
  profitTarget: number | null;
  stopLoss: number | null;
}

/**
 * The bracket of the order strategy the order is the entry of (its params' first `brackets`
 * entry): undefined when the order is not a strategy's, null when it is but the broker's params
 * (not known yet, or unreadable) do not say.
 */
export function strategyBracket(mirror: Mirror, orderId: number): StrategyBracket | null | undefined {
  const strategyId = strategyOf(mirror, orderId);
  if (strategyId === null) return undefined;
  const params = mirror.get('orderStrategy', strategyId)?.params;
  if (typeof params !== 'string') return null;
  try {
    const brackets = (JSON.parse(params) as { brackets?: { profitTarget?: unknown; stopLoss?: unknown }[] }).brackets;
    const first = Array.isArray(brackets) ? brackets[0] : undefined;
    if (!first) return { profitTarget: null, stopLoss: null };
    return { profitTarget: typeof first.profitTarget === 'number' ? first.profitTarget : null, stopLoss: typeof first.stopLoss === 'number' ? first.stopLoss : null };
  } catch {
    return null;
  }
}

/**
 * Whether the order is the entry of an order strategy that asked for bracket legs (its params'
 * `brackets`): the broker places those legs only once the entry has filled completely.
 */
export function strategyWantsLegs(mirror: Mirror, orderId: number): boolean {
  const bracket = strategyBracket(mirror, orderId);
  return !!bracket && (bracket.profitTarget !== null || bracket.stopLoss !== null);
}

/** The order's own label (`text`, where tradegate sends a clientOrderId), if any. */
function textOf(version: Entity | undefined): string | null {
  return typeof version?.text === 'string' && version.text ? version.text : null;
}

/** A leg's role from its order type; null while its orderVersion has not arrived yet. */
function legRole(version: Entity | undefined): 'take_profit' | 'stop_loss' | null {
  const t = version?.orderType;
  if (t === 'Limit' || t === 'MIT') return 'take_profit';
  if (t === 'Stop' || t === 'StopLimit' || t === 'TrailingStop' || t === 'TrailingStopLimit') return 'stop_loss';
  return null;
}

/** Where an order sits in a bracket. */
export interface Linkage {
  role: OrderRole;
  /** Entry order id of the bracket (also the bracket id). */
  entryId: number | null;
  takeProfit: number | null;
  stopLoss: number | null;
}

/**
 * Bracket linkage from broker data. OSO legs point at their entry with `parentId` (or
 * `linkedId`); strategy legs share an orderStrategy with the entry, which is the order whose
 * action equals the strategy's action.
 */
export function linkageOf(mirror: Mirror, order: Entity): Linkage {
  const parent = Number(order.parentId ?? 0) || null;
  if (parent && mirror.get('order', parent)) return legsOfEntry(mirror, parent, order.id);
  const children = mirror.by('order', 'parentId', order.id);
  if (children.length) return legsOfEntry(mirror, order.id, order.id);
  const strategyId = strategyOf(mirror, order.id);
  if (strategyId !== null) {
    const strategy = mirror.get('orderStrategy', strategyId);
    const members = mirror
      .by('orderStrategyLink', 'orderStrategyId', strategyId)
      .map((l) => mirror.get('order', Number(l.orderId)))
      .filter((o): o is Entity => !!o)
      .sort((a, b) => a.id - b.id);
    const entry = members.find((o) => o.action === strategy?.action) ?? members[0];
    if (entry) return fromMembers(mirror, entry, members.filter((o) => o.id !== entry.id), order.id);
  }
  return { role: 'single', entryId: null, takeProfit: null, stopLoss: null };
}

function legsOfEntry(mirror: Mirror, entryId: number, selfId: number): Linkage {
  const entry = mirror.get('order', entryId)!;
  return fromMembers(mirror, entry, mirror.by('order', 'parentId', entryId), selfId);
}

function fromMembers(mirror: Mirror, entry: Entity, legs: Entity[], selfId: number): Linkage {
  let takeProfit: number | null = null;
  let stopLoss: number | null = null;
  let selfRole: OrderRole = 'entry';
  const unknown: Entity[] = [];
  for (const leg of legs.sort((a, b) => a.id - b.id)) {
    const role = legRole(mirror.latestVersion(leg.id));
    if (role === null) unknown.push(leg);
    else if (role === 'take_profit') takeProfit ??= leg.id;
    else stopLoss ??= leg.id;
    if (leg.id === selfId && role) selfRole = role;
  }
  // Legs whose version is still in flight: bracket1 (the take-profit) is created first.
  for (const leg of unknown) {
    const role = takeProfit === null ? 'take_profit' : 'stop_loss';
    if (role === 'take_profit') takeProfit = leg.id;
    else stopLoss ??= leg.id;
    if (leg.id === selfId) selfRole = role;
  }
  return { role: selfId === entry.id ? 'entry' : selfRole, entryId: entry.id, takeProfit, stopLoss };
}

/**
 * Builds the OrderRecord for one broker order. `noteOf` gives the notes of other orders: a leg
 * the broker created on its own (an order strategy's) has none, and shows its entry's
 * requestedSymbol and clientOrderId.
 */
export function toOrderRecord(
  mirror: Mirror,
  order: Entity,
  note: OrderNote | undefined,
  fallbackSymbol?: string,
  noteOf?: (orderId: number) => OrderNote | undefined,
): OrderRecord {
  const version = mirror.latestVersion(order.id);
  const fills = fillsOf(mirror, order.id);
  const link = linkageOf(mirror, order);
  const entryNote = note === undefined && link.entryId !== null && link.entryId !== order.id ? noteOf?.(link.entryId) : undefined;
  const qty = Number(version?.orderQty ?? 0) || fills.qty;
  const status = statusOf(order.ordStatus, fills.qty);
  const rejectReason = status === 'rejected' ? (note?.rejectReason ?? rejectReasonOf(mirror, order.id)) : undefined;
  const createdAt = typeof order.timestamp === 'string' ? order.timestamp : new Date(0).toISOString();
  const legIds = note?.legs ?? { takeProfit: idOrNull(link.takeProfit), stopLoss: idOrNull(link.stopLoss) };
  const record: OrderRecord = {
    orderId: String(order.id),
    accountId: String(order.accountId),
    symbol: contractName(mirror, order.contractId) ?? fallbackSymbol ?? String(order.contractId ?? ''),
    requestedSymbol: note?.requestedSymbol ?? entryNote?.requestedSymbol ?? null,
    side: order.action === 'Sell' ? 'sell' : 'buy',
    type: TYPE_FROM_BROKER[String(version?.orderType)] ?? 'market',
    qty,
    filledQty: fills.qty,
    avgFillPrice: fills.avg,
    price: version?.price == null ? null : Number(version.price),
    stopPrice: version?.stopPrice == null ? null : Number(version.stopPrice),
    timeInForce: TIF_FROM_BROKER[String(version?.timeInForce)] ?? 'day',
    status,
    role: note?.role ?? link.role,
    bracketId: note?.bracketId ?? idOrNull(link.entryId),
    legs: link.role === 'entry' || note?.legs ? legIds : { takeProfit: null, stopLoss: null },
    clientOrderId: note?.clientOrderId ?? entryNote?.clientOrderId ?? textOf(version) ?? (link.entryId !== null && link.entryId !== order.id ? textOf(mirror.latestVersion(link.entryId)) : null),
    createdAt,
    updatedAt: latestTimestamp(mirror, order, fills.lastAt) ?? createdAt,
  };
  if (rejectReason !== undefined) record.rejectReason = rejectReason;
  return record;
}

function idOrNull(id: number | null): string | null {
  return id === null ? null : String(id);
}

function latestTimestamp(mirror: Mirror, order: Entity, fillAt: string | null): string | null {
  let latest = fillAt;
  for (const r of mirror.by('executionReport', 'orderId', order.id)) {
    if (typeof r.timestamp === 'string' && (!latest || r.timestamp > latest)) latest = r.timestamp;
  }
  return latest;
}

/** The broker's reason for a rejected order: commandReport or executionReport text. */
export function rejectReasonOf(mirror: Mirror, orderId: number): string | null {
  for (const cmd of mirror.by('command', 'orderId', orderId)) {
    for (const rep of mirror.by('commandReport', 'commandId', cmd.id)) {
      if (rep.commandStatus === 'RiskRejected' || rep.commandStatus === 'ExecutionRejected' || rep.rejectReason) {
        return [rep.rejectReason, rep.text].filter((x) => typeof x === 'string' && x).join(': ') || 'rejected';
      }
    }
  }
  for (const r of mirror.by('executionReport', 'orderId', orderId)) {
    if (r.execType === 'Rejected' || r.ordStatus === 'Rejected') {
      return [r.rejectReason, r.text].filter((x) => typeof x === 'string' && x).join(': ') || 'rejected';
    }
  }
  return null;
}
