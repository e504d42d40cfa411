/**
 * The front ↔ connection-actor boundary, messages only. Everything that crosses it is plain
 * data (structured-clone safe): requests are a discriminated union, results are
 * `{ ok: true, value } | { ok: false, error }`, errors are ErrorData rebuilt by `code`. The
 * records inside the messages are domain vocabulary (domain/orders.ts, domain/connections.ts).
 *
 * Shared by src/http (caller), src/actors (supervisor, ActorClient) and
 * workers/connection-actor (the actor host). Changing a shape here changes the contract for all three.
 */
import type { MessagePort } from 'node:worker_threads';
import type { ConnectionSpec, StatusEvent } from '../domain/connections.js';
import type { AccountRecord, ClosedTrade, NewOrder, OrderRecord, PositionRecord } from '../domain/orders.js';
import type { ErrorData, ProblemCode } from '../domain/problems.js';
import type { GuardConfig, GuardName, GuardNarrowing, GuardRefusal, LockState, OwedLeg } from '../domain/guards.js';
import type { ConnectionTuning } from '../tuning.js';
import type { ThreadUsage } from '../thread-usage.js';
import type { Turn, TurnMode } from './alert-turns.js';

// ---------------------------------------------------------------------------
// Requests (front → actor). Symbols are already resolved by the front (domain/order-plan).

/** Place one order (single or bracket); the fields are the planned NewOrder. */
export interface PlaceOrderRequest extends NewOrder {
  type: 'place-order';
  /** Where the order came from (webhook entries may be flat-only); api when absent. */
  origin?: 'api' | 'webhook';
  /** The calling token's or key's narrowing of the account's guards. */
  narrowing?: GuardNarrowing[];
  /** A partial exit: refused with SYMBOL_MISMATCH unless the account's position in the contract is on the other side and at least `qty`. */
  reduceOnly?: boolean;
  /**
   * Set by the worker as the request arrives (performance.now() there): when its caller stops
   * waiting (RequestEnvelope.waitsMs). An API order not sent by then is not sent at all.
   */
  callerGoneAt?: number;
  /**
   * A partial exit sized against the strategy's position after it (marketPositionSize): what the
   * position keeps. Should a leg fill while the legs make room for it, so that the exit would take
   * the position below this, nothing is sent (SYMBOL_MISMATCH).
   */
  keepQty?: number;
}

export interface CancelOrderRequest {
  type: 'cancel-order';
  accountId: string;
  orderId: string;
}

export interface FlattenRequest {
  type: 'flatten';
  accountId: string;
  /** Resolved contract; when given and the account holds other contracts only → SYMBOL_MISMATCH. */
  symbol?: string | null;
  /**
   * Only `symbol`'s orders and position (a strategy's exit): the account's other contracts are
   * left alone, and a symbol the account does not hold is nothing to do, not SYMBOL_MISMATCH.
   */
  symbolOnly?: boolean;
  /**
   * With symbolOnly: every month of `symbol`'s product (the exit named the product, `ES1!`, not a
   * month): a position opened before the roll is still that strategy's position.
   */
  productOnly?: boolean;
  clOrdIdPrefix?: string;
}

export interface ListRequest {
  type: 'working-orders' | 'positions' | 'trade-history';
  accountId: string;
  /**
   * Positions: read once the account's orders on their way have reached the broker (up to its
   * settle time each), as a reversal must (TV probe: the entry sent 100 ms before it was missed).
   */
  settled?: boolean;
  /**
   * Positions: confirmed with the broker's own list first (`position/list`; a difference reads the
   * whole state again), 503 when the broker does not answer. For a conclusion that a position is
   * closed: events lost in a short silence leave the mirror flat where the broker is not.
   */
  verified?: boolean;
}

export interface AccountsRequest {
  type: 'accounts';
}

/**
 * One page of an account's working orders, serialized by the actor (JSON text of the array):
 * the `limit` oldest after order id `after` (0: from the first). Keyed by the last order a client
 * saw, not by an offset: orders ended between two pages (cancelled while paging) do not shift the
 * next page past ones it never showed.
 */
export interface WorkingOrdersPageRequest {
  type: 'working-orders-page';
  accountId: string;
  after: number;
  limit: number;
}

