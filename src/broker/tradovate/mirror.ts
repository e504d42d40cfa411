/**
 * The actor's mirror of the user's broker entities: replaced wholesale by a `user/syncrequest`
 * snapshot, then kept current by `props` events. Events are applied independently of their
 * order across entity types (a fill may arrive before its order); readers join on demand.
 */

import { IdMap, IdSet } from '../../domain/id-map.js';

/** A broker entity as sent by `<entityType>/item` or a props event. */
export type Entity = Record<string, unknown> & { id: number };

/**
 * Entity types the actor subscribes to (explicit: without them the broker sends nothing).
 * Only types the partner docs list for user/syncrequest: contracts are fetched by id instead.
 */
export const SYNC_ENTITY_TYPES = [
  'account',
  'position',
  'order',
  'orderVersion',
  'command',
  'commandReport',
  'executionReport',
  'fill',
  'fillPair',
  'orderStrategy',
  'orderStrategyLink',
  'cashBalance',
  'fillFee',
] as const;

const PLURALS: Record<string, string> = {
  accounts: 'account',
  positions: 'position',
  orders: 'order',
  orderVersions: 'orderVersion',
  commands: 'command',
  commandReports: 'commandReport',
  executionReports: 'executionReport',
  fills: 'fill',
  fillFees: 'fillFee',
  fillPairs: 'fillPair',
  orderStrategies: 'orderStrategy',
  orderStrategyLinks: 'orderStrategyLink',
  cashBalances: 'cashBalance',
  contracts: 'contract',
  products: 'product',
};

/** Entity types a snapshot keeps from before (Mirror.replace). */
const REFERENCE_TYPES = ['contract', 'product'] as const;

/** Secondary indexes: entity type → fields to look entities up by. */
const INDEXED: Record<string, string[]> = {
  orderVersion: ['orderId'],
  fill: ['orderId'],
  command: ['orderId', 'clOrdId'],
  commandReport: ['commandId'],
  executionReport: ['orderId'],
  orderStrategyLink: ['orderStrategyId', 'orderId'],
  orderStrategy: ['uuid'],
  order: ['accountId', 'parentId', 'ocoId', 'clOrdId'],
  position: ['accountId'],
};

/**
 * The ids filed under one index value. Most values name one entity (an order's versions, a
 * command's reports, a clOrdId): those hold the id itself, and only a value shared by several
 * entities gets a Set. A Set per value was ~20 small objects per bracket order in the actor's heap.
 * A value that names thousands (an account's orders) moves to an IdSet, which never rehashes
 * all of them at once (id-map.ts).
 */
type Ids = number | Set<number> | IdSet;

/** Ids of one value past which its Set becomes an IdSet. */
const LARGE_IDS = 2048;

/**
 * Field value → ids. Numeric values (order, command and account ids) are kept in an IdMap,
 * others (clOrdIds, uuids) in a Map.
 */
class IndexValues {
  private readonly numbers = new IdMap<Ids>();
  private readonly others = new Map<unknown, Ids>();

  get(value: unknown): Ids | undefined {
    return typeof value === 'number' ? this.numbers.get(value) : this.others.get(value);
  }

  set(value: unknown, ids: Ids): void {
    if (typeof value === 'number') this.numbers.set(value, ids);
    else this.others.set(value, ids);
  }

  delete(value: unknown): void {
    if (typeof value === 'number') this.numbers.delete(value);
    else this.others.delete(value);
  }
}

/** One secondary index of an entity type: field value → ids. */
interface FieldIndex {
  field: string;
  values: IndexValues;
}

const NO_INDEXES: readonly FieldIndex[] = [];

function addId(values: IndexValues, value: unknown, id: number): void {
  const ids = values.get(value);
  if (ids === undefined) values.set(value, id);
  else if (typeof ids === 'number') {
    if (ids !== id) values.set(value, new Set([ids, id]));
  } else if (ids instanceof Set && ids.size >= LARGE_IDS) values.set(value, new IdSet(ids).add(id));
  else ids.add(id);
}

function removeId(values: IndexValues, value: unknown, id: number): void {
  const ids = values.get(value);
  if (ids === undefined) return;
  if (typeof ids === 'number') {
    if (ids === id) values.delete(value);
  } else if (ids.delete(id) && ids.size === 0) values.delete(value);
}

/** One applied change (`Snapshot` after a full replace). */
export interface MirrorChange {
  entityType: string;
  eventType: 'Created' | 'Updated' | 'Deleted' | 'Snapshot';
  entity: Entity | null;
}

type Listener = (change: MirrorChange) => void;

/** Most events kept while a snapshot is awaited; a sync that long overdue fails and is retried anyway. */
const MAX_JOURNAL = 50_000;

