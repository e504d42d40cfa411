/**
 * Broker request budget of one connection (DESIGN §3): rolling per-minute and per-hour
 * counts. Orders and cancels go ahead of reads: reads may only use the budget up to a reserve
 * kept for trading, so a burst of reads can never starve a cancel. Counting is bucketed
 * (1 s buckets for the minute, 1 min buckets for the hour) so paper budgets of millions per
 * hour cost constant memory.
 */
import { AppError } from '../../domain/problems.js';

/** Orders and cancels outrank reads. */
export type RequestClass = 'order' | 'read';

class Window {
  private readonly counts: number[];
  private readonly stamps: number[];
  private total = 0;

  constructor(
    private readonly buckets: number,
    private readonly bucketMs: number,
  ) {
    this.counts = new Array<number>(buckets).fill(0);
    this.stamps = new Array<number>(buckets).fill(-1);
  }

  private roll(now: number): void {
    const slot = Math.floor(now / this.bucketMs);
    for (let i = 0; i < this.buckets; i++) {
      const s = this.stamps[i]!;
      if (s !== -1 && s <= slot - this.buckets) {
        this.total -= this.counts[i]!;
        this.counts[i] = 0;
        this.stamps[i] = -1;
      }
    }
  }

  used(now: number): number {
    this.roll(now);
    return this.total;
  }

  add(now: number): void {
    const slot = Math.floor(now / this.bucketMs);
    const i = slot % this.buckets;
    if (this.stamps[i] !== slot) {
      this.total -= this.counts[i]!;
      this.counts[i] = 0;
      this.stamps[i] = slot;
    }
    this.counts[i]!++;
    this.total++;
  }

  /** Seconds until the oldest counted bucket leaves the window. */
  secondsUntilSlot(now: number): number {
    const slot = Math.floor(now / this.bucketMs);
    let oldest = slot;
    for (const s of this.stamps) if (s !== -1 && s < oldest) oldest = s;
    const freeAt = (oldest + this.buckets) * this.bucketMs;
    return Math.max(1, Math.ceil((freeAt - now) / 1000));
  }
}

/** Share of each window reads may use; the rest is kept for orders and cancels. */
const READ_SHARE = 0.8;

/** Per-connection broker budget. */
export class BrokerBudget {
  private readonly minute = new Window(60, 1000);
  private readonly hour = new Window(60, 60_000);

  constructor(
    private readonly limits: { perMinute: number; perHour: number },
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one request slot or throws BROKER_UNAVAILABLE with retryAfterSeconds. */
  take(kind: RequestClass): void {
    const t = this.now();
    const share = kind === 'order' ? 1 : READ_SHARE;
    const minuteCap = Math.max(1, Math.floor(this.limits.perMinute * share));
    const hourCap = Math.max(1, Math.floor(this.limits.perHour * share));
    if (this.minute.used(t) >= minuteCap) {
      throw new AppError('BROKER_UNAVAILABLE', 'broker request budget exhausted (per minute)', {}, this.minute.secondsUntilSlot(t));
    }
    if (this.hour.used(t) >= hourCap) {
      throw new AppError('BROKER_UNAVAILABLE', 'broker request budget exhausted (per hour)', {}, this.hour.secondsUntilSlot(t));
    }
    this.minute.add(t);
    this.hour.add(t);
  }

  /**
   * Counts a request that must go out regardless (login, authorize, resync: without them the
   * connection cannot come back); it still uses up budget that later requests see.
   */
  record(): void {
    const t = this.now();
    this.minute.add(t);
    this.hour.add(t);
  }

  /** Requests counted in the current minute and hour windows. */
  usage(): { minute: number; hour: number } {
    const t = this.now();
    return { minute: this.minute.used(t), hour: this.hour.used(t) };
  }
}
