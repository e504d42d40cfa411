import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkFixedLegsFromFill, checkLegsFromFill, expectedFill, lowestFill, offsetLegs, type EntryPrices, type OffsetLeg } from '../../../src/domain/fill-anchor.js';
import { priceBand } from '../../../src/domain/order-plan.js';

const ES = { tick: 0.25, band: priceBand(5000, 0.25, 5) };
const ticks = (name: OffsetLeg['name'], n: number): OffsetLeg => ({ name, offsetPoints: n * ES.tick, ticks: n });
const check = (e: EntryPrices, legs: OffsetLeg[], last: number | null) => checkLegsFromFill(e, legs, ES.tick, ES.band, 'ESZ6', last);

describe('expectedFill', () => {
  it('a limit fills at the better of its limit and the market, a stop at the worse of its trigger and the market', () => {
    expect(expectedFill({ side: 'buy', orderType: 'market' }, 5000)).toBe(5000);
    expect(expectedFill({ side: 'buy', orderType: 'limit', price: 20000 }, 5000)).toBe(5000);
    expect(expectedFill({ side: 'buy', orderType: 'limit', price: 4900 }, 5000)).toBe(4900);
    expect(expectedFill({ side: 'sell', orderType: 'limit', price: 1000 }, 5000)).toBe(5000);
    expect(expectedFill({ side: 'sell', orderType: 'limit', price: 5100 }, 5000)).toBe(5100);
    expect(expectedFill({ side: 'buy', orderType: 'stop', stopPrice: 5100 }, 5000)).toBe(5100);
    expect(expectedFill({ side: 'buy', orderType: 'stop', stopPrice: 1200 }, 5000)).toBe(5000);
    expect(expectedFill({ side: 'sell', orderType: 'stop', stopPrice: 24000 }, 5000)).toBe(5000);
    expect(expectedFill({ side: 'buy', orderType: 'stop_limit', stopPrice: 5100, price: 5101 }, 5000)).toBe(5100);
    expect(expectedFill({ side: 'buy', orderType: 'stop_limit', stopPrice: 5100, price: 5101 }, 5200)).toBe(5101);
    expect(expectedFill({ side: 'sell', orderType: 'stop_limit', stopPrice: 4900, price: 4899 }, 4800)).toBe(4899);
  });

  it('without a market, the lowest fill is what the entry’s own prices guarantee, else the band’s bottom', () => {
    expect(lowestFill({ side: 'buy', orderType: 'limit', price: 20000 }, 1000).price).toBe(1000);
    expect(lowestFill({ side: 'buy', orderType: 'market' }, 1000).price).toBe(1000);
    expect(lowestFill({ side: 'buy', orderType: 'stop', stopPrice: 5100 }, 1000).price).toBe(5100);
    expect(lowestFill({ side: 'buy', orderType: 'stop_limit', stopPrice: 5100, price: 5090 }, 1000).price).toBe(5090);
    expect(lowestFill({ side: 'sell', orderType: 'limit', price: 5100 }, 1000).price).toBe(5100);
    expect(lowestFill({ side: 'sell', orderType: 'stop', stopPrice: 4900 }, 1000).price).toBe(1000);
  });
});

