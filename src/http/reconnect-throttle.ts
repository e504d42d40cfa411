/**
 * Manual restarts of a connection are broker logins, and a login that fails again and again is
 * what brokers punish: on Tradovate repeated failed logins end in a captcha lock for an hour
 * that no program can lift (reference/tradovate-protocol.md §6). So a connection is restarted
 * by hand (POST /connections/{id}/reconnect) at most once per RECONNECT_MIN_INTERVAL_S; a restart
 * with new credentials (PATCH) is never refused (it is new information) but starts the interval.
 * Past it the answer is 429 RATE_LIMITED with Retry-After: a rate, so waiting helps. One login
 * in flight at a time is the route's other rule: only a FAILED (or never started) connection
 * is reconnected, and a restarted one is CONNECTING until its login is answered.
 */
import { AppError } from '../domain/problems.js';

/** Entries older than the interval are dropped once the map grows past this. */
const PRUNE_AT = 1024;

/** The last manual restart of each connection. */
export class ReconnectThrottle {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly intervalMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Takes the connection's turn now, or throws RATE_LIMITED with the seconds until its next one. */
  take(connectionId: string): void {
    const now = this.clock();
    const prev = this.last.get(connectionId);
    if (prev !== undefined && now - prev < this.intervalMs) {
      const waitS = Math.max(1, Math.ceil((prev + this.intervalMs - now) / 1000));
      throw new AppError(
        'RATE_LIMITED',
        `Connection ${connectionId} was restarted by hand ${Math.floor((now - prev) / 1000)} s ago; one manual reconnect per ${this.intervalMs / 1000} s (RECONNECT_MIN_INTERVAL_S), since each is a broker login`,
        { connectionId, limit: 'reconnect' },
        waitS,
      );
    }
    this.note(connectionId, now);
  }

  /** Records a restart that is not refused (new credentials) so the next manual reconnect waits for it. */
  note(connectionId: string, now = this.clock()): void {
    this.last.set(connectionId, now);
    if (this.last.size <= PRUNE_AT) return;
    for (const [id, at] of this.last) if (now - at >= this.intervalMs) this.last.delete(id);
  }
}
