/**
 * Manual restarts of a connection are broker logins, and a login that fails again and again is
 * what brokers punish: on Tradovate repeated failed logins end in a captcha lock for an hour
 * that no program can lift (reference/tradovate-protocol.md §6). So a connection is restarted
 * by hand (POST /connections/{id}/reconnect) at most once per RECONNECT_MIN_INTERVAL_S; a restart
 * with new credentials (PATCH) takes that turn too.
 * Past it the answer is 429 RATE_LIMITED with Retry-After: a rate, so waiting helps. One login
 * in flight at a time is the route's other rule: only a FAILED (or never started) connection
 * is reconnected, and a restarted one is CONNECTING until its login is answered.
 *
 * Adding a connection is a login too, and deleting and adding again gave each attempt a fresh
 * connection id (attack probe: eight logins as someone else's username in 3.5 s). So an add also
 * takes the user's turn with its broker login, one per interval whichever of the user's
 * connections logs in as it (a PATCH or reconnect of that login takes that turn too), and
 * one of the user's ADDS_PER_USER per ADD_WINDOW_MS, which bounds how many usernames one user
 * can try. (Users of the service are people its operator added: logins are counted per user.)
 */
import { AppError } from '../domain/problems.js';

/** Connections to a real broker one user may add per ADD_WINDOW_MS. */
export const ADDS_PER_USER = 10;
export const ADD_WINDOW_MS = 10 * 60_000;

/** Entries older than the interval are dropped once the map grows past this. */
const PRUNE_AT = 1024;

/** The last manual restart of each connection, the last login by hand of each user's broker logins, and each user's adds. */
export class ReconnectThrottle {
  private readonly last = new Map<string, number>();
  private readonly lastLogin = new Map<string, number>();
  /** When each user's adds within the window were taken, oldest first. */
  private readonly adds = new Map<string, number[]>();

  constructor(
    private readonly intervalMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Takes the connection's turn now, or throws RATE_LIMITED with the seconds until its next one. */
  take(connectionId: string): void {
    const now = this.clock();
    this.connectionTurn(connectionId, now);
    this.note(connectionId, now);
  }

  /** RATE_LIMITED when the connection was restarted by hand within the interval. */
  private connectionTurn(connectionId: string, now: number): void {
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
  }

  /** Records a restart that is not refused (new credentials) so the next manual reconnect waits for it. */
  note(connectionId: string, now = this.clock()): void {
    this.remember(this.last, connectionId, now);
  }

  /**
   * Takes the turn of an add: the user's with its broker login (`login`, brokerLoginKey) and one
   * of the user's adds; or throws RATE_LIMITED with the seconds until it is due, taking neither.
   * Returns what gives both back, for an add refused before its login was tried (a quota: re-probe,
   * a user at the quota who deleted one was kept from adding for minutes by refused adds).
   */
  takeAdd(userId: string, login: string): () => void {
    const now = this.clock();
    const key = `${userId}\n${login}`;
    const prev = this.loginTurn(key, now);
    const taken = (this.adds.get(userId) ?? []).filter((at) => now - at < ADD_WINDOW_MS);
    if (taken.length >= ADDS_PER_USER) {
      throw new AppError(
        'RATE_LIMITED',
        `At most ${ADDS_PER_USER} broker connections are added per user in ${ADD_WINDOW_MS / 60_000} minutes: each is a broker login`,
        { limit: 'connection-adds' },
        Math.max(1, Math.ceil((taken[0]! + ADD_WINDOW_MS - now) / 1000)),
      );
    }
    taken.push(now);
    this.adds.set(userId, taken);
    this.remember(this.lastLogin, key, now);
    return () => {
      // The user's list as it is now: an add taken since replaced the array this one was put in.
      const current = this.adds.get(userId);
      const at = current ? current.lastIndexOf(now) : -1;
      if (at >= 0) current!.splice(at, 1);
      if (this.lastLogin.get(key) !== now) return;
      if (prev === undefined) this.lastLogin.delete(key);
      else this.lastLogin.set(key, prev);
    };
  }

  /**
   * Takes the connection's turn for a restart by hand (a reconnect, new credentials: take) and
   * records it as the user's login by hand as `login`, so an add of that login waits for the interval.
   */
  takeRestart(connectionId: string, userId: string, login: string): void {
    const key = `${userId}\n${login}`;
    // The login's turn too: a PATCH of each of several connections to one username logged in as it
    // once per connection, four times in a second (re-probe), and a reconnect right after an add was a second login.
    const now = this.clock();
    this.connectionTurn(connectionId, now);
    this.loginTurn(key, now);
    this.note(connectionId, now);
    this.remember(this.lastLogin, key, now);
  }

  /** When the user last logged in by hand as this login (undefined: not within the interval), or RATE_LIMITED within the interval. */
  private loginTurn(key: string, now: number): number | undefined {
    const prev = this.lastLogin.get(key);
    if (prev !== undefined && now - prev < this.intervalMs) {
      throw new AppError(
        'RATE_LIMITED',
        `This broker login was used by hand ${Math.floor((now - prev) / 1000)} s ago; one login by hand per ${this.intervalMs / 1000} s (RECONNECT_MIN_INTERVAL_S), however its connections are added, changed or removed`,
        { limit: 'broker-login' },
        Math.max(1, Math.ceil((prev + this.intervalMs - now) / 1000)),
      );
    }
    return prev;
  }

  private remember(map: Map<string, number>, key: string, now: number): void {
    map.set(key, now);
    if (map.size <= PRUNE_AT) return;
    for (const [k, at] of map) if (now - at >= this.intervalMs) map.delete(k);
    for (const [userId, times] of this.adds) if (times.every((at) => now - at >= ADD_WINDOW_MS)) this.adds.delete(userId);
  }
}
