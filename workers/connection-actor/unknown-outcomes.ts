/**
 * Placements whose outcome is unknown. When the broker does not answer an order request in
 * time (BROKER_TIMEOUT), or a strategy it started shows no entry in time, the order may still be
 * on its way to the broker or inside it, and the mirror cannot know it yet. Neither Tradovate
 * nor the paper broker refuses a repeated clOrdId, so a retry that placed now could make a
 * second order. Until the outcome is known a retry for the key places nothing (place.ts waits
 * here, up to its own deadline) and the order's contracts stay held for the risk guards.
 *
 * The outcome is known once
 *  - the broker's late answer comes (the socket kept the request's id): a refusal means nothing
 *    was placed; an order id is awaited in the mirror;
 *  - an order (or a strategy's entry) with the clOrdId appears in the mirror;
 *  - a full sync has replaced the mirror. A request pending on a socket that closes fails as
 *    BROKER_UNAVAILABLE, never BROKER_TIMEOUT, so every sync after an entry opened comes from
 *    a later socket: the old one is gone, and the mirror is authoritative;
 *  - `maxAgeMs` has passed (UNKNOWN_OUTCOME_MAX_MS): logged as an error, since a retry may
 *    then place a second order if the broker still executes the first.
 *
 * Costs nothing while the broker answers in time: the mirror is watched only while an entry is open.
 */
