import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { listProducts } from '../../../src/domain/products.js';
import { addTicks, isOnTick, pointsToTicks, priceToTicks, roundToTick, tickDecimals, ticksToPoints, ticksToPrice } from '../../../src/domain/ticks.js';

describe('isOnTick', () => {
  it('accepts prices on the tick despite binary floating point', () => {
    expect(isOnTick(5001.25, 0.25)).toBe(true);
    expect(isOnTick(71.23, 0.01)).toBe(true);
    expect(isOnTick(1.08735, 0.00005)).toBe(true);
    expect(isOnTick(0.3, 0.1)).toBe(true); // 0.3 / 0.1 === 2.9999999999999996
    expect(isOnTick(2.345, 0.005)).toBe(true);
    expect(isOnTick(4.1235, 0.0005)).toBe(true);
    expect(isOnTick(3.456, 0.001)).toBe(true);
    expect(isOnTick(112.515625, 1 / 64)).toBe(true);
    expect(isOnTick(-37.63, 0.01)).toBe(true); // CL settled negative in April 2020
    expect(isOnTick(0, 0.25)).toBe(true);
  });

  it('rejects prices between ticks, however close', () => {
    expect(isOnTick(5001.3, 0.25)).toBe(false);
    expect(isOnTick(5001.2501, 0.25)).toBe(false);
    expect(isOnTick(71.235, 0.01)).toBe(false);
    expect(isOnTick(1.08736, 0.00005)).toBe(false);
    expect(isOnTick(112.5, 1 / 128 + 1e-6)).toBe(false);
  });

  it('rejects non-finite prices and invalid tick sizes', () => {
    for (const price of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) expect(isOnTick(price, 0.25)).toBe(false);
    for (const tick of [0, -0.25, Number.NaN, Number.POSITIVE_INFINITY]) expect(isOnTick(5000, tick)).toBe(false);
  });
});

describe('roundToTick', () => {
  it('rounds to the nearest tick and returns clean decimals', () => {
    expect(roundToTick(5001.3, 0.25)).toBe(5001.25);
    expect(roundToTick(5001.4, 0.25)).toBe(5001.5);
    expect(roundToTick(71.234, 0.01)).toBe(71.23);
    expect(roundToTick(1.087361, 0.00005)).toBe(1.08735);
    expect(roundToTick(0.1 + 0.2, 0.1)).toBe(0.3);
    expect(roundToTick(112.51, 1 / 64)).toBe(112.515625);
  });

  it('rounds ties away from zero, symmetric for negative prices', () => {
    expect(roundToTick(5001.125, 0.25)).toBe(5001.25);
    expect(roundToTick(-5001.125, 0.25)).toBe(-5001.25);
    expect(roundToTick(-0.1, 0.25)).toBe(0);
    expect(Object.is(roundToTick(-0.1, 0.25), -0)).toBe(false);
  });

  it('rounds down or up on request but leaves on-tick prices where they are', () => {
    expect(roundToTick(5001.3, 0.25, 'down')).toBe(5001.25);
    expect(roundToTick(5001.3, 0.25, 'up')).toBe(5001.5);
    expect(roundToTick(-5001.3, 0.25, 'down')).toBe(-5001.5);
    expect(roundToTick(71.23, 0.01, 'up')).toBe(71.23);
    expect(roundToTick(71.23, 0.01, 'down')).toBe(71.23);
    expect(roundToTick(1.08735, 0.00005, 'up')).toBe(1.08735);
  });

  it('returns NaN for non-finite input instead of a made-up price', () => {
    expect(roundToTick(Number.NaN, 0.25)).toBeNaN();
    expect(roundToTick(5000, 0)).toBeNaN();
  });
});

describe('tick distances', () => {
  it('converts ticks to points without float noise, keeping the sign', () => {
    expect(ticksToPoints(20, 0.25)).toBe(5);
    expect(ticksToPoints(3, 0.1)).toBe(0.3);
    expect(ticksToPoints(7, 0.00005)).toBe(0.00035);
    expect(ticksToPoints(-12, 0.01)).toBe(-0.12);
    expect(ticksToPoints(1, 1 / 128)).toBe(0.0078125);
    expect(ticksToPoints(Number.NaN, 0.25)).toBeNaN();
  });

  it('converts points to whole ticks', () => {
    expect(pointsToTicks(5, 0.25)).toBe(20);
    expect(pointsToTicks(0.3, 0.1)).toBe(3);
    expect(pointsToTicks(-0.12, 0.01)).toBe(-12);
    expect(pointsToTicks(Number.POSITIVE_INFINITY, 0.25)).toBeNaN();
  });

  it('moves a price by a number of ticks and stays on the grid', () => {
    expect(addTicks(5001.25, 20, 0.25)).toBe(5006.25);
    expect(addTicks(71.23, -15, 0.01)).toBe(71.08);
    expect(addTicks(1.08735, 3, 0.00005)).toBe(1.0875);
    expect(addTicks(5001.25, Number.NaN, 0.25)).toBeNaN();
  });

  it('knows how many decimals each catalogue tick size needs', () => {
    expect(listProducts().map((p) => [p.root, tickDecimals(p.tickSize)])).toContainEqual(['6E', 5]);
    expect(tickDecimals(0.25)).toBe(2);
    expect(tickDecimals(1)).toBe(0);
    expect(tickDecimals(1 / 128)).toBe(7);
    expect(tickDecimals(0.0005)).toBe(4);
  });
});

