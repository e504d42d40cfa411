/**
 * Symbol resolution (DESIGN §5): turns what a client or an alert sends (`ES`, `ES1!`, `ES!`,
 * `CME_MINI:ES1!`, `ESZ6`, `ESZ26`, `ESZ2026`, `ES 12-26`) into one tradable contract name (`ESZ6`), or a coded
 * UNKNOWN_SYMBOL result. A pure function of (input, now); it never throws, whatever the input.
 *
 * Forms (input is trimmed and accepted in any ASCII case; output is upper-case):
 *
 * | form | example | result |
 * |---|---|---|
 * | `contract` `<ROOT><month><1-digit year>` | `ESZ6` | that contract: the month must be listed for the root, the year is the nearest year ≥ now's year ending in that digit, and the contract must be unexpired and within the product's listing horizon |
 * | `root` `<ROOT>` | `ES` | front month |
 * | `continuous` `<ROOT>1!` | `ES1!` | front month |
 * | `bang` `<ROOT>!` | `ES!` | front month |
 * | `exchange-continuous` `<EXCHANGE>:<ROOT>1!` | `CME_MINI:ES1!` | front month; the prefix must be known and name the product's exchange |
 * | `two-digit-year` `<ROOT><month><2-digit year>` | `ESZ26` | front month, as the spec says for this charting-platform form; the month must still be listed for the root |
 * | `four-digit-year` `<ROOT><month><4-digit year>` | `ESZ2026` | that contract (TradingView's ticker of a dated contract's chart), checked like `contract`: listed, unexpired, within the listing horizon |
 * | `month-year` `<ROOT> <MM>-<YY>` | `ES 12-26` | that contract (NinjaTrader's instrument name, which CrossTrade alerts carry), checked like `four-digit-year`; one space, two-digit month and year (20YY) |
 *
 * Front month: the nearest listed contract whose roll date (products.ts) is still ahead of
 * `now`'s UTC date. Roots are matched longest first (`MES` before `ES`; `M2K`, `6E` contain
 * digits), by map lookups only: no regular expression runs per call.
 */
import { civilOfDay, dateOfDay, dayOf, expiryDay, isoDay, rollDay } from './contract-calendar.js';
import { EXCHANGE_PREFIXES, MAX_ROOT_LENGTH, getProduct, isListedMonth, monthCode, monthNumber } from './products.js';
import type { MonthCode, Product } from './products.js';

export { getProduct, listProducts } from './products.js';
export type { Exchange, MonthCode, Product } from './products.js';

/** Which accepted form the input had. */
export type SymbolForm = 'contract' | 'root' | 'continuous' | 'bang' | 'exchange-continuous' | 'two-digit-year' | 'four-digit-year' | 'month-year';

/** One dated contract of a product. */
export interface Contract {
  /** Tradovate-style name: root, month code, last digit of the year, e.g. `ESZ6`. */
  contract: string;
  root: string;
  product: Product;
  monthCode: MonthCode;
  /** Four-digit contract year. */
  year: number;
  /** Last trading day, ISO date `YYYY-MM-DD` (UTC). */
  expiry: string;
  /** Day the front month moves past this contract, ISO date `YYYY-MM-DD` (UTC). */
  rollDate: string;
}

/** A successful resolution. */
export interface ResolvedContract extends Contract {
  ok: true;
  form: SymbolForm;
}

/** A failed resolution; `symbol` is the input (cut to 64 characters), `reason` says why. */
export interface UnknownSymbol {
  ok: false;
  code: 'UNKNOWN_SYMBOL';
  symbol: string;
  reason: string;
}

export type ResolvedSymbol = ResolvedContract | UnknownSymbol;

// Anything longer cannot be a symbol (`CBOT_MINI_DL:MYM1!` is 18); refusing early bounds the work.
const MAX_INPUT_LENGTH = 32;
const MAX_ECHO_LENGTH = 64;
const CODE_0 = 48;
const CODE_9 = 57;

// Results depend only on (input, UTC day), so the hot path (the same few symbols all day) is
// one map lookup. Entries are frozen because callers share them; the map is cleared when full
// so random input cannot grow it.
const resultCache = new Map<string, { day: number; result: ResolvedSymbol }>();
const RESULT_CACHE_LIMIT = 2000;

