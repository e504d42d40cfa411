/**
 * zod schemas for every request and response body of the API (DESIGN §4). The routes
 * validate with them and `/api-docs` is generated from them, so the documentation cannot
 * drift from what the server accepts. API request bodies are strict: an unknown field
 * (a typo such as `stopLos`) is a 400, never silently ignored.
 */
import { z } from 'zod';
import { ORDER_QTY_CEILING } from '../domain/orders.js';
import { PLAIN_LINES, PLAIN_LINES_MESSAGE, PLAIN_TEXT, PLAIN_TEXT_MESSAGE } from '../domain/plain-text.js';
import { WEBHOOK_FIELD_ALIASES, type WebhookField } from './webhook-payload.js';
import { guardNarrowingSchema } from './guard-schemas.js';

const id = z.string().min(1).describe('Identifier (string)');

/** A name of 1..`max` characters of plain text. */
export const label = (max: number) => z.string().min(1).max(max).regex(PLAIN_TEXT, PLAIN_TEXT_MESSAGE);
/** The same, trimmed first. */
export const trimmedLabel = (max: number) => z.string().regex(PLAIN_TEXT, PLAIN_TEXT_MESSAGE).trim().min(1).max(max);
const isoTime = z.string().describe('ISO-8601 UTC time');
const price = z.number().finite().positive();
// The bound first: 1e308 is refused as over the limit, not as past the safe integers.
// Up to the ceiling ORDER_QTY_MAX may be set to; the configured limit is the planner's (400 naming it).
const qty = z.number().max(ORDER_QTY_CEILING).int().positive();

export const sideSchema = z.enum(['buy', 'sell']);
export const orderTypeSchema = z.enum(['market', 'limit', 'stop', 'stop_limit']);
export const timeInForceSchema = z.enum(['day', 'gtc', 'ioc', 'fok']);
export const orderStatusSchema = z.enum(['pending', 'working', 'partially_filled', 'filled', 'cancelled', 'rejected', 'expired']);
export const connectionStatusSchema = z.enum(['CONNECTING', 'CONNECTED', 'RECONNECTING', 'AUTH_EXPIRED', 'FAILED', 'DISABLED']);

/** A take-profit or stop-loss: an absolute price, or a tick offset from the entry's fill price. */
export const bracketLegSchema = z.union([
  z.strictObject({ price: price.describe('Absolute price; must sit on the contract tick') }),
  z.strictObject({
    ticks: z
      .number()
      .int()
      .positive()
      .max(100_000)
      .describe('Offset in ticks from the average fill price, direction-aware; must land inside the price band from the price the entry can really fill at (400 PRICE_OUT_OF_RANGE)'),
  }),
]);

/** A price given as a number (required), or left out / null (not allowed). */
const PRICE_GIVEN = { type: 'number' } as const;
const PRICE_NOT_GIVEN = { type: 'null' } as const;
/** JSON Schema conditions: the prices each order type takes (type absent is market). */
const ORDER_TYPE_PRICES = (
  [
    ['market', false, false],
    ['limit', true, false],
    ['stop', false, true],
    ['stop_limit', true, true],
  ] as const
).map(([type, limit, stop]) => ({
  if: type === 'market' ? { properties: { type: { const: type } } } : { properties: { type: { const: type } }, required: ['type'] },
  then: {
    required: [...(limit ? ['price'] : []), ...(stop ? ['stopPrice'] : [])],
    properties: { price: limit ? PRICE_GIVEN : PRICE_NOT_GIVEN, stopPrice: stop ? PRICE_GIVEN : PRICE_NOT_GIVEN },
  },
}));

