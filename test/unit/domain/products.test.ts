import { describe, expect, it } from 'vitest';
import { EXCHANGE_PREFIXES, MAX_ROOT_LENGTH, MONTH_CODES, getProduct, isListedMonth, listProducts, monthCode, monthNumber } from '../../../src/domain/products.js';

// Exchange contract specifications (CME Group): root → [exchange, tick size, $ per point, $ per tick, listed months].
const EXPECTED: Record<string, [string, number, number, number, string]> = {
  ES: ['CME', 0.25, 50, 12.5, 'HMUZ'],
  MES: ['CME', 0.25, 5, 1.25, 'HMUZ'],
  NQ: ['CME', 0.25, 20, 5, 'HMUZ'],
  MNQ: ['CME', 0.25, 2, 0.5, 'HMUZ'],
  YM: ['CBOT', 1, 5, 5, 'HMUZ'],
  MYM: ['CBOT', 1, 0.5, 0.5, 'HMUZ'],
  RTY: ['CME', 0.1, 50, 5, 'HMUZ'],
  M2K: ['CME', 0.1, 5, 0.5, 'HMUZ'],
  CL: ['NYMEX', 0.01, 1000, 10, 'FGHJKMNQUVXZ'],
  MCL: ['NYMEX', 0.01, 100, 1, 'FGHJKMNQUVXZ'],
  NG: ['NYMEX', 0.001, 10000, 10, 'FGHJKMNQUVXZ'],
  GC: ['COMEX', 0.1, 100, 10, 'GJMQVZ'],
  MGC: ['COMEX', 0.1, 10, 1, 'GJMQVZ'],
  SI: ['COMEX', 0.005, 5000, 25, 'HKNUZ'],
  HG: ['COMEX', 0.0005, 25000, 12.5, 'HKNUZ'],
  ZB: ['CBOT', 0.03125, 1000, 31.25, 'HMUZ'],
  ZN: ['CBOT', 0.015625, 1000, 15.625, 'HMUZ'],
  ZF: ['CBOT', 0.0078125, 1000, 7.8125, 'HMUZ'],
  ZC: ['CBOT', 0.25, 50, 12.5, 'HKNUZ'],
  ZS: ['CBOT', 0.25, 50, 12.5, 'FHKNQUX'],
  '6E': ['CME', 0.00005, 125000, 6.25, 'HMUZ'],
};

describe('product catalogue', () => {
  it('holds every required root with exchange, tick size, point value, tick value and listed months per the exchange specs', () => {
    for (const [root, [exchange, tickSize, pointValue, tickValue, months]] of Object.entries(EXPECTED)) {
      const product = getProduct(root);
      expect(product, root).toBeDefined();
      expect({ root: product?.root, exchange: product?.exchange, tickSize: product?.tickSize, pointValue: product?.pointValue, tickValue: product?.tickValue, months: product?.months.join('') }).toEqual({
        root,
        exchange,
        tickSize,
        pointValue,
        tickValue,
        months,
      });
    }
  });

  it('gives every product a description, an expiry rule text, a roll rule text and a listing horizon of at least a year', () => {
    for (const product of listProducts()) {
      expect(product.description.length, product.root).toBeGreaterThan(0);
      expect(product.expiry.text.length, product.root).toBeGreaterThan(10);
      expect(product.roll.text.length, product.root).toBeGreaterThan(10);
      expect(product.listedMonthsAhead, product.root).toBeGreaterThanOrEqual(12);
    }
  });

  it('lists products sorted by root and frozen so no caller can change a tick size', () => {
    const roots = listProducts().map((p) => p.root);
    expect(roots).toEqual([...roots].sort());
    expect(roots.length).toBeGreaterThanOrEqual(Object.keys(EXPECTED).length);
    const es = getProduct('ES');
    expect(Object.isFrozen(es)).toBe(true);
    expect(Object.isFrozen(es?.months)).toBe(true);
    expect(() => {
      (es as { tickSize: number }).tickSize = 1;
    }).toThrow(TypeError);
  });

  it('looks roots up case-insensitively and returns undefined for unknown roots', () => {
    expect(getProduct('mes')?.root).toBe('MES');
    expect(getProduct('6e')?.root).toBe('6E');
    expect(getProduct('XX')).toBeUndefined();
    expect(getProduct('')).toBeUndefined();
    expect(getProduct('ES1!')).toBeUndefined();
    expect(getProduct('E'.repeat(10_000))).toBeUndefined();
  });

  it('knows the longest root so parsing can try roots longest first', () => {
    expect(MAX_ROOT_LENGTH).toBe(3);
  });

  it('maps month codes F..Z to months 1..12 and back', () => {
    expect(MONTH_CODES.join('')).toBe('FGHJKMNQUVXZ');
    expect(MONTH_CODES.map((c) => monthNumber(c))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(monthNumber('A')).toBeUndefined();
    expect(monthNumber('z')).toBeUndefined();
    expect(monthCode(12)).toBe('Z');
    expect(() => monthCode(13)).toThrow(RangeError);
  });

  it('tells listed months from unlisted ones per product', () => {
    const es = getProduct('ES');
    const gc = getProduct('GC');
    if (es === undefined || gc === undefined) throw new Error('catalogue incomplete');
    expect(isListedMonth(es, 'Z')).toBe(true);
    expect(isListedMonth(es, 'F')).toBe(false);
    expect(isListedMonth(gc, 'J')).toBe(true);
    expect(isListedMonth(gc, 'H')).toBe(false);
  });

  it('maps TradingView exchange prefixes, including _DL and _MINI variants, to the exchange they stand for', () => {
    expect(EXCHANGE_PREFIXES.get('CME_MINI')).toBe('CME');
    expect(EXCHANGE_PREFIXES.get('CME_MINI_DL')).toBe('CME');
    expect(EXCHANGE_PREFIXES.get('CBOT_MINI')).toBe('CBOT');
    expect(EXCHANGE_PREFIXES.get('NYMEX_DL')).toBe('NYMEX');
    expect(EXCHANGE_PREFIXES.get('COMEX')).toBe('COMEX');
    expect(EXCHANGE_PREFIXES.get('ICE')).toBeUndefined();
    for (const product of listProducts()) {
      const prefixes = [...EXCHANGE_PREFIXES].filter(([, exchange]) => exchange === product.exchange);
      expect(prefixes.length, product.root).toBeGreaterThanOrEqual(2);
    }
  });
});
