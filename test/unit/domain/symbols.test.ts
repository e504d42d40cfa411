import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dayNumber, dayOf, expiryDay, rollDay } from '../../../src/domain/contract-calendar.js';
import { EXCHANGE_PREFIXES, MONTH_CODES, listProducts, monthNumber } from '../../../src/domain/products.js';
import { contractExpiry, contractRoot, frontMonth, getProduct, resolveSymbol, rollDate } from '../../../src/domain/symbols.js';
import type { ResolvedContract, ResolvedSymbol } from '../../../src/domain/symbols.js';

const NOW = new Date('2026-11-21T12:00:00Z');
const CONTRACT_NAME = /^[A-Z0-9]+[FGHJKMNQUVXZ]\d$/;

function ok(input: string, now: Date = NOW): ResolvedContract {
  const result = resolveSymbol(input, now);
  if (!result.ok) throw new Error(`${input} did not resolve: ${result.reason}`);
  return result;
}

function rejected(input: string, now: Date = NOW): string {
  const result = resolveSymbol(input, now);
  if (result.ok) throw new Error(`${input} resolved to ${result.contract}, expected UNKNOWN_SYMBOL`);
  expect(result.code).toBe('UNKNOWN_SYMBOL');
  return result.reason;
}

describe('resolveSymbol: accepted forms', () => {
  it('uses a full contract name as given, with its expiry and roll dates', () => {
    const r = ok('ESZ6');
    expect(r).toMatchObject({ ok: true, contract: 'ESZ6', root: 'ES', form: 'contract', monthCode: 'Z', year: 2026, expiry: '2026-12-18', rollDate: '2026-12-10' });
    expect(r.product.tickSize).toBe(0.25);
  });

  it('resolves ROOT, ROOT1!, ROOT! and EXCHANGE:ROOT1! to the front month and names the form', () => {
    expect([ok('ES'), ok('ES1!'), ok('ES!'), ok('CME_MINI:ES1!')].map((r) => [r.contract, r.form])).toEqual([
      ['ESZ6', 'root'],
      ['ESZ6', 'continuous'],
      ['ESZ6', 'bang'],
      ['ESZ6', 'exchange-continuous'],
    ]);
  });

  it('resolves the two-digit-year charting form to the front month, whatever listed month it names', () => {
    expect(ok('ESZ26')).toMatchObject({ contract: 'ESZ6', form: 'two-digit-year' });
    expect(ok('ESH27')).toMatchObject({ contract: 'ESZ6', form: 'two-digit-year' });
    expect(ok('ESM99').contract).toBe('ESZ6');
  });

  it("resolves TradingView's dated-contract ticker (four-digit year) to that very contract, checked like a full name", () => {
    expect(ok('ESZ2026')).toMatchObject({ contract: 'ESZ6', form: 'four-digit-year', year: 2026, expiry: '2026-12-18' });
    expect(ok('esh2027')).toMatchObject({ contract: 'ESH7', form: 'four-digit-year', year: 2027 });
    expect(ok('MNQM2027')).toMatchObject({ contract: 'MNQM7', year: 2027 });
    expect(ok('GCG2027').contract).toBe('GCG7');
    expect(rejected('ESZ2025')).toBe('ESZ2025 expired on 2025-12-19');
    expect(rejected('ESZ2036')).toBe('ESZ2036 is not listed yet');
    expect(rejected('ESF2027')).toBe('F is not a listed month for ES (listed: H M U Z)');
    expect(rejected('ESZ20266')).toBe('Z20266 after root ES is not a recognised symbol form');
  });

  it("resolves NinjaTrader's instrument name (ROOT MM-YY, as CrossTrade alerts carry it) to that very contract", () => {
    expect(ok('ES 12-26')).toMatchObject({ contract: 'ESZ6', form: 'month-year', year: 2026, expiry: '2026-12-18' });
    expect(ok(' mes 03-27 ')).toMatchObject({ contract: 'MESH7', form: 'month-year', year: 2027 });
    expect(ok('CL 01-27')).toMatchObject({ contract: 'CLF7', year: 2027 });
    expect(ok('6E 03-27').contract).toBe('6EH7');
    expect(rejected('ES 12-25')).toBe('ES 12-25 expired on 2025-12-19');
    expect(rejected('ES 12-36')).toBe('ES 12-36 is not listed yet');
    expect(rejected('ES 01-27')).toBe('F (month 1) is not a listed month for ES (listed: H M U Z)');
    expect(rejected('ES 13-26')).toBe('13 is not a month');
    expect(rejected('ES 00-26')).toBe('00 is not a month');
    expect(rejected('XX 12-26')).toBe('unknown root XX');
    for (const input of ['ES 12-2026', 'ES 12/26', 'ES 1-26', 'ES  12-26', 'ES Z6', 'ES\t12-26', 'ES 12-2a', 'ES 12-26x']) {
      expect(resolveSymbol(input, NOW), input).toMatchObject({ ok: false, code: 'UNKNOWN_SYMBOL' });
    }
    expect(rejected('ES 1!')).toBe('a symbol with a space must be <ROOT> <MM>-<YY>, e.g. ES 12-26');
  });

  it('accepts any letter case and surrounding whitespace, and answers in upper case', () => {
    expect(ok('es1!').contract).toBe('ESZ6');
    expect(ok('cme_mini:es1!').contract).toBe('ESZ6');
    expect(ok('eSz6').contract).toBe('ESZ6');
    expect(ok('m2k!').contract).toBe('M2KZ6');
    expect(ok('  NQ1!\n').contract).toBe('NQZ6');
  });

  it('matches roots longest first, including roots with digits', () => {
    expect(ok('MESZ6').root).toBe('MES');
    expect(ok('MES1!').root).toBe('MES');
    expect(ok('M2KH7')).toMatchObject({ root: 'M2K', contract: 'M2KH7', year: 2027 });
    expect(ok('6E')).toMatchObject({ root: '6E', contract: '6EZ6', expiry: '2026-12-14' });
    expect(ok('MYM!').root).toBe('MYM');
    expect(ok('MCL').contract).toBe('MCLF7'); // MCLZ6 rolled on 2026-11-16
    expect(ok('CL1!').contract).toBe('CLF7'); // CLZ6 rolled on 2026-11-17
  });

  it('accepts each exchange prefix only for products of that exchange', () => {
    expect(ok('CBOT_MINI:YM1!').contract).toBe('YMZ6');
    expect(ok('CBOT:ZN1!').contract).toBe('ZNZ6');
    expect(ok('NYMEX:CL1!').contract).toBe('CLF7');
    expect(ok('NYMEX_DL:NG1!').root).toBe('NG');
    expect(ok('COMEX:GC1!').contract).toBe('GCZ6');
    expect(ok('CME:6E1!').root).toBe('6E');
    expect(ok('CME_MINI_DL:MNQ1!').root).toBe('MNQ');
  });

  it('reads a one-digit year as the nearest year from now on that ends in it', () => {
    expect(ok('ESH7').year).toBe(2027);
    expect(ok('ESZ0')).toMatchObject({ year: 2030, expiry: '2030-12-20' });
    expect(ok('ESH0', new Date('2029-12-01T00:00:00Z')).year).toBe(2030);
    // CL lists more than ten years ahead, so CLF6 in 2027 is the 2036 contract.
    expect(ok('CLF6', new Date('2027-01-10T00:00:00Z')).year).toBe(2036);
  });

  it('accepts a full contract until the end of its last trading day, even after the front month moved on', () => {
    expect(ok('ESH6', new Date('2026-03-12T00:00:00Z')).contract).toBe('ESH6');
    expect(ok('ESH6', new Date('2026-03-20T23:59:59.999Z')).contract).toBe('ESH6');
    expect(rejected('ESH6', new Date('2026-03-21T00:00:00Z'))).toBe('ESH6 expired on 2026-03-20');
  });
});