/** POST /accounts/{id}/orders body. */
export const placeOrderBodySchema = z.strictObject({
  symbol: z.string().min(1).max(64).describe('Any accepted symbol form: ESZ6, ES, ES1!, ES!, CME_MINI:ES1!, ESZ26, ESZ2026, ES 12-26'),
  side: sideSchema,
  qty,
  type: orderTypeSchema.optional().describe('Default market'),
  price: price.nullable().optional().describe('Limit price (limit, stop_limit)'),
  stopPrice: price.nullable().optional().describe('Stop trigger price (stop, stop_limit)'),
  timeInForce: timeInForceSchema.optional().describe('Default day'),
  takeProfit: bracketLegSchema.nullable().optional(),
  stopLoss: bracketLegSchema.nullable().optional(),
  clientOrderId: label(64)
    // Carried in the broker's 64-unit `text` field (what survives a restart): an emoji takes two (client probe: cut mid-character).
    .refine((s) => s.length <= 64, 'at most 64 UTF-16 code units (the broker’s text field): characters outside the Basic Multilingual Plane, such as emoji, count as two')
    .nullable()
    .optional()
    .describe('Your own label, echoed back; not a dedupe key (use Idempotency-Key). At most 64 UTF-16 code units (emoji count as two)'),
})
  // Which prices each type takes, said in the document as the planner checks them (order-plan.ts
  // checkPriceFields): a client generated from the schema sent a market order with a price and
  // got a 400 it could not have foreseen (clients probe).
  .meta({ allOf: ORDER_TYPE_PRICES });
export type PlaceOrderBody = z.output<typeof placeOrderBodySchema>;

const boolQuery = z.enum(['true', 'false', '1', '0']);

/** Query of POST /accounts/{id}/orders. Strict like every query: `?dryrun=true` is a 400, never a real order. */
export const placeOrderQuerySchema = z.strictObject({
  dryRun: boolQuery.optional().describe('true: validate, resolve and compute the plan; send nothing (send it without an Idempotency-Key: with one it is 400)'),
});

const DECIMAL_DIGITS = /^[0-9]+$/;

/**
 * An integer query parameter in min..max, spelled in decimal digits only. `z.coerce.number()`
 * alone reads `1e2`, `0x10`, `+5`, ` 5` and `1.0` as numbers: a client that sends one of those
 * has a bug, so it is a 400, never a guess. Documented as the integer it stands for.
 */
export function integerQuery(min: number, max: number) {
  return z
    .string()
    .refine((s) => DECIMAL_DIGITS.test(s), 'must be a whole number in decimal digits')
    // Capped so that 400 digits are a number too (Number() makes them Infinity, which z.number() refuses as not one).
    .transform((digits) => Math.min(Number(digits), Number.MAX_SAFE_INTEGER + 1))
    // The range first, alone: a number past 2^53 was refused as not a safe integer (clients probe), not as over the cap.
    .pipe(z.number().min(min, { abort: true }).max(max, { abort: true }).int())
    .meta({ type: 'integer', minimum: min, maximum: max });
}

/** `?limit=&cursor=` on every list (strict: an unknown parameter is a 400). */
export const listQuerySchema = z.strictObject({
  limit: integerQuery(1, 500).optional().describe('1..500, default 100'),
  cursor: z.string().max(200).optional().describe('nextCursor of the previous page'),
});
export type ListQuery = z.output<typeof listQuerySchema>;

/** `{ data, nextCursor }` envelope of every list. */
export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), nextCursor: z.string().nullable() });
}

