/**
 * Lenient parser for webhook alerts (DESIGN §7). TradingView users paste templates written
 * for other products, so aliases and numeric strings are accepted and unknown fields are
 * ignored (and echoed in `warnings`, so a typo is visible in the response). What the spec
 * excludes — more than one take-profit or stop-loss, trailing stops, breakeven moves,
 * scale-outs — is refused with WEBHOOK_UNSUPPORTED and a message that says why.
 */
import type { OrderInput } from '../domain/order-plan.js';
import type { LegInput, OrderType, Side, TimeInForce } from '../domain/orders.js';
import { printable } from '../domain/plain-text.js';
import { AppError } from '../domain/problems.js';

/** A TradingView alert message that places a bracket order through a webhook URL (shown in /api-docs). */
export const TRADINGVIEW_TEMPLATE = `{
  "id": "{{strategy.order.id}}-{{strategy.position_size}}-{{timenow}}",
  "action": "{{strategy.order.action}}",
  "symbol": "{{ticker}}",
  "qty": "{{strategy.order.contracts}}",
  "orderType": "market",
  "takeProfit": { "ticks": 40 },
  "stopLoss": { "ticks": 20 },
  "marketPosition": "{{strategy.market_position}}",
  "marketPositionSize": "{{strategy.market_position_size}}",
  "time": "{{timenow}}"
}`;

/** The fields an alert may leave to the token's strategy. */
export interface StrategyDefaults {
  symbol?: string | null;
  qty?: number | null;
  orderType?: OrderType | null;
  takeProfit?: LegInput | null;
  stopLoss?: LegInput | null;
}

interface Common {
  warnings: string[];
  /** Dedupe key (payload `id`). */
  id?: string;
  /** ms between the payload `time` and now, when `time` parses. */
  alertDelayMs: number | null;
}

export type WebhookIntent =
  /**
   * `reduce`: a partial exit (the strategy stays on the side the order reduces): no bracket, and it must reduce the position.
   * `entry`: the strategy is on the order's side after it (marketPosition long on a buy, short on a sell): it may reverse a position.
   * `positionSize`: the strategy's position after the alert (marketPositionSize): an entry never leaves the account holding more
   * on its side, a partial exit never less.
   */
  | (Common & {
      kind: 'order';
      order: Partial<OrderInput> & { side: Side };
      reduce?: true;
      entry?: true;
      positionSize?: number;
      /** The price came under a name that makes it a limit price (`limitPrice`, `limit_price`, `limit`): refused on a market or stop order (completeOrder). */
      limitPriceAs?: string;
    })
  /** `exit`: a buy or sell that leaves the strategy flat; without a symbol, its strategy's symbol. */
  | (Common & { kind: 'flatten'; symbol?: string; exit?: true });

/** The strategy's position after the alert: TradingView's {{strategy.market_position}}, TradersPost's `sentiment`. */
type MarketPosition = 'long' | 'short' | 'flat';
// Maps, not object literals: an alert's word is looked up as sent, and `constructor` or `__proto__`
// found the object prototype's members (fuzz probe: `"action": "__proto__"` sold, `"constructor"`
// took the service down as the function could not be passed to the actor).
const MARKET_POSITIONS = new Map<string, MarketPosition>([['long', 'long'], ['bullish', 'long'], ['short', 'short'], ['bearish', 'short'], ['flat', 'flat']]);

const FLATTEN_ACTIONS = new Set(['close', 'flat', 'flatten', 'exit']);
const ACTIONS = new Map<string, Side>([['buy', 'buy'], ['long', 'buy'], ['sell', 'sell'], ['short', 'sell']]);
const ORDER_TYPES = new Map<string, OrderType>([
  ['market', 'market'],
  ['mkt', 'market'],
  ['limit', 'limit'],
  ['lmt', 'limit'],
  ['stop', 'stop'],
  ['stp', 'stop'],
  ['stop_market', 'stop'],
  ['stopmarket', 'stop'],
  ['stop_limit', 'stop_limit'],
  ['stoplimit', 'stop_limit'],
  ['stp_lmt', 'stop_limit'],
]);
const TIFS = new Set(['day', 'gtc', 'ioc', 'fok']);

/** The fields an alert can carry, each under its own name or an alias. */
export type WebhookField =
  | 'action'
  | 'symbol'
  | 'qty'
  | 'orderType'
  | 'price'
  | 'stopPrice'
  | 'takeProfit'
  | 'stopLoss'
  | 'timeInForce'
  | 'marketPosition'
  | 'marketPositionSize'
  | 'id'
  | 'time';

/**
 * Name sent → the field it means; everything else is unknown and echoed. The one alias list:
 * the payload's zod schema (schemas.ts) is built from it too. No prototype: `constructor` is unknown.
 */
