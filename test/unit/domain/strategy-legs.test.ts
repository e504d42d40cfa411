import { describe, expect, it } from 'vitest';
import { checkStrategyLegs, type StrategyLegs } from '../../../src/domain/strategy-legs.js';
import { thrown } from '../../support/errors.js';

const NOW = new Date('2026-11-21T15:00:00Z');
const check = (legs: StrategyLegs) => checkStrategyLegs(legs, NOW, 5);

describe('checkStrategyLegs', () => {
  it('with a symbol: each price on that contract’s tick and inside its band', () => {
    expect(() => check({ symbol: 'ES1!', takeProfit: { price: 5010.25 }, stopLoss: { price: 4990 } })).not.toThrow();
    const off = thrown(() => check({ symbol: 'ES1!', takeProfit: { price: 4000.1 } }));
    expect(off).toMatchObject({ code: 'VALIDATION_FAILED', extensions: { errors: [{ path: 'takeProfit.price', message: '4000.1 is not on the 0.25 tick of ESZ6' }] } });
    const far = thrown(() => check({ symbol: 'ES1!', takeProfit: { price: 5000 }, stopLoss: { price: 1e21 } }));
    expect(far).toMatchObject({ code: 'PRICE_OUT_OF_RANGE', extensions: { band: { min: 1000, max: 25000, reference: 5000 }, errors: [{ path: 'stopLoss.price', message: '1e+21 is outside 1000..25000 for ESZ6' }] } });
  });

  it('without a symbol: each price one some product can trade, both legs one product can trade together (the audit’s 1e21 stop)', () => {
    const audit = thrown(() => check({ takeProfit: { price: 4000.1 }, stopLoss: { price: 1e21 } }));
    expect(audit.code).toBe('PRICE_OUT_OF_RANGE');
    expect(audit.extensions.errors).toEqual([{ path: 'stopLoss.price', message: expect.stringContaining('1e+21 is a price no product can trade') }]);
    for (const price of [5e-324, 0.00001, 1e9]) expect(thrown(() => check({ stopLoss: { price } })).code, String(price)).toBe('PRICE_OUT_OF_RANGE');
    // 4000.1 is a gold price, 1.0805 a euro one: fine alone, never one contract's pair.
    expect(() => check({ takeProfit: { price: 4000.1 } })).not.toThrow();
    expect(() => check({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } })).not.toThrow();
    const apart = thrown(() => check({ takeProfit: { price: 4000.1 }, stopLoss: { price: 1.0805 } }));
    expect(apart.code).toBe('PRICE_OUT_OF_RANGE');
    expect(apart.extensions.errors).toEqual([
      { path: 'takeProfit.price', message: expect.stringMatching(/^4000\.1 fits .*GC.* only: no product trades both legs$/) },
      { path: 'stopLoss.price', message: '1.0805 fits 6E, HG only: no product trades both legs' },
    ]);
  });

  it('tick-offset legs and strategies without legs have nothing to check here', () => {
    expect(() => check({ symbol: 'ES', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } })).not.toThrow();
    expect(() => check({})).not.toThrow();
  });
});
