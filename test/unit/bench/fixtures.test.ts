import { describe, expect, it } from 'vitest';
import { accountAtBroker, restingBracket, PINNED_PRICE, type BrokerOrder } from '../../../bench/fixtures.js';

const order = (id: number, clOrdId: string | null, parentId: number | null = null): BrokerOrder => ({
  id, accountId: 1, ordStatus: 'Working', parentId, clOrdId, timestamp: '2026-11-21T19:45:00.000Z',
});

describe('broker accounting', () => {
  it('finds every acknowledged id, ignoring bracket legs when counting entries', () => {
    const orders = [order(1, 'a'), order(2, null, 1), order(3, null, 1), order(4, 'b')];
    expect(accountAtBroker(orders, ['1', '4'])).toEqual({ entries: 2, missing: [], duplicates: 0, unacknowledged: 0 });
  });

  it('reports acknowledged ids the broker does not have', () => {
    expect(accountAtBroker([order(1, 'a')], ['1', '9']).missing).toEqual(['9']);
  });

  it('counts each extra entry sharing a clOrdId as a duplicate, and entries no answer names', () => {
    const orders = [order(1, 'a'), order(2, 'a'), order(3, 'a'), order(4, 'b'), order(5, 'c')];
    const result = accountAtBroker(orders, ['1', '4']);
    expect(result.duplicates).toBe(2);
    expect(result.unacknowledged).toBe(3);
  });
});

describe('resting bracket', () => {
  it('rests far below the pinned price with the take-profit above and the stop below the entry', () => {
    const b = restingBracket('x1') as { price: number; takeProfit: { price: number }; stopLoss: { price: number }; clientOrderId: string };
    expect(b.price).toBeLessThan(PINNED_PRICE);
    expect(b.takeProfit.price).toBeGreaterThan(b.price);
    expect(b.stopLoss.price).toBeLessThan(b.price);
    // ES ticks are 0.25: every price must sit on the tick.
    for (const p of [b.price, b.takeProfit.price, b.stopLoss.price]) expect(Number.isInteger(p * 4)).toBe(true);
    expect(b.clientOrderId).toBe('x1');
    expect(restingBracket()).not.toHaveProperty('clientOrderId');
  });
});
