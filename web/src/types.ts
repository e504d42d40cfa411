/** Shapes of the API's JSON (see /api-docs); the page reads nothing else. */

export type Scope = 'read' | 'trade';
export type ConnectionStatus = 'CONNECTING' | 'CONNECTED' | 'RECONNECTING' | 'AUTH_EXPIRED' | 'FAILED' | 'DISABLED';

export interface Session {
  user: { id: string; name: string };
  csrfToken: string;
  expiresAt: string;
  idleTimeoutSeconds: number;
}

export interface ApiKey {
  id: string;
  name: string;
  scopes: Scope[];
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface Account {
  id: string;
  name: string;
  connectionId: string;
  broker: 'paper' | 'tradovate';
  environment: 'paper' | 'demo' | 'live';
  active: boolean;
}

export interface Connection {
  id: string;
  name: string | null;
  broker: 'paper' | 'tradovate';
  environment: 'paper' | 'demo' | 'live';
  status: ConnectionStatus;
  since: string | null;
  reason: string | null;
  /** What the status means in words (as the health stream sends it). */
  detail: string | null;
  /** FAILED for the broker's rate limit: when it logs in again by itself. */
  retryAt: string | null;
  accountIds: string[];
}

export interface WebhookToken {
  id: string;
  name: string;
  accountId: string;
  strategyId: string | null;
  /** null: not known yet (its connection has not reported its accounts since the service started). */
  accountActive: boolean | null;
  createdAt: string | null;
  lastUsedAt: string | null;
  /** When the URL was last rotated (null: never): the URL shown is read again when this moves. */
  rotatedAt?: string | null;
  url?: string;
  alertMessage?: string;
}

export interface Alert {
  /** Unique per listed entry (requestId is the sender's to choose and may repeat). */
  id: string;
  at: string;
  accountId: string | null;
  action: string | null;
  symbol: string | null;
  qty: string | null;
  alertId: string | null;
  status: number;
  code: string | null;
  detail: string | null;
  orderId: string | null;
  orderStatus: string | null;
  /** Less than qty when a reversal closed a position first or marketPositionSize capped it. */
  orderQty: number | null;
  flattened: { cancelledOrders: number; positions: number } | null;
  warnings: string[];
  requestId: string;
  /** A follow-up: the requestId of the alert answered 504 whose order this reports. */
  lateOutcomeOf: string | null;
}

export type BracketLeg = { price: number } | { ticks: number };
export type OrderType = 'market' | 'limit' | 'stop' | 'stop_limit';

export interface Strategy {
  id: string;
  name: string;
  description: string | null;
  symbol: string | null;
  qty: number | null;
  orderType: OrderType | null;
  takeProfit: BracketLeg | null;
  stopLoss: BracketLeg | null;
  createdAt: string | null;
  updatedAt: string | null;
}

export interface Position {
  accountId: string;
  symbol: string;
  netQty: number;
  avgPrice: number;
  openedAt: string | null;
}

export interface Order {
  orderId: string;
  accountId: string;
  symbol: string;
  requestedSymbol: string | null;
  side: 'buy' | 'sell';
  type: OrderType;
  qty: number;
  filledQty: number;
  avgFillPrice: number | null;
  price: number | null;
  stopPrice: number | null;
  status: string;
  role: 'single' | 'entry' | 'take_profit' | 'stop_loss';
  bracketId: string | null;
  legs: { takeProfit: string | null; stopLoss: string | null };
  createdAt: string;
}

export interface CancelResult {
  order: Order;
  removedLegIds: string[];
  replaced: { replacedOrderId: string; newOrderId: string } | null;
  remainderCancelled: boolean;
}

export interface ClosedTrade {
  id: string;
  symbol: string;
  direction: 'long' | 'short';
  qty: number;
  entryPrice: number;
  exitPrice: number;
  openedAt: string;
  closedAt: string;
  pnlPoints: number;
  pnl: number;
}

export interface FlattenResult {
  accountId: string;
  cancelledOrderIds: string[];
  positions: { symbol: string; closedQty: number; status: 'liquidated' | 'failed'; detail?: string }[];
  /** Orders the broker had not answered yet (on their way, or timed out): they may fill after the flatten. */
  outstandingOrders?: number;
}

export type Weekday = 'sun' | 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat';

/** A trading window: opens on `days` at `start` (local HH:MM), closes at `end` (before `start`: the next day). */
export interface TradingWindow {
  days: Weekday[];
  start: string;
  end: string;
}

/** An account's risk guards as stored (PUT replaces them all; null: no limit). */
export interface AccountGuards {
  maxOrderQty: number | null;
  maxPositionPerContract: number | null;
  maxPositionTotal: number | null;
  allowedProducts: string[] | null;
  direction: 'both' | 'long_only' | 'short_only';
  noPyramiding: boolean;
  flatOnly: boolean;
  webhookFlatOnly: boolean;
  tradingWindows: { timeZone: string; flattenAtEnd?: boolean; windows: TradingWindow[] } | null;
  dailyLossLimit: number | null;
  dailyProfitTarget: number | null;
}

/** GET /accounts/{id}/guards. */
export interface GuardsView {
  accountId: string;
  guards: AccountGuards;
  lock: { guard: string; since: string; until: string | null; detail: string | null; flattenPending: boolean } | null;
  live: { day: { start: string; end: string; realized: number; fees: number; open: number; pnl: number }; inWindow: boolean | null } | null;
}

/** POST /accounts/{id}/lock: the view, and what the flatten did (or why it could not run now). */
export interface LockResult extends GuardsView {
  flatten: FlattenResult | { error: string } | null;
}

/** A message of the health stream. */
export interface HealthMessage {
  type: 'snapshot' | 'status' | 'heartbeat' | 'bracket-alert';
  connectionId?: string;
  status?: ConnectionStatus;
  ts: number;
  reason?: string;
  detail?: string;
  accountId?: string;
  orderId?: string;
}