/** Entity store with per-field indexes and change listeners. */
export class Mirror {
  /** Entity type → entities by id (IdMap: tables that grow in step never rehash together). */
  private readonly tables = new Map<string, IdMap<Entity>>();
  /** Entity type → its secondary indexes (INDEXED), made at the type's first entity. */
  private readonly indexes = new Map<string, FieldIndex[]>();
  private readonly listeners = new Set<Listener>();
  /** Waiters on one order's changes (waitForOrder): a change wakes its order's waiters only. */
  private readonly orderWaiters = new Map<number, Set<() => void>>();
  /** Events applied since `expectSnapshot`, replayed over the snapshot when it arrives. */
  private journal: Array<[string, string, unknown]> | undefined;

  private table(type: string): IdMap<Entity> {
    let t = this.tables.get(type);
    if (!t) this.tables.set(type, (t = new IdMap()));
    return t;
  }

  private indexesOf(type: string): readonly FieldIndex[] {
    let list = this.indexes.get(type);
    if (!list) {
      const fields = INDEXED[type];
      if (!fields) return NO_INDEXES;
      this.indexes.set(type, (list = fields.map((field) => ({ field, values: new IndexValues() }))));
    }
    return list;
  }

  private unindex(type: string, e: Entity): void {
    for (const { field, values } of this.indexesOf(type)) {
      const v = e[field];
      if (v !== undefined && v !== null) removeId(values, v, e.id);
    }
  }

  private reindex(type: string, e: Entity): void {
    for (const { field, values } of this.indexesOf(type)) {
      const v = e[field];
      if (v !== undefined && v !== null) addId(values, v, e.id);
    }
  }

  /**
   * Stores `raw` (a fresh object: parsed from a frame or an answer, never shared) or merges it
   * into the stored entity in place: some deployments send partial entities on Updated. No copy
   * per event; readers take what they need synchronously.
   */
  private upsert(type: string, raw: Entity): Entity {
    const t = this.table(type);
    const prev = t.get(raw.id);
    if (!prev) {
      t.set(raw.id, raw);
      this.reindex(type, raw);
      return raw;
    }
    // Only indexed fields that change move between index sets: most updates (status, fills)
    // touch none, and an account's set of order ids holds its whole history.
    for (const { field, values } of this.indexesOf(type)) {
      if (!(field in raw)) continue;
      const before = prev[field];
      const after = raw[field];
      if (before === after) continue;
      if (before !== undefined && before !== null) removeId(values, before, prev.id);
      if (after !== undefined && after !== null) addId(values, after, prev.id);
    }
    Object.assign(prev, raw);
    return prev;
  }

  /**
   * Marks that a sync request is on its way. A broker may push events before its snapshot
   * answer; those are kept and applied again over the snapshot, so a snapshot taken before
   * them cannot undo them (and one taken after them ends in the same state).
   */
  expectSnapshot(): void {
    this.journal = [];
  }

  /** Replaces everything with a sync snapshot (`d` of the syncrequest answer). */
  replace(snapshot: Record<string, unknown>): void {
    // Contracts and products are reference data that a snapshot does not carry (they are fetched
    // by id): an id names the same contract for good. Cleared with the rest, every position was
    // named by its contract id until the fetch after the snapshot came back, and an exit naming its
    // symbol, or a strategy alert sizing against the position, found none (re-probe: a TradingView
    // exit answered 200 and left the position open, an entry doubled it).
    const kept = REFERENCE_TYPES.map((type) => [type, [...(this.tables.get(type)?.values() ?? [])]] as const);
    this.tables.clear();
    this.indexes.clear();
    for (const [type, entities] of kept) for (const e of entities) this.upsert(type, e);
    for (const [key, value] of Object.entries(snapshot)) {
      const type = PLURALS[key];
      if (!type || !Array.isArray(value)) continue;
      for (const e of value) if (isEntity(e)) this.upsert(type, e);
    }
    const early = this.journal ?? [];
    this.journal = undefined;
    this.emit({ entityType: '*', eventType: 'Snapshot', entity: null });
    for (const [entityType, eventType, entity] of early) this.apply(entityType, eventType, entity);
  }

  /** Applies one props event; `entity` may be an object or an array of them. */
  apply(entityType: string, eventType: string, entity: unknown): void {
    if (this.journal && this.journal.length < MAX_JOURNAL) this.journal.push([entityType, eventType, entity]);
    const list = Array.isArray(entity) ? entity : [entity];
    for (const e of list) {
      if (!isEntity(e)) continue;
      if (eventType === 'Deleted') {
        const t = this.table(entityType);
        const prev = t.get(e.id);
        if (prev) {
          this.unindex(entityType, prev);
          t.delete(e.id);
        }
        this.emit({ entityType, eventType: 'Deleted', entity: prev ?? e });
      } else {
        const next = this.upsert(entityType, e);
        this.emit({ entityType, eventType: eventType === 'Created' ? 'Created' : 'Updated', entity: next });
      }
    }
  }

  /**
   * Removes an entity without telling listeners: for records the actor no longer needs (a
   * finished order's), which no reader waits on. Not a broker event.
   */
  drop(type: string, id: number): void {
    const t = this.tables.get(type);
    const prev = t?.get(id);
    if (!t || !prev) return;
    this.unindex(type, prev);
    t.delete(id);
  }

