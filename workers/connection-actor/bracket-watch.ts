/**
 * Bracket integrity (DESIGN §6): an entry that has filled must never sit without the
 * protection it was placed with. Watches mirror changes for a protective leg that died
 * without filling (rejected or expired) while its entry holds a fill, and for a strategy that
 * failed after its entry filled, and reports each once as a BracketAlertEvent.
 */
import type { Mirror, MirrorChange } from '../../src/broker/tradovate/mirror.js';
import { fillsOf, linkageOf, rejectReasonOf } from '../../src/broker/tradovate/order-records.js';
import type { BracketAlertEvent } from '../../src/actors/protocol.js';

/** Remembers what was reported so each exposure raises one alert. */
export class BracketWatch {
  private readonly reported = new Set<string>();

  constructor(
    private readonly mirror: Mirror,
    private readonly connectionId: string,
  ) {}

  /** The alert a change raises, if any. */
  check(change: MirrorChange): BracketAlertEvent | null {
    const e = change.entity;
    if (!e || change.eventType === 'Deleted') return null;
    if (change.entityType === 'order' && (e.ordStatus === 'Rejected' || e.ordStatus === 'Expired')) {
      const link = linkageOf(this.mirror, e);
      if (link.role !== 'take_profit' && link.role !== 'stop_loss') return null;
      if (link.entryId === null || fillsOf(this.mirror, link.entryId).qty === 0) return null;
      const reason = e.ordStatus === 'Rejected' ? rejectReasonOf(this.mirror, e.id) : null;
      const state = `${String(e.ordStatus).toLowerCase()}${reason ? ` (${reason})` : ''}`;
      return this.once(`leg:${e.id}`, String(e.accountId), String(link.entryId), `${link.role} leg ${e.id} of filled entry ${link.entryId} is ${state}: position unprotected`);
    }
    if (change.entityType === 'orderStrategy' && (e.status === 'ExecutionFailed' || e.status === 'NotEnoughLiquidity')) {
      const entry = this.mirror
        .by('orderStrategyLink', 'orderStrategyId', e.id)
        .map((l) => this.mirror.get('order', Number(l.orderId)))
        .find((o) => o?.action === e.action);
      if (!entry || fillsOf(this.mirror, entry.id).qty === 0) return null;
      return this.once(`strategy:${e.id}`, String(e.accountId), String(entry.id), `bracket strategy ${e.id} failed (${String(e.failureMessage ?? e.status)}) after entry ${entry.id} filled`);
    }
    return null;
  }

  private once(key: string, accountId: string, orderId: string, detail: string): BracketAlertEvent | null {
    if (this.reported.has(key)) return null;
    this.reported.add(key);
    return { type: 'bracket-alert', connectionId: this.connectionId, accountId, orderId, ts: Date.now(), detail };
  }
}