export interface FindOrderRequest {
  type: 'find-by-clordid';
  accountId: string;
  clOrdId: string;
}

/** Replaces an account's guards (the lock stays as it is). */
export interface SetGuardsRequest {
  type: 'set-guards';
  accountId: string;
  config: GuardConfig;
}

/** Kill switch: lock the account (entries refused until unlocked), flattening it unless told not to. */
export interface LockRequest {
  type: 'lock';
  accountId: string;
  flatten: boolean;
  detail?: string;
  /** When the lock was thrown, for a lock stored first and relayed to the actor later (ms since the epoch; default now). */
  since?: number;
}

/** Lifts a kill-switch lock (a daily loss or profit target lock lasts until the next trading day). */
export interface UnlockRequest {
  type: 'unlock';
  accountId: string;
}

/** The supervisor stored what an OwedLegsChanged notice `seq` said (and every earlier one): the actor may go on. */
export interface OwedLegsStoredRequest {
  type: 'owed-legs-stored';
  seq: number;
}

/** A dry run's question: would the account's guards (and the credential's narrowing) admit this order now? */
export type CheckOrderRequest = Omit<PlaceOrderRequest, 'type' | 'clOrdId'> & { type: 'check-order' };

/** The guards in force on an account, its lock, its P&L of the day and exposure. */
export interface GuardStatusRequest {
  type: 'guard-status';
  accountId: string;
}

export type ActorRequest =
  | PlaceOrderRequest
  | CancelOrderRequest
  | FlattenRequest
  | ListRequest
  | AccountsRequest
  | WorkingOrdersPageRequest
  | FindOrderRequest
  | SetGuardsRequest
  | LockRequest
  | UnlockRequest
  | GuardStatusRequest
  | CheckOrderRequest
  | OwedLegsStoredRequest;

/**
 * Requests whose effect at the broker may outlive the process that sent them: once handed over,
 * their outcome is unknown (504) if the answer never comes; any other request can be retried (503)
 * (a lock's flatten is owed and run again by the next owner: the lock stays retryable).
 */
export const EFFECTFUL_REQUESTS: ReadonlySet<ActorRequest['type']> = new Set<ActorRequest['type']>(['place-order', 'flatten', 'cancel-order']);

// ---------------------------------------------------------------------------
// Results.

export interface PlaceOrderResult {
  order: OrderRecord;
  /** Present for brackets; legs of a relative bracket may be null until the entry fills. */
  legs?: { takeProfit: OrderRecord | null; stopLoss: OrderRecord | null };
  /** true when the clOrdId was already at the broker and no new order was sent. */
  reconciled: boolean;
  /** Broker round trip in ms for Server-Timing. */
  brokerMs: number;
  /** Wait after the answer until the broker's events settled the order (ms, Server-Timing `settle`). */
  settleMs?: number;
}

export interface CancelOrderResult {
  order: OrderRecord;
  /** Leg ids removed with an unfilled entry. */
  removedLegIds: string[];
  /** When a leg of a filled bracket was cancelled: the survivor re-placed under a new id. */
  replaced: { replacedOrderId: string; newOrderId: string } | null;
  /** Entry partly filled: the unfilled remainder was cancelled, the filled part stays. */
  remainderCancelled: boolean;
  /** What the trader must act on: the filled part of a tick-offset bracket entry has no legs and never will. */
  warning?: string;
  brokerMs: number;
}

export interface FlattenResult {
  cancelledOrderIds: string[];
  /** A failed one says why (`code`, as the error the broker call ended with; `retryAfterSeconds` with it). */
  positions: { symbol: string; closedQty: number; status: 'liquidated' | 'failed'; detail?: string; code?: ProblemCode; retryAfterSeconds?: number }[];
  /** Orders sent before the flatten the broker has not settled yet (on their way, or timed out): they may still fill. */
  outstandingOrders?: number;
  brokerMs: number;
}

/** What the actor knows of an account's guards right now. */
export interface GuardStatus {
  accountId: string;
  config: GuardConfig;
  lock: LockState | null;
  /** The trading day counted (ms) and its P&L in account currency: realized − fees + open. */
  day: { start: number; end: number; realized: number; fees: number; open: number; pnl: number };
  /** Inside the account's trading windows now (null without windows). */
  inWindow: boolean | null;
  /** Per contract: net position, contracts working on each side (in flight included) and exposure. */
  positions: { symbol: string; net: number; buying: number; selling: number; exposure: number }[];
}