export const WEBHOOK_FIELD_ALIASES: Readonly<Record<string, WebhookField>> = Object.assign(Object.create(null) as Record<string, WebhookField>, {
  action: 'action',
  side: 'action',
  symbol: 'symbol',
  ticker: 'symbol',
  qty: 'qty',
  quantity: 'qty',
  contracts: 'qty',
  orderType: 'orderType',
  order_type: 'orderType',
  // The REST order's own name, and the FIX/Tradovate one (fuzz probe: `"type": "limit"` was an
  // unknown field, and the limit went out at market 2,000 points away).
  type: 'orderType',
  ordType: 'orderType',
  price: 'price',
  limitPrice: 'price',
  limit_price: 'price',
  // Pine's strategy.exit names its take-profit `limit`: as a limit price it is refused on a market order, as either meaning must be.
  limit: 'price',
  stopPrice: 'stopPrice',
  takeProfit: 'takeProfit',
  tp: 'takeProfit',
  stopLoss: 'stopLoss',
  sl: 'stopLoss',
  timeInForce: 'timeInForce',
  marketPosition: 'marketPosition',
  market_position: 'marketPosition',
  sentiment: 'marketPosition',
  marketPositionSize: 'marketPositionSize',
  market_position_size: 'marketPositionSize',
  id: 'id',
  time: 'time',
});

/** A key as written in any case, with `_`, `-` and spaces dropped: `OrderType`, `order-type` and `ordertype` meet. */
function looseName(key: string): string {
  return key.toLowerCase().replace(/[-_\s]/g, '');
}

/**
 * The aliases by loose name, for every field but the legs (re-probe: `OrderType`, `Type` and
 * `order-type` were unknown fields, and limit alerts filled at market). A leg under another
 * spelling (`take_profit`, `Stop_Loss`) may mean points, not a price: it stays refused (foreignLeg).
 */
const LOOSE_ALIASES: ReadonlyMap<string, WebhookField> = new Map(
  Object.entries(WEBHOOK_FIELD_ALIASES)
    .filter(([, field]) => field !== 'takeProfit' && field !== 'stopLoss')
    .map(([name, field]) => [looseName(name), field]),
);

/** The field a key names: exactly as listed, else (not a leg) in any case and spelling of separators. */
function fieldOf(key: string): WebhookField | undefined {
  return WEBHOOK_FIELD_ALIASES[key] ?? LOOSE_ALIASES.get(looseName(key));
}

/** Names under which a price can only be a limit price (completeOrder refuses one on a market or stop order). */
const LIMIT_PRICE_NAMES: ReadonlySet<string> = new Set(['limitprice', 'limit']);

/** Keys that ask for a feature a webhook cannot do (spec Limits); no prototype, like the aliases. */
const UNSUPPORTED_KEYS: Record<string, string> = Object.assign(Object.create(null) as Record<string, string>, {
  trailingStop: 'trailing stops',
  trailing_stop: 'trailing stops',
  trailAmount: 'trailing stops',
  trailPercent: 'trailing stops',
  trailOffset: 'trailing stops',
  trail_offset: 'trailing stops',
  trail: 'trailing stops',
  trail_stop: 'trailing stops',
  trail_trigger: 'trailing stops',
  autoTrail: 'trailing stops',
  breakeven: 'breakeven moves',
  breakevenOffset: 'breakeven moves',
  breakeven_offset: 'breakeven moves',
  scaleOut: 'scale-outs',
  scaleOuts: 'scale-outs',
  scale_out: 'scale-outs',
  partialExits: 'scale-outs',
  takeProfits: 'more than one take-profit',
  stopLosses: 'more than one stop-loss',
  takeProfit2: 'more than one take-profit',
  stopLoss2: 'more than one stop-loss',
  tp2: 'more than one take-profit',
  sl2: 'more than one stop-loss',
  advance_tp_sl: 'more than one take-profit',
  brackets: 'more than one take-profit',
});

function unsupported(what: string): AppError {
  return new AppError(
    'WEBHOOK_UNSUPPORTED',
    `Webhooks do not support ${what}: a payload carries one entry with at most one take-profit and one stop-loss ({price} or {ticks}).`,
    { feature: what },
  );
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_FAILED', `${path}: ${message}`, { errors: [{ path, message }] });
}

/**
 * A finite number, or a numeric string in plain decimal notation ("2", " 5001.25 ", "-3");
 * anything else → undefined. Exponents ("1e3"), hex and the like are refused: an alert that
 * says "1e3" contracts is a broken template, not a request for a thousand.
 */
export function toNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && /^[+-]?(\d+\.?\d*|\.\d+)$/.test(value.trim())) return Number(value.trim());
  return undefined;
}

function positivePrice(path: string, value: unknown): number {
  const n = toNumber(value);
  if (n === undefined || n <= 0) throw invalid(path, 'must be a positive number (numeric strings accepted)');
  return n;
}

/**
 * A take-profit or stop-loss in another product's spelling (CrossTrade's `stop_loss`, PickMyTrade's
 * `dollar_sl` and `percentage_tp`, Pine `strategy.exit`'s `profit`/`loss`/`stop`, `stopLossTicks`,
 * `target_price`…): which leg it names, so that an entry carrying one is refused rather than
 * ignored with the other unknown fields. Ignored, the entry went out with no stop at all and a
 * 201 (trader probes). `limit` and `limit_price` are left alone: an entry's limit price, as often.
 */
