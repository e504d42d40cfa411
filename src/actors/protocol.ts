/**
 * The front ↔ connection-actor boundary. Everything that crosses it is plain data
 * (structured-clone safe): requests are a discriminated union, results are
 * `{ ok: true, value } | { ok: false, error }`, errors are ErrorData rebuilt by `code`.
 *
 * Shared by src/http (caller), src/actors (supervisor, ActorClient) and workers/
 * (the actor host). Changing a shape here changes the contract for all three.
 */
import type { ErrorData } from '../domain/problems.js';

// ---------------------------------------------------------------------------
// Records the service exposes (DESIGN §4). IDs are strings, times ISO-8601 UTC.

export type ConnectionStatus = 'CONNECTING' | 'CONNECTED' | 'RECONNECTING' | 'AUTH_EXPIRED' | 'FAILED' | 'DISABLED';

/** The named occurrences of the spec's Events section, plus `disabled` for a stopped connection. */
export type StatusReason = 'connect' | 'disconnect' | 'reconnect' | 'auth-expired' | 'fatal-error' | 'disabled';

export type BrokerKind = 'paper' | 'tradovate';
export type Environment = 'paper' | 'demo' | 'live';

export interface AccountRecord {
  id: string;
  name: string;
  connectionId: string;
  broker: BrokerKind;
  environment: Environment;
  /** false once the broker stops reporting the account (evaluation breached, reset, replaced). */
  active: boolean;
}

export interface PositionRecord {
  accountId: string;
  symbol: string;
  /** Signed: positive long, negative short. */
  netQty: number;
  avgPrice: number;
  openedAt: string | null;
}

export type Side = 'buy' | 'sell';
export type OrderType = 'market' | 'limit' | 'stop' | 'stop_limit';
export type TimeInForce = 'day' | 'gtc' | 'ioc' | 'fok';
export type OrderStatus = 'pending' | 'working' | 'partially_filled' | 'filled' | 'cancelled' | 'rejected' | 'expired';
export type OrderRole = 'single' | 'entry' | 'take_profit' | 'stop_loss';

export interface OrderRecord {
  /** The broker's own order id as a string. */
  orderId: string;
  accountId: string;
  /** Resolved contract, e.g. "ESZ6". */
  symbol: string;
  /** What the client sent, e.g. "ES1!"; null for orders not placed through tradegate. */
  requestedSymbol: string | null;
  side: Side;
  type: OrderType;
  qty: number;
  filledQty: number;
  avgFillPrice: number | null;
  price: number | null;
  stopPrice: number | null;
  timeInForce: TimeInForce;
  status: OrderStatus;
  role: OrderRole;
  bracketId: string | null;
  legs: { takeProfit: string | null; stopLoss: string | null };
  clientOrderId: string | null;
  /** Broker-side reject reason, when status is rejected. */
  rejectReason?: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface ClosedTrade {
  id: string;
  accountId: string;
  symbol: string;
  direction: 'long' | 'short';
  qty: number;
  entryPrice: number;
  exitPrice: number;
  openedAt: string;
  closedAt: string;
  pnlPoints: number;
  /** In account currency: pnlPoints × point value × qty. */
  pnl: number;
  entryOrderIds: string[];
  exitOrderIds: string[];
}

// ---------------------------------------------------------------------------
// Connection specs (front → worker when an actor is added).

export interface BrokerCredentials {
  name: string;
  password: string;
  appId?: string;
  appVersion?: string;
  cid?: string | number;
  sec?: string;
  deviceId?: string;
}

export interface ConnectionSpec {
  connectionId: string;
  userId: string;
  broker: BrokerKind;
  environment: Environment;
  /** e.g. http://127.0.0.1:8091/v1 or https://demo.tradovateapi.com/v1 */
  restUrl: string;
  /** e.g. ws://127.0.0.1:8091/v1/websocket */
  wsUrl: string;
  credentials: BrokerCredentials;
  /** Broker request budget for this connection (DESIGN §3 "Broker budget"). */
  budget: { perMinute: number; perHour: number };
  /** Per-request broker deadline. */
  requestTimeoutMs?: number;
}

// ---------------------------------------------------------------------------
// Requests (front → actor). Symbols are already resolved by the front (domain/symbols).

/** Bracket leg: an absolute price, or an unsigned offset in points from the entry's fill. */
export type BracketLeg = { price: number } | { offsetPoints: number };

export interface PlaceOrderRequest {
  type: 'place-order';
  accountId: string;
  /** Resolved contract name, e.g. "ESZ6". */
  symbol: string;
  requestedSymbol: string;
  side: Side;
  qty: number;
  orderType: OrderType;
  price?: number | null;
  stopPrice?: number | null;
  timeInForce: TimeInForce;
  takeProfit?: BracketLeg | null;
  stopLoss?: BracketLeg | null;
  clientOrderId?: string | null;
  /**
   * Deterministic broker clOrdId (derived from user + Idempotency-Key when one is given).
   * Before placing, the actor looks it up in its synced mirror; if the broker already has
   * an order with it, that order is the answer (no second order).
   */
  clOrdId: string;
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
  clOrdIdPrefix?: string;
}

export interface ListRequest {
  type: 'working-orders' | 'positions' | 'trade-history';
  accountId: string;
}

export interface AccountsRequest {
  type: 'accounts';
}

export interface FindOrderRequest {
  type: 'find-by-clordid';
  accountId: string;
  clOrdId: string;
}

export type ActorRequest =
  | PlaceOrderRequest
  | CancelOrderRequest
  | FlattenRequest
  | ListRequest
  | AccountsRequest
  | FindOrderRequest;

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
}