/** A kill-switch lock: the status after it, and the flatten (null when not asked; `error` when it failed and is retried). */
export interface LockResult {
  status: GuardStatus;
  flatten: FlattenResult | { error: string } | null;
}

export interface ResultMap {
  'place-order': PlaceOrderResult;
  'cancel-order': CancelOrderResult;
  flatten: FlattenResult;
  'working-orders': OrderRecord[];
  'working-orders-page': WorkingOrdersPage;
  positions: PositionRecord[];
  'trade-history': ClosedTrade[];
  accounts: AccountRecord[];
  'find-by-clordid': OrderRecord | null;
  'set-guards': GuardStatus;
  lock: LockResult;
  unlock: GuardStatus;
  'guard-status': GuardStatus;
  /** The refusal the order would meet now, or null when the guards would admit it. */
  'check-order': { refusal: GuardRefusal | null };
  'owed-legs-stored': null;
}

/**
 * One page of working orders: `json`, the page's records as a JSON array text; `total`, working
 * orders on the account; `version`, the actor's page version it was served at (the supervisor
 * keeps the page until a WorkingOrdersChanged notice with a newer version).
 */
export interface WorkingOrdersPage {
  json: string;
  total: number;
  version?: number;
  /** Whether working orders follow this page, and the id of its last order (the next page's `after`). */
  more?: boolean;
  lastId?: number;
}

export type ResultFor<R extends ActorRequest> = ResultMap[R['type']];

export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorData };

// ---------------------------------------------------------------------------
// Events (actor → front, one-way on a MessagePort).

export interface AccountsEvent {
  type: 'accounts';
  connectionId: string;
  accounts: AccountRecord[];
}

/** Bracket integrity: an entry filled but its protection could not be placed, or legs were fitted to a position another order changed. */
export interface BracketAlertEvent {
  type: 'bracket-alert';
  connectionId: string;
  accountId: string;
  orderId: string;
  ts: number;
  detail: string;
}

/** A guard acted: refused an entry, locked or unlocked an account, flattened it (or failed to). */
export interface GuardEvent {
  type: 'guard';
  connectionId: string;
  accountId: string;
  guard: GuardName;
  action: 'refused' | 'locked' | 'unlocked' | 'flattened' | 'flatten-failed';
  ts: number;
  detail: string;
  /** On `locked` / `unlocked`: the account's lock from now on (the front persists it). */
  lock?: LockState | null;
}

/** Everything an actor reports; status events are the domain's StatusEvent. */
export type ActorEvent = StatusEvent | AccountsEvent | BracketAlertEvent | GuardEvent;

/**
 * Worker host → supervisor only, never published as an ActorEvent: the working orders of the
 * connection changed after a page was served (pages served before `version` are stale). Sent
 * at most once per page served, so an order flow nobody reads costs no messages.
 */
export interface WorkingOrdersChanged {
  type: 'working-orders-changed';
  connectionId: string;
  version: number;
}

/**
 * Actor → supervisor only: the bracket legs the actor owes an account changed (domain/guards.ts
 * OwedLeg). The supervisor stores them with the account's guards, and answers with an
 * OwedLegsStoredRequest of the same `seq` once they are durable.
 */
export interface OwedLegsChanged {
  type: 'owed-legs-changed';
  connectionId: string;
  accountId: string;
  legs: OwedLeg[];
  seq: number;
}

/** What an actor tells its supervisor alone. */
export type SupervisorNotice = WorkingOrdersChanged | OwedLegsChanged;

/** What travels on a worker host's event port. */
export type WorkerEventMessage = ActorEvent | SupervisorNotice;

// ---------------------------------------------------------------------------
// What the HTTP front sees of the actor system (implemented by src/actors/supervisor.ts).

/** Options of one actor call. */
export interface ActorCallOptions {
  timeoutMs?: number;
  /**
   * Asked once, just before the call leaves this thread (the turn's batch, after uWS has parsed
   * everything the client sent with it): true withdraws the call, which then rejects with
   * RequestNotSentError and never reaches the actor.
   */
  cancelled?: () => boolean;
}