function foreignLeg(key: string): ForeignLeg | undefined {
  const words = key
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter(Boolean);
  const k = words.join('');
  const unit = words.some((w) => LEG_UNIT_WORDS.has(w));
  // Names of what is about a stop or target, not its level (re-probe 4: stop_reason,
  // session_stop, target_account, targetTimeframe refused entries; re-probe 5: stops_hit,
  // target_qty, target_position), unless they also name a unit (stop_loss_ticks_count).
  if (!unit && words.some((w) => NOT_A_LEVEL.has(w))) return undefined;
  if (words.includes('risk')) return words.some((w) => RISK_DISTANCE_WORDS.has(w)) ? { leg: 'stopLoss', plain: true } : undefined;
  // Named for the leg itself (stop_loss, sl_pips, take_profit, profit_target, Pine's stop/loss/profit):
  // any value other than off asks for one. Other names with "stop" or "target" in them
  // (exit_stop, stop_market_price, target_breakout…) only when the value reads as a level.
  if (k.includes('stoploss') || FOREIGN_STOP.test(k) || k === 'stop') return { leg: 'stopLoss', plain: true };
  if (/takeprofit|profittarget/.test(k) || FOREIGN_TARGET.test(k)) return { leg: 'takeProfit', plain: true };
  // The one field webhooks read under a name with "stop" in it is stopPrice, matched before this.
  if (k.includes('stop')) return { leg: 'stopLoss', plain: false };
  if (k.includes('target') || (k.endsWith('tp') && !k.endsWith('http'))) return { leg: 'takeProfit', plain: false };
  return undefined;
}
/** Which leg a foreign field names, and whether its name says so plainly (foreignLeg). */
interface ForeignLeg {
  leg: 'stopLoss' | 'takeProfit';
  plain: boolean;
}
/** `tp`/`sl` text meaning no such leg; an empty one stays refused (a placeholder that came out empty). */
const LEG_OFF = /^\s*(0+(\.0*)?|false|off|none|no)\s*$/i;
const NOT_A_LEVEL = new Set(
  ('time timeframe tf reason date session trading url account name comment message text note type mode enabled status count id out ' +
    'position qty quantity size contract contracts hit hits max min stopped nonstop').split(' '),
);
const LEG_UNIT_WORDS = new Set('tick ticks price points point pts pips pip dollar dollars usd percent percentage pct amount offset distance level value atr'.split(' '));
const LEG_UNIT = '(ticks?|price|points?|pts|pips?|dollars?|usd|percent(age)?|pct|amount|offset|distance|level|value|atr)';
const FOREIGN_STOP = new RegExp(`^(sl|loss)${LEG_UNIT}?$|^${LEG_UNIT}(sl|loss)$`);
/**
 * Risk named with a distance (`risk_ticks`, `risk_in_ticks`, `riskDistance`, `max_risk_points`):
 * the stop's distance (fuzz probe, re-probe: ignored, the entry went out with no stop). Not risk
 * in percent or dollars: that sizes the position (PickMyTrade's risk_percentage).
 */
const RISK_DISTANCE_WORDS = new Set('tick ticks point points pts pip pips distance offset'.split(' '));
const FOREIGN_TARGET = new RegExp(`^(tp|pt|tgt|take|profit)${LEG_UNIT}?$|^${LEG_UNIT}(tp|profit)$`);

/**
 * Text that reads as a level: a number (thousands separated by commas allowed), with a currency
 * sign or word or a unit (`20`, `"$50"`, `"USD 50"`, `"20 ticks"`, `"20 pips"`, `"17,950.00"`, `"1.5%"`).
 */
const LEVEL_TEXT =
  /^\s*([$€£]|usd|eur)?\s*[+-]?(\d{1,3}(,\d{3})+(\.\d*)?|\d+(\.\d*)?|\.\d+)\s*(t|ticks?|pts?|points?|pips?|%|percent|usd|dollars?|\$)?\s*$/i;

/**
 * Whether a foreign leg field's value asks for a level: a number other than 0, text that reads
 * as one (LEVEL_TEXT), or an object or list holding one. Under a name that plainly names the leg,
 * any text with a digit other than 0 in it (`"1e1"`, `"20t"`, `"2 ATR"`). Off (`0`, `"0.0"`,
 * `false`, `null`, `""`) and other text (`"N/A"`, `"disabled"`, `"Long Entry 1"` under a name
 * that is not plainly a leg, `"15:55"`, a URL) ask for nothing.
 */
function asksForLevel(value: unknown, plain: boolean, depth = 0): boolean {
  if (typeof value === 'number') return Number.isFinite(value) && value !== 0;
  if (typeof value === 'string') return /[1-9]/.test(value) && !LEG_OFF.test(value) && (plain || LEVEL_TEXT.test(value));
  if (value === null || typeof value !== 'object' || depth > MAX_NESTED_DEPTH) return false;
  return Object.values(value).some((v) => asksForLevel(v, plain, depth + 1));
}

