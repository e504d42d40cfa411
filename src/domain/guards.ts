/**
 * Risk guards: what an account's guards say, how a webhook token or an API key narrows them,
 * what counts as an exit, and the arithmetic of every entry check. Pure: the connection actor
 * feeds it the live exposure it keeps from the broker's own events and enforces the answer.
 *
 * Vocabulary (per account and contract):
 * - `net`: the signed position; `buying` / `selling`: contracts of live orders that may still
 *   fill on each side (working, pending, in flight to the broker; a one-cancels-other pair
 *   counts once, suspended bracket legs not at all).
 * - An **exit** only reduces the absolute net position whatever else fills: it is on the side
 *   opposite the position and its quantity plus everything already working on that side fits
 *   in the position (`qty + selling ≤ net` for a sell on a long). Exits, cancels and flatten
 *   are never refused. Everything else is an **entry**.
 * - **Exposure** in a contract is the largest absolute position the account could reach if
 *   every live order on one side filled and none on the other: max(net + buying, selling − net).
 *   Max-position limits bound the exposure an entry would create, so working entries count.
 */
import type { OrderRecord } from './orders.js';
import { describeLocal, inWindows, type TradingWindows } from './trading-time.js';

export type { TradingWindows, TradingWindow, Weekday } from './trading-time.js';

export type Direction = 'both' | 'long_only' | 'short_only';

/** Limits on entries; an account sets them, a token or key may only narrow them. */
export interface EntryLimits {
  /** Contracts per order. */
  maxOrderQty: number | null;
  /** Exposure per contract. */
  maxPositionPerContract: number | null;
  /** Exposure summed over the account's contracts. */
  maxPositionTotal: number | null;
  /** Product roots (ES, MNQ…) entries may trade; null = any. */
  allowedProducts: string[] | null;
  direction: Direction;
  /** No entry in the direction of the position or of working entries (no adding). */
  noPyramiding: boolean;
  /** Entries only while flat in that contract with nothing working there. */
  flatOnly: boolean;
  /** Entries only inside these windows. */
  tradingWindows: TradingWindows | null;
}

/** An account's guards. */
export interface GuardConfig extends EntryLimits {
  /** `flatOnly` for webhook alerts only. */
  webhookFlatOnly: boolean;
  /** Session P&L (realized + open − fees) at or below −limit: cancel, flatten, lock until the next session. */
  dailyLossLimit: number | null;
  /** Session P&L at or above the target: the same. */
  dailyProfitTarget: number | null;
}

/** What a token or key may set: any subset of the entry limits; an unset field narrows nothing. */
export type GuardNarrowing = Partial<EntryLimits>;

/** Guard names, as refusals and events report them. */
/** Every guard, as refusals, locks and the health stream name them. */
export const GUARD_NAMES = [
  'kill_switch',
  'daily_loss',
  'profit_target',
  'trading_window',
  'allowed_products',
  'direction',
  'max_order_qty',
  'flat_only',
  'no_pyramiding',
  'max_position',
  'max_position_total',
] as const;

export type GuardName = (typeof GUARD_NAMES)[number];

/** Why an account is locked, since when and until when (null: until unlocked). */
export interface LockState {
  guard: 'kill_switch' | 'daily_loss' | 'profit_target';
  /** ms since the epoch. */
  since: number;
  until: number | null;
  detail: string;
  /**
   * The flatten the lock asked for (a kill switch with flatten, a tripped P&L limit) has not
   * gone through yet: it is running, or the connection was down, FAILED or not running. Stored
   * with the lock from the moment it is set, so every actor that starts with it (after a crash
   * too) flattens the account once CONNECTED; cleared when that succeeds, dropped by an unlock.
   */
  flattenOwed?: true;
  /**
   * On a kill switch: the day's P&L lock it was thrown over, or that tripped under it. It takes
   * over when the kill switch is lifted, so it is stored with it: a restarted actor keeps it
   * (re-probe: after a restart the unlock freed an account its daily loss had locked).
   */
  under?: Omit<LockState, 'under'>;
}

/**
 * A bracket leg the service owes an account: the survivor of a leg cancel of a filled bracket,
 * which the broker's one-cancels-other takes down and the service places again (`rp-<id>`).
 * Stored before the cancel is sent and cleared once the survivor is back (or not needed), so an
 * actor that starts after a crash in between still places it (workers/connection-actor/cancel.ts).
 */
