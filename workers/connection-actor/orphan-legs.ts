/**
 * Bracket integrity the other way round: protective legs never cover more than the position
 * they protect. Futures positions net per contract, so a take-profit or stop-loss working in a
 * contract the account is flat in opens a new, unprotected position when it fires; once the
 * position has reversed, a leg of the old side adds to the new one; and legs for 2 over a
 * position of 1 turn it into the opposite 1. The spec's own way to exit one symbol (an ordinary
 * opposite-side order) leaves such legs behind, as the broker keeps them working, and so do a
 * close by hand, a partial exit and a reversal in one order.
 *
 * When a position goes flat, changes side or shrinks, the account's legs in that contract are
 * swept: at once when the fill that moved it was not a leg's (an exit, a reversal, a close by
 * hand: every moment its legs keep working, a stop could fire and open the other way), after a
 * grace period when it was a leg's or is not known yet (the broker cancels or trims the leg's OCO
 * sibling itself, a moment after the position update). Only legs of entries that are done (filled or
 * otherwise final, or re-placed legs) are looked at, and not those of an entry still filling:
 * - legs that cannot reduce the position (it is flat, or on their own side), and legs whose
 *   OCO sibling has filled and is done (the broker is about to cancel them), are cancelled;
 * - of the legs that reduce it, each kind (take-profit, stop-loss) is trimmed to the position,
 *   newest first: cut to the quantity left, or cancelled when nothing is left for it.
 * Each bracket touched is reported once as a bracket-alert, and logged.
 *
 * The same sweeps keep the other half of bracket integrity: legs whose re-placement a connection
 * loss interrupted (cancel.ts) are re-placed first; and after every snapshot (a restart, a
 * reconnect), and a grace after a leg ends without filling while the connection runs (cancelled
 * at the broker by hand, rejected, expired), a position that nothing protects although its latest
 * bracket's legs ended without filling is reported as a bracket-alert, so it is never silent.
 */