/**
 * A stop-loss or take-profit inside an unknown object (`"bracket": {"sl": 20, "tp": 40}`,
 * `"extras": {"stopLoss": {"ticks": 20}}`): its path and leg, the first found; webhooks read
 * legs at the top level only.
 */
function nestedLeg(path: string, value: unknown, depth = 0): { path: string; leg: 'stopLoss' | 'takeProfit' } | undefined {
  if (value === null || typeof value !== 'object' || depth >= MAX_NESTED_DEPTH) return undefined;
  for (const [key, v] of Object.entries(value)) {
    const here = `${path}.${printable(key)}`;
    const canonical = WEBHOOK_FIELD_ALIASES[key];
    const found: ForeignLeg | undefined = canonical === 'stopLoss' || canonical === 'takeProfit' ? { leg: canonical, plain: true } : foreignLeg(key);
    if (found && asksForLevel(v, found.plain)) return { path: here, leg: found.leg };
    const deeper = nestedLeg(here, v, depth + 1);
    if (deeper) return deeper;
  }
  return undefined;
}
const MAX_NESTED_DEPTH = 4;

function foreignLegError(path: string, leg: 'stopLoss' | 'takeProfit'): AppError {
  return invalid(
    path,
    `not a field webhooks read; a ${leg === 'stopLoss' ? 'stop-loss' : 'take-profit'} is '${leg}' ({price} or {ticks}) at the top level${leg === 'stopLoss' ? ", a stop order's trigger 'stopPrice'" : ''}. Refused, so that the order is never placed without the protection the alert asks for`,
  );
}

/** What a leg object may carry (a take-profit's price may be called limitPrice, a stop-loss's stopPrice); anything else is refused. */
const LEG_KEYS = { takeProfit: new Set(['price', 'ticks', 'limitPrice', 'type']), stopLoss: new Set(['price', 'ticks', 'stopPrice', 'type']) };

/** A feature switch set to off: 0, false, null, an empty string or array, "0", "false", "off", "none", "no". */
function switchedOff(value: unknown): boolean {
  if (value === null || value === false || value === 0) return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === 'string' && /^\s*(|0|false|off|none|no)\s*$/i.test(value);
}

/**
 * A top-level field for a trailing stop or a breakeven move under a name UNSUPPORTED_KEYS does not
 * list (Pine strategy.exit's trail_points and trail_price, trail_ticks, trailDistance, break_even…):
 * ignored, the entry went out with no stop at all (re-probe 6: 201, nothing working).
 */
function topLevelFeature(key: string): string | undefined {
  if (/trail/i.test(key)) return 'trailing stops';
  if (/break_?even/i.test(key)) return 'breakeven moves';
  if (/scale_?(out|in)/i.test(key)) return 'scale-outs';
  return undefined;
}

/** What an unknown key inside a leg asks for, when it names a feature webhooks do not have. */
function legFeature(key: string): string | undefined {
  if (UNSUPPORTED_KEYS[key]) return UNSUPPORTED_KEYS[key];
  if (/trail/i.test(key)) return 'trailing stops';
  if (/break_?even/i.test(key)) return 'breakeven moves';
  if (/scale/i.test(key)) return 'scale-outs';
  return undefined;
}

function parseLeg(path: 'takeProfit' | 'stopLoss', value: unknown): LegInput | null {
  if (value === null || value === undefined) return null;
  const what = path === 'takeProfit' ? 'more than one take-profit' : 'more than one stop-loss';
  if (Array.isArray(value)) {
    if (value.length > 1) throw unsupported(what);
    // `[null]`, `[[]]`, `[""]`: as empty as `[]` (a placeholder that came out empty), never absent.
    const only: unknown = value[0] ?? [];
    refuseEmpty(path, only);
    return parseLeg(path, only);
  }
  if (typeof value !== 'object') return { price: positivePrice(path, value) };
  const leg = value as Record<string, unknown>;
  for (const key of Object.keys(leg)) {
    const feature = legFeature(key);
    if (feature) throw unsupported(feature);
    // A key we do not know inside a leg may change what the leg means (a trail, an offset
    // unit): refused rather than ignored, so the leg never silently becomes something else.
    if (!LEG_KEYS[path].has(key)) throw invalid(`${path}.${printable(key)}`, 'unknown field in a take-profit or stop-loss: give {"price": n} or {"ticks": n}');
  }
  if (leg.type !== undefined && (typeof leg.type !== 'string' || /trail/i.test(leg.type))) throw unsupported('trailing stops');
  const otherName = path === 'takeProfit' ? 'limitPrice' : 'stopPrice';
  const other = leg[otherName];
  // Its price under two names: one price, or a 400 naming both (new-user probe: one silently dropped).
  if (leg.price !== undefined && leg.price !== null && other !== undefined && other !== null && toNumber(leg.price) !== toNumber(other)) {
    throw invalid(`${path}.${otherName}`, `differs from ${path}.price (${printable(String(leg.price))}): give the leg's price once`);
  }
  const priceValue = leg.price ?? other;
  const hasPrice = priceValue !== undefined && priceValue !== null;
  const hasTicks = leg.ticks !== undefined && leg.ticks !== null;
  if (hasPrice && hasTicks) throw invalid(path, 'give either price or ticks, not both');
  if (hasPrice) return { price: positivePrice(`${path}.price`, priceValue) };
  if (hasTicks) {
    const ticks = toNumber(leg.ticks);
    if (ticks === undefined || !Number.isSafeInteger(ticks) || ticks <= 0) throw invalid(`${path}.ticks`, 'must be a positive integer');
    return { ticks };
  }
  throw invalid(path, 'must be {"price": n}, {"ticks": n} or a bare number (= price)');
}