/** Resolves a client symbol to one contract at `now`; never throws. */
export function resolveSymbol(input: string, now: Date): ResolvedSymbol {
  if (typeof input !== 'string') return unknown('', 'symbol must be a string');
  const today = now instanceof Date ? dayOf(now) : Number.NaN;
  if (!Number.isFinite(today)) return unknown(input, 'no valid current date to resolve against');
  const cacheable = input.length <= MAX_INPUT_LENGTH;
  const cached = cacheable ? resultCache.get(input) : undefined;
  if (cached !== undefined && cached.day === today) return cached.result;
  let result: ResolvedSymbol;
  try {
    result = Object.freeze(resolveText(input, today));
  } catch {
    // Only reachable with a date outside what the calendar can represent (years beyond 9999).
    return unknown(input, 'symbol cannot be resolved at this date');
  }
  if (cacheable) {
    if (resultCache.size >= RESULT_CACHE_LIMIT) resultCache.clear();
    resultCache.set(input, { day: today, result });
  }
  return result;
}

function resolveText(input: string, today: number): ResolvedSymbol {
  const text = normalise(input);
  if (text === undefined) {
    return unknown(input, input.trim().length === 0 ? 'symbol is empty' : 'symbol is too long or contains characters other than printable ASCII');
  }
  const space = text.indexOf(' ');
  if (space >= 0) return resolveMonthYear(input, text, space, today);
  const colon = text.indexOf(':');
  if (colon >= 0) return resolvePrefixed(input, text, colon, today);
  let firstFailure: string | undefined;
  for (let len = Math.min(MAX_ROOT_LENGTH, text.length); len >= 1; len -= 1) {
    const product = getProduct(text.slice(0, len));
    if (product === undefined) continue;
    const result = resolveSuffix(input, product, text.slice(len), today);
    if (result.ok) return result;
    firstFailure ??= result.reason;
  }
  return unknown(input, firstFailure ?? 'no product in the catalogue matches this symbol');
}

/** The front-month contract of a root at `now`, or undefined for an unknown root. */
export function frontMonth(root: string, now: Date): Contract | undefined {
  const product = getProduct(root);
  const today = dayOf(now);
  if (product === undefined || !Number.isFinite(today)) return undefined;
  return frontContract(product, today);
}

/** Last trading day (00:00 UTC) of a contract; undefined for an unknown root or unlisted month. */
export function contractExpiry(root: string, code: string, year: number): Date | undefined {
  const found = listedMonth(root, code, year);
  return found && dateOfDay(expiryDay(found.product, year, found.month));
}

/** Roll date (00:00 UTC, when the front month moves on) of a contract; undefined if not listed. */
export function rollDate(root: string, code: string, year: number): Date | undefined {
  const found = listedMonth(root, code, year);
  return found && dateOfDay(rollDay(found.product, year, found.month));
}

/** The product of a full contract name such as `ESZ6` (listed month, one-digit year), else undefined. */
export function contractRoot(contractName: string): Product | undefined {
  if (typeof contractName !== 'string' || contractName.length < 3 || contractName.length > MAX_ROOT_LENGTH + 2) return undefined;
  const name = contractName.toUpperCase();
  const root = name.slice(0, -2);
  const product = getProduct(root);
  const digit = name.charCodeAt(name.length - 1);
  if (product === undefined || digit < CODE_0 || digit > CODE_9) return undefined;
  return isListedMonth(product, name.charAt(name.length - 2)) ? product : undefined;
}

// Contract records are immutable facts of (product, year, month): built once, then shared.
// Bounded so that resolving across centuries (property tests) cannot grow it without limit.
interface ContractEntry {
  contract: Contract;
  expiryDay: number;
  rollDay: number;
}
const contractCache = new Map<Product, Map<number, ContractEntry>>();
const CONTRACT_CACHE_LIMIT = 1000;

/** The contract record of a product's month (1..12) and four-digit year. */
export function contractOf(product: Product, year: number, month: number): Contract {
  return contractEntry(product, year, month).contract;
}