export interface CancelOrderResult {
  order: OrderRecord;
  /** Leg ids removed with an unfilled entry. */
  removedLegIds: string[];
  /** When a leg of a filled bracket was cancelled: the survivor re-placed under a new id. */
  replaced: { replacedOrderId: string; newOrderId: string } | null;
  /** Entry partly filled: the unfilled remainder was cancelled, the filled part stays. */
  remainderCancelled: boolean;
  brokerMs: number;
}

export interface FlattenResult {
  cancelledOrderIds: string[];
  positions: { symbol: string; closedQty: number; status: 'liquidated' | 'failed'; detail?: string }[];
  brokerMs: number;
}

export interface ResultMap {
  'place-order': PlaceOrderResult;
  'cancel-order': CancelOrderResult;
  flatten: FlattenResult;
  'working-orders': OrderRecord[];
  positions: PositionRecord[];
  'trade-history': ClosedTrade[];
  accounts: AccountRecord[];
  'find-by-clordid': OrderRecord | null;
}

export type ResultFor<R extends ActorRequest> = ResultMap[R['type']];

export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorData };

// ---------------------------------------------------------------------------
// Events (actor → front, one-way on a MessagePort).

export interface StatusEvent {
  type: 'status';
  connectionId: string;
  status: ConnectionStatus;
  reason: StatusReason;
  /** ms since the epoch */
  ts: number;
  detail?: string;
}

export interface AccountsEvent {
  type: 'accounts';
  connectionId: string;
  accounts: AccountRecord[];
}

/** Bracket integrity alarm: an entry filled but its protection could not be placed. */
export interface BracketAlertEvent {
  type: 'bracket-alert';
  connectionId: string;
  accountId: string;
  orderId: string;
  ts: number;
  detail: string;
}

export type ActorEvent = StatusEvent | AccountsEvent | BracketAlertEvent;

// ---------------------------------------------------------------------------
// What the HTTP front sees of the actor system (implemented by src/actors/supervisor.ts).

export interface ActorGateway {
  /** Starts (or restarts) the actor for a connection. */
  addConnection(spec: ConnectionSpec): Promise<void>;
  /** Stops the actor; its status becomes DISABLED. */
  removeConnection(connectionId: string): Promise<void>;
  /**
   * Sends a request to the connection's actor. Resolves with the value or throws an
   * AppError (BROKER_UNAVAILABLE when the actor is down or the worker died mid-call,
   * BROKER_TIMEOUT past the deadline, or the actor's own coded error).
   */
  request<R extends ActorRequest>(connectionId: string, req: R, opts?: { timeoutMs?: number }): Promise<ResultFor<R>>;
  /** Last known status of a connection (CONNECTING until the actor reports). */
  status(connectionId: string): StatusEvent | undefined;
  /** Last known accounts of a connection (inactive ones included). */
  accounts(connectionId: string): AccountRecord[];
  /** Subscribes to every actor event; returns the unsubscribe function. */
  onEvent(listener: (event: ActorEvent) => void): () => void;
  /** Stops every actor and worker. */
  close(): Promise<void>;
}