describe('resolveSymbol: front month and roll boundaries', () => {
  it('ES: the day before the roll date keeps the current quarter, the roll date moves to the next', () => {
    expect(ok('ES1!', new Date('2026-03-11T23:59:59.999Z')).contract).toBe('ESH6');
    expect(ok('ES1!', new Date('2026-03-12T00:00:00Z')).contract).toBe('ESM6');
    expect(ok('ES', new Date('2026-12-09T18:00:00Z')).contract).toBe('ESZ6');
    expect(ok('ES', new Date('2026-12-10T00:00:00Z')).contract).toBe('ESH7');
  });

  it('answers correctly when asked about an earlier date after a later one (no stale cache)', () => {
    expect(ok('ES', new Date('2026-06-15T00:00:00Z')).contract).toBe('ESU6');
    expect(ok('ES', new Date('2026-03-11T00:00:00Z')).contract).toBe('ESH6');
    expect(ok('ES', new Date('2026-03-12T00:00:00Z')).contract).toBe('ESM6');
  });

  it('CL: monthly contracts roll three business days before their expiry', () => {
    expect(ok('CL', new Date('2026-01-14T23:00:00Z')).contract).toBe('CLG6');
    expect(ok('CL', new Date('2026-01-15T00:00:00Z')).contract).toBe('CLH6');
    expect(ok('CL', new Date('2026-02-16T23:59:59Z')).contract).toBe('CLH6');
    expect(ok('CL', new Date('2026-02-17T00:00:00Z')).contract).toBe('CLJ6');
  });

  it('GC: only active months are front months, rolled three business days before first notice', () => {
    expect(ok('GC', new Date('2026-01-26T12:00:00Z')).contract).toBe('GCG6');
    expect(ok('GC', new Date('2026-01-27T00:00:00Z')).contract).toBe('GCJ6');
    expect(ok('GC', new Date('2026-02-10T00:00:00Z')).contract).toBe('GCJ6');
    expect(ok('GC', new Date('2026-03-10T00:00:00Z')).contract).toBe('GCJ6');
    expect(ok('GC', new Date('2026-03-25T23:59:59Z')).contract).toBe('GCJ6');
    expect(ok('GC', new Date('2026-03-26T00:00:00Z')).contract).toBe('GCM6');
    expect(ok('MGC!', new Date('2026-03-26T00:00:00Z')).contract).toBe('MGCM6');
  });

  it('crosses year ends: December contracts roll into next year', () => {
    expect(ok('ZS', new Date('2025-12-26T00:00:00Z')).contract).toBe('ZSH6');
    expect(ok('ZN', new Date('2026-11-24T00:00:00Z')).contract).toBe('ZNZ6');
    expect(ok('ZN', new Date('2026-11-25T00:00:00Z')).contract).toBe('ZNH7');
  });
});

