/**
 * Who serves an account id that two connections of one user report (DESIGN §4: an account's id
 * is unique per user). Two brokers that number their accounts alike would otherwise list the id
 * twice and send its orders to whichever connection was listed first.
 *
 * The connection that served the id first keeps it. What each connection serves is stored with it
 * (`ClaimsStore`), so that holds across restarts whichever reports first, also while the other is
 * still connecting, FAILED or disabled; with no stored claim on either side, the older one keeps it
 * (by `createdAt`, then id). The other is refused as a whole: the supervisor stops its actor and
 * drops its accounts, and it stays FAILED saying which account and which connection. It keeps its
 * stored claims on the other ids it served, so those pass to no one meanwhile (a re-probe saw a
 * connection refused over one id hand its open position's account to another broker). It starts
 * again once the connection that kept the id is deleted or stops reporting it, or when it is
 * reconnected or given new credentials (it is then checked again).
 */
import type { Logger } from '../log.js';
import type { AccountRecord } from '../domain/orders.js';
import type { ConnectionSpec } from '../domain/connections.js';

/** What is read of a stored connection to settle who serves an account id. */
export interface ServedRecord {
  id: string;
  createdAt: string;
  servedAccountIds?: readonly string[];
}

/** Where the claims are stored: the user's stored connections, and a change to one's claims. */
export interface ClaimsStore {
  of(userId: string): readonly ServedRecord[];
  keep(connectionId: string, accountIds: string[]): Promise<unknown>;
}

/** Why a connection is refused. */
export interface Refusal {
  /** The connection that keeps the account id. */
  by: string;
  accountId: string;
  /** The FAILED status's detail, and the 409's. */
  detail: string;
}

/** What the claims read of, and do to, the supervisor's running connections. */
export interface ClaimsHost {
  /** The connections it runs (added and not removed), by id. */
  readonly specs: ReadonlyMap<string, ConnectionSpec>;
  /** A connection's last reported accounts; undefined when it has reported none. */
  liveAccounts(connectionId: string): readonly AccountRecord[] | undefined;
  /** Stops a refused connection's actor and shows it FAILED with the refusal's detail. */
  stop(connectionId: string, refusal: Refusal): void;
  /** Starts a connection whose refusal no longer holds (its accounts are checked again when it reports). */
  start(connectionId: string): void;
}

/** Whether `a` is older than `b` (by `createdAt`, then id). */
function older(a: { createdAt?: string | undefined; connectionId: string }, b: { createdAt?: string | undefined; connectionId: string }): boolean {
  const at = a.createdAt ?? '';
  const bt = b.createdAt ?? '';
  return at !== bt ? at < bt : a.connectionId < b.connectionId;
}

function sameIds(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((id, i) => id === b[i]);
}

/** The refused connections of one supervisor, and the decisions that refuse and readmit them. */
export class AccountClaims {
  private readonly refused = new Map<string, Refusal>();

  /**
   * @param store where claims are stored; without it only running connections count, and the older one keeps an id.
   */
  constructor(
    private readonly host: ClaimsHost,
    private readonly store: ClaimsStore | undefined,
    private readonly log: Logger,
  ) {}

  /** Why a connection is refused; undefined when it is not. */
  refusalOf(connectionId: string): Refusal | undefined {
    return this.refused.get(connectionId);
  }

  /** Whether some connection is refused (the supervisor checks them again now and then). */
  get anyRefused(): boolean {
    return this.refused.size > 0;
  }

  /** Drops a connection's refusal: it was removed, or restarted by hand and is checked again when it reports. */
  forget(connectionId: string): void {
    this.refused.delete(connectionId);
  }

