/**
 * Broker connections: one login at a broker, owned by a user. Credentials are sealed with
 * AES-256-GCM (bound to the connection id) and only opened when an actor is started.
 */
import { checkRecordName } from '../domain/plain-text.js';
import type { BrokerCredentials, BrokerKind, Environment } from '../domain/connections.js';
import { AppError } from '../domain/problems.js';
import { byCreation, cachedOwnedReads, rowReader, type StoreContext } from './context.js';
import { randomBase62, type Sealer } from './crypto.js';

/** A connection as it may be shown (no credentials). */
export interface ConnectionRecord {
  id: string;
  userId: string;
  name: string;
  broker: BrokerKind;
  environment: Environment;
  restUrl: string;
  wsUrl: string;
  createdAt: string;
  disabled: boolean;
  /**
   * The account ids this connection serves, as last admitted: an account id belongs to the
   * connection of its user that served it first, and another that reports it is refused
   * (actors/supervisor.ts). Absent on rows stored before, and until it first reported.
   */
  servedAccountIds?: string[];
}

/** A connection as stored; the NATS store keeps `sealedCredentials` as base64. */
export interface ConnectionRow extends ConnectionRecord {
  sealedCredentials: Uint8Array;
}

export interface NewConnection {
  userId: string;
  name: string;
  broker: BrokerKind;
  environment: Environment;
  restUrl: string;
  wsUrl: string;
  credentials: BrokerCredentials;
  disabled?: boolean;
}

/** What PATCH may change of a connection: its name, its credentials (sealed anew). */
export interface ConnectionPatch {
  name?: string;
  credentials?: BrokerCredentials;
}

export interface ConnectionStore {
  /** Stores a connection with its credentials sealed; durable before it resolves. */
  create(input: NewConnection): Promise<ConnectionRecord>;
  /** A user's connections, oldest first. */
  listByUser(userId: string): ConnectionRecord[];
  /** The connection when `userId` owns it. */
  getForUser(userId: string, id: string): ConnectionRecord | undefined;
  byId(id: string): ConnectionRecord | undefined;
  /** Every connection of every user (the supervisor starts an actor for each enabled one). */
  all(): ConnectionRecord[];
  /** Opens the sealed credentials; NOT_FOUND for an unknown id. */
  credentials(id: string): BrokerCredentials;
  /** Enables or disables a connection; false when unknown. */
  setDisabled(id: string, disabled: boolean): Promise<boolean>;
  /** Stores the account ids the connection serves now (ConnectionRecord.servedAccountIds); false when unknown. */
  setServedAccounts(id: string, accountIds: string[]): Promise<boolean>;
  /** Renames a connection the user owns or replaces its credentials; undefined when unknown or not theirs. */
  update(userId: string, id: string, patch: ConnectionPatch): Promise<ConnectionRecord | undefined>;
  /** Deletes a connection the user owns; false when unknown or not theirs. */
  remove(userId: string, id: string): Promise<boolean>;
}

/** Binds sealed credentials to their connection. */
export const connectionAad = (id: string): string => `connection:${id}`;

/** What may be shown of a stored connection (never its credentials). */
export function connectionView(r: ConnectionRecord): ConnectionRecord {
  return {
    id: r.id,
    userId: r.userId,
    name: r.name,
    broker: r.broker,
    environment: r.environment,
    restUrl: r.restUrl,
    wsUrl: r.wsUrl,
    createdAt: r.createdAt,
    disabled: r.disabled,
    ...(r.servedAccountIds !== undefined && { servedAccountIds: r.servedAccountIds }),
  };
}

/** VALIDATION_FAILED unless the name has 1..100 characters. */
export function checkConnectionName(name: string): void {
  checkRecordName('connection', name);
}

/** `row` with `patch` applied, new credentials sealed under `sealer` (bound to the row's id). */
export function patchedConnection<R extends ConnectionRecord & { sealedCredentials: unknown }>(
  r: R,
  patch: ConnectionPatch,
  seal: (credentials: BrokerCredentials) => R['sealedCredentials'],
): R {
  return {
    ...r,
    ...(patch.name !== undefined && { name: patch.name }),
    ...(patch.credentials !== undefined && { sealedCredentials: seal(patch.credentials) }),
  };
}

/**
 * The account ids whose webhook tokens a deleted connection takes with it: those it serves now
 * (`live`) or claims (`servedAccountIds`: a refused, disabled or failing connection serves
 * nothing live, re-probe: its tokens stayed active and the next alert filled at the broker of the
 * connection that took the id over), less those another connection of the user serves or claims
 * (the same broker login added twice before that was refused keeps its tokens). Read before the
 * connection's actor stops: the one it refused may take the id over at once.
 */
export function accountsLeaving(record: ConnectionRecord, userConnections: readonly ConnectionRecord[], live: (connectionId: string) => readonly string[] = () => []): string[] {
  const elsewhere = new Set(userConnections.filter((c) => c.id !== record.id).flatMap((c) => [...live(c.id), ...(c.servedAccountIds ?? [])]));
  return [...new Set([...live(record.id), ...(record.servedAccountIds ?? [])])].filter((a) => !elsewhere.has(a));
}