describe('resolveSymbol: rejections', () => {
  it('rejects an unknown root', () => {
    expect(rejected('XX1!')).toMatch(/no product/);
    expect(rejected('AAPL')).toMatch(/no product/);
  });

  it('rejects a month that is not listed for the root, in both dated forms', () => {
    expect(rejected('ESF6')).toBe('F is not a listed month for ES (listed: H M U Z)');
    expect(rejected('ESF26')).toMatch(/not a listed month/);
    expect(rejected('GCH6')).toMatch(/not a listed month for GC/);
    expect(rejected('ZSZ6')).toMatch(/not a listed month for ZS/);
  });

  it('rejects an expired contract instead of reading its year as the next decade', () => {
    expect(rejected('ESH6')).toBe('ESH6 expired on 2026-03-20');
    expect(rejected('CLZ6', new Date('2026-11-21T00:00:00Z'))).toBe('CLZ6 expired on 2026-11-20');
    expect(rejected('ESH6', new Date('2027-01-10T00:00:00Z'))).toBe(
      'ESH6 would be the 2036 contract, which is not listed yet (the 2026 contract expired on 2026-03-20)',
    );
    expect(rejected('ZNZ7')).toMatch(/not listed yet/);
  });

  it('rejects unknown and mismatched exchange prefixes and other forms after a prefix', () => {
    expect(rejected('ICE:ES1!')).toBe('unknown exchange prefix ICE');
    expect(rejected('NYMEX:ES1!')).toBe('ES trades on CME, not NYMEX');
    expect(rejected('CME:YM1!')).toBe('YM trades on CBOT, not CME');
    expect(rejected('COMEX:CL1!')).toMatch(/not COMEX/);
    expect(rejected('CME_MINI:ES!')).toMatch(/only the <ROOT>1! form/);
    expect(rejected('CME_MINI:ESZ6')).toMatch(/only the <ROOT>1! form/);
    expect(rejected('CME_MINI:XX1!')).toBe('unknown root XX');
    expect(rejected('CME_MINI:')).toMatch(/only the <ROOT>1! form/);
    expect(rejected(':ES1!')).toBe('unknown exchange prefix ');
    expect(rejected('CME_MINI:CME_MINI:ES1!')).toMatch(/unknown root/);
  });

  it('rejects garbage, empty input and near-misses of the forms', () => {
    for (const input of ['ES1', 'ES2!', 'ES1!!', 'ESZ', 'ESZ666', 'ESZ6!', 'ES Z6', 'E', '!', '!!!', ':', '1!', 'Z6', 'ESZA']) {
      expect(resolveSymbol(input, NOW), input).toMatchObject({ ok: false, code: 'UNKNOWN_SYMBOL', symbol: input });
    }
    expect(rejected('')).toBe('symbol is empty');
    expect(rejected('   ')).toBe('symbol is empty');
  });

  it('rejects non-ASCII look-alikes that Unicode case mapping would turn into a root', () => {
    expect(rejected('eſ1!')).toMatch(/printable ASCII/); // 'ſ'.toUpperCase() === 'S'
    expect(rejected('ＥＳ1!')).toMatch(/printable ASCII/);
    expect(rejected('ES\u00001!')).toMatch(/printable ASCII/);
    expect(rejected('ES\u200b1!')).toMatch(/printable ASCII/);
  });

  it('rejects huge input quickly and echoes at most 64 characters of it', () => {
    const huge = 'ES'.repeat(500_000);
    const result = resolveSymbol(huge, NOW);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.symbol.length).toBeLessThanOrEqual(65);
    expect(resolveSymbol(`${' '.repeat(1_000_000)}ES1!`, NOW).ok).toBe(false);
  });

  it('rejects instead of throwing for an invalid date or a non-string input', () => {
    expect(resolveSymbol('ES1!', new Date(Number.NaN))).toMatchObject({ ok: false, code: 'UNKNOWN_SYMBOL' });
    expect(resolveSymbol('ESZ6', new Date(8.64e15))).toMatchObject({ ok: false, code: 'UNKNOWN_SYMBOL' });
    expect(resolveSymbol(undefined as unknown as string, NOW)).toMatchObject({ ok: false, code: 'UNKNOWN_SYMBOL', symbol: '' });
  });
});

