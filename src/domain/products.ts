/**
 * The local futures product catalogue: tick size, point value, listed months, expiry rule and
 * roll rule of every root tradegate resolves. Pure data; no broker round trip is needed to
 * resolve a symbol (DESIGN §5). Values follow the CME Group contract specifications.
 *
 * Calendar conventions (apply to every rule below):
 * - Business days are Monday–Friday. Exchange holidays are ignored, so a rule that lands on a
 *   holiday gives the weekday the exchange would skip; the broker remains the final authority.
 * - All dates are UTC calendar dates. A contract can be traded through its last trading day
 *   and is expired from 00:00 UTC of the following day. The front month changes at 00:00 UTC
 *   of the roll date: the day before the roll date the front is still the old contract, on the
 *   roll date it is the next listed contract.
 * - "FND" (first notice day) is taken as the last business day of the month before the
 *   contract month; physically delivered products roll before it so that a long front-month
 *   position is never exposed to delivery notices.
 * - "Listed ahead" is how many months past the current month a contract may lie and still be
 *   accepted as a full contract name (`ESZ6`). It keeps a one-digit year from silently meaning
 *   the next decade: `ZNH6` typed in 2027 is the expired 2026 contract, not a 2036 one.
 *   Values are at least the exchange's listing schedule, so a listed contract is never refused.
 *
 * | root | exchange | tick | $/point | $/tick | months | last trading day (expiry) | roll (front month moves on) | listed ahead |
 * |---|---|---|---|---|---|---|---|---|
 * | ES, MES, NQ, MNQ, RTY, M2K | CME | 0.25 (RTY, M2K 0.10) | ES 50, MES 5, NQ 20, MNQ 2, RTY 50, M2K 5 | ES 12.50, MES 1.25, NQ 5, MNQ 0.50, RTY 5, M2K 0.50 | H M U Z | third Friday of the contract month | 8 calendar days before expiry (the Thursday of the prior week) | 66 |
 * | YM, MYM | CBOT | 1 | YM 5, MYM 0.5 | 5, 0.50 | H M U Z | third Friday of the contract month | 8 calendar days before expiry | 66 |
 * | CL | NYMEX | 0.01 | 1000 | 10 | all 12 | 3 business days before the 25th of the month before the contract month (4 if the 25th is not a business day) | 3 business days before expiry | 132 |
 * | MCL | NYMEX | 0.01 | 100 | 1 | all 12 | one business day before CL: 4 business days before the 25th of the prior month (5 if the 25th is not a business day) | 3 business days before expiry | 132 |
 * | NG | NYMEX | 0.001 | 10000 | 10 | all 12 | third-last business day of the month before the contract month | 3 business days before expiry | 144 |
 * | GC, MGC | COMEX | 0.10 | GC 100, MGC 10 | 10, 1 | G J M Q V Z | third-last business day of the contract month | 3 business days before FND | 72 |
 * | SI | COMEX | 0.005 | 5000 | 25 | H K N U Z | third-last business day of the contract month | 3 business days before FND | 66 |
 * | HG | COMEX | 0.0005 | 25000 | 12.50 | H K N U Z | third-last business day of the contract month | 3 business days before FND | 66 |
 * | ZB, ZN | CBOT | ZB 1/32, ZN 1/64 | 1000 | 31.25, 15.625 | H M U Z | 7th business day before the last business day of the contract month | 3 business days before FND | 12 |
 * | ZF | CBOT | 1/128 | 1000 | 7.8125 | H M U Z | last business day of the contract month | 3 business days before FND | 12 |
 * | ZC | CBOT | 0.25 ¢/bu | 50 | 12.50 | H K N U Z | business day before the 15th of the contract month | 3 business days before FND | 40 |
 * | ZS | CBOT | 0.25 ¢/bu | 50 | 12.50 | F H K N Q U X | business day before the 15th of the contract month | 3 business days before FND | 40 |
 * | 6E | CME | 0.00005 | 125000 | 6.25 | H M U Z | 2nd business day before the third Wednesday of the contract month | 5 business days before expiry | 63 |
 *
 * Exchange prefixes accepted in `<EXCHANGE>:<ROOT>1!` (TradingView style) and the exchange each
 * one stands for; a prefix is accepted only for products of that exchange, so
 * `CME_MINI:ES1!` resolves and `NYMEX:ES1!` is UNKNOWN_SYMBOL:
 *
 * | prefix | exchange |
 * |---|---|
 * | CME, CME_DL, CME_MINI, CME_MINI_DL | CME |
 * | CBOT, CBOT_DL, CBOT_MINI, CBOT_MINI_DL | CBOT |
 * | NYMEX, NYMEX_DL | NYMEX |
 * | COMEX, COMEX_DL | COMEX |
 */