export const orderRecordSchema = z.object({
  orderId: id.describe("The broker's own order id"),
  accountId: id,
  symbol: z.string().describe('Resolved contract, e.g. ESZ6'),
  requestedSymbol: z.string().nullable().describe('What the client sent, e.g. ES1!'),
  side: sideSchema,
  type: orderTypeSchema,
  qty: z.number(),
  filledQty: z.number(),
  avgFillPrice: z.number().nullable(),
  price: z.number().nullable(),
  stopPrice: z.number().nullable(),
  timeInForce: timeInForceSchema,
  status: orderStatusSchema,
  role: z.enum(['single', 'entry', 'take_profit', 'stop_loss']),
  bracketId: z.string().nullable(),
  legs: z.object({ takeProfit: z.string().nullable(), stopLoss: z.string().nullable() }),
  clientOrderId: z.string().nullable(),
  rejectReason: z.string().nullable().optional(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

/** 201 of POST /accounts/{id}/orders. */
export const placeOrderResponseSchema = orderRecordSchema.extend({
  legOrders: z
    .object({ takeProfit: orderRecordSchema.nullable(), stopLoss: orderRecordSchema.nullable() })
    .nullable()
    .describe('The bracket legs as placed; a relative bracket’s legs are null until the entry fills'),
  reconciled: z.boolean().describe('true when the order was already at the broker (retry after a timeout or crash)'),
});

const plannedLegSchema = z
  .object({
    kind: z.enum(['absolute', 'relative']),
    price: z.number().nullable().describe('Absolute price, or the projected price from the entry price when known'),
    ticks: z.number().nullable(),
    offsetPoints: z.number().nullable(),
  })
  .nullable();

/** 200 of POST /accounts/{id}/orders?dryRun=true. */
export const dryRunResponseSchema = z.object({
  dryRun: z.literal(true),
  accountId: id,
  symbol: z.string(),
  requestedSymbol: z.string(),
  product: z.object({ root: z.string(), tickSize: z.number(), pointValue: z.number() }),
  side: sideSchema,
  qty: z.number(),
  type: orderTypeSchema,
  price: z.number().nullable(),
  stopPrice: z.number().nullable(),
  timeInForce: timeInForceSchema,
  bracket: z.enum(['none', 'absolute', 'relative', 'mixed']).describe('absolute → placeOSO, relative/mixed → order strategy'),
  takeProfit: plannedLegSchema,
  stopLoss: plannedLegSchema,
  clientOrderId: z.string().nullable(),
  guardsChecked: z
    .boolean()
    .describe(
      'true: the account’s risk guards (and the key’s narrowing) would admit the order now, against the broker’s live positions and working orders ' +
        '(one they would refuse is 403 RISK_GUARD, as the real order); false: not checked, the connection is not CONNECTED',
    ),
});

/** 200 of DELETE /accounts/{id}/orders/{orderId} (DESIGN §6). */
export const cancelOrderResponseSchema = z.object({
  order: orderRecordSchema,
  removedLegIds: z.array(z.string()).describe('Legs removed with an unfilled entry'),
  replaced: z
    .object({ replacedOrderId: z.string(), newOrderId: z.string() })
    .nullable()
    .describe('A leg of a filled bracket was cancelled: the surviving leg got a new id'),
  remainderCancelled: z.boolean().describe('Entry partly filled: the unfilled remainder was cancelled'),
  warning: z
    .string()
    .optional()
    .describe('Present when the cancel leaves a position unprotected: a tick-offset bracket entry cancelled after a partial fill (its legs come only with a complete fill); protect or close it'),
});

export const accountSchema = z.object({
  id,
  name: z.string(),
  connectionId: id,
  broker: z.enum(['paper', 'tradovate']),
  environment: z.enum(['paper', 'demo', 'live']),
  active: z.boolean(),
});

export const positionSchema = z.object({
  accountId: id,
  symbol: z.string(),
  netQty: z.number().describe('Signed: positive long, negative short'),
  avgPrice: z.number(),
  openedAt: isoTime.nullable(),
});

export const closedTradeSchema = z.object({
  id,
  accountId: id,
  symbol: z.string(),
  direction: z.enum(['long', 'short']),
  qty: z.number(),
  entryPrice: z.number(),
  exitPrice: z.number(),
  openedAt: isoTime,
  closedAt: isoTime,
  pnlPoints: z.number(),
  pnl: z.number(),
  entryOrderIds: z.array(z.string()),
  exitOrderIds: z.array(z.string()),
});

/** POST /accounts/{id}/flatten body; may be empty. */
export const flattenBodySchema = z
  .strictObject({
    symbol: z.string().min(1).max(64).optional().describe('Only when the account holds this contract; otherwise 409 SYMBOL_MISMATCH'),
  })
  .optional();

export const flattenResponseSchema = z.object({
  accountId: id,
  symbol: z.string().nullable().describe('Resolved contract when a symbol was given'),
  cancelledOrderIds: z.array(z.string()),
  positions: z.array(
    z.object({
      symbol: z.string(),
      closedQty: z.number(),
      status: z.enum(['liquidated', 'failed']),
      detail: z.string().optional(),
      code: z.string().optional().describe('A failed one: the error code of its liquidation (BROKER_TIMEOUT: it may have reached the broker; BROKER_UNAVAILABLE: not sent; BROKER_REJECTED: refused, or not filled)'),
    }),
  ),
  outstandingOrders: z
    .number()
    .int()
    .positive()
    .optional()
    .describe(
      'Present when orders sent to the account before the flatten had no outcome from the broker yet (still on their way after 5 s, or timed out): they may still fill after it. Flatten again once they are known, or lock the account (a kill switch keeps flattening until they are)',
    ),
});

export const meResponseSchema = z.object({
  user: z.object({ id, name: z.string() }),
  key: z
    .object({ id: z.string(), name: z.string().nullable(), scopes: z.array(z.enum(['read', 'trade'])), prefix: z.string() })
    .describe('The credential of this request'),
  rateLimit: z.object({ limit: z.number(), windowSeconds: z.number() }),
});

export const connectionSchema = z.object({
  id,
  name: z.string().nullable(),
  broker: z.enum(['paper', 'tradovate']),
  environment: z.enum(['paper', 'demo', 'live']),
  status: connectionStatusSchema,
  since: isoTime.nullable().describe('When the connection entered this status'),
  reason: z.string().nullable(),
  detail: z.string().nullable().describe('What the status means in words, as the health stream sends it (why it FAILED, what was refused)'),
  retryAt: isoTime
    .nullable()
    .describe("FAILED for the broker's rate limit (429/423): when it logs in again by itself; requests answer 503 with Retry-After until then (POST …/reconnect tries sooner)"),
  accountIds: z.array(z.string()),
});

/** A paper account name (names are unique across the whole paper broker, like Tradovate's). */
const PAPER_ACCOUNT_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** POST /connections body: a paper connection on the embedded paper broker. */
export const createConnectionBodySchema = z.strictObject({
  name: label(100).optional(),
  accounts: z
    .array(z.strictObject({ name: z.string().regex(PAPER_ACCOUNT_NAME, 'must be 1..64 characters of A-Z a-z 0-9 _ . -') }))
    .min(1)
    .max(10)
    .superRefine((accounts, ctx) => {
      const seen = new Set<string>();
      accounts.forEach((a, i) => {
        if (seen.has(a.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `'${a.name}' is given twice; account names must be unique` });
        seen.add(a.name);
      });
    })
    .optional()
    .describe('Paper accounts to open, each name unique at the paper broker; default one account named after the login'),
});

/** PATCH /connections/{id} body: rename, and/or new broker credentials (merged into the stored ones). */
export const updateConnectionBodySchema = z
  .strictObject({
    name: label(100).optional(),
    credentials: z
      .strictObject({
        username: z.string().min(1).max(128).optional().describe('Broker user name'),
        password: z.string().min(1).max(1024).optional().describe('Stored sealed; never returned'),
        appId: z.string().min(1).max(100).optional(),
        appVersion: z.string().min(1).max(50).optional(),
        cid: z.union([z.string().regex(/^\d{1,12}$/), z.number().int().positive()]).optional().describe('API client id'),
        sec: z.string().min(1).max(256).optional().describe('API secret; stored sealed'),
        deviceId: z.string().min(1).max(100).optional(),
      })
      .refine((c) => Object.keys(c).length > 0, { message: 'give at least one credential field' })
      .meta({ minProperties: 1 })
      .optional()
      .describe('Replaces the given fields of the stored credentials and restarts the connection with them (leaves FAILED)'),
  })
  .refine((b) => b.name !== undefined || b.credentials !== undefined, { message: 'give name and/or credentials' })
  .meta({ minProperties: 1 });
export type UpdateConnectionBody = z.output<typeof updateConnectionBodySchema>;

const strategyFields = {
  name: label(100),
  description: z
    .string()
    .max(1000)
    .regex(PLAIN_LINES, PLAIN_LINES_MESSAGE)
    .nullable()
    .optional(),
  symbol: z.string().min(1).max(64).nullable().optional(),
  qty: qty.nullable().optional(),
  orderType: orderTypeSchema.nullable().optional(),
  takeProfit: bracketLegSchema.nullable().optional(),
  stopLoss: bracketLegSchema.nullable().optional(),
};

/** POST /strategies body. */
export const createStrategyBodySchema = z.strictObject(strategyFields);
/** PATCH /strategies/{id} body. */
export const updateStrategyBodySchema = z.strictObject({ ...strategyFields, name: strategyFields.name.optional() });
export type CreateStrategyBody = z.output<typeof createStrategyBodySchema>;
export type UpdateStrategyBody = z.output<typeof updateStrategyBodySchema>;

export const strategySchema = z.object({
  id,
  name: z.string(),
  description: z.string().nullable(),
  symbol: z.string().nullable(),
  qty: z.number().nullable(),
  orderType: orderTypeSchema.nullable(),
  takeProfit: bracketLegSchema.nullable(),
  stopLoss: bracketLegSchema.nullable(),
  createdAt: isoTime.nullable(),
  updatedAt: isoTime.nullable(),
});

/** POST /webhook-tokens body. */
export const createWebhookTokenBodySchema = z.strictObject({
  accountId: id,
  name: label(100),
  strategyId: id.nullable().optional(),
  guards: guardNarrowingSchema.nullable().optional(),
});
/** PATCH /webhook-tokens/{id} body: rebind the account, rename, change the strategy. */
export const updateWebhookTokenBodySchema = z.strictObject({
  accountId: id.optional(),
  name: label(100).optional(),
  strategyId: id.nullable().optional(),
  guards: guardNarrowingSchema.nullable().optional().describe('Replaces the narrowing; null removes it'),
});

export const webhookTokenSchema = z.object({
  id,
  name: z.string(),
  accountId: id,
  strategyId: z.string().nullable(),
  accountActive: z
    .boolean()
    .nullable()
    .describe(
      'false: the broker no longer reports the bound account, or the token was made inactive; alerts get 403 Account is inactive. ' +
        'null: not known yet, the account\'s connection has not reported its accounts since the service started (alerts get 503 until it has)',
    ),
  guards: guardNarrowingSchema.nullable().describe('This token’s narrowing of the account’s risk guards (null: none)'),
  inactiveReason: z.string().nullable().describe('Why the token was made inactive (its connection was deleted), until it is rebound; null otherwise'),
  rotatedAt: isoTime.nullable().describe('When the URL was last rotated (null: never): a URL read before then no longer works, so a page showing it reads it again when this moves'),
  createdAt: isoTime.nullable(),
  lastUsedAt: isoTime.nullable(),
  url: z.string().optional().describe('The receiving URL (contains the secret token); returned to its owner on create and GET one'),
  alertMessage: z.string().optional().describe('A ready TradingView alert message for this URL (on create and GET one)'),
});
export const createdWebhookTokenSchema = webhookTokenSchema.extend({
  url: z.string().describe('Paste this into the TradingView alert'),
  token: z.string().describe('whk_<id>_<secret>'),
});

const scalar = z.union([z.number(), z.string()]);
// Arrays pass the schema so that two take-profits get WEBHOOK_UNSUPPORTED with a clear message.
const webhookLeg = z.union([scalar, z.looseObject({ price: scalar.optional(), ticks: scalar.optional() }), z.array(z.unknown())]);

/** Each webhook field's shape and documentation, under its own name. */
const WEBHOOK_FIELDS: Record<WebhookField, { schema: z.ZodType; doc?: string }> = {
  action: { schema: z.string(), doc: 'buy | sell | close | flat | flatten | exit (aliases long → buy, short → sell)' },
  symbol: { schema: z.string(), doc: 'any accepted symbol form, e.g. {{ticker}}' },
  qty: { schema: scalar, doc: 'a whole number of contracts ≥ 1: a number, or a string of digits only ("2"; not "2.0", " 2" or "1e3")' },
  orderType: { schema: z.string(), doc: 'market | limit | stop | stop_limit (default market)' },
  price: { schema: scalar, doc: "Limit price; as 'price', ignored (with a warning) for market orders (TradingView's {{close}}); as limitPrice, limit_price or limit, refused on a market or stop order (400)" },
  stopPrice: { schema: scalar },
  takeProfit: { schema: webhookLeg, doc: '{price} | {ticks} | a bare number (= price); one only' },
  stopLoss: { schema: webhookLeg, doc: '{price} | {ticks} | a bare number (= price); one only' },
  timeInForce: { schema: z.string() },
  marketPosition: {
    schema: z.string(),
    doc: "The strategy's position after this alert ({{strategy.market_position}}): long | short | flat (bullish, bearish accepted). " +
      'flat makes a buy or sell an exit: the symbol is flattened (its orders cancelled, its position closed), nothing is opened. ' +
      'A sell that leaves it long (a buy that leaves it short) is a partial exit: no bracket, reduce-only (409 SYMBOL_MISMATCH otherwise)',
  },
  marketPositionSize: {
    schema: scalar,
    doc: "The strategy's position size after this alert ({{strategy.market_position_size}}, contracts, ≥ 0). With a marketPosition " +
      'on the order\'s side (an entry or reversal), no more than this is opened: a reversal that reaches an account a stop already ' +
      'closed opens this size, not the alert\'s qty. On a partial exit, the least the account keeps (nothing more is taken off). Ignored for exits (flat)',
  },
  id: { schema: scalar, doc: 'Dedupe key, with the body (the same id with another body is another alert), 24 h, per token: 1–255 characters, any but control characters (TradingView order ids hold spaces); a number must be a whole number up to 9007199254740991 (larger ones lose digits in JSON: quote them)' },
  time: { schema: scalar, doc: 'Alert time ({{timenow}}), used to report alert-to-order delay' },
};

/** One property per accepted name: fields carry their docs and aliases, aliases say what they stand for. */
function webhookProperties(): Record<string, z.ZodType> {
  const names = Object.entries(WEBHOOK_FIELD_ALIASES);
  const out: Record<string, z.ZodType> = {};
  for (const [name, field] of names) {
    const { schema, doc } = WEBHOOK_FIELDS[field];
    if (name !== field) {
      out[name] = schema.optional().describe(`alias of ${field}`);
      continue;
    }
    const aliases = names.filter(([a, f]) => f === field && a !== field).map(([a]) => a);
    const text = [aliases.length ? `aliases ${aliases.join(', ')}` : '', doc ?? ''].filter(Boolean).join('; ');
    out[name] = text ? schema.optional().describe(text) : schema.optional();
  }
  return out;
}

/**
 * Webhook payload (DESIGN §7) as documented, built from the parser's alias table. Deliberately
 * lenient: numeric strings are accepted and unknown fields are ignored and echoed in
 * `warnings`; the real rules live in webhook-payload.ts so that unsupported features get
 * WEBHOOK_UNSUPPORTED, not a schema error.
 */
export const webhookPayloadSchema = z.looseObject(webhookProperties());
/** A webhook body after the schema: any JSON object; `id` is the dedupe key. */
export type WebhookPayloadBody = { [field: string]: unknown; id?: string | number };

/** 201/200 of POST /webhooks/{token}. */
export const webhookResponseSchema = z.object({
  accepted: z.literal(true),
  action: z.enum(['buy', 'sell', 'flatten']),
  accountId: id,
  order: placeOrderResponseSchema.nullable(),
  flatten: flattenResponseSchema.nullable(),
  warnings: z.array(z.string()).describe('Ignored fields and adjustments, e.g. price ignored for a market order'),
  alertDelayMs: z.number().nullable().describe('Now minus the payload `time`, when given'),
});

/** Path parameter schemas (for the docs). */
export const accountParamsSchema = z.object({ id });