/** A quantity: a whole number of contracts ≥ 1, as a number or a string of digits only ("2"; not "2.0" or " 2"); the per-order cap is the plan's. */
function parseQty(value: unknown): number {
  const plain = typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));
  const n = plain ? toNumber(value) : undefined;
  if (n === undefined || !Number.isSafeInteger(n) || n < 1) throw invalid('qty', 'must be a whole number of contracts, at least 1 (digits only in a string)');
  return n;
}

/** `as`: the name it was sent under (`type`, `ordType`…), which the error names. */
function parseOrderType(value: unknown, as = 'orderType'): OrderType {
  const key = String(value).trim().toLowerCase().replace(/[\s-]+/g, '_');
  if (/trail/.test(key)) throw unsupported('trailing stops');
  const type = ORDER_TYPES.get(key);
  if (!type) throw invalid(printable(as), `'${printable(String(value))}' is not an order type: one of market, limit, stop, stop_limit`);
  return type;
}

/** `marketPosition` as sent, or undefined when absent; a value we cannot read is refused, never guessed. */
function parseMarketPosition(value: unknown): MarketPosition | undefined {
  if (value === undefined || value === null) return undefined;
  refuseEmpty('marketPosition', value);
  const position = typeof value === 'string' ? MARKET_POSITIONS.get(value.trim().toLowerCase()) : undefined;
  if (!position) throw invalid('marketPosition', `'${printable(String(value))}' is not one of long, short, flat (bullish, bearish accepted)`);
  return position;
}

/**
 * `marketPositionSize` as sent ({{strategy.market_position_size}}: the strategy's position after
 * the alert, in contracts, never negative), or undefined when absent. Refused when unreadable:
 * it caps what an entry opens.
 */
function parsePositionSize(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  refuseEmpty('marketPositionSize', value);
  // Digits only in a string, as for qty (" 1" is a template that came out wrong, not a size).
  const plain = typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));
  const n = plain ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) {
    throw invalid('marketPositionSize', `'${printable(String(value))}' is not a whole number of contracts, 0 or more ({{strategy.market_position_size}})`);
  }
  return n;
}

/**
 * A field that decides what is traded, sent empty (`""`, `[]`): most likely a placeholder that came
 * out empty. Refused rather than read as absent: an empty stop-loss would place the entry with
 * none, an empty order type a market order where a limit was meant.
 */
function refuseEmpty(field: WebhookField, value: unknown): void {
  if ((typeof value === 'string' && value.trim() === '') || (Array.isArray(value) && value.length === 0)) {
    throw invalid(field, 'is empty (a placeholder that came out empty?): give a value, or leave the field out');
  }
}