export type Exchange = 'CME' | 'CBOT' | 'NYMEX' | 'COMEX';

/** CME month codes, January (F) to December (Z). */
export type MonthCode = 'F' | 'G' | 'H' | 'J' | 'K' | 'M' | 'N' | 'Q' | 'U' | 'V' | 'X' | 'Z';

/** Month codes in calendar order; index + 1 is the month number. */
export const MONTH_CODES: readonly MonthCode[] = Object.freeze(['F', 'G', 'H', 'J', 'K', 'M', 'N', 'Q', 'U', 'V', 'X', 'Z']);

/** When a contract stops trading (its last trading day), as data so it can be documented and tested. */
export type ExpiryRule =
  | { readonly kind: 'nth-weekday'; readonly weekday: number; readonly nth: number; readonly text: string }
  | { readonly kind: 'before-25th-prior-month'; readonly businessDays: number; readonly text: string }
  | { readonly kind: 'nth-last-business-day'; readonly monthOffset: 0 | -1; readonly nth: number; readonly text: string }
  | { readonly kind: 'business-days-before-day'; readonly day: number; readonly businessDays: number; readonly text: string }
  | { readonly kind: 'business-days-before-nth-weekday'; readonly weekday: number; readonly nth: number; readonly businessDays: number; readonly text: string };

/** When the front month moves on to the next listed contract. */
export type RollRule =
  | { readonly kind: 'days-before-expiry'; readonly days: number; readonly text: string }
  | { readonly kind: 'business-days-before-expiry'; readonly businessDays: number; readonly text: string }
  | { readonly kind: 'business-days-before-first-notice'; readonly businessDays: number; readonly text: string };

/** One futures product (root) of the catalogue. */
export interface Product {
  readonly root: string;
  readonly description: string;
  readonly exchange: Exchange;
  /** Minimum price increment, in price points. */
  readonly tickSize: number;
  /** US dollars per one full price point (Tradovate `valuePerPoint`). */
  readonly pointValue: number;
  /** US dollars per tick (tickSize × pointValue). */
  readonly tickValue: number;
  /**
   * A typical price level of the product: the centre of the band a price must fall in
   * (PRICE_BAND_FACTOR either way) and where the paper broker's price walk starts.
   */
  readonly referencePrice: number;
  /** Listed contract months, in calendar order. */
  readonly months: readonly MonthCode[];
  readonly expiry: ExpiryRule;
  readonly roll: RollRule;
  /** How far ahead (months from the current month) a full contract name is accepted. */
  readonly listedMonthsAhead: number;
}

const QUARTERLY: readonly MonthCode[] = ['H', 'M', 'U', 'Z'];
const MONTHLY: readonly MonthCode[] = MONTH_CODES;
const METALS_HKNUZ: readonly MonthCode[] = ['H', 'K', 'N', 'U', 'Z'];

const THIRD_FRIDAY: ExpiryRule = { kind: 'nth-weekday', weekday: 5, nth: 3, text: 'third Friday of the contract month' };
const CL_EXPIRY: ExpiryRule = {
  kind: 'before-25th-prior-month',
  businessDays: 3,
  text: '3 business days before the 25th of the month before the contract month (4 if the 25th is not a business day)',
};
const MCL_EXPIRY: ExpiryRule = {
  kind: 'before-25th-prior-month',
  businessDays: 4,
  text: '4 business days before the 25th of the month before the contract month (5 if the 25th is not a business day), one business day before CL',
};
const NG_EXPIRY: ExpiryRule = { kind: 'nth-last-business-day', monthOffset: -1, nth: 3, text: 'third-last business day of the month before the contract month' };
const METALS_EXPIRY: ExpiryRule = { kind: 'nth-last-business-day', monthOffset: 0, nth: 3, text: 'third-last business day of the contract month' };
const LONG_TREASURY_EXPIRY: ExpiryRule = {
  kind: 'nth-last-business-day',
  monthOffset: 0,
  nth: 8,
  text: '7th business day before the last business day of the contract month',
};
const ZF_EXPIRY: ExpiryRule = { kind: 'nth-last-business-day', monthOffset: 0, nth: 1, text: 'last business day of the contract month' };
const GRAIN_EXPIRY: ExpiryRule = { kind: 'business-days-before-day', day: 15, businessDays: 1, text: 'business day before the 15th of the contract month' };
const FX_EXPIRY: ExpiryRule = {
  kind: 'business-days-before-nth-weekday',
  weekday: 3,
  nth: 3,
  businessDays: 2,
  text: '2nd business day before the third Wednesday of the contract month',
};