import type { Logger } from '../../src/log.js';
import type { Entity, Mirror, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import type { LateAnswer } from '../../src/broker/tradovate/ws-client.js';
import { penaltyOf } from '../../src/broker/tradovate/frames.js';
import { checkAnswer } from '../../src/broker/tradovate/requests.js';
import type { Hold } from './exposure.js';

/** How an unknown outcome became known; `orderId` is the order the broker has, if any. */
export interface Outcome {
  how: 'answer' | 'mirror' | 'refused' | 'sync' | 'expired';
  orderId: number | null;
}

/** One placement with an unknown outcome, as its attempt sees it. */
export interface UnknownPlacement {
  /** The broker's late answer to the order request. */
  answered(answer: LateAnswer): void;
}

interface Entry {
  key: string;
  accountId: string;
  clOrdId: string;
  hold: Hold | null;
  /** A partial exit's (its reduction is counted by the reduce-only bookkeeping). */
  reduceOnly: boolean;
  /** The order's contract, when known: a flatten of another symbol does not count it. */
  symbol: string | undefined;
  /** The order the late answer named, until the mirror shows it. */
  orderId: number | null;
  since: number;
  timer: NodeJS.Timeout;
  done: Promise<Outcome>;
  settle(outcome: Outcome): void;
}

/** A strategy the broker failed placed nothing (as place.ts reads it). */
const STRATEGY_FAILED = new Set(['ExecutionFailed', 'NotEnoughLiquidity']);

/** The key of a placement: `accountId|clOrdId` (as ActorContext.placing). */
export function placementKey(accountId: string, clOrdId: string): string {
  return `${accountId}|${clOrdId}`;
}

/** The open placements of one actor whose outcome is unknown, by `accountId|clOrdId`. */
export class UnknownOutcomes {
  private readonly entries = new Map<string, Entry>();
  /** Open entries by clOrdId and by the order id a late answer named: what mirror changes are matched by. */
  private readonly byClOrdId = new Map<string, Set<Entry>>();
  private readonly byOrderId = new Map<number, Entry>();
  private unwatch: (() => void) | undefined;

  constructor(
    private readonly mirror: Mirror,
    private readonly orders: { findByClOrdId(accountId: string, clOrdId: string): Entity | undefined },
    private readonly logger: Logger,
    /** How long a retry waits for an outcome (its own broker deadline). */
    readonly waitMs: number,
    private readonly maxAgeMs: number,
  ) {}

  /** Open entries. */
  get size(): number {
    return this.entries.size;
  }

  /** Open entries of one account: orders that may yet reach the broker and its position (partial exits left out with `exceptReduceOnly`, other contracts' with `inScope`). */
  pendingFor(accountId: string, exceptReduceOnly = false, inScope?: (symbol: string) => boolean): number {
    if (this.entries.size === 0) return 0;
    let n = 0;
    for (const e of this.entries.values()) {
      if (e.accountId !== accountId || (exceptReduceOnly && e.reduceOnly)) continue;
      if (inScope && e.symbol !== undefined && !inScope(e.symbol)) continue;
      n++;
    }
    return n;
  }

  /** Whether the key's outcome is unknown. */
  has(key: string): boolean {
    return this.entries.size > 0 && this.entries.has(key);
  }

  /**
   * Marks the placement of `clOrdId` outcome-unknown; `hold` (its contracts, for the guards) is
   * bound to the order once known, or released when nothing was placed or nothing can be known.
   */
  open(accountId: string, clOrdId: string, hold: Hold | null, reduceOnly = false, symbol?: string): UnknownPlacement {
    const key = placementKey(accountId, clOrdId);
    // place.ts runs one attempt per key and none while its outcome is unknown: there is no
    // earlier entry to merge with. Should one exist, the new one replaces it (the later bound).
    const earlier = this.entries.get(key);
    if (earlier) this.resolve(earlier, { how: 'expired', orderId: null });
    let settle!: (o: Outcome) => void;
    const done = new Promise<Outcome>((r) => (settle = r));
    const e: Entry = { key, accountId, clOrdId, hold, reduceOnly, symbol, orderId: null, since: Date.now(), timer: undefined as never, done, settle };
    e.timer = setTimeout(() => this.expire(e), this.maxAgeMs);
    e.timer.unref();
    this.entries.set(key, e);
    let same = this.byClOrdId.get(clOrdId);
    if (!same) this.byClOrdId.set(clOrdId, (same = new Set()));
    same.add(e);
    this.unwatch ??= this.mirror.onChange((change) => this.onChange(change));
    this.logger.warn({ accountId, clOrdId }, 'order outcome unknown (broker timeout): retries wait for it');
    this.check(e);
    return { answered: (answer) => this.answered(e, answer) };
  }

  /**
   * Resolves with the key's outcome once known (at once, as `mirror`, for a key not unknown: the
   * mirror answers for it); undefined when it is still unknown after `timeoutMs`.
   */
  async wait(key: string, timeoutMs: number): Promise<Outcome | undefined> {
    const e = this.entries.get(key);
    if (!e) return { how: 'mirror', orderId: null };
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), Math.max(0, timeoutMs))));
    try {
      return await Promise.race([e.done, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The key's outcome once known (however long that takes); undefined when it is not unknown. */
  whenKnown(key: string): Promise<Outcome> | undefined {
    return this.entries.get(key)?.done;
  }

  private answered(e: Entry, answer: LateAnswer): void {
    if (this.entries.get(e.key) !== e) return;
    // A broker failure says nothing about whether the order went through.
    if (answer.status >= 500) return;
    // Refused (4xx), or a p-ticket: the request was not executed.
    if (answer.status !== 200 || penaltyOf(answer.data)) return this.resolve(e, { how: 'refused', orderId: null });
    let d: Record<string, unknown>;
    try {
      d = checkAnswer('late answer', answer.data);
    } catch {
      return this.resolve(e, { how: 'refused', orderId: null });
    }
    const orderId = Number(d.orderId);
    if (orderId > 0) {
      e.orderId = orderId;
      this.byOrderId.set(orderId, e);
      // The order's own events take over from the hold once the broker reports it.
      e.hold?.bind(orderId);
      return this.check(e);
    }
    // A strategy names no order: its entry appears in the mirror (or the strategy fails).
    if (Number((d.orderStrategy as { id?: unknown } | undefined)?.id) > 0) return this.check(e);
    this.resolve(e, { how: 'refused', orderId: null });
  }

  /** Resolves `e` if the mirror now answers for it. */
  private check(e: Entry): void {
    const found = this.orders.findByClOrdId(e.accountId, e.clOrdId);
    if (found) return this.resolve(e, { how: 'mirror', orderId: found.id });
    if (e.orderId !== null && this.mirror.get('order', e.orderId)) return this.resolve(e, { how: 'answer', orderId: e.orderId });
    const strategy = this.strategyOf(e);
    if (strategy && STRATEGY_FAILED.has(String(strategy.status))) this.resolve(e, { how: 'refused', orderId: null });
  }

  /** The order strategy started under the entry's clOrdId (its uuid), if the mirror has one. */
  private strategyOf(e: Entry): Entity | undefined {
    return this.mirror.by('orderStrategy', 'uuid', e.clOrdId).find((s) => String(s.accountId) === e.accountId);
  }

  private onChange(change: MirrorChange): void {
    if (change.eventType === 'Snapshot') return this.synced();
    const x = change.entity;
    if (!x) return;
    switch (change.entityType) {
      case 'order': {
        const named = this.byOrderId.get(x.id);
        if (named) this.check(named);
        this.match(x.clOrdId);
        // Tradovate names the clOrdId on the order's command (and a strategy's entry through its link).
        for (const c of this.mirror.by('command', 'orderId', x.id)) this.match(c.clOrdId);
        for (const l of this.mirror.by('orderStrategyLink', 'orderId', x.id)) this.match(this.mirror.get('orderStrategy', Number(l.orderStrategyId))?.uuid);
        return;
      }
      case 'command':
        return this.match(x.clOrdId);
      case 'orderStrategyLink':
        return this.match(this.mirror.get('orderStrategy', Number(x.orderStrategyId))?.uuid);
      case 'orderStrategy':
        return this.match(x.uuid);
    }
  }

  private match(clOrdId: unknown): void {
    if (typeof clOrdId !== 'string') return;
    const same = this.byClOrdId.get(clOrdId);
    if (same) for (const e of [...same]) this.check(e);
  }

  /**
   * A full sync replaced the mirror: what the broker has is in it. A strategy it shows still
   * active without its entry may yet get one, so that one stays open.
   */
  private synced(): void {
    for (const e of [...this.entries.values()]) {
      this.check(e);
      if (this.entries.get(e.key) !== e) continue;
      const strategy = this.strategyOf(e);
      if (strategy && (strategy.status === undefined || strategy.status === 'ActiveStrategy')) continue;
      this.resolve(e, { how: 'sync', orderId: null });
    }
  }

  private expire(e: Entry): void {
    if (this.entries.get(e.key) !== e) return;
    this.logger.error(
      { accountId: e.accountId, clOrdId: e.clOrdId, ageMs: Date.now() - e.since },
      'order outcome still unknown after the maximum wait: retries with this key are no longer held back, and one may now place a second order if the broker still executes the first',
    );
    this.resolve(e, { how: 'expired', orderId: null });
  }

  private resolve(e: Entry, outcome: Outcome): void {
    if (this.entries.get(e.key) !== e) return;
    this.entries.delete(e.key);
    const same = this.byClOrdId.get(e.clOrdId);
    same?.delete(e);
    if (same?.size === 0) this.byClOrdId.delete(e.clOrdId);
    if (e.orderId !== null && this.byOrderId.get(e.orderId) === e) this.byOrderId.delete(e.orderId);
    clearTimeout(e.timer);
    if (this.entries.size === 0) {
      this.unwatch?.();
      this.unwatch = undefined;
    }
    if (outcome.orderId !== null) e.hold?.bind(outcome.orderId);
    else e.hold?.release();
    if (outcome.how !== 'expired') this.logger.info({ accountId: e.accountId, clOrdId: e.clOrdId, how: outcome.how, orderId: outcome.orderId }, 'order outcome known');
    e.settle(outcome);
  }
}