export interface ActorGateway {
  /**
   * Starts (or restarts) the actor for a connection. `resume`: the connection ran before (on
   * another node, or a crashed worker) and reports RECONNECTING until it is back. `ifStopped`:
   * leave an actor that runs already alone (a new connection someone else started first).
   * `manual`: a reconnect by hand (or the same credentials saved again), which a cluster allows
   * once per RECONNECT_MIN_INTERVAL_S on the connection's owner (a node on its own throttles in
   * the route).
   */
  addConnection(spec: ConnectionSpec, opts?: { resume?: boolean; ifStopped?: boolean; manual?: boolean }): Promise<void>;
  /** Stops the actor; announces DISABLED once (nothing for an unknown connection). */
  removeConnection(connectionId: string): Promise<void>;
  /**
   * Sends a request to the connection's actor. Resolves with the value or throws an
   * AppError (BROKER_UNAVAILABLE when the actor is down or the worker died mid-call,
   * BROKER_TIMEOUT past the deadline, or the actor's own coded error).
   */
  request<R extends ActorRequest>(connectionId: string, req: R, opts?: ActorCallOptions): Promise<ResultFor<R>>;
  /**
   * A working-orders page the front still holds for this read (the connection CONNECTED, its
   * working orders unchanged since the actor served the page), without a call into the actor;
   * undefined when there is none (then `request` it).
   */
  keptPage?(connectionId: string, accountId: string, offset: number, limit: number): WorkingOrdersPage | undefined;
  /**
   * An alert's turn on an account (alert-turns.ts), taken where the connection's actor runs, so
   * that alerts reaching different nodes of a cluster take turns with each other. `key` names the
   * account. Absent: the caller keeps the turns itself (one process holds every actor).
   */
  takeTurn?(connectionId: string, key: string, mode: TurnMode): Promise<Turn>;
  /** Last known status of a connection (CONNECTING until the actor reports). */
  status(connectionId: string): StatusEvent | undefined;
  /** Last known accounts of a connection (inactive ones included). */
  accounts(connectionId: string): AccountRecord[];
  /**
   * Subscribes to every actor event; returns the unsubscribe function. In cluster mode events
   * come through the cluster's event stream and carry its sequence as `id` (the SSE id).
   */
  onEvent(listener: (event: ActorEvent, id?: number) => void): () => void;
  /** Stops every actor and worker. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// The supervisor ↔ worker-host boundary (one worker may host several actors). Two planes:
// - control (add, remove, stats): comlink on the worker's own port, rare;
// - requests (the hot path): plain arrays on `requestPort`, one message per event-loop turn
//   each way, matched by a numeric id. comlink added and removed a port listener per call
//   (every reply ran past every pending call) and built ids and wire wrappers per message.

/** What a worker host answers over comlink (the control plane). */
export interface WorkerHostApi {
  /** `resume`: re-added after a worker crash (status continues from RECONNECTING). */
  add(spec: ConnectionSpec, resume?: boolean): Promise<void>;
  /** Stops an actor; it reports nothing more (the supervisor announces DISABLED). */
  remove(connectionId: string): Promise<void>;
  stats(): Promise<WorkerStats>;
}

/** One request on `requestPort` (front → worker host); a message is an array of them. */
export interface RequestEnvelope {
  id: number;
  connectionId: string;
  req: ActorRequest;
  /** How long the caller waits for the answer (ms): an API order is not sent once that has run out. */
  waitsMs: number;
}

/** One answer on `requestPort` (worker host → front); a message is an array of them. */
export interface ReplyEnvelope {
  id: number;
  result: Result<unknown>;
}

/** Memory, actor count and thread usage of one worker host (the front exposes them on /metrics). */
export interface WorkerStats {
  actors: number;
  heapUsed: number;
  rss: number;
  usage: ThreadUsage;
}

/** `workerData` of a worker host. */
export interface WorkerHostData {
  /** Events (status, accounts, bracket alerts, guards) and WorkingOrdersChanged notices flow one way on this port. */
  eventPort: MessagePort;
  /** Requests in, answers out: RequestEnvelope[] / ReplyEnvelope[] per message. */
  requestPort: MessagePort;
  logLevel: string;
  tuning?: Partial<ConnectionTuning>;
}