describe('resolveSymbol: repeated calls', () => {
  it('returns the same frozen answer for the same input on the same day, and a fresh one on another day', () => {
    const first = resolveSymbol('NQ1!', new Date('2026-03-11T01:00:00Z'));
    const again = resolveSymbol('NQ1!', new Date('2026-03-11T22:00:00Z'));
    expect(again).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => {
      (first as { contract: string }).contract = 'NQZ9';
    }).toThrow(TypeError);
    expect(resolveSymbol('NQ1!', new Date('2026-03-12T00:00:00Z'))).toMatchObject({ contract: 'NQM6' });
    expect(resolveSymbol('NQ1!', new Date('2026-03-11T23:00:00Z'))).toMatchObject({ contract: 'NQH6' });
  });
});

describe('contract helpers', () => {
  it('frontMonth gives the front contract of a root, undefined for an unknown root', () => {
    expect(frontMonth('ES', NOW)).toMatchObject({ contract: 'ESZ6', expiry: '2026-12-18', rollDate: '2026-12-10' });
    expect(frontMonth('gc', NOW)?.contract).toBe('GCZ6');
    expect(frontMonth('XX', NOW)).toBeUndefined();
    expect(frontMonth('ES', new Date(Number.NaN))).toBeUndefined();
  });

  it('contractExpiry and rollDate give 00:00 UTC dates for listed months only', () => {
    expect(contractExpiry('ES', 'Z', 2026)?.toISOString()).toBe('2026-12-18T00:00:00.000Z');
    expect(rollDate('ES', 'Z', 2026)?.toISOString()).toBe('2026-12-10T00:00:00.000Z');
    expect(contractExpiry('CL', 'F', 2027)?.toISOString()).toBe('2026-12-22T00:00:00.000Z');
    expect(contractExpiry('ES', 'F', 2026)).toBeUndefined();
    expect(rollDate('XX', 'Z', 2026)).toBeUndefined();
    expect(contractExpiry('ES', 'Z', 2026.5)).toBeUndefined();
  });

  it('contractRoot finds the product of a full contract name and nothing else', () => {
    expect(contractRoot('ESZ6')?.root).toBe('ES');
    expect(contractRoot('MESZ6')?.root).toBe('MES');
    expect(contractRoot('M2KH7')?.root).toBe('M2K');
    expect(contractRoot('6EM6')?.root).toBe('6E');
    expect(contractRoot('esz6')?.root).toBe('ES');
    for (const name of ['ESF6', 'ES', 'ES1!', 'XXZ6', 'ESZ26', 'ESZX', '', 'CME_MINI:ES1!']) expect(contractRoot(name), name).toBeUndefined();
  });

  it('getProduct is re-exported for callers that only import symbols', () => {
    expect(getProduct('NQ')?.pointValue).toBe(20);
  });
});