const EQUITY_ROLL: RollRule = { kind: 'days-before-expiry', days: 8, text: '8 calendar days before expiry (Thursday of the prior week)' };
const ENERGY_ROLL: RollRule = { kind: 'business-days-before-expiry', businessDays: 3, text: '3 business days before expiry' };
const FX_ROLL: RollRule = { kind: 'business-days-before-expiry', businessDays: 5, text: '5 business days before expiry' };
const DELIVERY_ROLL: RollRule = {
  kind: 'business-days-before-first-notice',
  businessDays: 3,
  text: '3 business days before first notice day (last business day of the month before the contract month)',
};

type ProductSpec = Omit<Product, 'tickValue' | 'referencePrice'>;

/** Reference price levels (mid-2020s), by root. */
const REFERENCE_PRICES: Readonly<Record<string, number>> = {
  ES: 5000, MES: 5000, NQ: 18000, MNQ: 18000, YM: 39000, MYM: 39000, RTY: 2000, M2K: 2000, CL: 75, MCL: 75,
  GC: 2300, MGC: 2300, SI: 28, HG: 4.5, NG: 2.5, ZB: 118, ZN: 110, ZF: 106, ZC: 450, ZS: 1200, '6E': 1.08,
};

function equity(root: string, description: string, exchange: Exchange, tickSize: number, pointValue: number): ProductSpec {
  return { root, description, exchange, tickSize, pointValue, months: QUARTERLY, expiry: THIRD_FRIDAY, roll: EQUITY_ROLL, listedMonthsAhead: 66 };
}

const SPECS: readonly ProductSpec[] = [
  equity('ES', 'E-mini S&P 500', 'CME', 0.25, 50),
  equity('MES', 'Micro E-mini S&P 500', 'CME', 0.25, 5),
  equity('NQ', 'E-mini Nasdaq-100', 'CME', 0.25, 20),
  equity('MNQ', 'Micro E-mini Nasdaq-100', 'CME', 0.25, 2),
  equity('YM', 'E-mini Dow ($5)', 'CBOT', 1, 5),
  equity('MYM', 'Micro E-mini Dow', 'CBOT', 1, 0.5),
  equity('RTY', 'E-mini Russell 2000', 'CME', 0.1, 50),
  equity('M2K', 'Micro E-mini Russell 2000', 'CME', 0.1, 5),
  { root: 'CL', description: 'Crude Oil (WTI)', exchange: 'NYMEX', tickSize: 0.01, pointValue: 1000, months: MONTHLY, expiry: CL_EXPIRY, roll: ENERGY_ROLL, listedMonthsAhead: 132 },
  { root: 'MCL', description: 'Micro WTI Crude Oil', exchange: 'NYMEX', tickSize: 0.01, pointValue: 100, months: MONTHLY, expiry: MCL_EXPIRY, roll: ENERGY_ROLL, listedMonthsAhead: 132 },
  { root: 'NG', description: 'Henry Hub Natural Gas', exchange: 'NYMEX', tickSize: 0.001, pointValue: 10000, months: MONTHLY, expiry: NG_EXPIRY, roll: ENERGY_ROLL, listedMonthsAhead: 144 },
  { root: 'GC', description: 'Gold', exchange: 'COMEX', tickSize: 0.1, pointValue: 100, months: ['G', 'J', 'M', 'Q', 'V', 'Z'], expiry: METALS_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 72 },
  { root: 'MGC', description: 'Micro Gold', exchange: 'COMEX', tickSize: 0.1, pointValue: 10, months: ['G', 'J', 'M', 'Q', 'V', 'Z'], expiry: METALS_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 72 },
  { root: 'SI', description: 'Silver', exchange: 'COMEX', tickSize: 0.005, pointValue: 5000, months: METALS_HKNUZ, expiry: METALS_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 66 },
  { root: 'HG', description: 'Copper', exchange: 'COMEX', tickSize: 0.0005, pointValue: 25000, months: METALS_HKNUZ, expiry: METALS_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 66 },
  { root: 'ZB', description: 'U.S. Treasury Bond', exchange: 'CBOT', tickSize: 1 / 32, pointValue: 1000, months: QUARTERLY, expiry: LONG_TREASURY_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 12 },
  { root: 'ZN', description: '10-Year U.S. Treasury Note', exchange: 'CBOT', tickSize: 1 / 64, pointValue: 1000, months: QUARTERLY, expiry: LONG_TREASURY_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 12 },
  { root: 'ZF', description: '5-Year U.S. Treasury Note', exchange: 'CBOT', tickSize: 1 / 128, pointValue: 1000, months: QUARTERLY, expiry: ZF_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 12 },
  { root: 'ZC', description: 'Corn', exchange: 'CBOT', tickSize: 0.25, pointValue: 50, months: ['H', 'K', 'N', 'U', 'Z'], expiry: GRAIN_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 40 },
  { root: 'ZS', description: 'Soybeans', exchange: 'CBOT', tickSize: 0.25, pointValue: 50, months: ['F', 'H', 'K', 'N', 'Q', 'U', 'X'], expiry: GRAIN_EXPIRY, roll: DELIVERY_ROLL, listedMonthsAhead: 40 },
  { root: '6E', description: 'Euro FX', exchange: 'CME', tickSize: 0.00005, pointValue: 125000, months: QUARTERLY, expiry: FX_EXPIRY, roll: FX_ROLL, listedMonthsAhead: 63 },
];