function contractEntry(product: Product, year: number, month: number): ContractEntry {
  let byMonth = contractCache.get(product);
  if (byMonth === undefined) {
    byMonth = new Map();
    contractCache.set(product, byMonth);
  }
  const key = year * 12 + month;
  const cached = byMonth.get(key);
  if (cached !== undefined) return cached;
  if (byMonth.size >= CONTRACT_CACHE_LIMIT) byMonth.clear();
  const entry = { contract: buildContract(product, year, month), expiryDay: expiryDay(product, year, month), rollDay: rollDay(product, year, month) };
  byMonth.set(key, entry);
  return entry;
}

function buildContract(product: Product, year: number, month: number): Contract {
  const code = monthCode(month);
  return Object.freeze({
    contract: `${product.root}${code}${year % 10}`,
    root: product.root,
    product,
    monthCode: code,
    year,
    expiry: isoDay(expiryDay(product, year, month)),
    rollDate: isoDay(rollDay(product, year, month)),
  });
}

function listedMonth(root: string, code: string, year: number): { product: Product; month: number } | undefined {
  const product = getProduct(root);
  const month = monthNumber(typeof code === 'string' ? code.toUpperCase() : '');
  if (product === undefined || month === undefined || !isListedMonth(product, monthCode(month)) || !Number.isInteger(year)) return undefined;
  return { product, month };
}

/**
 * Trimmed, upper-cased printable-ASCII text, or undefined when it cannot be a symbol. Inside it, only
 * the month-year form's single space (ASCII 0x20) is allowed; tabs and other blanks are not.
 */
function normalise(input: string): string | undefined {
  // Checked before toUpperCase: Unicode case mapping turns 'ſ' into 'S' and 'ß' into 'SS'.
  const trimmed = input.length > MAX_INPUT_LENGTH * 4 ? input.slice(0, MAX_INPUT_LENGTH * 4).trim() : input.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_INPUT_LENGTH) return undefined;
  for (let i = 0; i < trimmed.length; i += 1) {
    const c = trimmed.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return undefined;
  }
  return trimmed.toUpperCase();
}

/** `<ROOT> <MM>-<YY>` (NinjaTrader's `ES 12-26`): that contract of the year 20YY. */
function resolveMonthYear(input: string, text: string, space: number, today: number): ResolvedSymbol {
  const root = text.slice(0, space);
  const rest = text.slice(space + 1);
  const shaped = rest.length === 5 && rest.charAt(2) === '-' && allDigits(rest.slice(0, 2), 0) && allDigits(rest.slice(3), 0);
  if (!shaped) return unknown(input, `a symbol with a space must be <ROOT> <MM>-<YY>, e.g. ES 12-26`);
  const product = getProduct(root);
  if (product === undefined) return unknown(input, `unknown root ${root}`);
  const month = Number(rest.slice(0, 2));
  if (month < 1 || month > 12) return unknown(input, `${rest.slice(0, 2)} is not a month`);
  const code = monthCode(month);
  if (!isListedMonth(product, code)) {
    return unknown(input, `${code} (month ${month}) is not a listed month for ${product.root} (listed: ${product.months.join(' ')})`);
  }
  return resolveDatedContract(input, product, code, 2000 + Number(rest.slice(3)), today, `${product.root} ${rest}`, 'month-year');
}

function resolvePrefixed(input: string, text: string, colon: number, today: number): ResolvedSymbol {
  const prefix = text.slice(0, colon);
  const exchange = EXCHANGE_PREFIXES.get(prefix);
  if (exchange === undefined) return unknown(input, `unknown exchange prefix ${prefix}`);
  const rest = text.slice(colon + 1);
  if (!rest.endsWith('1!')) return unknown(input, `with an exchange prefix only the <ROOT>1! form is accepted`);
  const product = getProduct(rest.slice(0, -2));
  if (product === undefined) return unknown(input, `unknown root ${rest.slice(0, -2)}`);
  if (product.exchange !== exchange) return unknown(input, `${product.root} trades on ${product.exchange}, not ${prefix}`);
  return resolved(frontContract(product, today), 'exchange-continuous');
}