// Random inputs: dates from 2000 to 2090 (well inside what Date can represent).
const anyDate = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2090-12-31T23:59:59Z'), noInvalidDate: true });
const roots = listProducts().map((p) => p.root);
const token = fc.oneof(
  fc.constantFrom(...roots, ...roots.map((r) => r.toLowerCase())),
  fc.constantFrom(...MONTH_CODES, 'A', 'B', 'z', 'h'),
  fc.constantFrom('0', '1', '2', '6', '9', '26', '!', '1!', ':', ' ', '_', '\u017f', '\u0000'),
  fc.constantFrom(...EXCHANGE_PREFIXES.keys(), 'ICE', 'cme_mini'),
);
const mixed = fc.array(token, { maxLength: 6 }).map((parts) => parts.join(''));

function wellFormed(result: ResolvedSymbol): boolean {
  if (result.ok) return CONTRACT_NAME.test(result.contract) && getProduct(result.root) === result.product;
  return result.code === 'UNKNOWN_SYMBOL' && typeof result.symbol === 'string' && result.reason.length > 0;
}

describe('resolveSymbol properties', () => {
  it('never throws on arbitrary strings and always answers a contract name or UNKNOWN_SYMBOL', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), anyDate, (input, now) => wellFormed(resolveSymbol(input, now))),
      { numRuns: 2000 },
    );
  });

  it('never throws on arbitrary Unicode (lone surrogates, astral characters) either', () => {
    const unit = fc.oneof(
      fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
      fc.integer({ min: 0x10000, max: 0x10ffff }).map((c) => String.fromCodePoint(c)),
      fc.constantFrom('E', 'S', 'M', '1', '!', ':', 'Z', '6'),
    );
    const unicode = fc.array(unit, { maxLength: 24 }).map((units) => units.join(''));
    fc.assert(
      fc.property(unicode, anyDate, (input, now) => wellFormed(resolveSymbol(input, now))),
      { numRuns: 2000 },
    );
  });

  it('never throws on random mixes of roots, month codes, digits, ! and exchange prefixes', () => {
    fc.assert(
      fc.property(mixed, anyDate, (input, now) => {
        const result = resolveSymbol(input, now);
        expect(wellFormed(result)).toBe(true);
        if (result.ok && result.form === 'contract') expect(result.contract).toBe(input.trim().toUpperCase());
      }),
      { numRuns: 2000 },
    );
  });

  it('resolves the front month to the nearest listed contract that is neither expired nor past its roll date', () => {
    fc.assert(
      fc.property(fc.constantFrom(...roots), fc.constantFrom('', '1!', '!'), anyDate, (root, suffix, now) => {
        const result = ok(root + suffix, now);
        const product = result.product;
        const today = dayOf(now);
        const month = monthNumber(result.monthCode) ?? 0;
        expect(rollDay(product, result.year, month)).toBeGreaterThan(today);
        expect(expiryDay(product, result.year, month)).toBeGreaterThan(today);
        // No listed contract before it is still ahead of its roll date.
        const resolvedStart = dayNumber(result.year, month, 1);
        for (let back = 1; back <= 24; back += 1) {
          const start = dateOfMonthsBack(result.year, month, back);
          if (dayNumber(start.year, start.month, 1) >= resolvedStart) continue;
          if (!product.months.includes(MONTH_CODES[start.month - 1] ?? 'F')) continue;
          expect(rollDay(product, start.year, start.month)).toBeLessThanOrEqual(today);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('resolves the front month, named in full, to itself', () => {
    fc.assert(
      fc.property(fc.constantFrom(...roots), anyDate, (root, now) => {
        const front = ok(root, now);
        expect(ok(front.contract, now)).toMatchObject({ contract: front.contract, year: front.year, form: 'contract' });
      }),
      { numRuns: 500 },
    );
  });
});

function dateOfMonthsBack(year: number, month: number, back: number): { year: number; month: number } {
  const index = year * 12 + (month - 1) - back;
  return { year: Math.floor(index / 12), month: (index % 12) + 1 };
}

describe('resolveSymbol: exact refusals and boundaries', () => {
  const reason = (input: unknown, now: Date = NOW) => {
    const r = resolveSymbol(input as string, now);
    if (r.ok) throw new Error(`expected a refusal for ${String(input)}`);
    return r;
  };

  it('refuses what cannot be resolved, saying why', () => {
    expect(reason(5)).toEqual({ ok: false, code: 'UNKNOWN_SYMBOL', symbol: '', reason: 'symbol must be a string' });
    expect(reason('ES', new Date(Number.NaN)).reason).toBe('no valid current date to resolve against');
    expect(reason('ES', 'today' as unknown as Date).reason).toBe('no valid current date to resolve against');
    expect(reason('ES', new Date('+010000-01-01T00:00:00Z')).reason).toBe('symbol cannot be resolved at this date');
    expect(reason('CME:FOO1!').reason).toBe('unknown root FOO');
    expect(reason('ESZ266').reason).toBe('Z266 after root ES is not a recognised symbol form');
    expect(reason('ES~').reason).toBe('~ after root ES is not a recognised symbol form');
  });

  it('takes up to 32 printable characters, trimmed, and no more', () => {
    expect(reason(`ES${'X'.repeat(30)}`).reason).toMatch(/after root ES is not a recognised symbol form/);
    expect(reason(`ES${'X'.repeat(31)}`).reason).toBe('symbol is too long or contains characters other than printable ASCII');
    expect(reason(`${' '.repeat(200)}ES`).reason).toBe('symbol is too long or contains characters other than printable ASCII');
    expect(resolveSymbol(`ES${' '.repeat(200)}`, NOW).ok).toBe(true);
    expect(reason('  ').reason).toBe('symbol is empty');
  });

  it('echoes at most 64 characters of what was sent', () => {
    expect(reason('x'.repeat(64)).symbol).toBe('x'.repeat(64));
    expect(reason('x'.repeat(70)).symbol).toBe(`${'x'.repeat(64)}…`);
  });

  it('accepts a full contract name exactly as far ahead as the product lists, hinting at the expired one past it', () => {
    // 2026-11-21: ZS lists 40 months ahead; March 2030 is 40 months on.
    expect(resolveSymbol('ZSH0', NOW)).toMatchObject({ ok: true, year: 2030 });
    expect(reason('ZSK0').reason).toBe('ZSK0 would be the 2030 contract, which is not listed yet');
    expect(reason('ZBZ7').reason).toBe('ZBZ7 would be the 2027 contract, which is not listed yet');
    expect(reason('ZBH5').reason).toMatch(/^ZBH5 would be the 2035 contract, which is not listed yet \(the 2025 contract expired on 2025-03-\d\d\)$/);
  });

  it('answers per day: the same symbol resolves anew after the roll', () => {
    const before = resolveSymbol('ES1!', new Date('2026-12-09T12:00:00Z'));
    expect(resolveSymbol('ES1!', new Date('2026-12-09T13:00:00Z'))).toBe(before);
    const after = resolveSymbol('ES1!', new Date('2026-12-10T12:00:00Z'));
    expect([before.ok && before.contract, after.ok && after.contract]).toEqual(['ESZ6', 'ESH7']);
    expect(resolveSymbol('ES1!', new Date('2026-12-09T14:00:00Z'))).toMatchObject({ contract: 'ESZ6' });
  });
});

describe('contractRoot and listed months: exact bounds', () => {
  it('knows a contract name only with a listed month and a digit year', () => {
    expect(contractRoot('esz6')?.root).toBe('ES');
    expect(contractRoot('MESZ0')?.root).toBe('MES');
    expect(contractRoot('ESZ9')?.root).toBe('ES');
    for (const name of ['ES', 'ESZ/', 'ESZ:', 'ESF6', 'FOOZ6', 'MNQZ66', 7]) expect(contractRoot(name as string), String(name)).toBeUndefined();
  });

  it('dates contracts by root, month code (any case) and a whole year', () => {
    expect(contractExpiry('ES', 'z', 2026)?.toISOString()).toBe('2026-12-18T00:00:00.000Z');
    expect(rollDate('ES', 'Z', 2026)?.toISOString()).toBe('2026-12-10T00:00:00.000Z');
    for (const [root, code, year] of [['ES', 'F', 2026], ['ES', 'Z', 2026.5], ['XX', 'Z', 2026], ['ES', 5, 2026], ['ES', 'ZZ', 2026]] as const) {
      expect(contractExpiry(root, code as string, year), `${root} ${code} ${year}`).toBeUndefined();
    }
  });
});