function freezeProduct(spec: ProductSpec): Product {
  // tickValue is rounded to cents' fractions so 0.00005 × 125000 reads 6.25, not 6.250000000000001.
  const tickValue = Math.round(spec.tickSize * spec.pointValue * 1e6) / 1e6;
  const referencePrice = REFERENCE_PRICES[spec.root];
  if (referencePrice === undefined) throw new Error(`no reference price for ${spec.root}`);
  return Object.freeze({ ...spec, months: Object.freeze([...spec.months]), expiry: Object.freeze(spec.expiry), roll: Object.freeze(spec.roll), tickValue, referencePrice });
}

const PRODUCTS: readonly Product[] = Object.freeze(SPECS.map(freezeProduct).sort((a, b) => (a.root < b.root ? -1 : 1)));
const BY_ROOT: ReadonlyMap<string, Product> = new Map(PRODUCTS.map((p) => [p.root, p]));

/** Longest root length in the catalogue; symbol parsing tries roots from this length down. */
export const MAX_ROOT_LENGTH = PRODUCTS.reduce((n, p) => Math.max(n, p.root.length), 0);

/** Exchange prefixes of `<EXCHANGE>:<ROOT>1!` and the exchange each stands for. */
export const EXCHANGE_PREFIXES: ReadonlyMap<string, Exchange> = new Map<string, Exchange>([
  ['CME', 'CME'],
  ['CME_DL', 'CME'],
  ['CME_MINI', 'CME'],
  ['CME_MINI_DL', 'CME'],
  ['CBOT', 'CBOT'],
  ['CBOT_DL', 'CBOT'],
  ['CBOT_MINI', 'CBOT'],
  ['CBOT_MINI_DL', 'CBOT'],
  ['NYMEX', 'NYMEX'],
  ['NYMEX_DL', 'NYMEX'],
  ['COMEX', 'COMEX'],
  ['COMEX_DL', 'COMEX'],
]);

/** Every product of the catalogue, sorted by root. */
export function listProducts(): readonly Product[] {
  return PRODUCTS;
}

/** The product for a root (case-insensitive), or undefined if the root is not in the catalogue. */
export function getProduct(root: string): Product | undefined {
  return BY_ROOT.get(root) ?? (root.length <= MAX_ROOT_LENGTH ? BY_ROOT.get(root.toUpperCase()) : undefined);
}

const MONTH_NUMBER: ReadonlyMap<string, number> = new Map(MONTH_CODES.map((code, i) => [code, i + 1]));

/** Month number 1..12 of a month code, or undefined for anything that is not one. */
export function monthNumber(code: string): number | undefined {
  return MONTH_NUMBER.get(code);
}

/** Month code of a month number 1..12. */
export function monthCode(month: number): MonthCode {
  const code = MONTH_CODES[month - 1];
  if (code === undefined) throw new RangeError(`month out of range: ${month}`);
  return code;
}

/** Whether `code` is one of the product's listed contract months. */
export function isListedMonth(product: Product, code: string): code is MonthCode {
  return product.months.includes(code as MonthCode);
}