describe('checkLegsFromFill', () => {
  it('the audit’s buy limit above the market: a 60000-tick stop from the fill at 5000 is refused, naming the leg, the anchor and the band', () => {
    const r = check({ side: 'buy', orderType: 'limit', price: 20000 }, [ticks('stopLoss', 60000)], 5000);
    expect(r.anchor).toMatchObject({ price: 5000, last: 5000 });
    expect(r.errors).toEqual([
      { path: 'stopLoss.ticks', message: '60000 ticks below the expected fill 5000 (buy limit at 20000, last price 5000) is -10000, outside 1000..25000 for ESZ6' },
    ]);
  });

  it('the audit’s market buy with the market under the reference: 15990 ticks below 3000 is refused', () => {
    const r = check({ side: 'buy', orderType: 'market' }, [ticks('stopLoss', 15990)], 3000);
    expect(r.errors.map((e) => e.path)).toEqual(['stopLoss.ticks']);
    expect(r.errors[0]!.message).toContain('is -997.5, outside 1000..25000');
  });

  it('checks both sides of the band and both legs, and accepts legs that land inside it', () => {
    expect(check({ side: 'buy', orderType: 'market' }, [ticks('takeProfit', 40), ticks('stopLoss', 20)], 5000).errors).toEqual([]);
    const sell = check({ side: 'sell', orderType: 'market' }, [ticks('takeProfit', 17000), ticks('stopLoss', 80004)], 5000);
    expect(sell.errors.map((e) => e.path)).toEqual(['takeProfit.ticks', 'stopLoss.ticks']);
    expect(sell.errors[1]!.message).toContain('80004 ticks above the expected fill 5000 (sell market, last price 5000) is 25001, outside');
    // Exactly on the band's edges is inside.
    expect(check({ side: 'buy', orderType: 'market' }, [ticks('stopLoss', 16000), ticks('takeProfit', 80000)], 5000).errors).toEqual([]);
    expect(check({ side: 'buy', orderType: 'market' }, [ticks('stopLoss', 16001)], 5000).errors).toHaveLength(1);
  });

  it('an absolute leg of a mixed bracket is checked as the offset the broker receives', () => {
    const [tp, sl] = offsetLegs({ takeProfit: { offsetPoints: 10 }, stopLoss: { price: 1000 } }, (leg) => Math.abs(('price' in leg ? leg.price : 0) - 20000), ES.tick);
    expect(sl).toEqual({ name: 'stopLoss', offsetPoints: 19000, ticks: null, price: 1000 });
    const r = check({ side: 'buy', orderType: 'limit', price: 20000 }, [tp!, sl!], 5000);
    expect(r.errors).toEqual([{ path: 'stopLoss.price', message: expect.stringContaining('price 1000, sent as 19000 points below the expected fill 5000') }]);
  });

  it('offsetLegs: nothing to check for an OSO at fixed prices', () => {
    expect(offsetLegs({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }, () => 10, 0.25)).toEqual([]);
    expect(offsetLegs({ stopLoss: { offsetPoints: -5 } }, () => 0, 0.25)).toEqual([{ name: 'stopLoss', offsetPoints: 5, ticks: 20 }]);
  });

  it('without a market price, a leg below the fill must stay above zero from the lowest fill the entry allows; legs above are not checked', () => {
    const r = check({ side: 'buy', orderType: 'limit', price: 20000 }, [ticks('stopLoss', 60000), ticks('takeProfit', 90000)], null);
    expect(r.anchor).toMatchObject({ price: 1000, last: null });
    expect(r.errors).toEqual([{ path: 'stopLoss.ticks', message: expect.stringContaining('is -14000: a leg must stay above zero') }]);
    expect(check({ side: 'buy', orderType: 'limit', price: 20000 }, [ticks('stopLoss', 3999)], null).errors).toEqual([]);
    expect(check({ side: 'buy', orderType: 'limit', price: 20000 }, [ticks('stopLoss', 4000)], null).errors).toHaveLength(1);
    // A sell limit fills at its limit or higher: its target hangs from there.
    expect(check({ side: 'sell', orderType: 'limit', price: 5000 }, [ticks('takeProfit', 19996)], null).errors).toEqual([]);
    expect(check({ side: 'sell', orderType: 'limit', price: 5000 }, [ticks('takeProfit', 20000)], null).errors).toHaveLength(1);
  });

  it('no accepted leg lands at or below zero, whatever the entry, the market and the offset (property)', () => {
    const entry = fc.record({
      side: fc.constantFrom('buy' as const, 'sell' as const),
      orderType: fc.constantFrom('market' as const, 'limit' as const, 'stop' as const, 'stop_limit' as const),
      price: fc.integer({ min: 4000, max: 100000 }).map((t) => t * 0.25),
      stopPrice: fc.integer({ min: 4000, max: 100000 }).map((t) => t * 0.25),
    });
    fc.assert(
      fc.property(entry, fc.integer({ min: 1, max: 120000 }).map((t) => t * 0.25), fc.integer({ min: 1, max: 100000 }), fc.boolean(), (e, last, n, stop) => {
        const leg = ticks(stop ? 'stopLoss' : 'takeProfit', n);
        const r = check(e, [leg], last);
        if (r.errors.length) return;
        const fill = expectedFill(e, last);
        const landed = fill + ((e.side === 'buy') === stop ? -1 : 1) * leg.offsetPoints;
        expect(landed).toBeGreaterThanOrEqual(ES.band.min);
        expect(landed).toBeLessThanOrEqual(ES.band.max);
      }),
    );
  });
  it('fixed-price legs must lie on their side of where the entry really fills, not only of the price it names', () => {
    // A market buy at last 5000: a stop at 5010 would fill at once.
    expect(checkFixedLegsFromFill({ side: 'buy', orderType: 'market' }, { stopLoss: { price: 5010 }, takeProfit: { price: 5020 } }, 5000)).toEqual([
      { path: 'stopLoss.price', message: '5010 must be below the expected fill 5000 (buy market, last price 5000): it would fill at once' },
    ]);
    // A buy limit above the market fills at the market (5000): a stop under its limit but over the fill fills at once.
    expect(checkFixedLegsFromFill({ side: 'buy', orderType: 'limit', price: 5010 }, { takeProfit: { price: 5012 }, stopLoss: { price: 5005 } }, 5000)).toEqual([
      { path: 'stopLoss.price', message: '5005 must be below the expected fill 5000 (buy limit at 5010, last price 5000): it would fill at once' },
    ]);
    // A sell: mirrored; legs on their sides pass.
    expect(checkFixedLegsFromFill({ side: 'sell', orderType: 'market' }, { takeProfit: { price: 5001 }, stopLoss: { price: 4999 } }, 5000).map((e) => e.path)).toEqual(['takeProfit.price', 'stopLoss.price']);
    expect(checkFixedLegsFromFill({ side: 'sell', orderType: 'market' }, { takeProfit: { price: 4990 }, stopLoss: { price: 5010 } }, 5000)).toEqual([]);
    // Offset legs are not this check's.
    expect(checkFixedLegsFromFill({ side: 'buy', orderType: 'market' }, { stopLoss: { offsetPoints: 5 } }, 5000)).toEqual([]);
  });
});