/** What names a broker login: the broker, where it runs, and the user name there. */
export interface BrokerLogin {
  broker: BrokerKind;
  environment: Environment;
  restUrl: string;
  /** The user name at the broker (`credentials.name`). */
  name: string;
}

/** One key per broker login (user names compared without case, as brokers do). */
export function brokerLoginKey(login: BrokerLogin): string {
  return [login.broker, login.environment, login.restUrl.replace(/\/+$/, '').toLowerCase(), login.name.trim().toLowerCase()].join('\n');
}

/**
 * The user's connection (other than `exceptId`) that already logs in as `login`, if any. Two
 * connections to one login would each run an actor on the same accounts: the accounts listed
 * twice, orders and guards split between two views of one position, and two broker sessions
 * where Tradovate may end the older one.
 */
export function connectionWithLogin(store: Pick<ConnectionStore, 'listByUser' | 'credentials'>, userId: string, login: BrokerLogin, exceptId?: string): ConnectionRecord | undefined {
  const key = brokerLoginKey(login);
  return store.listByUser(userId).find((c) => {
    if (c.id === exceptId || c.broker !== login.broker || c.environment !== login.environment) return false;
    let name: string;
    try {
      name = store.credentials(c.id).name;
    } catch {
      // Credentials sealed under another key cannot be compared; that connection cannot log in either.
      return false;
    }
    return brokerLoginKey({ ...c, name }) === key;
  });
}

/** 409 CONFLICT naming the connection that already logs in as the same broker user. */
export function loginTaken(existing: ConnectionRecord): AppError {
  return new AppError(
    'CONFLICT',
    `Connection ${existing.id} (${existing.name}) already logs in as this ${existing.broker === existing.environment ? existing.broker : `${existing.broker} ${existing.environment}`} user: one connection per broker login (a second would list its accounts twice); give that one new credentials or delete it first`,
    { connectionId: existing.id },
  );
}

/** Validates a new connection and builds its row, the credentials sealed under `sealer`. */
export function newConnectionRow(input: NewConnection, createdAt: string, sealer: Sealer): ConnectionRow {
  checkConnectionName(input.name);
  const id = `con_${randomBase62(12)}`;
  return {
    id,
    userId: input.userId,
    name: input.name,
    broker: input.broker,
    environment: input.environment,
    restUrl: input.restUrl,
    wsUrl: input.wsUrl,
    createdAt,
    disabled: input.disabled ?? false,
    sealedCredentials: sealer.seal(JSON.stringify(input.credentials), connectionAad(id)),
  };
}

/** The connection store over a shared context. */
export function createConnectionStore(ctx: StoreContext): ConnectionStore {
  const { connections, owners } = ctx.dbs;
  const row = rowReader<ConnectionRow>(connections);

  /** Sets `change` on a stored connection durably; false when unknown. */
  function changeRow(id: string, change: Partial<Pick<ConnectionRow, 'disabled' | 'servedAccountIds'>>): Promise<boolean> {
    return ctx.durable(
      connections.transaction(() => {
        const r = row(id);
        if (!r) return false;
        connections.put(id, { ...r, ...change });
        return true;
      }),
    );
  }

  return {
    async create(input) {
      const rec = newConnectionRow(input, ctx.nowIso(), ctx.sealer);
      const { id } = rec;
      const ok = await ctx.durable(
        connections.ifNoExists(id, () => {
          connections.put(id, rec);
          owners.put(['connection', input.userId, id], true);
        }),
      );
      if (!ok) throw new AppError('CONFLICT', 'connection id collision, retry');
      return connectionView(rec);
    },

    ...cachedOwnedReads(ctx, 'connection', row, connectionView),

    all() {
      return ctx.cache.get('connection:all', () => {
        const out: ConnectionRecord[] = [];
        for (const { value } of connections.getRange()) out.push(connectionView(value as ConnectionRow));
        return byCreation(out);
      });
    },

    credentials(id) {
      const r = row(id);
      if (!r) throw new AppError('NOT_FOUND', 'connection not found');
      return JSON.parse(ctx.sealer.open(r.sealedCredentials, connectionAad(id))) as BrokerCredentials;
    },

    setDisabled: (id, disabled) => changeRow(id, { disabled }),
    setServedAccounts: (id, accountIds) => changeRow(id, { servedAccountIds: accountIds }),

    async update(userId, id, patch) {
      if (patch.name !== undefined) checkConnectionName(patch.name);
      const updated = await ctx.durable(
        connections.transaction((): ConnectionRow | undefined => {
          const r = row(id);
          if (!r || r.userId !== userId) return undefined;
          const next = patchedConnection(r, patch, (c) => ctx.sealer.seal(JSON.stringify(c), connectionAad(id)));
          connections.put(id, next);
          return next;
        }),
      );
      return updated && connectionView(updated);
    },

    async remove(userId, id) {
      return ctx.durable(
        connections.transaction(() => {
          const r = row(id);
          if (!r || r.userId !== userId) return false;
          connections.remove(id);
          owners.remove(['connection', userId, id]);
          return true;
        }),
      );
    },
  };
}