export interface OwedLeg {
  accountId: string;
  /** The survivor as it was before the cancel (its open quantity is what is owed). */
  leg: OrderRecord;
  entryId: number;
  role: 'take_profit' | 'stop_loss';
  attempts: number;
  /**
   * The cancel of its sibling timed out: the broker may still carry it out (and its OCO take this
   * leg down). Owed only once this leg is cancelled; kept, not dropped, while it still works.
   */
  cancelPending?: true;
  /**
   * Kept by a flatten that cancels it (workers/connection-actor/flatten-legs.ts), from before its
   * first cancel until it ends: found by an actor started after a crash in between, it is put back
   * on a position the flatten did not close.
   */
  flatten?: true;
}

/** An account's guards and lock, and the bracket legs owed to it, as the actor is given them. */
export interface AccountGuards {
  config: GuardConfig;
  lock: LockState | null;
  owedLegs?: OwedLeg[];
}

/** No guard at all: what an account without a record has. */
export const NO_GUARDS: Readonly<GuardConfig> = Object.freeze({
  maxOrderQty: null,
  maxPositionPerContract: null,
  maxPositionTotal: null,
  allowedProducts: null,
  direction: 'both',
  noPyramiding: false,
  flatOnly: false,
  tradingWindows: null,
  webhookFlatOnly: false,
  dailyLossLimit: null,
  dailyProfitTarget: null,
});

/** A refused entry: the guard, its limit and the value the order would have reached. */
export interface GuardRefusal {
  guard: GuardName;
  limit: unknown;
  value: unknown;
  detail: string;
}

/** Live order exposure of one account in one contract. */
export interface ContractExposure {
  net: number;
  buying: number;
  selling: number;
}

/** An order as the checks see it. */
export interface GuardedOrder {
  side: 'buy' | 'sell';
  qty: number;
  /** Product root of the contract, e.g. "ES". */
  root: string;
  origin: 'api' | 'webhook';
}

/** The worst-case absolute position of a contract: max(net + buying, selling − net, 0). */
export function exposureOf(e: ContractExposure): number {
  return Math.max(e.net + e.buying, e.selling - e.net, 0);
}

/** Whether an order only reduces the absolute position, counting what already works on its side. */
export function isExit(e: ContractExposure, side: 'buy' | 'sell', qty: number): boolean {
  if (side === 'sell') return e.net > 0 && qty + e.selling <= e.net;
  return e.net < 0 && qty + e.buying <= -e.net;
}

/** The exposure after adding an order of `qty` on `side`. */
export function withOrder(e: ContractExposure, side: 'buy' | 'sell', qty: number): ContractExposure {
  return side === 'buy' ? { ...e, buying: e.buying + qty } : { ...e, selling: e.selling + qty };
}

/** Entry limits in force: the account's, narrowed by every token/key narrowing (stricter wins). */
export interface EffectiveLimits {
  maxOrderQty: number | null;
  maxPositionPerContract: number | null;
  maxPositionTotal: number | null;
  allowedProducts: ReadonlySet<string> | null;
  long: boolean;
  short: boolean;
  noPyramiding: boolean;
  flatOnly: boolean;
  windows: TradingWindows[];
}

function minOf(a: number | null, b: number | null | undefined): number | null {
  if (b === null || b === undefined) return a;
  return a === null ? b : Math.min(a, b);
}

/** Narrows the account's entry limits by the credential's; `origin` applies `webhookFlatOnly`. */
export function effectiveLimits(config: GuardConfig, narrowings: readonly GuardNarrowing[], origin: 'api' | 'webhook'): EffectiveLimits {
  const out: EffectiveLimits = {
    maxOrderQty: config.maxOrderQty,
    maxPositionPerContract: config.maxPositionPerContract,
    maxPositionTotal: config.maxPositionTotal,
    allowedProducts: config.allowedProducts ? new Set(config.allowedProducts.map((p) => p.toUpperCase())) : null,
    long: config.direction !== 'short_only',
    short: config.direction !== 'long_only',
    noPyramiding: config.noPyramiding,
    flatOnly: config.flatOnly || (origin === 'webhook' && config.webhookFlatOnly),
    windows: config.tradingWindows ? [config.tradingWindows] : [],
  };
  for (const n of narrowings) {
    out.maxOrderQty = minOf(out.maxOrderQty, n.maxOrderQty);
    out.maxPositionPerContract = minOf(out.maxPositionPerContract, n.maxPositionPerContract);
    out.maxPositionTotal = minOf(out.maxPositionTotal, n.maxPositionTotal);
    if (n.allowedProducts) {
      const theirs = new Set(n.allowedProducts.map((p) => p.toUpperCase()));
      out.allowedProducts = out.allowedProducts ? new Set([...out.allowedProducts].filter((p) => theirs.has(p))) : theirs;
    }
    if (n.direction === 'long_only') out.short = false;
    if (n.direction === 'short_only') out.long = false;
    out.noPyramiding ||= n.noPyramiding === true;
    out.flatOnly ||= n.flatOnly === true;
    if (n.tradingWindows) out.windows.push(n.tradingWindows);
  }
  return out;
}

