/**
 * The actor's side of storing owed bracket legs (domain/guards.ts OwedLeg): it tells the
 * supervisor an account's owed legs (an OwedLegsChanged notice), which stores them with the
 * account's guards and answers with the notice's `seq` once they are durable. A leg cancel of a
 * filled bracket waits for that before it sends the cancel, so a crash at any moment after leaves
 * a record an actor started later finds.
 */
import type { Logger } from '../../src/log.js';
import type { OwedLeg } from '../../src/domain/guards.js';
import type { SupervisorNotice } from '../../src/actors/protocol.js';
import { ACTOR_OWED_LEGS } from '../../src/tuning.js';

export class OwedLegStore {
  private seq = 0;
  /** Waiters by the notice they wait for; the supervisor stores in order, so an answer settles every earlier one. */
  private readonly waiting = new Map<number, () => void>();

  constructor(
    private readonly connectionId: string,
    private readonly notify: (notice: SupervisorNotice) => void,
    private readonly log: Logger,
  ) {}

  /**
   * Sends the account's owed legs to be stored; resolves once they are, or after
   * ACTOR_OWED_LEGS.storeWaitMs (a front too busy to answer must not hold a cancel for long: it
   * is then logged, and the cancel goes on with the legs still owed in memory).
   */
  keep(accountId: string, legs: OwedLeg[]): Promise<void> {
    const seq = ++this.seq;
    this.notify({ type: 'owed-legs-changed', connectionId: this.connectionId, accountId, legs, seq });
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (!this.waiting.delete(seq)) return;
        this.log.warn({ accountId, seq }, 'owed bracket legs not confirmed stored in time; going on');
        resolve();
      }, ACTOR_OWED_LEGS.storeWaitMs);
      this.waiting.set(seq, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** The supervisor stored notice `seq` (and every earlier one). */
  stored(seq: number): void {
    for (const [n, done] of this.waiting) {
      if (n > seq) continue;
      this.waiting.delete(n);
      done();
    }
  }
}