/** A time whose date part names a day the calendar has: Date.parse rolls 2026-02-30 over to March 2 (fuzz probe). */
function realDate(text: string): boolean {
  const m = /^\s*(\d{4})-(\d{2})-(\d{2})/.exec(text);
  if (!m) return true;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** An alert whose `time` lies further back than this is traded, with a warning saying how old it is. */
const STALE_ALERT_MS = 60_000;

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value.trim();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/**
 * Whether two aliases of one field say the same: a take-profit or stop-loss as the leg it
 * parses to, any other value as its trimmed text (`1` and `"1"` agree, `1` and `2` do not).
 */
function sameValue(field: WebhookField, a: unknown, b: unknown): boolean {
  if (field === 'takeProfit' || field === 'stopLoss') return canonicalLeg(field, a) === canonicalLeg(field, b);
  return canonicalJson(a) === canonicalJson(b);
}

/** A leg as the JSON of what it parses to; a leg that does not parse, as its own canonical JSON (so only an identical one agrees). */
function canonicalLeg(field: 'takeProfit' | 'stopLoss', value: unknown): string {
  try {
    return JSON.stringify(parseLeg(field, value));
  } catch {
    return `invalid ${canonicalJson(value)}`;
  }
}

/** JSON with object keys sorted and scalars as trimmed text, so spelling that means nothing cannot make two values differ. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  if (typeof value === 'string' || typeof value === 'number') return JSON.stringify(String(value).trim());
  return JSON.stringify(value) ?? 'undefined';
}

/**
 * Two names of one field with different values: the alert is refused rather than one of them
 * dropped, since the template is broken and either reading could place the wrong order.
 */
function conflictingAliases(field: WebhookField, first: string, second: string): AppError {
  const message = `'${first}' and '${second}' both give ${field}, with different values: send one`;
  return new AppError('VALIDATION_FAILED', `${first}, ${second}: ${message}`, {
    errors: [
      { path: first, message },
      { path: second, message },
    ],
  });
}

/** The longest symbol an alert may name (the API's `symbol` field: schemas.ts). */
const MAX_SYMBOL_LENGTH = 64;

/**
 * Parses an alert body (already JSON-decoded). Throws AppError VALIDATION_FAILED or
 * WEBHOOK_UNSUPPORTED; never returns partial garbage.
 */
export function parseWebhookPayload(body: unknown, now: Date): WebhookIntent {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalid('(body)', 'must be a JSON object');
  }
  const raw = body as Record<string, unknown>;
  const fields: Record<string, unknown> = {};
  /** The name each field was first given under. */
  const givenAs: Record<string, string> = {};
  const warnings: string[] = [];
  /** Stop-losses and take-profits under names webhooks do not read (foreignLeg, nestedLeg). */
  const foreign: { path: string; leg: 'stopLoss' | 'takeProfit' }[] = [];
  /** Features webhooks do not have that the alert asks for: refused on an order that may open a position, once the action is known. */
  const asked: { path: string; feature: string }[] = [];
  for (const [key, value] of Object.entries(raw)) {
    const feature = UNSUPPORTED_KEYS[key] ?? topLevelFeature(key);
    if (feature) {
      // Templates written for other products carry every switch, most of them off (`"trail": 0`):
      // only one that asks for the feature is refused.
      if (!switchedOff(value)) asked.push({ path: printable(key), feature });
      else warnings.push(`'${printable(key)}' ignored: ${feature} are off in this alert, and not supported by webhooks`);
      continue;
    }
    const canonical = fieldOf(key);
    if (!canonical) {
      // A trailing stop asked for by a value (stopLossType: "trailing", sl_type: "trail"), not a name.
      if (typeof value === 'string' && /stop|sl|type/i.test(key) && /^\s*trail(ing)?([\s_-]*stop)?\s*$/i.test(value)) {
        asked.push({ path: printable(key), feature: 'trailing stops' });
        continue;
      }
      const named = foreignLeg(key);
      const found = named && asksForLevel(value, named.plain) ? { path: printable(key), leg: named.leg } : nestedLeg(printable(key), value);
      // Refused for an order that may open a position, once the action is known; an exit ignores it like its own legs.
      if (found) foreign.push(found);
      else warnings.push(`unknown field '${printable(key)}' ignored`);
      continue;
    }
    // PickMyTrade's `tp`/`sl` set to 0 (or off) in a template mean no such leg, as other
    // products' switches do (re-probe 4: refused 400). `takeProfit: 0` in our own spelling stays
    // refused: a placeholder that came out 0.
    if ((key === 'tp' || key === 'sl') && (value === 0 || value === false || (typeof value === 'string' && LEG_OFF.test(value)))) {
      warnings.push(`'${key}' is off (${JSON.stringify(value)}): no ${canonical === 'takeProfit' ? 'take-profit' : 'stop-loss'} from it`);
      continue;
    }
    if (canonical in fields) {
      const first = givenAs[canonical]!;
      if (!sameValue(canonical, fields[canonical], value)) throw conflictingAliases(canonical, first, key);
      warnings.push(`'${key}' ignored: ${canonical} already given`);
      continue;
    }
    fields[canonical] = value;
    givenAs[canonical] = key;
  }

  const actionText = text(fields.action)?.toLowerCase();
  if (!actionText) throw invalid('action', 'required: buy, sell, long, short, close, flat, flatten or exit');
  if (actionText === 'breakeven') throw unsupported('breakeven moves');
  // An id JSON cannot carry exactly (a 64-bit snowflake, 1795836704356090881) reaches us rounded:
  // distinct alerts read as one, and all but the first were "repeats" (fuzz probe). Refused, to be quoted.
  if (typeof fields.id === 'number' && !Number.isSafeInteger(fields.id)) {
    const what = Number.isInteger(fields.id) ? 'a whole number too large for JSON to carry exactly (up to 9007199254740991 only)' : 'not a whole number';
    throw invalid('id', `${what}: send the id as a string, in quotes ("id": "{{...}}")`);
  }
  const id = text(fields.id);
  const common: Common = { warnings, alertDelayMs: null, ...(id !== undefined ? { id } : {}) };
  if (fields.time !== undefined) {
    const at = typeof fields.time === 'string' && realDate(fields.time) ? Date.parse(fields.time) : NaN;
    if (Number.isNaN(at)) warnings.push(`time '${printable(String(fields.time))}' is not an ISO-8601 time; ignored`);
    else {
      common.alertDelayMs = Math.max(0, now.getTime() - at);
      if (common.alertDelayMs > STALE_ALERT_MS) {
        warnings.push(`time ${String(fields.time)} is ${Math.round(common.alertDelayMs / 1000)} s before this alert arrived: a delayed or replayed alert, traded at today's prices`);
      } else if (at - now.getTime() > STALE_ALERT_MS) {
        // A time ahead of ours: the sender's clock, or a local time written without its offset (fuzz probe: silent).
        warnings.push(`time ${String(fields.time)} is ${Math.round((at - now.getTime()) / 1000)} s after this alert arrived: the sender's clock or time zone is off (TradingView's {{timenow}} is UTC), so its delay cannot be told`);
      }
    }
  }
  const symbol = text(fields.symbol);
  // As the API's own symbol field: a longer one names no contract, and would be echoed whole.
  if (symbol !== undefined && symbol.length > MAX_SYMBOL_LENGTH) throw invalid(givenAs.symbol ?? 'symbol', `at most ${MAX_SYMBOL_LENGTH} characters`);
  const position = parseMarketPosition(fields.marketPosition);
  // An exit of the whole position does not use the size: one that came out wrong is ignored with a
  // warning, as its qty is, not refused (fuzz probe: the position stayed open on a 400).
  const closesAll = FLATTEN_ACTIONS.has(actionText) || position === 'flat';
  const positionSize = closesAll ? undefined : parsePositionSize(fields.marketPositionSize);
  if (closesAll && fields.marketPositionSize !== undefined && fields.marketPositionSize !== null) {
    let size: number | undefined;
    try {
      size = parsePositionSize(fields.marketPositionSize);
    } catch {
      // Not a size at all: said below, like a nonzero one.
    }
    const why = position === 'flat' ? 'marketPosition flat' : `action ${actionText}`;
    if (size !== 0) warnings.push(`marketPositionSize ${printable(JSON.stringify(fields.marketPositionSize).replace(/^"(\d+)"$/, '$1'))} ignored: ${why} closes the whole position`);
  }
  const ignoredForFlatten = (why: string) => {
    for (const key of ['qty', 'orderType', 'price', 'stopPrice', 'takeProfit', 'stopLoss', 'timeInForce']) {
      if (fields[key] !== undefined) warnings.push(`'${key}' ignored ${why}`);
    }
    for (const f of [...foreign, ...asked]) warnings.push(`'${f.path}' ignored ${why}`);
  };

  if (FLATTEN_ACTIONS.has(actionText)) {
    ignoredForFlatten(`for action ${actionText}`);
    if (position !== undefined && position !== 'flat') warnings.push(`marketPosition '${position}' ignored for action ${actionText}`);
    return Object.assign({}, common, { kind: 'flatten' as const }, symbol !== undefined ? { symbol } : {});
  }
  const side = ACTIONS.get(actionText);
  if (!side) throw invalid('action', `'${printable(actionText)}' is not one of buy, sell, long, short, close, flat, flatten, exit`);
  // The strategy says where it stands after this order. Flat: the order closes its position,
  // so the alert is an exit of its symbol (cancel its orders, bracket legs included, and close
  // it), not a new order with a bracket of its own that would open the other way. Still on the
  // side the order reduces: a partial exit, an order that may only reduce the position, with no
  // bracket of its own (the position's legs are cut to what is left once it fills).
  if (position === 'flat') {
    ignoredForFlatten('when marketPosition is flat: the exit closes the whole position');
    return Object.assign({}, common, { kind: 'flatten' as const, exit: true as const }, symbol !== undefined ? { symbol } : {});
  }
  const reduce = position !== undefined && (position === 'long') !== (side === 'buy');
  if (reduce) {
    for (const key of ['takeProfit', 'stopLoss'] as const) {
      if (fields[key] !== undefined) warnings.push(`'${key}' ignored: a partial exit (marketPosition ${position}) only reduces the position`);
    }
    for (const f of [...foreign, ...asked]) warnings.push(`'${f.path}' ignored: a partial exit (marketPosition ${position}) only reduces the position`);
  } else if (asked.length > 0) {
    throw unsupported(asked[0]!.feature);
  } else if (foreign.length > 0) {
    // Refused only where the alert does not give that leg itself: with its own, the order is
    // protected as it asks (re-probe 5: an entry with takeProfit and stopLoss was refused for
    // carrying another product's field too).
    // A second or third one (take_profit_2, tp3, sl2) is another leg, not a spelling of its own (re-probe 6: dropped with a
    // warning), with or without a first one: refused as tp2 is (new-user probe: tp3 alone was a field webhooks do not read).
    const another = foreign.find((f) => /[2-9]$/.test(f.path.replace(/[^A-Za-z0-9]/g, '')));
    if (another) throw unsupported(another.leg === 'takeProfit' ? 'more than one take-profit' : 'more than one stop-loss');
    const missing = foreign.find((f) => fields[f.leg] === undefined);
    if (missing) throw foreignLegError(missing.path, missing.leg);
    for (const f of foreign) warnings.push(`'${f.path}' ignored: the alert's own '${f.leg}' is used`);
  }
  if (positionSize !== undefined && position === undefined) warnings.push(`'marketPositionSize' ignored without marketPosition`);
  const entry = position !== undefined && !reduce;
  if ((entry || reduce) && positionSize === 0) {
    throw invalid('marketPositionSize', `is 0 while marketPosition is ${position}: the template's placeholders disagree`);
  }

  const order: Partial<OrderInput> & { side: Side } = { side };
  if (symbol !== undefined) order.symbol = symbol;
  for (const key of ['qty', 'orderType', 'takeProfit', 'stopLoss'] as const) refuseEmpty(key, fields[key]);
  if (fields.qty !== undefined) order.qty = parseQty(fields.qty);
  if (fields.orderType !== undefined) order.type = parseOrderType(fields.orderType, givenAs.orderType);
  if (fields.price !== undefined && fields.price !== '') order.price = positivePrice('price', fields.price);
  if (fields.stopPrice !== undefined && fields.stopPrice !== '') order.stopPrice = positivePrice('stopPrice', fields.stopPrice);
  const tp = reduce ? null : parseLeg('takeProfit', fields.takeProfit);
  const sl = reduce ? null : parseLeg('stopLoss', fields.stopLoss);
  if (tp) order.takeProfit = tp;
  if (sl) order.stopLoss = sl;
  if (fields.timeInForce !== undefined) {
    const tif = String(fields.timeInForce).trim().toLowerCase();
    if (TIFS.has(tif)) order.timeInForce = tif as TimeInForce;
    else warnings.push(`timeInForce '${printable(String(fields.timeInForce))}' not supported; day used`);
  }
  const sized = positionSize !== undefined ? { positionSize } : {};
  const kind = reduce ? Object.assign({ reduce: true as const }, sized) : entry ? Object.assign({ entry: true as const }, sized) : {};
  const priceAs = givenAs.price;
  const limitNamed = order.price !== undefined && priceAs !== undefined && LIMIT_PRICE_NAMES.has(looseName(priceAs)) ? { limitPriceAs: priceAs } : {};
  return Object.assign({}, common, { kind: 'order' as const, order }, kind, limitNamed);
}