  /** Adds entities fetched outside the sync stream (e.g. `contract/item`). */
  put(entityType: string, entity: Entity): void {
    const next = this.upsert(entityType, entity);
    this.emit({ entityType, eventType: 'Updated', entity: next });
  }

  /** Contract ids referenced by orders, positions or fills that the mirror has no contract for. */
  missingContractIds(): number[] {
    const missing = new Set<number>();
    for (const type of ['order', 'position', 'fill']) {
      for (const e of this.all(type)) {
        const c = e.contractId;
        if (typeof c === 'number' && !this.get('contract', c)) missing.add(c);
      }
    }
    return [...missing];
  }

  get(type: string, id: number): Entity | undefined {
    return this.tables.get(type)?.get(id);
  }

  all(type: string): Entity[] {
    return [...(this.tables.get(type)?.values() ?? [])];
  }

  /** Entities of `type` whose indexed `field` equals `value`. */
  by(type: string, field: string, value: unknown): Entity[] {
    let ids: Ids | undefined;
    for (const ix of this.indexes.get(type) ?? NO_INDEXES) {
      if (ix.field === field) {
        ids = ix.values.get(value);
        break;
      }
    }
    if (ids === undefined) return [];
    const t = this.table(type);
    if (typeof ids === 'number') {
      const e = t.get(ids);
      return e ? [e] : [];
    }
    const out: Entity[] = [];
    for (const id of ids) {
      const e = t.get(id);
      if (e) out.push(e);
    }
    return out;
  }

  /** The newest orderVersion of an order (highest id: a modify's version id is its command id). */
  latestVersion(orderId: number): Entity | undefined {
    let best: Entity | undefined;
    let any: Entity | undefined;
    for (const v of this.by('orderVersion', 'orderId', orderId)) {
      if (!any || v.id > any.id) any = v;
      // A modify the broker rejected leaves the order as it was: its version (the modify's
      // command id) is not the order's (re-probe 4: a leg cut to no more than it had filled was
      // refused, and the service took the leg for cut; it then sold past the position).
      if ((!best || v.id > best.id) && !this.commandRejected(v.id)) best = v;
    }
    return best ?? any;
  }

  /** Whether the broker reported command `commandId` rejected. */
  private commandRejected(commandId: number): boolean {
    for (const rep of this.by('commandReport', 'commandId', commandId)) {
      if (rep.commandStatus === 'RiskRejected' || rep.commandStatus === 'ExecutionRejected') return true;
    }
    return false;
  }

  /** Subscribes to every applied change. */
  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(change: MirrorChange): void {
    // A listener may unsubscribe itself while called; Set iteration tolerates deletion.
    for (const l of this.listeners) l(change);
    if (this.orderWaiters.size === 0) return;
    if (change.eventType === 'Snapshot') {
      for (const set of [...this.orderWaiters.values()]) for (const wake of [...set]) wake();
      return;
    }
    const id = orderKey(change);
    const set = id === undefined ? undefined : this.orderWaiters.get(id);
    if (set) for (const wake of [...set]) wake();
  }

  /**
   * Like waitFor, for a probe that depends on one order only (its entity, versions, reports,
   * fills, commands): re-checked on that order's changes, not on every change of the mirror,
   * so a thousand orders settling at once cost a thousand checks, not a million.
   */
  waitForOrder<T>(orderId: number, probe: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
    const now = probe();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve) => {
      let set = this.orderWaiters.get(orderId);
      if (!set) this.orderWaiters.set(orderId, (set = new Set()));
      const waiters = set;
      const done = (v: T | undefined): void => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.orderWaiters.get(orderId) === waiters) this.orderWaiters.delete(orderId);
        resolve(v);
      };
      const wake = (): void => {
        const v = probe();
        if (v !== undefined) done(v);
      };
      waiters.add(wake);
      const timer = setTimeout(() => done(undefined), timeoutMs);
    });
  }

  /**
   * Resolves with the first non-undefined value of `probe`, checked now and after every change;
   * resolves `undefined` at the deadline (callers decide whether that is an error).
   */
  waitFor<T>(probe: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
    const now = probe();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve) => {
      const done = (v: T | undefined) => {
        clearTimeout(timer);
        off();
        resolve(v);
      };
      const off = this.onChange(() => {
        const v = probe();
        if (v !== undefined) done(v);
      });
      const timer = setTimeout(() => done(undefined), timeoutMs);
    });
  }
}

/** The order a change concerns (the New command's id is its order's id, so its reports count too). */
function orderKey(change: MirrorChange): number | undefined {
  const e = change.entity;
  if (!e) return undefined;
  if (change.entityType === 'order') return e.id;
  const ref = change.entityType === 'commandReport' ? e.commandId : e.orderId;
  return typeof ref === 'number' ? ref : undefined;
}

function isEntity(e: unknown): e is Entity {
  return !!e && typeof e === 'object' && typeof (e as { id?: unknown }).id === 'number';
}
