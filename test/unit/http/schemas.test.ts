import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { integerQuery, listQuerySchema, placeOrderBodySchema } from '../../../src/http/schemas.js';
import { jsonSchemaOf } from '../../../src/http/openapi.js';

describe('integer query parameters', () => {
  const limit = integerQuery(1, 500);

  it('accept decimal digits within the range, as the number they spell', () => {
    expect(limit.parse('1')).toBe(1);
    expect(limit.parse('500')).toBe(500);
    expect(listQuerySchema.parse({ limit: '25', cursor: 'x' })).toEqual({ limit: 25, cursor: 'x' });
    fc.assert(fc.property(fc.integer({ min: 1, max: 500 }), (n) => limit.parse(String(n)) === n));
  });

  it('refuse every other spelling of a number, and numbers out of range', () => {
    for (const text of ['1e2', '0x10', '+5', '-5', ' 5', '5 ', '1.0', '5.', '1_0', '', '0', '501', '١٢', 'Infinity', 'NaN']) {
      expect(limit.safeParse(text).success, JSON.stringify(text)).toBe(false);
      expect(listQuerySchema.safeParse({ limit: text }).success, JSON.stringify(text)).toBe(false);
    }
    // Anything holding a character other than a digit, whatever Number() would make of it.
    fc.assert(fc.property(fc.string().filter((t) => !/^[0-9]+$/.test(t)), (t) => !limit.safeParse(t).success));
  });

  it('are documented as the integer they stand for', () => {
    expect(jsonSchemaOf(limit, 'input')).toEqual({ type: 'integer', minimum: 1, maximum: 500 });
  });
});

describe('order quantities', () => {
  it('a huge quantity is refused as over the limit first, not as past the safe integers', () => {
    for (const qty of [1e308, 2 ** 53, 10_001]) {
      const r = placeOrderBodySchema.safeParse({ symbol: 'ES', side: 'buy', qty });
      expect(r.success).toBe(false);
      expect(r.error!.issues[0]!.message, String(qty)).toMatch(/<=10000$/);
    }
  });
});
