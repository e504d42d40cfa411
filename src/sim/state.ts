/**
 * The simulator's data: Tradovate entities kept exactly as `<entity>/item` would return them,
 * one increasing id sequence, and the buffer of `props` events produced by each mutation.
 * Pure: no I/O, no timers; time comes from an injected clock.
 */
import { IdMap } from '../domain/id-map.js';
import { ContractRegistry } from './contracts.js';
import { PriceBook } from './prices.js';
import { TradingCalendar, type SessionMode, type SessionState, type TradeDate } from './sessions.js';

/** A Tradovate entity as sent on the wire. */
export type Entity = { id: number } & Record<string, unknown>;

/** Entity types the simulator produces (names as in `props` events and sync `entityTypes`). */
export const ENTITY_TYPES = [
  'account', 'cashBalance', 'position', 'order', 'orderVersion', 'command', 'commandReport',
  'executionReport', 'fill', 'fillPair', 'orderStrategy', 'orderStrategyLink',
] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

/** Sync snapshot collection name per entity type. */
export const COLLECTION_OF: Record<EntityType, string> = {
  account: 'accounts', cashBalance: 'cashBalances', position: 'positions', order: 'orders',
  orderVersion: 'orderVersions', command: 'commands', commandReport: 'commandReports',
  executionReport: 'executionReports', fill: 'fills', fillPair: 'fillPairs',
  orderStrategy: 'orderStrategies', orderStrategyLink: 'orderStrategyLinks',
};

/** Field naming the parent entity, for `<entity>/deps?masterid=`. */
export const MASTER_FIELD: Record<EntityType, string> = {
  account: 'userId', cashBalance: 'accountId', position: 'accountId', order: 'accountId',
  orderVersion: 'orderId', command: 'orderId', commandReport: 'commandId', executionReport: 'commandId',
  fill: 'orderId', fillPair: 'positionId', orderStrategy: 'accountId', orderStrategyLink: 'orderStrategyId',
};

/** One `props` event, tagged with the account it concerns (for subscription filters). */
export interface SimEvent {
  entityType: EntityType;
  eventType: 'Created' | 'Updated' | 'Deleted';
  /** The entity's JSON as it was when the event happened. */
  json: string;
  accountId: number;
  /** Whether the account was visible when the event happened (a breach liquidates, then revokes, in one flush). */
  visible: boolean;
}

/** A user of the paper broker. */
export interface SimUser {
  id: number;
  name: string;
  password: string;
  accountIds: number[];
}

/** Prop-firm evaluation rules of an account (amounts in account currency). */
export interface AccountRules {
  /** Liquidate and revoke once the trade date's P&L (realized + open) reaches −this. */
  dailyLossLimit?: number;
  /** Liquidate and revoke once equity falls this far below its highest value. */
  trailingDrawdown?: number;
}

/** Account bookkeeping beyond the wire entity. */
export interface AccountState {
  entity: Entity;
  userId: number;
  active: boolean;
  maxOrderQty?: number;
  maxPosition?: number;
  cashBalanceId: number;
  /** Balance the account was created with (a reset starts from it again). */
  initialBalance: number;
  rules: AccountRules;
  /** Equity when the current trade date began. */
  dayStartEquity: number;
  /** Highest equity seen while a trailing drawdown is set. */
  highWater: number;
  /** Set when a rule liquidated and revoked the account. */
  breach?: { rule: 'DailyLossLimit' | 'TrailingDrawdown'; at: string; equity: number; limit: number };
}

interface Stored {
  e: Entity;
  a: number;
}

/**
 * Where the id sequence starts and how ids are reserved past it (a file, outside this pure
 * module: SimOptions.idFile). Reserved in blocks of ID_BLOCK, so a run starts past every id an
 * earlier run may have given.
 */
export interface IdReservation {
  floor: number;
  reserve(upTo: number): void;
}

/** Ids reserved at a time. */
const ID_BLOCK = 100_000;

/** Entities by type, ids, clock and the event buffer. */
export class SimState {
  readonly contracts = new ContractRegistry();
  readonly prices: PriceBook;
  readonly users = new Map<number, SimUser>();
  readonly usersByName = new Map<string, SimUser>();
  readonly accounts = new Map<number, AccountState>();
  /** Entities by type and id (IdMaps: tables that grow in step must not rehash all at once, id-map.ts). */
  private readonly tables = new Map<EntityType, IdMap<Stored>>(ENTITY_TYPES.map((t) => [t, new IdMap()]));
  private events: SimEvent[] = [];
  private nextId = 10_000_001;
  /** Ids below this are reserved (Infinity without a reservation). */
  private reservedTo = Number.POSITIVE_INFINITY;
  private timeMs = Number.NaN;
  private isoNow = '';
  readonly calendar: TradingCalendar;

  constructor(
    readonly clock: () => number,
    random: () => number,
    sessions: SessionMode = 'none',
    private readonly ids?: IdReservation,
  ) {
    this.prices = new PriceBook(this.contracts, random);
    this.calendar = new TradingCalendar(sessions);
    if (ids) {
      this.nextId = Math.max(this.nextId, ids.floor);
      this.reservedTo = this.nextId;
    }
  }

  /** Market session now (open or closed, trade date, last close). */
  session(): SessionState {
    return this.calendar.at(this.clock());
  }

  /** Next id of the single increasing sequence shared by all entity types. */
  id(): number {
    if (this.nextId >= this.reservedTo) {
      this.reservedTo = this.nextId + ID_BLOCK;
      this.ids!.reserve(this.reservedTo);
    }
    return this.nextId++;
  }