describe('tick properties', () => {
  const tickSizes = [...new Set(listProducts().map((p) => p.tickSize))];

  it('a price built from a whole number of ticks is on tick and rounds to itself, for every catalogue tick size', () => {
    fc.assert(
      fc.property(fc.constantFrom(...tickSizes), fc.integer({ min: -2_000_000, max: 20_000_000 }), (tick, n) => {
        const price = Number((n * tick).toFixed(tickDecimals(tick)));
        expect(isOnTick(price, tick)).toBe(true);
        expect(roundToTick(price, tick)).toBe(price);
        expect(ticksToPoints(n, tick)).toBe(price);
        expect(pointsToTicks(price, tick)).toBe(n);
      }),
      { numRuns: 1000 },
    );
  });

  it('roundToTick always lands on a tick within half a tick of the input', () => {
    fc.assert(
      fc.property(fc.constantFrom(...tickSizes), fc.double({ min: -1000, max: 100_000, noNaN: true }), (tick, price) => {
        // Within a millionth of a tick a price counts as on the tick, so bounds allow that much.
        const slack = tick * 1e-6;
        const rounded = roundToTick(price, tick);
        expect(isOnTick(rounded, tick)).toBe(true);
        expect(Math.abs(rounded - price)).toBeLessThanOrEqual(tick / 2 + slack);
        expect(roundToTick(price, tick, 'down')).toBeLessThanOrEqual(price + slack);
        expect(roundToTick(price, tick, 'up')).toBeGreaterThanOrEqual(price - slack);
        expect(price - roundToTick(price, tick, 'down')).toBeLessThan(tick);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('invalid input never yields a made-up number', () => {
  const badTicks = [0, -0.25, Number.NaN, Number.POSITIVE_INFINITY];
  it('every conversion refuses a bad tick size on its own, with a good value', () => {
    for (const tick of badTicks) {
      expect(roundToTick(5000, tick), String(tick)).toBeNaN();
      expect(ticksToPoints(4, tick), String(tick)).toBeNaN();
      expect(pointsToTicks(1, tick), String(tick)).toBeNaN();
      expect(addTicks(5000, 1, tick), String(tick)).toBeNaN();
      expect(ticksToPrice(4, tick), String(tick)).toBeNaN();
      expect(priceToTicks(5000, tick), String(tick)).toBeUndefined();
    }
  });

  it('every conversion refuses a bad value on its own, with a good tick size', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(roundToTick(bad, 0.25)).toBeNaN();
      expect(ticksToPoints(bad, 0.25)).toBeNaN();
      expect(pointsToTicks(bad, 0.25)).toBeNaN();
      expect(addTicks(bad, 1, 0.25)).toBeNaN();
      expect(addTicks(5000, bad, 0.25)).toBeNaN();
      expect(priceToTicks(bad, 0.25)).toBeUndefined();
    }
    expect(ticksToPrice(1.5, 0.25)).toBeNaN();
    expect(ticksToPrice(2 ** 53, 0.25)).toBeNaN();
    expect(priceToTicks(1e300, 0.25)).toBeUndefined();
  });

  it('never answers negative zero', () => {
    expect(Object.is(roundToTick(-0.1, 0.25), 0)).toBe(true);
    expect(Object.is(pointsToTicks(-0.1, 0.25), 0)).toBe(true);
    expect(Object.is(priceToTicks(-0, 0.25), 0)).toBe(true);
    expect(Object.is(ticksToPrice(-0, 0.25), 0)).toBe(true);
  });

  it('a price a millionth of a tick off still counts as on the tick for the paper broker’s lenient check', () => {
    expect(isOnTick(5000 + 0.25 * 9e-7, 0.25)).toBe(true);
    expect(isOnTick(5000 + 0.25 * 1.1e-6, 0.25)).toBe(false);
    expect(roundToTick(5000 + 0.25 * 9e-7, 0.25, 'up')).toBe(5000);
    expect(roundToTick(-5000 - 0.25 * 9e-7, 0.25, 'down')).toBe(-5000);
  });

  it('rounds to the nearest tick by default', () => {
    expect(roundToTick(5000.2, 0.25)).toBe(5000.25);
  });

  it('stops at 9 decimals for a tick no decimal writes exactly (a billionth of a point is noise)', () => {
    expect(tickDecimals(1 / 3)).toBe(9);
    expect(tickDecimals(1 / 3)).toBe(9);
  });
});

describe('priceToTicks and ticksToPrice (integer ticks)', () => {
  it('maps exact tick prices to whole ticks and back, for every catalogue tick size', () => {
    for (const p of listProducts()) {
      fc.assert(
        fc.property(fc.integer({ min: -1_000_000, max: 1_000_000 }), (n) => {
          const price = ticksToPrice(n, p.tickSize);
          expect(priceToTicks(price, p.tickSize)).toBe(n === 0 ? 0 : n);
        }),
        { numRuns: 200 },
      );
    }
  });

  it('accepts float noise of a few units in the last place and refuses anything further', () => {
    expect(priceToTicks(71.22999999999999, 0.01)).toBe(7123);
    expect(priceToTicks(0.1 + 0.2, 0.1)).toBe(3);
    expect(priceToTicks(1000.2500000001, 0.25)).toBeUndefined();
    expect(priceToTicks(1000.25 + 1e-12, 0.25)).toBeUndefined();
    expect(priceToTicks(5e-324, 0.25)).toBeUndefined();
    expect(priceToTicks(0, 0.25)).toBe(0);
  });
});

describe('clean tick arithmetic', () => {
  it('a distance that rounds to nothing is zero, not negative zero', () => {
    expect(Object.is(ticksToPoints(-1e-20, 0.25), 0)).toBe(true);
    expect(Object.is(addTicks(-1e-20, 0, 0.25), 0)).toBe(true);
  });
});