  /**
   * Settles a collision that a connection's reported accounts bring: the connection that loses is
   * refused. The one whose stored claim names the id keeps it (it served it first); with both or
   * neither, the older. False when the reporting connection itself lost.
   */
  admit(connectionId: string, reportedAccounts: readonly AccountRecord[]): boolean {
    const spec = this.host.specs.get(connectionId);
    if (!spec) return true;
    const stored = this.storedOf(spec.userId);
    const mine = new Set(stored.get(connectionId)?.servedAccountIds ?? []);
    const reported = new Set(reportedAccounts.map((a) => a.id));
    const others = new Set([...stored.keys(), ...[...this.host.specs.values()].filter((o) => o.userId === spec.userId).map((o) => o.connectionId)]);
    others.delete(connectionId);
    // Every id it shares with another first: refused over one, it takes none (a refused connection
    // keeps its claims on the others, so its accounts pass to no one).
    const won: [otherId: string, accountId: string][] = [];
    for (const otherId of others) {
      const other = { createdAt: stored.get(otherId)?.createdAt ?? this.host.specs.get(otherId)?.createdAt, connectionId: otherId };
      const theirStored = stored.get(otherId)?.servedAccountIds ?? [];
      for (const shared of this.claimsOf(otherId, stored)) {
        if (!reported.has(shared)) continue;
        const theirs = theirStored.includes(shared);
        if (theirs !== mine.has(shared) ? theirs : older(other, spec)) {
          this.refuse(connectionId, otherId, shared);
          return false;
        }
        won.push([otherId, shared]);
      }
    }
    const lost = new Map<string, string[]>();
    for (const [otherId, accountId] of won) lost.set(otherId, [...(lost.get(otherId) ?? []), accountId]);
    for (const [otherId, accountIds] of lost) {
      // Its stored claims on them go (not those on other ids); running and serving them, it is refused.
      const claims = stored.get(otherId)?.servedAccountIds ?? [];
      if (claims.some((id) => accountIds.includes(id))) this.keepServed(otherId, claims.filter((id) => !accountIds.includes(id)));
      if (this.host.specs.has(otherId) && !this.refused.has(otherId)) this.refuse(otherId, connectionId, accountIds[0]!);
    }
    this.keepServed(connectionId, [...reported], stored.get(connectionId)?.servedAccountIds);
    // Connections it refused for an id it no longer reports start again (checked when they report).
    for (const [id, why] of [...this.refused]) if (why.by === connectionId && !reported.has(why.accountId)) this.readmit(id);
    return true;
  }

  /**
   * Starts again the refused connections whose refusal no longer holds: the connection that kept
   * their id was deleted (by any process: the CLI too), or serves or claims the id no more.
   */
  recheck(): void {
    for (const [id, why] of [...this.refused]) {
      const userId = this.host.specs.get(id)?.userId;
      if (userId === undefined) continue;
      if (!this.claimsOf(why.by, this.storedOf(userId)).includes(why.accountId)) this.readmit(id);
    }
  }

  /** What a connection serves or claims: its live accounts while it runs admitted, else its stored claim. */
  private claimsOf(connectionId: string, stored: ReadonlyMap<string, ServedRecord>): readonly string[] {
    const live = this.host.specs.has(connectionId) && !this.refused.has(connectionId) ? this.host.liveAccounts(connectionId) : undefined;
    return live ? live.map((a) => a.id) : (stored.get(connectionId)?.servedAccountIds ?? []);
  }

  /** The user's stored connections by id (none without a store: the running ones only count). */
  private storedOf(userId: string): Map<string, ServedRecord> {
    return new Map((this.store?.of(userId) ?? []).map((r) => [r.id, r]));
  }

  /** Stores what a connection serves when it changed (not awaited: a write that fails is logged, and made again at its next report). */
  private keepServed(connectionId: string, accountIds: string[], before?: readonly string[]): void {
    if (!this.store || sameIds(before, accountIds)) return;
    this.store.keep(connectionId, accountIds).catch((err: unknown) => this.log.error({ err, connectionId }, 'storing the accounts a connection serves failed'));
  }

  private refuse(connectionId: string, by: string, accountId: string): void {
    const detail = `account ${accountId} is also an account of connection ${by}, which served it first: a user's account ids must be unique across their connections. Delete one of them (this one then starts again), give this one other credentials, or reconnect it once its broker no longer reports that account`;
    const refusal = { by, accountId, detail };
    this.refused.set(connectionId, refusal);
    this.log.warn({ connectionId, by, accountId }, 'connection refused: an account id another connection of its user serves');
    this.host.stop(connectionId, refusal);
  }

  private readmit(connectionId: string): void {
    this.refused.delete(connectionId);
    if (this.host.specs.has(connectionId)) this.host.start(connectionId);
  }
}
