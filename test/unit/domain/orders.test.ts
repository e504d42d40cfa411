import fc from 'fast-check';
import { expect, test } from 'vitest';
import { FINAL_STATUSES, isOrderQty, MAX_ORDER_QTY, parseOrderId, referencePrice } from '../../../src/domain/orders.js';

test('an order quantity is a whole number of contracts from 1 to MAX_ORDER_QTY', () => {
  expect([1, 2, MAX_ORDER_QTY].map((q) => isOrderQty(q))).toEqual([true, true, true]);
  expect([0, -1, 1.5, MAX_ORDER_QTY + 1, Number.NaN, Number.POSITIVE_INFINITY].map((q) => isOrderQty(q))).toEqual([false, false, false, false, false, false]);
  expect([isOrderQty(20, 20), isOrderQty(21, 20)]).toEqual([true, false]);
  fc.assert(fc.property(fc.integer({ min: 1, max: MAX_ORDER_QTY }), (q) => isOrderQty(q)));
});

test('an order id from a path is canonical decimal digits within the safe integers, nothing else', () => {
  expect(parseOrderId('10000337')).toBe(10000337);
  expect(parseOrderId(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
  for (const loose of ['010000337', '0x9897d1', '1.0000337e7', '10000337.0000000001', '10000337.0', '+10000337', ' 10000337', '0', '-1', '', '9007199254740993', '１２']) {
    expect(parseOrderId(loose), loose).toBeUndefined();
  }
  // Exactly the ids that print as themselves.
  fc.assert(fc.property(fc.string({ unit: fc.constantFrom('0', '1', '9', 'e', '.', 'x', '+', ' ') }), (text) => {
    const id = parseOrderId(text);
    expect(id === undefined || String(id) === text).toBe(true);
  }));
  fc.assert(fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => parseOrderId(String(n)) === n));
});

test('the reference price is the limit for limit and stop-limit orders, the trigger for stops, none for market', () => {
  expect(referencePrice('limit', 5000, 4990)).toBe(5000);
  expect(referencePrice('stop_limit', 5000, 4990)).toBe(5000);
  expect(referencePrice('stop', 5000, 4990)).toBe(4990);
  expect(referencePrice('market', 5000, 4990)).toBeNull();
  expect(referencePrice('limit', undefined, 4990)).toBeNull();
});

test('final statuses are the four an order cannot leave', () => {
  expect([...FINAL_STATUSES].sort()).toEqual(['cancelled', 'expired', 'filled', 'rejected']);
});
