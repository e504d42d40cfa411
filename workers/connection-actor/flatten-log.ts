/**
 * Which flattens began on an account, and what each closes: for work that was under way when one
 * began and must not finish as if it had not (money probe):
 * - a bracket leg's cancel must not place its survivor again on a position a flatten is closing
 *   (the stop went out 2 ms after the liquidation filled, and made the flat account short 2): it
 *   waits for a flatten that was already running, and looks at the position it left;
 * - an exit whose legs were making room for it must not go out after a flatten closed its position
 *   (it rested on the flat account, and opened a short when it filled).
 */
import type { FlattenRequest } from '../../src/actors/protocol.js';
import { contractRoot } from '../../src/domain/symbols.js';
import type { ActorContext } from './context.js';

/** One flatten begun: its order among all of this actor's, what it closes, whether it still runs. */
export interface FlattenMark {
  seq: number;
  covers(symbol: string): boolean;
  running: boolean;
  /** Settles when it ends. */
  ended?: Promise<unknown>;
}

/** How many flattens each account's log keeps: work under way is younger than that many flattens. */
const KEPT = 16;
let seq = 0;

/** What a flatten closes: every contract, one contract, or (productOnly) every contract of its product. */
export function flattenScope(req: Pick<FlattenRequest, 'symbol' | 'symbolOnly' | 'productOnly'>): (symbol: string) => boolean {
  const only = req.symbolOnly && req.symbol ? req.symbol : undefined;
  const product = only !== undefined && req.productOnly ? contractRoot(only)?.root : undefined;
  return (symbol) => only === undefined || symbol === only || (product !== undefined && contractRoot(symbol)?.root === product);
}

/** Notes a flatten beginning on the account; the caller sets `running` false when it ends. */
export function flattenBegins(ctx: ActorContext, accountId: string, covers: (symbol: string) => boolean): FlattenMark {
  const mark: FlattenMark = { seq: ++seq, covers, running: true };
  const log: FlattenMark[] = ((ctx.flattenLog ??= new Map()).get(accountId) ?? []).concat(mark);
  // The last KEPT, and every one still running however many began since.
  ctx.flattenLog.set(accountId, log.length > KEPT ? log.filter((m, i) => m.running || i >= log.length - KEPT) : log);
  return mark;
}

/** A point in time to ask `flattenSince` about later. */
export function flattenClock(): number {
  return seq;
}

/** Whether a flatten covering `symbol` on the account is running now, or began after `since` (flattenClock). */
export function flattenSince(ctx: ActorContext, accountId: string, symbol: string, since: number): boolean {
  return (ctx.flattenLog?.get(accountId) ?? []).some((m) => (m.running || m.seq > since) && m.covers(symbol));
}

/**
 * Waits until no flatten covering `symbol` that began at or before `asOf` (flattenClock) runs on
 * the account any more. Those begun later are not waited for: they wait for the work that asks.
 */
export async function flattensBefore(ctx: ActorContext, accountId: string, symbol: string, asOf: number): Promise<void> {
  const before = (ctx.flattenLog?.get(accountId) ?? []).filter((m) => m.running && m.seq <= asOf && m.covers(symbol));
  await Promise.all(before.map((m) => m.ended?.catch(() => undefined)));
}

/**
 * Settles when every flatten covering `symbol` that runs on the account now has ended; undefined
 * when none does. An order in another contract than a strategy's close does not wait for it (probe:
 * an NQ entry held 17 s behind an ES exit at a slow broker, refused as "a flatten of the account").
 */
export function flattensCovering(ctx: ActorContext, accountId: string, symbol: string): Promise<unknown> | undefined {
  const running = (ctx.flattenLog?.get(accountId) ?? []).filter((m) => m.running && m.covers(symbol));
  if (running.length === 0) return undefined;
  return Promise.all(running.map((m) => m.ended?.catch(() => undefined)));
}
