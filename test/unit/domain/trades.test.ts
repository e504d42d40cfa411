import { expect, test } from 'vitest';
import fc from 'fast-check';
import { pairTrades, type FillInput } from '../../../src/domain/trades.js';

let n = 0;
const f = (side: 'buy' | 'sell', qty: number, price: number, symbol = 'ESZ6'): FillInput => ({
  fillId: String(++n), orderId: `o${n}`, accountId: 'A', symbol, side, qty, price, timestamp: new Date(1_700_000_000_000 + n * 1000).toISOString(),
});

test('FIFO: the oldest open lot closes first', () => {
  const trades = pairTrades([f('buy', 1, 100), f('buy', 1, 102), f('sell', 1, 105)], () => 50);
  expect(trades).toHaveLength(1);
  expect(trades[0]).toMatchObject({ direction: 'long', qty: 1, entryPrice: 100, exitPrice: 105, pnlPoints: 5, pnl: 250 });
});

test('a short closed higher loses; pnl scales with qty and point value', () => {
  const [t] = pairTrades([f('sell', 2, 100), f('buy', 2, 101.25)], () => 20);
  expect(t).toMatchObject({ direction: 'short', qty: 2, pnlPoints: -1.25, pnl: -50 });
});

test('a fill through zero closes the position and opens the other side', () => {
  const trades = pairTrades([f('buy', 1, 100), f('sell', 3, 110), f('buy', 2, 105)], () => 1);
  expect(trades.map((t) => [t.direction, t.qty, t.entryPrice, t.exitPrice])).toEqual([
    ['long', 1, 100, 110],
    ['short', 2, 110, 105],
  ]);
});

test('contracts pair separately', () => {
  const trades = pairTrades([f('buy', 1, 100, 'ESZ6'), f('sell', 1, 200, 'NQZ6'), f('sell', 1, 101, 'ESZ6')], () => 1);
  expect(trades).toHaveLength(1);
  expect(trades[0]!.symbol).toBe('ESZ6');
});

test('property: closed qty never exceeds the smaller of bought and sold', () => {
  fc.assert(
    fc.property(fc.array(fc.record({ buy: fc.boolean(), qty: fc.integer({ min: 1, max: 5 }), price: fc.integer({ min: 90, max: 110 }) }), { maxLength: 30 }), (xs) => {
      const fills = xs.map((x) => f(x.buy ? 'buy' : 'sell', x.qty, x.price));
      const bought = xs.filter((x) => x.buy).reduce((s, x) => s + x.qty, 0);
      const sold = xs.filter((x) => !x.buy).reduce((s, x) => s + x.qty, 0);
      const closed = pairTrades(fills, () => 1).reduce((s, t) => s + t.qty, 0);
      expect(closed).toBeLessThanOrEqual(Math.min(bought, sold));
      // Everything that can pair does pair when all fills are one contract.
      let net = 0;
      let maxPairs = 0;
      for (const x of xs) {
        const signed = x.buy ? x.qty : -x.qty;
        if (net !== 0 && Math.sign(net) !== Math.sign(signed)) maxPairs += Math.min(Math.abs(net), x.qty);
        net += signed;
      }
      expect(closed).toBe(maxPairs);
    }),
  );
});
