/**
 * zod schemas of the risk guards API: an account's guards (PUT replaces them whole; a field
 * left out means "no such guard"), a token's or key's narrowing (a field left out narrows
 * nothing), lock bodies and the guards view. Shared by the routes and `/api-docs`.
 */
import { z } from 'zod';
import { ORDER_QTY_CEILING } from '../domain/orders.js';
import { getProduct, listProducts } from '../domain/products.js';
import { PLAIN_TEXT, PLAIN_TEXT_MESSAGE } from '../domain/plain-text.js';
import { isTimeZone, parseClock, WEEKDAYS, type Weekday } from '../domain/trading-time.js';
import { CME_DAY } from '../domain/trading-time.js';

/** At most this many windows may cover one weekday. */
export const MAX_WINDOWS_PER_DAY = 8;

const contracts = z.number().max(ORDER_QTY_CEILING).int().min(0);
const money = z.number().finite().positive().max(1_000_000_000);
const clock = z
  .string()
  .refine((t) => parseClock(t) !== null, 'HH:MM from 00:00 to 24:00')
  // The same rule for clients that generate requests from the document (parseClock decides).
  .meta({ pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$' })
  .describe('Local time HH:MM (24:00 = end of day)');

const windowSchema = z
  .strictObject({
    days: z.array(z.enum(WEEKDAYS as [Weekday, ...Weekday[]])).min(1).max(7).describe('Days the window opens on (sun … sat)'),
    // 24:00 ends a day; a window cannot start there (the document said it could: clients probe).
    start: clock.meta({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$' }).describe('Local time HH:MM, 00:00 to 23:59; must differ from `end`'),
    end: clock.describe('Local time HH:MM; before `start` = the window runs past midnight into the next day'),
  })
  .refine((w) => w.start !== w.end && w.start !== '24:00', { message: 'start and end must differ (and start before 24:00)', path: ['end'] });

const windowList = z
  .array(windowSchema)
  .min(1)
  .max(MAX_WINDOWS_PER_DAY * 7)
  .refine((list) => WEEKDAYS.every((d) => list.filter((w) => w.days.includes(d)).length <= MAX_WINDOWS_PER_DAY), `at most ${MAX_WINDOWS_PER_DAY} windows per weekday`);

/** Zone names the database keeps as fixed offsets, with what their users usually mean. */
const FIXED_ABBREVIATIONS = new Map([
  ['EST', 'UTC-5 all year'],
  ['MST', 'UTC-7 all year'],
  ['HST', 'UTC-10 all year'],
]);
const FIXED_ABBREVIATIONS_MEANT = new Map([
  ['EST', 'America/New_York'],
  ['MST', 'America/Denver (America/Phoenix keeps UTC-7 all year)'],
  ['HST', 'Pacific/Honolulu'],
]);

const timeZone = z
  .string()
  .min(1)
  .max(64)
  .refine(isTimeZone, 'an IANA time zone name, e.g. America/Chicago')
  // The time zone database's EST, MST and HST are fixed offsets (America/Panama, Phoenix,
  // Honolulu): a trader who types EST means New York, and an hour off all summer (web probe).
  .superRefine((tz, ctx) => {
    const fixed = FIXED_ABBREVIATIONS.get(tz.toUpperCase());
    if (fixed) ctx.addIssue({ code: 'custom', message: `${tz} is a fixed offset, ${fixed} with no daylight saving; name the place instead, e.g. ${FIXED_ABBREVIATIONS_MEANT.get(tz.toUpperCase())}` });
  })
  // Stored as the time zone database spells it (`america/chicago` was stored as typed: web probe),
  // but under the name given: ICU resolves today's names to the old links they replaced
  // (Asia/Kolkata → Asia/Calcutta, Europe/Kyiv → Europe/Kiev), and a zone read back under another
  // name than the one set looked like a different setting (fuzz probe).
  .transform((tz) => {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
    // Only between place names: EST5EDT and the like are stored as the place they mean.
    return resolved.toLowerCase() === tz.toLowerCase() || !tz.includes('/') ? resolved : tz;
  })
  .default(CME_DAY.timeZone)
  .describe('IANA time zone of the windows (default America/Chicago, daylight saving included)');

const tradingWindowsSchema = z
  .strictObject({
    timeZone,
    windows: windowList,
    flattenAtEnd: z.boolean().default(false).describe('Cancel working orders and close positions when a window ends'),
  })
  .describe('Entries are allowed only inside a window; exits, cancels and flatten always');

const products = z
  .array(z.string().regex(/^[A-Za-z0-9]{1,8}$/, 'a product root such as ES or MNQ').transform((p) => p.toUpperCase()))
  .max(100)
  // Each root once (`es, ES` was stored twice: web probe).
  .transform((roots) => [...new Set(roots)])
  // An unknown root would silently block every entry: refused, naming each one.
  .superRefine((roots, ctx) => {
    const unknown = [...new Set(roots.filter((r) => getProduct(r) === undefined))];
    if (unknown.length) ctx.addIssue({ code: 'custom', message: `unknown product root${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${listProducts().map((p) => p.root).join(', ')})` });
  })
  .describe(`Product roots entries may trade, from the catalogue: ${listProducts().map((p) => p.root).join(', ')} (an unknown root is a 400)`);

const direction = z.enum(['both', 'long_only', 'short_only']);

/** PUT /accounts/{id}/guards: the account's guards (replaced whole). */
export const guardConfigBodySchema = z.strictObject({
  maxOrderQty: contracts.min(1).nullable().default(null).describe('Contracts per order'),
  maxPositionPerContract: contracts.nullable().default(null).describe('Exposure per contract: |position| counting working entries'),
  maxPositionTotal: contracts.nullable().default(null).describe('Exposure summed over the account’s contracts'),
  allowedProducts: products.nullable().default(null),
  direction: direction.default('both'),
  noPyramiding: z.boolean().default(false).describe('No entry in the direction of the position or of working entries'),
  flatOnly: z.boolean().default(false).describe('Entries only while flat in that contract with nothing working there'),
  webhookFlatOnly: z.boolean().default(false).describe('flatOnly for webhook alerts only'),
  tradingWindows: tradingWindowsSchema.nullable().default(null),
  dailyLossLimit: money.nullable().default(null).describe('Day P&L (realized − fees + open) at or below −limit: cancel, flatten, lock until 17:00 America/Chicago'),
  dailyProfitTarget: money.nullable().default(null).describe('Day P&L at or above the target: the same'),
});

/** A webhook token's or API key's narrowing: only stricter than the account's guards, never wider. */
export const guardNarrowingSchema = z
  .strictObject({
    maxOrderQty: contracts.min(1).optional(),
    maxPositionPerContract: contracts.optional(),
    maxPositionTotal: contracts.optional(),
    allowedProducts: products.optional(),
    direction: direction.optional(),
    noPyramiding: z.boolean().optional(),
    flatOnly: z.boolean().optional(),
    tradingWindows: z.strictObject({ timeZone, windows: windowList }).transform((tw) => ({ ...tw, flattenAtEnd: false })).optional(),
  })
  .describe('Narrows the account’s guards for this credential: the stricter value of each wins; a field left out narrows nothing');

/** POST /accounts/{id}/lock body (optional). */
export const lockBodySchema = z.strictObject({
  flatten: z.boolean().default(true).describe('Cancel working orders and close positions (default true)'),
  reason: z
    .string()
    .min(1)
    .max(200)
    .regex(PLAIN_TEXT, PLAIN_TEXT_MESSAGE)
    .optional(),
});

const isoTime = z.string().describe('ISO-8601 UTC time');

/** The lock as shown. */
export const lockViewSchema = z.object({
  guard: z.enum(['kill_switch', 'daily_loss', 'profit_target']),
  since: isoTime,
  until: isoTime.nullable().describe('null: until unlocked (kill switch)'),
  detail: z.string(),
  flattenPending: z
    .boolean()
    .describe(
      'Kill switch: the flatten it asked for has not run yet (the connection was not CONNECTED; it runs once it is), or ran while an order sent before the lock had no known outcome (broker timeout; it runs again until that order is known)',
    ),
});

const guardConfigSchema = guardConfigBodySchema;

/** GET/PUT /accounts/{id}/guards and lock/unlock answers. */
export const guardsViewSchema = z.object({
  accountId: z.string(),
  guards: guardConfigSchema,
  lock: lockViewSchema.nullable(),
  live: z
    .object({
      day: z.object({ start: isoTime, end: isoTime, realized: z.number(), fees: z.number(), open: z.number(), pnl: z.number() }),
      inWindow: z.boolean().nullable(),
      positions: z.array(z.object({ symbol: z.string(), net: z.number(), buying: z.number(), selling: z.number(), exposure: z.number() })),
    })
    .nullable()
    .describe('What the connection’s actor sees now (as of its last sync while the connection is not CONNECTED); null while no actor runs the account, and always null for a key without the read scope'),
  flatten: z
    .unknown()
    .optional()
    .describe('lock: the flatten outcome (cancelled orders, closed positions), or `{error}` saying why it has not run yet (it runs once the connection is CONNECTED; `lock.flattenPending`)'),
});

/** GET/PUT /api-keys/{id}/guards answer. */
export const keyGuardsViewSchema = z.object({ keyId: z.string(), guards: guardNarrowingSchema.nullable() });

export type GuardConfigBody = z.output<typeof guardConfigBodySchema>;
export type GuardNarrowingBody = z.output<typeof guardNarrowingSchema>;
export type LockBody = z.output<typeof lockBodySchema>;
