/**
 * Alerts on one account take turns where the position decides what they do. A reversal reads
 * the position, closes it, then opens the rest; an exit closes what is held; a partial exit or a
 * sized entry reads the position to size itself. Run side by side, the second alert reads a
 * position the first is about to change (trader probe: close then re-enter 30 ms apart ended
 * flat; two reversals ended flat or short 2; every answer said success).
 *
 * A readers-writer queue per account, first come first served:
 * - `shared`: an alert whose order does not depend on the position (a plain buy or sell, without
 *   `marketPosition`). Any number run together, so a burst of plain alerts is not queued one by one.
 * - `exclusive`: an alert that reads the position to decide (exit, partial exit, a strategy entry,
 *   which may be a reversal). It waits for every earlier alert to finish, and later ones wait for it.
 * An alert waiting for its turn holds back the shared ones that come after it (no overtaking),
 * so alerts act in the order they arrived. A turn ends when the alert's last broker call has
 * answered or timed out (every call has a deadline), never later than `maxHoldMs` (a safety net).
 *
 * One queue per account in one process: in a cluster, the node that runs the account's connection
 * keeps it, and alerts reaching other nodes take their turns there (cluster/gateway.ts `takeTurn`).
 */

export type TurnMode = 'shared' | 'exclusive';

interface Waiter {
  mode: TurnMode;
  grant: () => void;
}

interface Queue {
  /** Alerts holding a turn now: any number of shared ones, or one exclusive. */
  shared: number;
  exclusive: boolean;
  waiting: Waiter[];
}

/** An alert's turn on its account. */
export interface Turn {
  /** Ends the turn; calling it again does nothing. */
  end(): void;
}

export class AlertTurns {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly maxHoldMs = 30_000) {}

  /**
   * The alert's turn on `key` (an account) when it can have it now (nobody in its way), else
   * undefined. `maxHoldMs`: this turn's safety net, when shorter than the queue's.
   */
  takeNow(key: string, mode: TurnMode, maxHoldMs = this.maxHoldMs): Turn | undefined {
    let q = this.queues.get(key);
    if (!q) this.queues.set(key, (q = { shared: 0, exclusive: false, waiting: [] }));
    return q.waiting.length === 0 && this.fits(q, mode) ? { end: this.hold(key, q, mode, maxHoldMs) } : undefined;
  }

  /** Waits for the alert's turn on `key` (an account); the alert ends it when it has answered. */
  take(key: string, mode: TurnMode, maxHoldMs = this.maxHoldMs): Promise<Turn> {
    const now = this.takeNow(key, mode, maxHoldMs);
    if (now) return Promise.resolve(now);
    const queue = this.queues.get(key)!;
    return new Promise((resolve) => queue.waiting.push({ mode, grant: () => resolve({ end: this.hold(key, queue, mode, maxHoldMs) }) }));
  }

  /** Accounts with an alert holding or waiting for a turn (for tests). */
  get busy(): number {
    return this.queues.size;
  }

  private fits(q: Queue, mode: TurnMode): boolean {
    return mode === 'shared' ? !q.exclusive : !q.exclusive && q.shared === 0;
  }

  private hold(key: string, q: Queue, mode: TurnMode, maxHoldMs: number): () => void {
    if (mode === 'shared') q.shared++;
    else q.exclusive = true;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      if (mode === 'shared') q.shared--;
      else q.exclusive = false;
      this.pump(key, q);
    };
    const timer = setTimeout(end, maxHoldMs);
    timer.unref();
    return end;
  }

  private pump(key: string, q: Queue): void {
    while (q.waiting.length > 0 && this.fits(q, q.waiting[0]!.mode)) q.waiting.shift()!.grant();
    if (q.waiting.length === 0 && q.shared === 0 && !q.exclusive && this.queues.get(key) === q) this.queues.delete(key);
  }
}