/** What an entry check needs besides the limits: the contract's and the account's exposure now. */
export interface EntryContext {
  now: number;
  contract: ContractExposure;
  /** Sum of exposureOf over the account's contracts (this one included). */
  accountExposure: number;
}

/**
 * The first guard an entry breaks, or null. Order of checks: time and product rules first
 * (they do not depend on size), then size, then position rules.
 */
export function checkEntry(limits: EffectiveLimits, order: GuardedOrder, ctx: EntryContext): GuardRefusal | null {
  for (const tw of limits.windows) {
    if (!inWindows(tw, ctx.now)) {
      const at = describeLocal(ctx.now, tw.timeZone);
      return { guard: 'trading_window', limit: tw.windows, value: at, detail: `entries are allowed only inside the trading windows; it is ${at}` };
    }
  }
  if (limits.allowedProducts && !limits.allowedProducts.has(order.root.toUpperCase())) {
    const allowed = [...limits.allowedProducts];
    return { guard: 'allowed_products', limit: allowed, value: order.root, detail: `${order.root} is not an allowed product (${allowed.join(', ') || 'none'})` };
  }
  if ((order.side === 'buy' && !limits.long) || (order.side === 'sell' && !limits.short)) {
    const limit = limits.long ? 'long_only' : limits.short ? 'short_only' : 'none';
    return { guard: 'direction', limit, value: order.side, detail: `${order.side} entries are not allowed (${limit})` };
  }
  if (limits.maxOrderQty !== null && order.qty > limits.maxOrderQty) {
    return { guard: 'max_order_qty', limit: limits.maxOrderQty, value: order.qty, detail: `${order.qty} contracts exceed the ${limits.maxOrderQty} per order` };
  }
  const c = ctx.contract;
  if (limits.flatOnly && (c.net !== 0 || c.buying !== 0 || c.selling !== 0)) {
    const value = exposureOf(c);
    return { guard: 'flat_only', limit: 0, value, detail: `entries only while flat; the contract has ${c.net} open and ${c.buying + c.selling} working` };
  }
  if (limits.noPyramiding) {
    const adding = order.side === 'buy' ? c.net + c.buying : c.selling - c.net;
    if (adding > 0) {
      return { guard: 'no_pyramiding', limit: 0, value: adding, detail: `a ${order.side} would add to ${adding} contracts already ${order.side === 'buy' ? 'long' : 'short'} or working` };
    }
  }
  const after = exposureOf(withOrder(c, order.side, order.qty));
  if (limits.maxPositionPerContract !== null && after > limits.maxPositionPerContract) {
    return { guard: 'max_position', limit: limits.maxPositionPerContract, value: after, detail: `the position could reach ${after} contracts (max ${limits.maxPositionPerContract})` };
  }
  const total = ctx.accountExposure - exposureOf(c) + after;
  if (limits.maxPositionTotal !== null && total > limits.maxPositionTotal) {
    return { guard: 'max_position_total', limit: limits.maxPositionTotal, value: total, detail: `the account's positions could reach ${total} contracts (max ${limits.maxPositionTotal})` };
  }
  return null;
}

/** The refusal of an entry on a locked account. */
export function lockRefusal(lock: LockState): GuardRefusal {
  const until = lock.until === null ? 'until unlocked' : `until ${new Date(lock.until).toISOString()}`;
  return { guard: lock.guard, limit: lock.until === null ? null : new Date(lock.until).toISOString(), value: 'locked', detail: `account locked by ${lock.guard} ${until}: ${lock.detail}` };
}

/** Whether a session P&L reaches the loss limit or the profit target; the guard that trips. */
export function pnlTrip(config: GuardConfig, pnl: number): { guard: 'daily_loss' | 'profit_target'; limit: number } | null {
  if (config.dailyLossLimit !== null && pnl <= -config.dailyLossLimit) return { guard: 'daily_loss', limit: config.dailyLossLimit };
  if (config.dailyProfitTarget !== null && pnl >= config.dailyProfitTarget) return { guard: 'profit_target', limit: config.dailyProfitTarget };
  return null;
}

/** Fills a partial config with the defaults of NO_GUARDS. */
export function guardConfig(partial: Partial<GuardConfig>): GuardConfig {
  return { ...NO_GUARDS, ...partial };
}