import type { Entity, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { contractName, fillsOf, isFinal, linkageOf, statusOf, strategyWantsLegs } from '../../src/broker/tradovate/order-records.js';
import { cancelOrderBody, checkAnswer, resizeOrderBody } from '../../src/broker/tradovate/requests.js';
import { restoreLegPair } from './leg-pair.js';
import { FINAL_STATUSES, type OrderRecord } from '../../src/domain/orders.js';
import type { ActorContext } from './context.js';
import { cancelOrder, resumeOwedLegs } from './cancel.js';
import { reduces, stopCoverage, isStopExit, standsForPosition } from './stop-coverage.js';

/** What a sweep does to one leg: cancel it, or cut it to `qty` (its whole quantity, filled part included). */
export type LegAction = { leg: OrderRecord; cancel: true } | { leg: OrderRecord; cancel: false; qty: number };

const open = (o: Pick<OrderRecord, 'qty' | 'filledQty'>) => o.qty - o.filledQty;


/** How long legs cut for an exit found not placed wait for the connection to be up before they are sized back (undoRoom), and how often it looks. */
const UNDO_WAIT_MS = 120_000;
const UNDO_RETRY_MS = 250;

/** The order id restingExits gives an exit not sent yet (makeRoom). */
const COMING_ID = 'about to be placed';

/** `legs` of an unprotected position whose bracket entry's legs were never placed. */
const NEVER_PLACED = 'never placed';

/**
 * Exits resting on each position, by contract: plain orders (a webhook partial exit, or an API
 * order with no bracket) working on the side that reduces it, each no larger than the position.
 * They count with the legs of their kind (a limit with the take-profits, a stop with the
 * stop-losses): long 3 with a take-profit for 3 and a limit sell of 1 under it would, in one move
 * through both, sell 4 and open a short. Only legs are cut for them, never the exits.
 */
function restingExits(working: readonly OrderRecord[], net: ReadonlyMap<string, number>, coming?: ComingExit): Map<string, { take_profit: number; stop_loss: number; ids: string[] }> {
  const out = new Map<string, { take_profit: number; stop_loss: number; ids: string[] }>();
  const orders: readonly Pick<OrderRecord, 'role' | 'type' | 'symbol' | 'side' | 'qty' | 'filledQty' | 'orderId'>[] = coming
    ? [...working, { ...coming, role: 'single', filledQty: 0, orderId: COMING_ID }]
    : working;
  for (const o of orders) {
    if (o.role !== 'single') continue;
    // A market exit fills at once: it takes its contracts from under both kinds of leg.
    const market = o.type === 'market';
    const kind = o.type === 'limit' ? 'take_profit' : o.type === 'stop' || o.type === 'stop_limit' ? 'stop_loss' : undefined;
    const position = net.get(o.symbol) ?? 0;
    const reduces = position > 0 ? o.side === 'sell' : position < 0 && o.side === 'buy';
    if ((!kind && !market) || !reduces || open(o) > Math.abs(position)) continue;
    const sums = out.get(o.symbol) ?? { take_profit: 0, stop_loss: 0, ids: [] };
    if (market) {
      sums.take_profit += open(o);
      sums.stop_loss += open(o);
    } else sums[kind!] += open(o);
    sums.ids.push(o.orderId);
    out.set(o.symbol, sums);
  }
  return out;
}

/** A plain order about to rest on a position (makeRoom): its legs are fitted as if it already did. */
export interface ComingExit {
  symbol: string;
  side: 'buy' | 'sell';
  type: OrderRecord['type'];
  qty: number;
  /** Its placement (placementKey): the leg cancels making room for it do not wait for it, as it waits for them. */
  placement?: string;
}

/** How long an exit on its way (its legs cut for it) holds the look for unprotected positions back. */
const EXIT_ON_ITS_WAY_MAX_MS = 30_000;

/** The broker's reason when it rejected command `commandId`; null while it has not. */
function commandRefusal(mirror: ActorContext['mirror'], commandId: number): string | null {
  for (const rep of mirror.by('commandReport', 'commandId', commandId)) {
    if (rep.commandStatus === 'RiskRejected' || rep.commandStatus === 'ExecutionRejected') {
      return [rep.rejectReason, rep.text].filter((x) => typeof x === 'string' && x).join(': ') || String(rep.commandStatus);
    }
  }
  return null;
}

/**
 * How much of a position of `net` the legs of `role` on the exit's side do not cover yet, beside
 * the exits resting on it (`resting`, their open quantity): legs and exits together never sell
 * more than the position holds. None when that side no longer reduces the position: a partial
 * exit of a long refused because the account had turned short meanwhile gave the long's sell
 * legs back on the short, and the sell stop then added to it (short 2 became short 4: probe).
 */
function legRoom(working: readonly OrderRecord[], exit: ComingExit, role: 'take_profit' | 'stop_loss', net: number, resting: number): number {
  if (!reduces(exit.side, net)) return 0;
  let covered = 0;
  for (const o of working) {
    if (o.symbol === exit.symbol && o.role === role && o.side === exit.side && standsForPosition(o, working)) covered += o.qty - o.filledQty;
  }
  return Math.abs(net) - resting - covered;
}

/** Keeps protective legs within the positions they protect. */
export class OrphanLegs {
  /** Accounts with a sweep pending (one timer per account, however many positions moved), and when it runs. */
  private readonly pending = new Map<number, { timer: NodeJS.Timeout; at: number }>();
  /** Per account and contract (`accountId:contractId`) with fills since its position's last update: whether one was a protective leg's. */
  private readonly legFilled = new Map<string, boolean>();
  /** Net quantity each position was last seen with: a sweep is due when it goes flat, changes side or shrinks. */
  private readonly nets = new Map<number, number>();
  /** Accounts whose next sweep follows a snapshot: it also looks for positions left unprotected. */
  private readonly afterSnapshot = new Set<number>();
  /** Entries still filling whose legs a sweep left alone: once one is done, its account is swept again. */
  private readonly filling = new Set<string>();
  /** Accounts where a leg ended without filling since their last sweep: it looks for positions left unprotected too. */
  private readonly legEnded = new Set<number>();
  /** The legs that ended without filling since their account's last look (what underStopped names). */
  private readonly endedLegs = new Set<{ accountId: string; symbol: string; orderId: string; role: string; status: string }>();
  /** The legs each exit about to be sent (makeRoom) had cut or cancelled for it, by its ComingExit: undone should it fail (undoRoom). */
  private readonly roomMade = new Map<ComingExit, { leg: OrderRecord; to: number }[]>();
  /**
   * The account of each exit that had room made and is still on its way (sent, not answered, or
   * its outcome unknown): the legs cut for it ended on purpose, and the position is about to
   * shrink to them. No unprotected-position look meanwhile (probe: "long 3 has stop-losses for 1
   * only … protect the rest" 3 ms before the exit of 2 filled; acted on, an extra stop would open
   * a position the other way once it did). At most EXIT_ON_ITS_WAY_MAX_MS each: an outcome never
   * learnt must not silence the look for good.
   */
  private readonly exitsOnTheirWay = new Map<ComingExit, { accountId: string; since: number }>();
  /** Accounts whose exit about to be sent (makeRoom) had a stop-loss leg cut for it. */
  private readonly comingCutStops = new Set<string>();
  /** Accounts with a sweep running, and those due another once it ends: sweeps of an account never overlap. */
  private readonly sweeping = new Map<number, Promise<void>>();
  private readonly sweepAgain = new Set<number>();
  /**
   * Leg changes the broker has answered that its events may not show yet: order id → the whole
   * quantity it was cut to (0: cancelled). A sweep right after another plans with them, so it never
   * cuts a leg again for the same excess (two sweeps a moment apart left a position of 4 with stops for 3).
   */
  private readonly sent = new Map<string, number>();

  constructor(
    private readonly ctx: ActorContext,
    private readonly connectionId: string,
    private readonly graceMs: number,
  ) {}

  /** Feeds one mirror change; a position that went flat, reversed or shrank (or a fresh snapshot) schedules a sweep. */
  onChange(change: MirrorChange): void {
    if (change.eventType === 'Snapshot') {
      this.nets.clear();
      this.filling.clear();
      this.sent.clear();
      for (const p of this.ctx.mirror.all('position')) this.nets.set(p.id, Number(p.netPos ?? 0));
      for (const account of this.ctx.mirror.all('account')) {
        this.afterSnapshot.add(account.id);
        this.schedule(account.id);
      }
      return;
    }
    const e = change.entity;
    if (change.entityType === 'fill' && change.eventType === 'Created' && e) {
      // Fills come before the position they move; a fill names its order, not its account.
      const order = this.ctx.mirror.get('order', Number(e.orderId));
      if (order && typeof order.accountId === 'number') {
        const link = linkageOf(this.ctx.mirror, order);
        const key = `${order.accountId}:${e.contractId}`;
        this.legFilled.set(key, this.legFilled.get(key) === true || link.role === 'take_profit' || link.role === 'stop_loss');
        // An entry filling on after its legs have ended (one filled, the other taken by its OCO):
        // what it fills now has no protection. Looked at after the grace, like a leg ended by hand.
        if (link.role === 'entry') {
          const legs = [link.takeProfit, link.stopLoss].filter((id): id is number => id !== null);
          if (legs.length > 0 && legs.every((id) => isFinal(this.ctx.mirror, id))) {
            this.legEnded.add(order.accountId);
            this.schedule(order.accountId);
          }
        }
      }
      return;
    }
    if (change.entityType === 'order' && change.eventType === 'Updated' && e && typeof e.accountId === 'number') {
      // Final statuses do not depend on fills: no fill sum for the many updates that are not final.
      if (!FINAL_STATUSES.has(statusOf(e.ordStatus, 0))) return;
      // An entry whose legs a sweep left alone while it was filling is done: its legs are fitted now.
      if (this.filling.delete(String(e.id))) this.schedule(e.accountId, 0);
      // The model knows re-placed legs too (the broker links only a bracket's own).
      const rec = this.ctx.model.record(e.id);
      // A stop exit that had a stop-loss cut for it, ended before it filled all, counts like a
      // stop-loss leg: the cut stays (prop probe: long 3 with a stop-loss for 2, and nothing said).
      const cutStops = !!rec && !!this.ctx.stopsCutBy?.has(rec.orderId);
      const stopExit = cutStops && rec.filledQty < rec.qty && isStopExit(rec, this.ctx.model.netPosition(String(e.accountId), rec.symbol));
      // Filled all (it took off what its cut stood for), or no longer a stop exit of the position:
      // nothing to say of it. A stop exit is forgotten once its alert has been judged (underStopped),
      // after the cancel that ended it has read it for its answer (cancel.ts).
      if (cutStops && !stopExit) this.ctx.stopsCutBy!.delete(rec.orderId);
      if (!stopExit && fillsOf(this.ctx.mirror, e.id).qty > 0) return;
      const role = rec?.role ?? linkageOf(this.ctx.mirror, e).role;
      if (role !== 'take_profit' && role !== 'stop_loss' && !stopExit) return;
      // The legs of an entry that never filled (cancelled, an IOC that expired) protected nothing.
      if (!stopExit && rec?.bracketId && fillsOf(this.ctx.mirror, Number(rec.bracketId)).qty === 0) return;
      // After the grace: a leg the broker's OCO or our own cancel took has its replacement, or its position is flat, by then.
      this.legEnded.add(e.accountId);
      if (rec) this.endedLegs.add({ accountId: String(e.accountId), symbol: rec.symbol, orderId: rec.orderId, role: stopExit ? 'stop exit' : role, status: rec.status });
      this.schedule(e.accountId);
      return;
    }
    if (change.entityType !== 'position' || !e || typeof e.accountId !== 'number') return;
    // A broker that deletes a closed position instead of zeroing it: flat all the same.
    const net = change.eventType === 'Deleted' ? 0 : Number(e.netPos ?? 0);
    // The fills since the position's last update moved it; a position update before its fill is not blamed on the fill before.
    const fillKey = `${e.accountId}:${e.contractId}`;
    const byLeg = this.legFilled.get(fillKey) ?? true;
    this.legFilled.delete(fillKey);
    const before = this.nets.get(e.id);
    if (change.eventType === 'Deleted') this.nets.delete(e.id);
    else this.nets.set(e.id, net);
    const shrank = before !== undefined && (Math.sign(before) !== Math.sign(net) || Math.abs(net) < Math.abs(before));
    if (net !== 0 && !shrank) return;
    // Moved by a fill that is not a leg's: nothing for the broker's OCO to do, so no reason to wait.
    this.schedule(e.accountId, byLeg ? this.graceMs : 0);
  }

  /** Stops pending sweeps (the actor is stopping). */
  stop(): void {
    for (const { timer } of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }

  /** A sweep of the account in `delayMs` (or sooner, when one is due sooner already). */
  private schedule(accountId: number, delayMs = this.graceMs): void {
    const at = Date.now() + delayMs;
    const due = this.pending.get(accountId);
    if (due) {
      if (due.at <= at) return;
      clearTimeout(due.timer);
    }
    // Even "at once" waits for the rest of the broker's batch (the position's other fills and orders).
    const timer = setTimeout(() => {
      this.pending.delete(accountId);
      void this.run(accountId);
    }, delayMs);
    timer.unref();
    this.pending.set(accountId, { timer, at });
  }

  /**
   * Sweeps the account now, or right after the sweep of it that is running (which planned from what
   * it saw then); resolves once this sweep is done. With `coming`, the sweep fits the legs as if that
   * exit already rested on the position.
   */
  private run(accountId: number, coming?: ComingExit): Promise<void> {
    const running = this.sweeping.get(accountId);
    if (running) {
      if (coming) return running.then(() => this.run(accountId, coming));
      this.sweepAgain.add(accountId);
      return running;
    }
    const swept = this.sweep(String(accountId), coming)
      .catch((err: unknown) => this.ctx.logger.warn({ err, accountId }, 'bracket leg sweep failed'))
      .finally(() => {
        this.sweeping.delete(accountId);
        if (this.sweepAgain.delete(accountId)) void this.run(accountId);
      });
    this.sweeping.set(accountId, swept);
    return swept;
  }

  /**
   * Makes the position's legs room for a plain exit about to rest on it, before it is sent: placed
   * first, a move through it and the full-size take-profit (or stop) in the moment before the legs
   * were cut sold more than the position. Resolves once the cuts are answered.
   */
  async makeRoom(accountId: string, coming: ComingExit): Promise<boolean> {
    this.comingCutStops.delete(accountId);
    this.roomMade.set(coming, []);
    this.exitsOnTheirWay.set(coming, { accountId, since: Date.now() });
    await this.run(Number(accountId), coming);
    return this.comingCutStops.delete(accountId);
  }

  private connected(): boolean {
    try {
      this.ctx.conn.requireConnected();
      return true;
    } catch {
      return false;
    }
  }

  /** Forgets the room made for an exit that was sent (its legs stay as fitted). */
  roomTaken(coming: ComingExit, accountId?: string): void {
    this.roomMade.delete(coming);
    this.exitsOnTheirWay.delete(coming);
    // Placed, it is a resting exit only now: a position that shrank below it while it was on its
    // way (another exit filled first) saw no sweep that knew it, and it rested to open the other
    // way (final probe: two exits of 2 on long 3 at a 12 s broker left a sell 2 on long 1). Looked at once more.
    if (accountId !== undefined) this.schedule(Number(accountId));
  }

  /**
   * An exit that had room made for it and then was not placed (refused by the broker, or nothing
   * sent): the legs cut for it are sized back up as far as the position still needs them, and the
   * stream says what stays short (fault probe: an exit refused left long 3 with stops for 1, and
   * nothing said). `outcomeUnknown`: it may still reach the broker, so nothing is sized back; the
   * stream says the legs stay cut for it. `sentQty`: the exit went out smaller than the room made
   * for it (a strategy's partial exit after a leg fill took part of it): the rest is given back.
   */
  async undoRoom(accountId: string, coming: ComingExit, why: string, outcomeUnknown: boolean, waitedMs = 0, sentQty?: number): Promise<void> {
    const made = this.roomMade.get(coming) ?? [];
    // Known as the connection syncs again, its positions not read back yet (faults probe: "was not
    // placed" said 4 ms before CONNECTED, and the legs left cut for good): sized back once it is up.
    if (!outcomeUnknown && made.length > 0 && !this.connected() && waitedMs < UNDO_WAIT_MS) {
      await new Promise((r) => setTimeout(r, UNDO_RETRY_MS));
      return this.undoRoom(accountId, coming, why, false, waitedMs + UNDO_RETRY_MS, sentQty);
    }
    // Kept while the outcome is unknown: undone (or dropped) once it is known.
    if (!outcomeUnknown) {
      this.roomMade.delete(coming);
      this.exitsOnTheirWay.delete(coming);
    }
    if (made.length === 0) return;
    const exit = `${coming.side} ${coming.qty} ${coming.symbol} (${coming.type})`;
    if (outcomeUnknown) {
      const detail = `the exit ${exit} the legs were cut for may not have reached the broker (${why}): they stay cut until its outcome is known (${made.map((m) => `${m.leg.role} ${m.leg.orderId} at ${m.to}`).join(', ')}), and are sized back then if it was not placed`;
      this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: made[0]!.leg.orderId, ts: Date.now(), detail });
      return;
    }
    // A flatten running on the account (one begun while the legs made room refuses the exit): its
    // outcome decides. Closed, nothing is given back; left open (it failed), the legs are. Given
    // back alongside it, they could reach the broker after its cancels and rest on the flat account.
    await this.ctx.flattening.get(accountId);
    // Not beside a sweep of the account: it plans from the legs as they stand.
    await this.sweeping.get(Number(accountId))?.catch(() => undefined);
    const net = this.ctx.model.netPosition(accountId, coming.symbol);
    const resting = this.restingExitQty(accountId, coming);
    const back: string[] = [];
    const short: string[] = [];
    for (const role of ['stop_loss', 'take_profit'] as const) {
      const working = this.ctx.model.workingOrders(accountId);
      // What the position still needs of this kind of leg, beyond what already covers it.
      let room = legRoom(working, coming, role, net, resting);
      for (const m of made.filter((x) => x.leg.role === role)) {
        const id = Number(m.leg.orderId);
        const now = working.find((o) => o.orderId === m.leg.orderId);
        if (!now || isFinal(this.ctx.mirror, id) || now.filledQty > 0) {
          short.push(`${role} ${m.leg.orderId} ${m.to === 0 ? 'cancelled' : `cut to ${m.to}`}`);
          continue;
        }
        const to = Math.min(m.leg.qty, now.qty + Math.max(0, room));
        if (to <= now.qty) continue;
        try {
          checkAnswer('modifyorder', await this.ctx.conn.send('order/modifyorder', resizeOrderBody(now, to), { kind: 'order' }));
          this.sent.delete(m.leg.orderId);
          room -= to - now.qty;
          back.push(`${role} ${m.leg.orderId} back to ${to}`);
        } catch (err) {
          this.ctx.logger.error({ err, orderId: m.leg.orderId, accountId }, 'bracket leg could not be sized back');
          short.push(`${role} ${m.leg.orderId} still at ${now.qty} (sizing it back failed)`);
        }
      }
    }
    back.push(...(await this.restoreCancelledBrackets(accountId, coming, made, net, resting, short)));
    const position = net === 0 ? 'flat' : `${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
    const covered = stopCoverage(this.ctx.model.workingOrders(accountId), coming.symbol, net);
    const parts = [
      sentQty === undefined ? `the exit ${exit} was not placed (${why})` : `the exit ${exit} was sent for ${sentQty} only (${why})`,
      ...(back.length ? [`the legs cut for it were sized back: ${back.join(', ')}`] : []),
      // Flat (a leg closed it meanwhile): nothing is owed to a position that is gone (trader probe: a red "not given back" on a flat account).
      ...(net === 0 ? ['the position is flat now: no leg is needed'] : short.length ? [`not given back: ${short.join(', ')}`] : []),
    ];
    const tail = net !== 0 && covered < Math.abs(net) ? `; the ${coming.symbol} position ${position} has stop-losses for ${covered} only now${back.length ? ' (what was asked back may show a moment later)' : ''}: protect the rest or close it` : '';
    this.ctx.logger.warn({ accountId, symbol: coming.symbol, back, short }, 'room made for a failed exit undone');
    this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: made[0]!.leg.orderId, ts: Date.now(), detail: `${parts.join('; ')}${tail}` });
  }

  /**
   * Brackets whose legs were cancelled for a refused exit (a whole-position exit takes both: the
   * broker's OCO takes the second) are put back on the position as an OCO pair at their prices,
   * sized to what the position still needs (re-probe: long 3 left with no order at all). Moves the
   * entries it restores from `short`; answers what it did.
   */
  private async restoreCancelledBrackets(accountId: string, coming: ComingExit, made: readonly { leg: OrderRecord; to: number }[], net: number, resting: number, short: string[]): Promise<string[]> {
    const done: string[] = [];
    // Cancelled for the exit, or cut for it and then ended (a cut leg that filled the rest, whose
    // OCO then took the other: re-probe 3, long 1 left with nothing working after the 409).
    const brackets = new Set(made.filter((m) => m.leg.bracketId !== null).map((m) => m.leg.bracketId!));
    for (const entryId of brackets) {
      const working = this.ctx.model.workingOrders(accountId);
      // Only a bracket with no leg left at all: one still working is sized back above.
      if (working.some((o) => o.bracketId === entryId && (o.role === 'take_profit' || o.role === 'stop_loss'))) continue;
      const cut = made.find((m) => m.leg.bracketId === entryId)!.leg;
      const order = this.ctx.mirror.get('order', Number(cut.orderId));
      const link = order ? linkageOf(this.ctx.mirror, order) : null;
      const siblingId = link ? (cut.role === 'take_profit' ? link.stopLoss : link.takeProfit) : null;
      const sibling = siblingId === null ? undefined : this.ctx.model.record(siblingId);
      const tp = cut.role === 'take_profit' ? cut : sibling;
      const sl = cut.role === 'stop_loss' ? cut : sibling;
      // Sized to what the position still needs: a leg that filled in part meanwhile (a stop the
      // market reached as the legs were cut) gets the rest back at its price, where it then acts
      // as it would have (re-probe: its partial fill kept the pair from being put back, and long 1
      // was left with nothing working).
      const qty = Math.min(cut.qty, legRoom(working, coming, 'stop_loss', net, resting));
      if (!tp || !sl || qty <= 0) continue;
      try {
        const { takeProfit: newTp, stopLoss: newSl } = await restoreLegPair(this.ctx, accountId, entryId, tp, sl, qty);
        for (const old of [tp, sl]) {
          const i = short.findIndex((x) => x.startsWith(`${old.role} ${old.orderId} `));
          if (i >= 0) short.splice(i, 1);
        }
        done.push(`take_profit ${tp.orderId} and stop_loss ${sl.orderId} (cancelled) re-placed for ${qty} as take_profit ${newTp} and stop_loss ${newSl} (one cancels the other)`);
      } catch (err) {
        this.ctx.logger.error({ err, entryId, accountId }, 'bracket legs could not be re-placed');
        short.push(`the legs of entry ${entryId} could not be re-placed (${err instanceof Error ? err.message : String(err)})`);
      }
    }
    return done;
  }

  /** Open quantity of the exits (reduce-only orders) resting on the exit's side of its contract. */
  private restingExitQty(accountId: string, coming: ComingExit): number {
    let qty = 0;
    for (const o of this.ctx.model.workingReduceOnly(accountId)) {
      if (o.symbol === coming.symbol && o.side === coming.side && !isFinal(this.ctx.mirror, Number(o.orderId))) qty += o.qty - o.filledQty;
    }
    return qty;
  }

  /**
   * A partial exit still working (a resting limit) whose position went flat or shrank below it
   * meanwhile (its stop hit, another exit) would open the other way when it fills: cancelled.
   */
  private async cancelStaleExits(accountId: string): Promise<void> {
    for (const order of this.ctx.model.workingReduceOnly(accountId)) {
      const id = Number(order.orderId);
      if (isFinal(this.ctx.mirror, id)) continue;
      const net = this.ctx.model.netPosition(accountId, order.symbol);
      const open = order.qty - order.filledQty;
      if ((order.side === 'sell' ? net : -net) >= open) continue;
      try {
        checkAnswer('cancelorder', await this.ctx.conn.send('order/cancelorder', cancelOrderBody(id), { kind: 'order' }));
      } catch (err) {
        if (!isFinal(this.ctx.mirror, id)) this.ctx.logger.error({ err, orderId: order.orderId, accountId }, 'partial exit could not be cancelled');
        continue;
      }
      const now = net === 0 ? 'flat' : `${net > 0 ? 'long' : 'short'} ${Math.abs(net)}`;
      const detail = `partial exit ${order.orderId} (${order.side} ${open} ${order.symbol}) cancelled: the position it was to reduce is ${now} now, and it would have opened one the other way`;
      this.ctx.logger.warn({ orderId: order.orderId, accountId }, 'partial exit cancelled');
      this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: order.orderId, ts: Date.now(), detail });
    }
  }

  /** What a sweep of the account would do now, leg by leg. */
  plan(accountId: string, coming?: ComingExit): LegAction[] {
    const working = this.ctx.model.workingOrders(accountId);
    const net = new Map(this.ctx.model.openPositionEntities(accountId).map((p) => [contractName(this.ctx.mirror, p.contractId) ?? String(p.contractId), Number(p.netPos)]));
    const byId = new Map(working.map((o) => [o.orderId, o]));
    // The legs of an entry still filling are left alone: they size to fills still to come. Other
    // brackets' legs in its contract are not: a reversal filling bit by bit must not leave the
    // old side's legs working, where they add to the new side.
    const filling = new Set(working.filter((o) => o.role === 'entry' && o.filledQty > 0).map((o) => o.orderId));
    const legs = new Map<string, OrderRecord[]>();
    for (const [id, qty] of this.sent) {
      const o = this.ctx.mirror.get('order', Number(id));
      const shown = byId.get(id);
      if (!o || isFinal(this.ctx.mirror, Number(id)) || (qty > 0 && shown !== undefined && shown.qty <= qty)) this.sent.delete(id);
    }
    for (const listed of working) {
      if (listed.role !== 'take_profit' && listed.role !== 'stop_loss') continue;
      // As the broker answered it, where its events have not caught up yet.
      const cut = this.sent.get(listed.orderId);
      if (cut === 0) continue;
      const o = cut === undefined ? listed : { ...listed, qty: cut };
      if (o.bracketId !== null && filling.has(o.bracketId)) {
        this.filling.add(o.bracketId);
        continue;
      }
      // A leg of a resting entry waits for its entry.
      const entry = o.bracketId === null ? undefined : byId.get(o.bracketId);
      if (entry !== undefined && !FINAL_STATUSES.has(entry.status)) continue;
      const list = legs.get(o.symbol);
      if (list) list.push(o);
      else legs.set(o.symbol, [o]);
    }
    const resting = restingExits(working, net, coming);
    const out: LegAction[] = [];
    for (const [symbol, list] of legs) {
      const position = net.get(symbol) ?? 0;
      const exits = resting.get(symbol);
      // A leg whose sibling filled is done for, whenever the broker's OCO gets to it: counting it
      // would cut a live bracket's leg in its place.
      const live = (o: OrderRecord) => reduces(o.side, position) && !this.siblingFilled(o);
      for (const o of list) if (!live(o)) out.push({ leg: o, cancel: true });
      for (const role of ['take_profit', 'stop_loss'] as const) {
        const kind = list.filter((o) => o.role === role && live(o)).sort((a, b) => Number(b.orderId) - Number(a.orderId));
        let excess = kind.reduce((n, o) => n + open(o), 0) + (exits?.[role] ?? 0) - Math.abs(position);
        for (const o of kind) {
          if (excess <= 0) break;
          const cut = Math.min(excess, open(o));
          excess -= cut;
          out.push(cut === open(o) ? { leg: o, cancel: true } : { leg: o, cancel: false, qty: o.qty - cut });
        }
      }
    }
    return out;
  }

  /** The other leg of this leg's bracket while it works (its OCO partner at the broker), else null. */
  private liveSibling(leg: OrderRecord): number | null {
    const order = this.ctx.mirror.get('order', Number(leg.orderId));
    if (!order) return null;
    const link = linkageOf(this.ctx.mirror, order);
    const sibling = leg.role === 'take_profit' ? link.stopLoss : link.takeProfit;
    return sibling !== null && !isFinal(this.ctx.mirror, sibling) ? sibling : null;
  }

  /**
   * Whether the other leg of this leg's bracket filled and is done. A sibling still filling is
   * not: the broker resizes this leg to what is left (and the cut below would do the same).
   */
  private siblingFilled(leg: OrderRecord): boolean {
    const order = this.ctx.mirror.get('order', Number(leg.orderId));
    if (!order) return false;
    const link = linkageOf(this.ctx.mirror, order);
    const sibling = leg.role === 'take_profit' ? link.stopLoss : link.takeProfit;
    return sibling !== null && isFinal(this.ctx.mirror, sibling) && fillsOf(this.ctx.mirror, sibling).qty > 0;
  }

  /**
   * Open positions with no working order that reduces them, whose latest filled entry (the last
   * order on the position's side that is not a leg) was a bracket whose legs have all ended: what
   * is left unprotected, and why. A position opened by a plain order is not reported.
   */
  unprotected(accountId: string): { symbol: string; net: number; entryId: string; legs: string; legFilled?: true }[] {
    const out: { symbol: string; net: number; entryId: string; legs: string; legFilled?: true }[] = [];
    const working = this.ctx.model.workingOrders(accountId);
    for (const p of this.ctx.model.openPositionEntities(accountId)) {
      const net = Number(p.netPos ?? 0);
      const symbol = contractName(this.ctx.mirror, p.contractId) ?? String(p.contractId);
      if (net === 0 || working.some((o) => o.symbol === symbol && o.side === (net > 0 ? 'sell' : 'buy') && standsForPosition(o, working))) continue;
      const action = net > 0 ? 'Buy' : 'Sell';
      let latest: Entity | undefined;
      for (const o of this.ctx.mirror.by('order', 'accountId', Number(accountId))) {
        if (o.contractId !== p.contractId || o.action !== action || (latest && o.id < latest.id)) continue;
        if (fillsOf(this.ctx.mirror, o.id).qty === 0) continue;
        const role = linkageOf(this.ctx.mirror, o).role;
        if (role !== 'take_profit' && role !== 'stop_loss') latest = o;
      }
      if (!latest) continue;
      const link = linkageOf(this.ctx.mirror, latest);
      const legs = [link.takeProfit, link.stopLoss].filter((id): id is number => id !== null);
      if (legs.length === 0) {
        // A bracket entry whose legs the broker never placed: cancelled after a partial fill.
        if (isFinal(this.ctx.mirror, latest.id) && strategyWantsLegs(this.ctx.mirror, latest.id)) {
          out.push({ symbol, net, entryId: String(latest.id), legs: NEVER_PLACED });
        }
        continue;
      }
      // Every leg done (cancelled, rejected, or filled in part and then ended) while the position
      // is still open with nothing reducing it: unprotected, however the legs ended.
      if (!legs.every((id) => isFinal(this.ctx.mirror, id))) continue;
      const legsFilled = legs.reduce((n, id) => n + fillsOf(this.ctx.mirror, id).qty, 0);
      // Its legs closed all the bracket bought: what is open came from other orders, a plain one's
      // (web probe: a market buy, then a bracket whose stop-loss filled, was reported unprotected).
      if (legsFilled > 0 && fillsOf(this.ctx.mirror, latest.id).qty <= legsFilled) continue;
      const legFilled = legsFilled > 0;
      out.push({ symbol, net, entryId: String(latest.id), legs: legs.map((id) => `${id} ${this.ctx.model.record(id)?.status ?? 'gone'}`).join(', '), ...(legFilled && { legFilled: true as const }) });
    }
    return out;
  }

  /**
   * Open positions whose stop-losses (and resting stop exits) cover part of them only, after a leg
   * in their contract ended without filling since the account's last look: the rest has no stop. A
   * position nothing stops at all is unprotected()'s, and one with no stop-loss ever is a plain one.
   */
  private underStopped(accountId: string): { symbol: string; net: number; covered: number; orderId: string; ended: string }[] {
    const out: { symbol: string; net: number; covered: number; orderId: string; ended: string }[] = [];
    const working = this.ctx.model.workingOrders(accountId);
    for (const p of this.ctx.model.openPositionEntities(accountId)) {
      const net = Number(p.netPos ?? 0);
      const symbol = contractName(this.ctx.mirror, p.contractId) ?? String(p.contractId);
      const covered = stopCoverage(working, symbol, net);
      const ended = [...this.endedLegs].filter((e) => e.accountId === accountId && e.symbol === symbol);
      // Nothing stopping it at all is unprotected()'s to say, unless a stop exit that had the stop-loss cut for it ended.
      if (covered >= Math.abs(net) || ended.length === 0 || (covered === 0 && !ended.some((e) => e.role === 'stop exit'))) continue;
      out.push({ symbol, net, covered, orderId: ended.at(-1)!.orderId, ended: ended.map((e) => `${e.role} ${e.orderId} ${e.status}`).join(', ') });
    }
    for (const e of [...this.endedLegs]) {
      if (e.accountId !== accountId) continue;
      this.endedLegs.delete(e);
      if (e.role === 'stop exit') this.ctx.stopsCutBy?.delete(e.orderId);
    }
    return out;
  }

  /**
   * Whether this sweep looks for unprotected positions because a leg ended unfilled. Not while a
   * flatten, a cancel, a leg's re-placement or an exit the legs were cut for is under way on the
   * account (they end legs on purpose and finish what they do): the look waits for them, another
   * grace at a time.
   */
  private afterLegEnded(accountId: string): boolean {
    const id = Number(accountId);
    if (!this.legEnded.has(id)) return false;
    const prefix = `${accountId}|`;
    const busy =
      this.ctx.flattening.has(accountId) ||
      [...this.ctx.cancelling.keys()].some((k) => k.startsWith(prefix)) ||
      [...this.ctx.owedLegs.values()].some((o) => o.accountId === accountId && !o.cancelPending) ||
      this.exitOnItsWay(accountId);
    if (busy) {
      this.schedule(id);
      return false;
    }
    this.legEnded.delete(id);
    return true;
  }

  /** Whether an exit the legs of `accountId` were cut for is on its way (entries past EXIT_ON_ITS_WAY_MAX_MS are dropped). */
  private exitOnItsWay(accountId: string): boolean {
    let onItsWay = false;
    for (const [coming, e] of this.exitsOnTheirWay) {
      if (Date.now() - e.since >= EXIT_ON_ITS_WAY_MAX_MS) this.exitsOnTheirWay.delete(coming);
      else if (e.accountId === accountId) onItsWay = true;
    }
    return onItsWay;
  }

  private async sweep(accountId: string, coming?: ComingExit): Promise<void> {
    try {
      this.ctx.conn.requireConnected();
    } catch {
      return; // the snapshot after the reconnect sweeps again
    }
    if (this.ctx.owedLegs.size > 0) await resumeOwedLegs(this.ctx, accountId, this.connectionId, { afterSnapshot: this.afterSnapshot.has(Number(accountId)) });
    const snapshot = this.afterSnapshot.delete(Number(accountId));
    if (this.afterLegEnded(accountId) || snapshot) {
      for (const u of this.unprotected(accountId)) {
        const why =
          u.legs === NEVER_PLACED
            ? `its bracket entry ${u.entryId} was cancelled after a partial fill, before the broker placed its legs`
            : u.legFilled
              ? `the legs of its bracket (entry ${u.entryId}: ${u.legs}) ended before the entry filled completely, and nothing protects what it filled since`
              : `the legs of its bracket (entry ${u.entryId}: ${u.legs}) ended without filling`;
        const detail = `the ${u.symbol} position ${u.net > 0 ? 'long' : 'short'} ${Math.abs(u.net)} has no protective order: ${why}`;
        this.ctx.logger.error({ accountId, symbol: u.symbol, entryId: u.entryId }, 'position unprotected');
        this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: u.entryId, ts: Date.now(), detail });
      }
      for (const u of this.underStopped(accountId)) {
        const detail = `the ${u.symbol} position ${u.net > 0 ? 'long' : 'short'} ${Math.abs(u.net)} has stop-losses for ${u.covered} only: a protective order ended without filling (${u.ended}); protect the rest or close it`;
        this.ctx.logger.error({ accountId, symbol: u.symbol }, 'position partly unprotected');
        this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: u.orderId, ts: Date.now(), detail });
      }
    }
    await this.cancelStaleExits(accountId);
    // One report per bracket: cancelling one leg may take its OCO sibling with it.
    const brackets = new Map<string, LegAction[]>();
    for (const action of this.plan(accountId, coming)) {
      const key = action.leg.bracketId ?? action.leg.orderId;
      const list = brackets.get(key);
      if (list) list.push(action);
      else brackets.set(key, [action]);
    }
    const cancelling = new Set([...brackets.values()].flat().filter((a) => a.cancel).map((a) => a.leg.orderId));
    for (const [bracket, actions] of brackets) {
      const done: string[] = [];
      const cuts: { id: number; leg: OrderRecord; qty: number; commandId: number | null }[] = [];
      for (const action of actions) {
        const { leg } = action;
        const id = Number(leg.orderId);
        if (isFinal(this.ctx.mirror, id)) continue;
        try {
          const sibling = action.cancel ? this.liveSibling(leg) : null;
          if (sibling !== null && !cancelling.has(String(sibling))) {
            // Its OCO sibling stays (an exit resting on the position counts with this leg's kind
            // only): cancelled on its own, the broker would take the sibling down too. Cancelled as
            // a leg of a filled bracket instead: the survivor is re-placed under a new id.
            const r = await cancelOrder(this.ctx, { type: 'cancel-order', accountId, orderId: leg.orderId }, coming?.placement);
            this.sent.set(leg.orderId, 0);
            if (coming) this.roomMade.get(coming)?.push({ leg, to: 0 });
            done.push(`${leg.role} ${leg.orderId} cancelled${r.replaced ? ` (its ${leg.role === 'take_profit' ? 'stop-loss' : 'take-profit'} ${r.replaced.replacedOrderId} re-placed as ${r.replaced.newOrderId})` : ''}`);
          } else if (action.cancel) {
            checkAnswer('cancelorder', await this.ctx.conn.send('order/cancelorder', cancelOrderBody(id), { kind: 'order' }));
            this.sent.set(leg.orderId, 0);
            if (coming) this.roomMade.get(coming)?.push({ leg, to: 0 });
            done.push(`${leg.role} ${leg.orderId} cancelled`);
          } else {
            const answer = checkAnswer('modifyorder', await this.ctx.conn.send('order/modifyorder', resizeOrderBody(leg, action.qty), { kind: 'order' })) as { commandId?: unknown };
            this.sent.set(leg.orderId, action.qty);
            cuts.push({ id, leg, qty: action.qty, commandId: typeof answer?.commandId === 'number' ? answer.commandId : null });
            if (coming) this.roomMade.get(coming)?.push({ leg, to: action.qty });
          }
        } catch (err) {
          // It filled or went away meanwhile: nothing left to do.
          if (!isFinal(this.ctx.mirror, id)) this.ctx.logger.error({ err, orderId: leg.orderId, accountId }, 'bracket leg could not be cancelled or cut');
        }
      }
      // A modify's answer is a command id only: the broker may still reject it. A cut is said once
      // the leg's own version shows it (protocol audit: "cut" was said of legs still at full size).
      done.push(...(await this.confirmCuts(accountId, cuts)));
      if (done.length === 0) continue;
      const symbol = actions[0]!.leg.symbol;
      const position = this.ctx.model.netPosition(accountId, symbol);
      const now = position === 0 ? 'flat' : `${position > 0 ? 'long' : 'short'} ${Math.abs(position)}`;
      const net = new Map([[symbol, position]]);
      const exits = (restingExits(this.ctx.model.workingOrders(accountId), net, coming).get(symbol)?.ids ?? []).filter((id) => id !== COMING_ID);
      // Stops cut for exits: cancelled before they fill, those exits leave the position's stops short (cancel.ts).
      if (actions.some((a) => a.leg.role === 'stop_loss')) {
        const stops = (this.ctx.stopsCutBy ??= new Set());
        for (const id of exits) stops.add(id);
        if (coming && coming.symbol === symbol) this.comingCutStops.add(accountId);
      }
      const incoming = coming && coming.symbol === symbol ? `${coming.type === 'market' ? 'a market' : `a ${coming.type}`} exit of ${coming.qty} about to be sent` : undefined;
      const on = [...exits.map((id) => `exit ${id}`), ...(incoming ? [incoming] : [])];
      const cause = on.length > 0 ? `fitted to the ${symbol} position ${now} with ${on.join(' and ')} on it` : `another order left the ${symbol} position ${now}`;
      const detail = `${done.join(', ')}${actions[0]!.leg.bracketId ? ` (entry ${bracket})` : ''}: ${cause}`;
      this.ctx.logger.warn({ orderId: bracket, accountId, symbol, done }, 'bracket legs fitted to the position');
      this.ctx.emit({ type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId: bracket, ts: Date.now(), detail });
    }
  }

  /** What became of the legs this sweep asked the broker to cut: each cut once its version shows it, or unconfirmed (asked again at the next look). */
  private async confirmCuts(accountId: string, cuts: readonly { id: number; leg: OrderRecord; qty: number; commandId: number | null }[]): Promise<string[]> {
    if (cuts.length === 0) return [];
    const mirror = this.ctx.mirror;
    const shows = (c: (typeof cuts)[number]) => Number(mirror.latestVersion(c.id)?.orderQty) === c.qty || isFinal(mirror, c.id);
    // Refused by the broker (a leg that filled meanwhile cannot be cut to what it has filled):
    // known at once, not waited out.
    const refused = (c: (typeof cuts)[number]) => (c.commandId === null ? null : commandRefusal(mirror, c.commandId));
    await mirror.waitFor(() => (cuts.every((c) => shows(c) || refused(c) !== null) ? true : undefined), this.ctx.settleMs);
    const out: string[] = [];
    for (const c of cuts) {
      if (shows(c)) {
        out.push(`${c.leg.role} ${c.leg.orderId} cut from ${c.leg.qty} to ${c.qty}`);
        continue;
      }
      const why = refused(c);
      if (why !== null) {
        this.sent.delete(c.leg.orderId);
        this.schedule(Number(accountId));
        out.push(`${c.leg.role} ${c.leg.orderId}: cut from ${c.leg.qty} to ${c.qty} refused by the broker (${why}); planned again from what it shows`);
        continue;
      }
      // Planned again at the next sweep, from what the broker shows.
      this.sent.delete(c.leg.orderId);
      this.schedule(Number(accountId));
      out.push(`${c.leg.role} ${c.leg.orderId}: cut from ${c.leg.qty} to ${c.qty} asked, not confirmed by the broker within ${this.ctx.settleMs / 1000} s (it may still be sized for ${c.leg.qty}; asked again at the next look)`);
    }
    return out;
  }
}