/**
 * Completes an alert's order from the token's strategy (the alert wins field by field)
 * and drops what does not apply: the `{{close}}` price TradingView templates put on
 * market orders is ignored with a warning rather than refused.
 */
export function completeOrder(
  order: Partial<OrderInput> & { side: Side },
  strategy: StrategyDefaults | null,
  warnings: string[],
  limitPriceAs?: string,
): OrderInput {
  const symbol = order.symbol ?? strategy?.symbol ?? undefined;
  const qty = order.qty ?? strategy?.qty ?? undefined;
  if (symbol === undefined) throw invalid('symbol', 'required (or set a symbol on the token’s strategy)');
  if (qty === undefined) throw invalid('qty', 'required (or set qty on the token’s strategy)');
  const type = order.type ?? strategy?.orderType ?? 'market';
  let price = order.price ?? null;
  const stopPrice = order.stopPrice ?? null;
  // A price named as a limit price meant a limit order: dropped, the order went out at market
  // (fuzz probe). The plain `price` of a market alert is TradingView's {{close}}: dropped, said.
  if (price !== null && limitPriceAs !== undefined && (type === 'market' || type === 'stop')) {
    throw invalid(
      'price',
      `given as '${printable(limitPriceAs)}', a limit price, on a ${type} order: a limit order is orderType 'limit' (or 'stop_limit') with its price; a take-profit is 'takeProfit' ({price} or {ticks}). Refused, so that the order is not placed at market where a limit was meant`,
    );
  }
  if (price !== null && (type === 'market' || type === 'stop')) {
    warnings.push(`price ignored for ${type} orders`);
    price = null;
  }
  // Not dropped like a market alert's {{close}} price: a trigger given to a market order meant a
  // stop order or a stop-loss, and dropped, the order went out at once with no stop (re-probe 5; the
  // API refuses it too).
  if (stopPrice !== null && (type === 'market' || type === 'limit')) {
    throw invalid(
      'stopPrice',
      `not used by ${type} orders: a stop order is orderType 'stop' (or 'stop_limit') with its trigger in stopPrice; a stop-loss is 'stopLoss' ({price} or {ticks}). Refused, so that the order is not placed at once where a trigger or a stop was meant`,
    );
  }
  return {
    symbol,
    side: order.side,
    qty,
    type,
    price,
    stopPrice,
    timeInForce: order.timeInForce ?? 'day',
    takeProfit: order.takeProfit ?? strategy?.takeProfit ?? null,
    stopLoss: order.stopLoss ?? strategy?.stopLoss ?? null,
    clientOrderId: null,
  };
}
