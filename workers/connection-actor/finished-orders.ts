/**
 * Drops finished orders from the actor a while after they end. The mirror kept every order
 * the broker reported for the connection's life, with its versions, commands and reports, and
 * the order model its note: a load probe that placed and cancelled ~95 orders/s measured
 * ~4.5–6 KB per finished order (about 2 GB an hour at 100 orders/s), given back only by a
 * re-sync.
 *
 * Dropped: an order cancelled, rejected or expired with nothing filled, `retentionMs` after it
 * was first seen so, together with its versions, commands, command reports and execution
 * reports, and tradegate's note of it. Kept: filled orders (trade history pairs their fills),
 * and an order a working order still names (a bracket leg of it, or a leg re-placed for it).
 * The retention (FINISHED_ORDER_RETENTION_MS, 25 h) outlasts the idempotency window: a retry
 * with the same key, or an alert's repeat, is reconciled by clOrdId against these orders, and at
 * 30 minutes a retry of a 504'd order the user had cancelled meanwhile placed a second one
 * (re-probe). Past it, a cancel that names such an order answers 404 where it answered 409.
 */
import type { Entity, Mirror, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { fillsOf, orderStatus } from '../../src/broker/tradovate/order-records.js';

/** Statuses whose order, with nothing filled, nobody reads after a while. */
const DROPPABLE = new Set(['cancelled', 'rejected', 'expired']);
/** Statuses of an order that can no longer change. */
const FINAL = new Set([...DROPPABLE, 'filled']);

export class FinishedOrders {
  /** Orders seen finished, oldest first (an order may be in it twice; checked when due). */
  private queue: { id: number; at: number }[] = [];
  private head = 0;

  constructor(
    private readonly mirror: Mirror,
    private readonly forgetNote: (orderId: number) => void,
    private readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Follows the mirror (register it with `mirror.onChange`). */
  onChange(change: MirrorChange): void {
    if (change.eventType === 'Snapshot') {
      // A re-sync replaced everything: what it holds finished is due a retention from now.
      this.queue = [];
      this.head = 0;
      const at = this.now();
      for (const o of this.mirror.all('order')) if (this.finished(o)) this.queue.push({ id: o.id, at });
      return;
    }
    if (change.entityType !== 'order' || change.eventType === 'Deleted' || !change.entity) return;
    if (this.finished(change.entity)) this.queue.push({ id: change.entity.id, at: this.now() });
  }

  /** Drops the orders due; returns how many. */
  sweep(): number {
    const cutoff = this.now() - this.retentionMs;
    let dropped = 0;
    while (this.head < this.queue.length && this.queue[this.head]!.at <= cutoff) {
      const { id } = this.queue[this.head++]!;
      const order = this.mirror.get('order', id);
      if (!order || !this.finished(order)) continue;
      if (this.unused(id)) {
        this.drop(id);
        dropped++;
      } else {
        // Still named by a working order: looked at again a retention from now.
        this.queue.push({ id, at: this.now() });
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return dropped;
  }

  /** Orders waiting for their retention (for tests). */
  get pending(): number {
    return this.queue.length - this.head;
  }

  private finished(order: Entity): boolean {
    return DROPPABLE.has(orderStatus(this.mirror, order)) && fillsOf(this.mirror, order.id).qty === 0;
  }

  /**
   * No working order names it: none of its bracket legs, and no leg re-placed for it
   * (`rp-<id>`, cancel.ts), whose cancel by this old id is forwarded to the new one.
   */
  private unused(id: number): boolean {
    const m = this.mirror;
    const working = (o: Entity | undefined) => !!o && !FINAL.has(orderStatus(m, o));
    if (m.by('order', 'parentId', id).some(working)) return false;
    const successor = `rp-${id}`;
    if (m.by('order', 'clOrdId', successor).some(working)) return false;
    return !m.by('command', 'clOrdId', successor).some((c) => working(m.get('order', Number(c.orderId))));
  }

  private drop(id: number): void {
    const m = this.mirror;
    for (const v of m.by('orderVersion', 'orderId', id)) m.drop('orderVersion', v.id);
    for (const c of m.by('command', 'orderId', id)) {
      for (const r of m.by('commandReport', 'commandId', c.id)) m.drop('commandReport', r.id);
      m.drop('command', c.id);
    }
    for (const r of m.by('executionReport', 'orderId', id)) m.drop('executionReport', r.id);
    m.drop('order', id);
    this.forgetNote(id);
  }
}
