/**
 * The prose half of /api-docs: conventions, rate limits, idempotency, the error catalogue,
 * the SSE formats, symbol forms and the webhook payload. Kept as data (sections with
 * paragraphs, tables and code) so the JSON document and the HTML page show the same text.
 */
import type { Config } from '../config.js';
import { PROBLEMS } from '../domain/problems.js';
import { listProducts } from '../domain/symbols.js';
import { TRADINGVIEW_TEMPLATE } from './webhook-payload.js';

/** One section of the guide. */
export interface GuideSection {
  id: string;
  title: string;
  paragraphs: string[];
  table?: { head: string[]; rows: string[][]; anchorPrefix?: string };
  code?: string;
}

type GuideConfig = Pick<Config, 'rateLimitPerMin' | 'webhookRateLimitPerMin' | 'sseHeartbeatMs' | 'sseMaxStreamsPerKey' | 'bodyLimitBytes' | 'reconnectMinIntervalS'>;

/** The guide for a configuration (limits are quoted as configured). */
export function buildGuide(config: GuideConfig): GuideSection[] {
  return [
    {
      id: 'conventions',
      title: 'Conventions',
      paragraphs: [
        'Every endpoint is served under both /api/v1/… and /v1/…. Bodies are JSON (UTF-8, Content-Type: application/json) ' +
          `up to ${config.bodyLimitBytes} bytes; unknown fields are rejected with 400 VALIDATION_FAILED, also a body with fields on a route that takes none (none, {} or null pass). IDs are strings; ` +
          'REST times are ISO-8601 UTC; SSE ts is integer milliseconds since the epoch.',
        'Lists are { "data": [...], "nextCursor": string|null } with ?limit= (1..500, default 100) and ?cursor=.',
        'Every response carries X-Request-Id (yours, echoed, or generated) and, except the health stream (it has no end), Server-Timing (total;dur=…, plus broker;dur=… on broker calls).',
        'Processing order: route → authentication → rate limit → body size → validation → idempotency → handler. ' +
          'A body over the limit is answered 413 as soon as the limit is crossed (the rest is not read) and the connection is closed.',
      ],
    },
    {
      id: 'authentication',
      title: 'Authentication and scopes',
      paragraphs: [
        'Send X-API-Key: tgk_<id>_<secret>. A missing, malformed, unknown or revoked key gets one and the same 401 UNAUTHENTICATED body. ' +
          'Scope read covers every GET (including the health stream); trade covers every write. A key without the scope gets 403 ' +
          'INSUFFICIENT_SCOPE with requiredScope. Objects you do not own answer 404 NOT_FOUND, exactly like unknown ones.',
        'Failed authentications are limited to 30 per minute per client IP; beyond that further failed attempts from that IP get 429 RATE_LIMITED until the window frees (valid keys keep working). ' +
          'Webhook URLs are exempt (TradingView sends every user\'s alerts from the same few addresses; a token cannot be guessed): an unknown token is simply 404.',
      ],
    },
    {
      id: 'rate-limits',
      title: 'Rate limits',
      paragraphs: [
        `Exactly ${config.rateLimitPerMin} requests per API key in any rolling 60 s (a sliding log, not a token bucket). The window is half-open: ` +
          'a request exactly 60.000 s after the oldest counted one is allowed. Rejected (429) requests do not count. Idempotent replays count.',
        `Webhook URLs are limited per token: ${config.webhookRateLimitPerMin} per rolling 60 s.`,
        `Headers on every keyed response: RateLimit-Policy: "key";q=${config.rateLimitPerMin};w=60, RateLimit: "key";r=<remaining>;t=<seconds until a slot frees>, ` +
          'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (epoch second the next slot frees). 429 adds Retry-After (same instant as t).',
        `POST /api/v1/connections/{id}/reconnect: at most once per ${config.reconnectMinIntervalS} s per connection (RECONNECT_MIN_INTERVAL_S), since each is a broker ` +
          'login and repeated failed logins lock a Tradovate user out for an hour; within it 429 RATE_LIMITED with Retry-After. A PATCH with new credentials starts the interval.',
        'Quotas (409 QUOTA_EXCEEDED) and the actor ceiling (503 ACTOR_LIMIT_REACHED) are exact under concurrency: N concurrent creates under a limit Q create exactly min(N, Q).',
      ],
    },
    {
      id: 'idempotency',
      title: 'Idempotency',
      paragraphs: [
        'POST orders and flatten accept Idempotency-Key (1–255 visible ASCII characters; a quoted structured-field string is unquoted); ' +
          'a webhook payload\'s "id" plays the same role (1–255 characters, spaces and any text but control characters: TradingView order ids hold spaces). ' +
          'Keys are scoped to your user, a webhook id to its token, and kept 24 h.',
        'The request fingerprint is SHA-256 over method, route, path parameters (not a webhook URL\'s token: a rotated URL replays), the validated query and the canonical JSON of the validated body ' +
          '(a dryRun takes no key: 400, so a stored plan never blocks the real order). ' +
          'Same key and fingerprint after completion → the first answer, byte for byte, with Idempotent-Replayed: true and no broker call. ' +
          'Same key while the first request is running → 409 IDEMPOTENCY_KEY_IN_USE with Retry-After: 1. Same key, other request → 422 IDEMPOTENCY_KEY_REUSED.',
        'Stored: every answer 200–499 except 400, 401, 403, 404, 429 (those are rejected before anything runs; fix the request and retry with the same key) ' +
          'and 409 CONNECTION_FAILED (nothing reached the broker: once the connection is back, the retry with the same key places the order), ' +
          'and the 422 IDEMPOTENCY_KEY_REUSED of a retry after a 504 whose body is not the order the broker has under the key (the right body still reconciles). ' +
          'Never stored: 5xx. 503 means nothing reached the broker; 500 and 504 BROKER_TIMEOUT leave the outcome unknown, and the retry with the same key ' +
          'finds the order at the broker by its deterministic clOrdId (returning it) or places it — never a duplicate. ' +
          'The answer is committed durably before it is sent.',
      ],
    },
    {
      id: 'errors',
      title: 'Error catalogue',
      paragraphs: [
        'Errors are RFC 9457 problem details (Content-Type: application/problem+json): { "type", "title", "status", "detail", "code", …extensions }. ' +
          'code is stable; match on it, not on detail. ' +
          'A method a path does not list is answered 405 METHOD_NOT_ALLOWED with Allow naming the methods it has (HEAD wherever GET is); ' +
          'every operation documents that and any other unlisted error as its default response.',
      ],
      table: {
        head: ['code', 'status', 'title'],
        rows: Object.entries(PROBLEMS).map(([code, p]) => [code, String(p.status), p.title]),
        anchorPrefix: 'problem-',
      },
    },
    {
      id: 'health-stream',
      title: 'Health stream (server-sent events)',
      paragraphs: [
        'GET /api/v1/connection-health/stream with X-API-Key (scope read) and Accept: text/event-stream. On open: retry: 3000, then one snapshot per connection you own. ' +
          `Then a status message on every change and a heartbeat every ${config.sseHeartbeatMs} ms. Every message is id: <seq> followed by data: <json>.`,
        'Statuses: CONNECTING, CONNECTED, RECONNECTING, AUTH_EXPIRED, FAILED, DISABLED; reason names the occurrence ' +
          '(connect→CONNECTED, disconnect→RECONNECTING, reconnect→CONNECTED, auth-expired→AUTH_EXPIRED, fatal-error→FAILED). ' +
          'bracket-alert messages report an entry whose protective legs could not be placed, or legs cancelled or cut because another order closed, reversed or shrank the position they protected; guard messages ' +
          '{type:"guard", accountId, guard, action, ts, detail} report a risk guard refusing an entry, locking or unlocking an account, or flattening it. When the stream’s key is revoked (also by the CLI in another process: within about a second), ' +
          'its user deleted or its web session ended, a last revoked message says why and the stream ends; reconnecting gets 401.',
        'Reconnect with Last-Event-ID to receive what you missed; when that id is no longer buffered you get fresh snapshots. ' +
          `At most ${config.sseMaxStreamsPerKey} concurrent streams per key (429 TOO_MANY_STREAMS). A client that stops reading is disconnected once its buffer passes a bound.`,
      ],
      code: [
        'retry: 3000',
        '',
        'id: 1732200000000',
        'data: {"type":"snapshot","connectionId":"c1","status":"CONNECTED","ts":1732200000000,"reason":"connect"}',
        '',
        'id: 1732200000001',
        'data: {"type":"status","connectionId":"c1","status":"RECONNECTING","ts":1732200004000,"reason":"disconnect"}',
        '',
        'id: 1732200000001',
        'data: {"type":"heartbeat","ts":1732200015000}',
        '',
        'id: 1732200000002',
        'data: {"type":"bracket-alert","connectionId":"c1","accountId":"7","orderId":"42","ts":1732200016000,"detail":"stop loss could not be placed"}',
        '',
        'id: 1732200000003',
        'data: {"type":"guard","accountId":"7","guard":"daily_loss","action":"locked","ts":1732200017000,"detail":"P&L of the day -1000 reached the daily loss limit of 1000"}',
      ].join('\n'),
    },
    {
      id: 'risk-guards',
      title: 'Risk guards',
      paragraphs: [
        'PUT /api/v1/accounts/{id}/guards sets an account\'s guards (scope trade; a field left out = no such guard); GET reads them with what they see now ' +
          '(the day\'s P&L, exposure per contract). POST /api/v1/accounts/{id}/lock is the kill switch (flattens unless {"flatten":false}); /unlock lifts it.',
        'Guards and locks are stored per account and work in every connection state (FAILED included); every actor starts with them. A lock whose flatten ' +
          'cannot run now answers 200 with flatten: {error} saying why and lock.flattenPending: true; the flatten runs as soon as the connection is CONNECTED ' +
          'again, while entries stay refused. An unlock drops a pending flatten.',
        'They are enforced inside the connection\'s actor against the broker\'s live positions and working orders, one order after the other: an entry is ' +
          'checked with every earlier order counted (in flight included), so a burst cannot overshoot. A refused entry is 403 RISK_GUARD with guard, limit and ' +
          'value (what the order would have reached: numbers for quantity and position guards; for a lock, value "locked" and limit the lock\'s end or null; ' +
            'for products, direction and trading windows what the guard compared); nothing reaches the broker.',
        'An exit (an order on the side opposite the position whose quantity, plus everything already working on that side, fits in the position), ' +
          'cancels and flatten are never refused. Exposure = the largest position one side filling could reach: max(net + working buys, working sells − net).',
        'The trading day starts at 17:00 America/Chicago. Day P&L = realized P&L of the day\'s fill pairs − fees the broker reports + open P&L. Reaching ' +
          'dailyLossLimit (or dailyProfitTarget) cancels working orders, flattens and locks the account until the next trading day; unlock answers 409 until then.',
        'A webhook token (field guards on POST/PATCH /webhook-tokens) or an API key (PUT /api-keys/{id}/guards, from the web session) may narrow the ' +
          'guards for its own orders: the stricter value of each field wins.',
      ],
      code: JSON.stringify(
        {
          maxOrderQty: 5,
          maxPositionPerContract: 5,
          dailyLossLimit: 1000,
          tradingWindows: { timeZone: 'America/Chicago', flattenAtEnd: true, windows: [{ days: ['sun', 'mon', 'tue', 'wed', 'thu'], start: '17:00', end: '15:55' }] },
        },
        null,
        2,
      ),
    },
    {
      id: 'symbols',
      title: 'Symbol forms',
      paragraphs: [
        'Symbols resolve locally (no broker round trip); an unknown one is 400 UNKNOWN_SYMBOL before anything is sent. Every order response names the resolved contract. ' +
          'Front month = the nearest listed contract whose roll date has not passed.',
      ],
      table: {
        head: ['form', 'example', 'result'],
        rows: [
          ['<ROOT><month><1-digit year>', 'ESZ6', 'that contract (listed, unexpired)'],
          ['<ROOT>', 'ES', 'front month'],
          ['<ROOT>1!', 'ES1!', 'front month'],
          ['<ROOT>!', 'ES!', 'front month'],
          ['<EXCHANGE>:<ROOT>1!', 'CME_MINI:ES1!', 'front month (known exchange prefixes only)'],
          ['<ROOT><month><2-digit year>', 'ESZ26', 'front month (as the spec says for this charting form)'],
          ['<ROOT><month><4-digit year>', 'ESZ2026', 'that contract (TradingView\'s ticker of a dated contract), listed and unexpired'],
          ['<ROOT> <MM>-<YY>', 'ES 12-26', 'that contract (NinjaTrader\'s instrument name, as CrossTrade alerts carry it), listed and unexpired'],
        ],
      },
    },
    {
      id: 'products',
      title: 'Products',
      paragraphs: ['The local product catalogue with tick size, point value, listed months and roll rule.'],
      table: {
        head: ['root', 'description', 'exchange', 'tick', 'point value ($)', 'months', 'roll'],
        rows: listProducts().map((p) => [p.root, p.description, p.exchange, String(p.tickSize), String(p.pointValue), p.months.join(''), p.roll.text]),
      },
    },
    {
      id: 'webhooks',
      title: 'Webhooks (TradingView alerts)',
      paragraphs: [
        'Create a webhook token (POST /api/v1/webhook-tokens {accountId, name, strategyId?}); the answer holds the URL …/api/v1/webhooks/whk_<id>_<secret>. ' +
          'Paste it into the alert\'s Webhook URL and the template below into its Message. JSON sent as application/json or text/plain is accepted.',
        'Fields: action buy|sell|close|flat|flatten|exit (aliases long, short), symbol (alias ticker), qty (aliases quantity, contracts; numeric strings accepted), ' +
          'orderType (aliases type, ordType, order_type), price (aliases limitPrice, limit_price, limit: under these a limit price, 400 on a market or stop order; as price, ignored there with a warning), stopPrice, ' +
          'takeProfit and stopLoss (one each: {price} or {ticks}, or a bare number = price), marketPosition (alias sentiment), marketPositionSize, id (dedupe key with the body, 24 h, per token: the same id with another body is another alert; a number must be whole and at most 9007199254740991, else quote it), time. ' +
          'Every field but the legs is also read in any case and with or without _ or - (OrderType, order-type). ' +
          'Unknown fields are ignored and echoed in warnings, except a take-profit or stop-loss in another product\'s spelling (stop_loss, sl_pips, take_profit…) asking for a level: 400 on an order that may open a position, unless the alert gives that leg itself. ' +
          'More than one take-profit or stop-loss, trailing stops, breakeven or scale-outs → 400 on such an order; exits ignore them with a warning.',
        'close/flat/flatten/exit cancels every resting order and closes every position of the bound account (with symbol: 409 SYMBOL_MISMATCH when the account holds another symbol, or, flat, has working orders only in others; nothing cancelled or closed). ' +
          'marketPosition is the strategy\'s position after the alert ({{strategy.market_position}}: long, short or flat; bullish, bearish accepted). ' +
          'flat turns a buy or sell into an exit of its symbol (or the strategy\'s): that contract\'s resting orders, bracket legs included, are cancelled and its position closed; ' +
          'other contracts are left alone and nothing is opened, so an exit alert never adds a bracket the other way. A buy that leaves the strategy short, or a sell that leaves it long, ' +
          'is a partial exit: placed without a bracket, only while the account holds at least that much on the other side (else 409 SYMBOL_MISMATCH, nothing sent); ' +
          'the position\'s legs are then cut to what is left. A buy that leaves the strategy long (a sell, short) is an entry: a position the other way is closed first, ' +
          'and no more than marketPositionSize ({{strategy.market_position_size}}) is opened, so a reversal reaching an account whose stop already closed it opens what the strategy holds.',
          'An account the broker no longer reports → 403 with detail "Account is inactive"; rebinding the token (PATCH) works on the next alert. An unknown token URL → 404.',
      ],
      code: TRADINGVIEW_TEMPLATE,
    },
  ];
}