function resolveSuffix(input: string, product: Product, suffix: string, today: number): ResolvedSymbol {
  if (suffix === '') return resolved(frontContract(product, today), 'root');
  if (suffix === '1!') return resolved(frontContract(product, today), 'continuous');
  if (suffix === '!') return resolved(frontContract(product, today), 'bang');
  const code = suffix.charAt(0);
  const isDated = (suffix.length === 2 || suffix.length === 3 || suffix.length === 5) && monthNumber(code) !== undefined && allDigits(suffix, 1);
  if (!isDated) return unknown(input, `${suffix} after root ${product.root} is not a recognised symbol form`);
  if (!isListedMonth(product, code)) {
    return unknown(input, `${code} is not a listed month for ${product.root} (listed: ${product.months.join(' ')})`);
  }
  if (suffix.length === 3) return resolved(frontContract(product, today), 'two-digit-year');
  if (suffix.length === 5) return resolveDatedContract(input, product, code, Number(suffix.slice(1)), today, `${product.root}${suffix}`, 'four-digit-year');
  const yearDigit = suffix.charCodeAt(1) - CODE_0;
  const nowYear = civilOfDay(today).year;
  const year = nowYear + ((yearDigit - (nowYear % 10) + 10) % 10);
  return resolveDatedContract(input, product, code, year, today, `${product.root}${code}${yearDigit}`, 'contract');
}

/** One dated contract, named `name` as the client wrote it: unexpired and already listed. */
function resolveDatedContract(input: string, product: Product, code: MonthCode, year: number, today: number, name: string, form: SymbolForm): ResolvedSymbol {
  const now = civilOfDay(today);
  const month = monthNumber(code) ?? 0;
  const { contract, expiryDay: expiry } = contractEntry(product, year, month);
  if (expiry < today) return unknown(input, `${name} expired on ${contract.expiry}`);
  const monthsAhead = (year - now.year) * 12 + (month - now.month);
  if (monthsAhead > product.listedMonthsAhead) {
    if (form === 'four-digit-year' || form === 'month-year') return unknown(input, `${name} is not listed yet`);
    const earlier = year - 10;
    const hint = earlier >= now.year - 1 ? ` (the ${earlier} contract expired on ${isoDay(expiryDay(product, earlier, month))})` : '';
    return unknown(input, `${name} would be the ${year} contract, which is not listed yet${hint}`);
  }
  return resolved(contract, form);
}

// One cached front month per product: valid from the day it was computed until its roll day,
// since every earlier contract had already rolled by the computing day.
const frontCache = new Map<Product, { from: number; until: number; contract: Contract }>();

function frontContract(product: Product, today: number): Contract {
  const cached = frontCache.get(product);
  if (cached !== undefined && today >= cached.from && today < cached.until) return cached.contract;
  let { year, month } = civilOfDay(today);
  // Every expiry rule lands in the contract month or the month before it, so the front month
  // is never earlier than the current month and always within the next 13 months.
  for (let step = 0; step < 24; step += 1) {
    if (isListedMonth(product, monthCode(month))) {
      const entry = contractEntry(product, year, month);
      if (today < entry.rollDay) {
        frontCache.set(product, { from: today, until: entry.rollDay, contract: entry.contract });
        return entry.contract;
      }
    }
    month += 1;
    if (month > 12) {
      month = 1;
      year += 1;
    }
  }
  // Unreachable with the catalogue's rules (every product lists at least one month a year).
  throw new Error(`no front month found for ${product.root}`);
}

function allDigits(text: string, from: number): boolean {
  for (let i = from; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c < CODE_0 || c > CODE_9) return false;
  }
  return true;
}

function resolved(contract: Contract, form: SymbolForm): ResolvedContract {
  return { ok: true, form, ...contract };
}

function unknown(input: string, reason: string): UnknownSymbol {
  const symbol = input.length > MAX_ECHO_LENGTH ? `${input.slice(0, MAX_ECHO_LENGTH)}…` : input;
  return { ok: false, code: 'UNKNOWN_SYMBOL', symbol, reason };
}

