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

  it('refuse a number past the range as past it, however large (clients probe: 20 digits said "expected int to be <=9007199254740991")', () => {
    for (const text of ['501', '99999999999999999999', '9'.repeat(400)]) {
      const issues = limit.safeParse(text).error!.issues;
      expect(issues.map((i) => i.message), text).toEqual(['Too big: expected number to be <=500']);
    }
    expect(limit.safeParse('0').error!.issues.map((i) => i.message)).toEqual(['Too small: expected number to be >=1']);
  });

  it('are documented as the integer they stand for', () => {
    expect(jsonSchemaOf(limit, 'input')).toEqual({ type: 'integer', minimum: 1, maximum: 500 });
  });
});

describe('order quantities', () => {
  it('a huge quantity is refused as over the limit first, not as past the safe integers', () => {
    for (const qty of [1e308, 2 ** 53, 1_000_001]) {
      const r = placeOrderBodySchema.safeParse({ symbol: 'ES', side: 'buy', qty });
      expect(r.success).toBe(false);
      expect(r.error!.issues[0]!.message, String(qty)).toMatch(/<=1000000$/);
    }
    // Up to the ceiling ORDER_QTY_MAX may be raised to: the configured limit is the planner's (an
    // ORDER_QTY_MAX of 20,000 refused 15,000 here: new-user probe).
    expect(placeOrderBodySchema.safeParse({ symbol: 'ES', side: 'buy', qty: 15_000 }).success).toBe(true);
  });
});

describe('clientOrderId', () => {
  it('is refused past 64 UTF-16 units, the broker text field it survives a restart in (client probe: 41 emoji were cut mid-character and read back with a lone surrogate)', () => {
    const ok = placeOrderBodySchema.safeParse({ symbol: 'ES', side: 'buy', qty: 1, clientOrderId: `a${'😀'.repeat(31)}` });
    expect(ok.success).toBe(true);
    const long = placeOrderBodySchema.safeParse({ symbol: 'ES', side: 'buy', qty: 1, clientOrderId: `a${'😀'.repeat(40)}` });
    expect(long.success).toBe(false);
    expect(long.error!.issues[0]).toMatchObject({ path: ['clientOrderId'], message: expect.stringContaining('emoji, count as two') });
  });
});