  /**
   * `wanted` when no user or entity has it (the sequence then continues past it), else the next
   * id: how a login re-created at a restart keeps its accounts' ids.
   */
  idOrNext(wanted: number | undefined): number {
    if (wanted === undefined || !Number.isSafeInteger(wanted) || wanted <= 0 || this.users.has(wanted)) return this.id();
    for (const table of this.tables.values()) if (table.has(wanted)) return this.id();
    this.nextId = Math.max(this.nextId, wanted + 1);
    return wanted;
  }

  /** ISO timestamp of now. */
  timestamp(): string {
    this.refreshTime();
    return this.isoNow;
  }

  /** Tradovate `tradeDate` of now (the CME trade date, rolling at 17:00 CT); shared frozen object. */
  tradeDate(): TradeDate {
    return this.session().tradeDate;
  }

  // One order writes a dozen timestamps; formatting a Date each time dominated the profile.
  private refreshTime(): void {
    const now = this.clock();
    if (now === this.timeMs) return;
    this.timeMs = now;
    this.isoNow = new Date(now).toISOString();
  }

  /** Stores a new entity and records a `Created` event. */
  create(type: EntityType, entity: Entity, accountId: number): Entity {
    this.tables.get(type)!.set(entity.id, { e: entity, a: accountId });
    this.emit(type, 'Created', entity, accountId);
    return entity;
  }

  /** Applies `changes` to a stored entity and records an `Updated` event. */
  update(type: EntityType, entity: Entity, changes: Record<string, unknown>): Entity {
    Object.assign(entity, changes);
    const stored = this.tables.get(type)!.get(entity.id);
    this.emit(type, 'Updated', entity, stored?.a ?? 0);
    return entity;
  }

  /** Records an event without storing anything (account Deleted/Created on revoke/restore). */
  emit(type: EntityType, eventType: SimEvent['eventType'], entity: Entity, accountId: number): void {
    // Serialised now: the same object may change again before the events are sent (PendingNew →
    // Working in one call), and every event is sent (the actor subscribes to every type), so its
    // text is needed anyway; a copy to serialise later cost a second pass over the entity.
    const visible = this.accounts.get(accountId)?.active ?? false;
    this.events.push({ entityType: type, eventType, json: JSON.stringify(entity), accountId, visible });
  }

  /** Returns and clears the events recorded since the last call. */
  takeEvents(): SimEvent[] {
    const out = this.events;
    this.events = [];
    return out;
  }

  /** Forgets an entity without an event (archival of old final orders). */
  remove(type: EntityType, id: number): void {
    this.tables.get(type)!.delete(id);
  }

  /** One entity by type and id. */
  get(type: EntityType, id: number): Entity | undefined {
    return this.tables.get(type)!.get(id)?.e;
  }

  /** The account an entity belongs to. */
  accountOf(type: EntityType, id: number): number | undefined {
    return this.tables.get(type)!.get(id)?.a;
  }

  /** Entities of `type` belonging to one of `accountIds`. */
  list(type: EntityType, accountIds: ReadonlySet<number>): Entity[] {
    const out: Entity[] = [];
    for (const s of this.tables.get(type)!.values()) if (accountIds.has(s.a)) out.push(s.e);
    return out;
  }

  /**
   * Revokes (or restores) an account: it leaves (or re-enters) the user's view and subscribers
   * get an `account` Deleted (or Created) event. Returns false when nothing changed.
   */
  setActive(accountId: number, active: boolean): boolean {
    const account = this.accounts.get(accountId);
    if (!account || account.active === active) return false;
    account.active = active;
    this.emit('account', active ? 'Created' : 'Deleted', account.entity, accountId);
    return true;
  }

  /** Ids of the accounts a user can see now (revoked accounts excluded). */
  visibleAccounts(userId: number): Set<number> {
    const user = this.users.get(userId);
    const out = new Set<number>();
    for (const id of user?.accountIds ?? []) if (this.accounts.get(id)?.active) out.add(id);
    return out;
  }

  /** Creates a user with no accounts. */
  addUser(name: string, password: string): SimUser {
    const user: SimUser = { id: this.id(), name, password, accountIds: [] };
    this.users.set(user.id, user);
    this.usersByName.set(name, user);
    return user;
  }

  /** Creates an account (plus its cash balance) for a user; under `wantedId` when that id is free. */
  addAccount(userId: number, name: string, balance: number, wantedId?: number): AccountState {
    const user = this.users.get(userId);
    if (!user) throw new Error(`unknown user ${userId}`);
    const id = this.idOrNext(wantedId);
    const entity: Entity = {
      id, name, userId, accountType: 'Customer', active: true, clearingHouseId: 2, riskCategoryId: 2,
      autoLiqProfileId: 2, marginAccountType: 'Speculator', legalStatus: 'Individual', archived: false,
      timestamp: this.timestamp(), readonly: false, restricted: false, closed: false,
    };
    const cash: Entity = {
      id: this.id(), accountId: id, timestamp: this.timestamp(), tradeDate: this.tradeDate(), currencyId: 1,
      amount: balance, realizedPnL: 0, weekRealizedPnL: 0,
    };
    const state: AccountState = {
      entity, userId, active: true, cashBalanceId: cash.id, initialBalance: balance, rules: {}, dayStartEquity: balance, highWater: balance,
    };
    this.accounts.set(id, state);
    user.accountIds.push(id);
    this.create('account', entity, id);
    this.create('cashBalance', cash, id);
    return state;
  }
}
