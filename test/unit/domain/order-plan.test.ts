import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { clOrdIdFor, dryRunBody, flattenClOrdIdPrefix, planOrder, type OrderInput } from '../../../src/domain/order-plan.js';
import { dryRunResponseSchema } from '../../../src/http/schemas.js';
import { thrown } from '../../support/errors.js';

// 2026-11-21: ES front month is Dec 2026 (roll 2026-12-10).
const NOW = new Date('2026-11-21T15:00:00Z');

function order(patch: Partial<OrderInput> = {}): OrderInput {
  return { symbol: 'ES', side: 'buy', qty: 1, ...patch };
}

function paths(err: AppError): string[] {
  return (err.extensions.errors as { path: string }[]).map((e) => e.path);
}

describe('planOrder symbol resolution', () => {
  it.each(['ESZ6', 'ES', 'ES1!', 'ES!', 'CME_MINI:ES1!', 'ESZ26', ' es1! '])('resolves %s to the front month and keeps what was sent', (symbol) => {
    const plan = planOrder(order({ symbol }), '42', NOW);
    expect(plan.order.symbol).toBe('ESZ6');
    expect(plan.order.requestedSymbol).toBe(symbol);
    expect(plan.product).toMatchObject({ root: 'ES', tickSize: 0.25, pointValue: 50 });
  });

  it('refuses an unknown symbol with UNKNOWN_SYMBOL naming it', () => {
    const err = thrown(() => planOrder(order({ symbol: 'FOO1!' }), '42', NOW));
    expect(err.code).toBe('UNKNOWN_SYMBOL');
    expect(err.extensions.symbol).toBe('FOO1!');
    expect(err.message).toContain('FOO1!');
  });

  it('checks the symbol before anything else (an unknown symbol with bad prices is still UNKNOWN_SYMBOL)', () => {
    const err = thrown(() => planOrder(order({ symbol: 'XX', type: 'limit', price: 1.13 }), '42', NOW));
    expect(err.code).toBe('UNKNOWN_SYMBOL');
  });
});

describe('planOrder request mapping', () => {
  it('maps a plain market order with defaults (day, no bracket)', () => {
    const plan = planOrder(order({ qty: 3, side: 'sell' }), '42', NOW);
    expect(plan.order).toEqual({
      accountId: '42',
      symbol: 'ESZ6',
      requestedSymbol: 'ES',
      side: 'sell',
      qty: 3,
      orderType: 'market',
      price: null,
      stopPrice: null,
      timeInForce: 'day',
      takeProfit: null,
      stopLoss: null,
      clientOrderId: null,
    });
    expect(plan.bracket).toBe('none');
  });

  it('maps an absolute bracket to prices (placeOSO)', () => {
    const plan = planOrder(order({ type: 'limit', price: 5000, takeProfit: { price: 5010 }, stopLoss: { price: 4995.5 } }), '42', NOW);
    expect(plan.bracket).toBe('absolute');
    expect(plan.order.takeProfit).toEqual({ price: 5010 });
    expect(plan.order.stopLoss).toEqual({ price: 4995.5 });
  });

  it('maps tick offsets to unsigned points and projects them from a limit price, direction-aware', () => {
    const buy = planOrder(order({ type: 'limit', price: 5001.25, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } }), '42', NOW);
    expect(buy.bracket).toBe('relative');
    expect(buy.order.takeProfit).toEqual({ offsetPoints: 10 });
    expect(buy.order.stopLoss).toEqual({ offsetPoints: 5 });
    expect(buy.takeProfit?.price).toBe(5011.25);
    expect(buy.stopLoss?.price).toBe(4996.25);

    const sell = planOrder(order({ side: 'sell', type: 'limit', price: 5001.25, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } }), '42', NOW);
    expect(sell.takeProfit?.price).toBe(4991.25);
    expect(sell.stopLoss?.price).toBe(5006.25);
  });

  it('leaves relative legs unprojected for market orders (anchored to the real fill by the broker)', () => {
    const plan = planOrder(order({ takeProfit: { ticks: 8 } }), '42', NOW);
    expect(plan.takeProfit).toEqual({ kind: 'relative', price: null, ticks: 8, offsetPoints: 2 });
    expect(plan.stopLoss).toBeNull();
  });

  it('uses the stop price as the reference of a stop entry and reports a mixed bracket', () => {
    const plan = planOrder(order({ type: 'stop', stopPrice: 5020, takeProfit: { price: 5030 }, stopLoss: { ticks: 4 } }), '42', NOW);
    expect(plan.bracket).toBe('mixed');
    expect(plan.stopLoss?.price).toBe(5019);
  });

  it('uses the contract tick of other products (CL 0.01)', () => {
    const plan = planOrder(order({ symbol: 'CL1!', type: 'limit', price: 71.23, stopLoss: { ticks: 15 } }), '42', NOW);
    expect(plan.order.symbol).toMatch(/^CL[FGHJKMNQUVXZ]\d$/);
    expect(plan.order.stopLoss).toEqual({ offsetPoints: 0.15 });
    expect(plan.stopLoss?.price).toBe(71.08);
  });
});

describe('planOrder validation', () => {
  it.each([
    ['price', { type: 'limit', price: 5001.1 }],
    ['stopPrice', { type: 'stop', stopPrice: 5001.3 }],
    ['takeProfit.price', { takeProfit: { price: 5010.1 } }],
    ['stopLoss.price', { stopLoss: { price: 4990.05 } }],
  ] as const)('refuses an off-tick %s and names the field', (path, patch) => {
    const err = thrown(() => planOrder(order(patch as Partial<OrderInput>), '42', NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(paths(err)).toContain(path);
    expect(err.message).toContain(path);
  });

  it.each([
    ['limit without price', { type: 'limit' }, 'price'],
    ['stop without stopPrice', { type: 'stop' }, 'stopPrice'],
    ['stop_limit without stopPrice', { type: 'stop_limit', price: 5000 }, 'stopPrice'],
    ['market with a price', { price: 5000 }, 'price'],
    ['limit with a stopPrice', { type: 'limit', price: 5000, stopPrice: 4999 }, 'stopPrice'],
    ['a fractional qty', { qty: 1.5 }, 'qty'],
    ['zero ticks', { takeProfit: { ticks: 0 } }, 'takeProfit.ticks'],
  ] as const)('refuses %s', (_name, patch, path) => {
    const err = thrown(() => planOrder(order(patch as Partial<OrderInput>), '42', NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(paths(err)).toContain(path);
  });

  it('refuses a buy whose take-profit is below the entry and stop-loss above it', () => {
    const err = thrown(() =>
      planOrder(order({ type: 'limit', price: 5000, takeProfit: { price: 4990 }, stopLoss: { price: 5005 } }), '42', NOW),
    );
    expect(paths(err)).toEqual(['takeProfit.price', 'stopLoss.price']);
  });

  it('refuses a sell whose take-profit is above the entry', () => {
    const err = thrown(() => planOrder(order({ side: 'sell', type: 'limit', price: 5000, takeProfit: { price: 5010 } }), '42', NOW));
    expect(paths(err)).toEqual(['takeProfit.price']);
    expect(planOrder(order({ side: 'sell', type: 'limit', price: 5000, takeProfit: { price: 4990 }, stopLoss: { price: 5010 } }), '42', NOW).bracket).toBe('absolute');
  });

  it('refuses a take-profit equal to the entry (no protection)', () => {
    const err = thrown(() => planOrder(order({ type: 'limit', price: 5000, takeProfit: { price: 5000 } }), '42', NOW));
    expect(paths(err)).toEqual(['takeProfit.price']);
  });

  it('checks a market order’s absolute legs against each other', () => {
    const err = thrown(() => planOrder(order({ takeProfit: { price: 4990 }, stopLoss: { price: 5010 } }), '42', NOW));
    expect(paths(err)).toEqual(['takeProfit.price']);
    expect(planOrder(order({ takeProfit: { price: 5010 }, stopLoss: { price: 4990 } }), '42', NOW).bracket).toBe('absolute');
  });

  it('reports every problem at once', () => {
    const err = thrown(() => planOrder(order({ type: 'limit', price: 5000.1, takeProfit: { price: 5010.1 } }), '42', NOW));
    expect(paths(err)).toEqual(expect.arrayContaining(['price', 'takeProfit.price']));
  });
});

describe('clOrdIdFor', () => {
  it('is deterministic per (user, key), distinct across users and keys, and within 64 chars', () => {
    const a = clOrdIdFor('usr_1', 'k-1');
    expect(clOrdIdFor('usr_1', 'k-1')).toBe(a);
    expect(clOrdIdFor('usr_2', 'k-1')).not.toBe(a);
    expect(clOrdIdFor('usr_1', 'k-2')).not.toBe(a);
    expect(a.length).toBeLessThanOrEqual(64);
    // Pinned: a clOrdId stored under a key before an upgrade must be the one derived after it
    // (sha256("usr_1\0k-1"), base64url, first 40 characters).
    expect(a).toBe('tg-k-3woDqZGXHorIi98Obetkce7dzBsVuMtMrOvRxxPD');
  });

  it('is random without a key', () => {
    expect(clOrdIdFor('usr_1')).not.toBe(clOrdIdFor('usr_1'));
  });
});

describe('flattenClOrdIdPrefix', () => {
  it('is deterministic per (user, key) and leaves room for the per-order suffix within 64 chars', () => {
    const a = flattenClOrdIdPrefix('usr_1', 'k-1');
    expect(flattenClOrdIdPrefix('usr_1', 'k-1')).toBe(a);
    expect(flattenClOrdIdPrefix('usr_2', 'k-1')).not.toBe(a);
    expect(flattenClOrdIdPrefix('usr_1', 'k-2')).not.toBe(a);
    expect(a).toMatch(/^tg-f-[\w-]{24}$/);
    // One digest of (user, key) behind both ids: a flatten retried with its key tags the same orders.
    expect(a.slice(5)).toBe(clOrdIdFor('usr_1', 'k-1').slice(5, 29));
  });

  it('is random without a key', () => {
    expect(flattenClOrdIdPrefix('usr_1')).not.toBe(flattenClOrdIdPrefix('usr_1'));
  });
});

describe('dryRunBody', () => {
  it('matches the documented dryRun response schema', () => {
    const plan = planOrder(order({ symbol: 'ES1!', type: 'limit', price: 5001.25, takeProfit: { ticks: 40 }, stopLoss: { price: 4990 } }), '42', NOW);
    const body = dryRunBody(plan, false);
    expect(dryRunResponseSchema.parse(body)).toEqual(body);
    expect(body).toMatchObject({ dryRun: true, symbol: 'ESZ6', requestedSymbol: 'ES1!', bracket: 'mixed' });
  });
});

describe('planOrder prices as whole ticks and the price band', () => {
  it('refuses prices outside reference ÷ 5 … × 5 with PRICE_OUT_OF_RANGE naming each (ES reference 5000)', () => {
    for (const price of [5e-324, 0.25, 999.75, 25000.25, 1e21]) {
      const err = thrown(() => planOrder(order({ type: 'limit', price }), '42', NOW));
      expect(err.code, String(price)).toBe('PRICE_OUT_OF_RANGE');
      expect(paths(err)).toEqual(['price']);
      expect(err.extensions.band).toEqual({ min: 1000, max: 25000, reference: 5000 });
    }
    expect(planOrder(order({ type: 'limit', price: 1000 }), '42', NOW).order.price).toBe(1000);
    expect(planOrder(order({ type: 'limit', price: 25000 }), '42', NOW).order.price).toBe(25000);
  });

  it('takes the band width from the limits (PRICE_BAND_FACTOR) and the quantity cap (ORDER_QTY_MAX)', () => {
    const limits = { maxQty: 3, priceBandFactor: 2 };
    expect(thrown(() => planOrder(order({ type: 'limit', price: 2499.75 }), '42', NOW, limits)).code).toBe('PRICE_OUT_OF_RANGE');
    expect(planOrder(order({ type: 'limit', price: 2500, qty: 3 }), '42', NOW, limits).order.qty).toBe(3);
    expect(paths(thrown(() => planOrder(order({ qty: 4 }), '42', NOW, limits)))).toEqual(['qty']);
  });

  it('refuses a price a hair off the tick and sends exact tick prices (no float drift)', () => {
    expect(paths(thrown(() => planOrder(order({ type: 'limit', price: 5000.2500000001 }), '42', NOW)))).toEqual(['price']);
    const cl = planOrder(order({ symbol: 'CL', type: 'limit', price: 71.22999999999999, takeProfit: { ticks: 7 } }), '42', NOW);
    expect(cl.order.price).toBe(71.23);
    expect(cl.takeProfit?.price).toBe(71.3);
    const sixE = planOrder(order({ symbol: '6E', type: 'stop', stopPrice: 1.08735, stopLoss: { ticks: 3 } }), '42', NOW);
    expect(sixE.stopLoss?.price).toBe(1.0872);
  });

  it('checks stopPrice and absolute legs against the band too', () => {
    const err = thrown(() => planOrder(order({ type: 'stop_limit', stopPrice: 1e9, price: 5000, takeProfit: { price: 1e9 }, stopLoss: { price: 0.5 } }), '42', NOW));
    expect(err.code).toBe('PRICE_OUT_OF_RANGE');
    expect(paths(err)).toEqual(['stopPrice', 'takeProfit.price', 'stopLoss.price']);
  });

  it('refuses a relative leg whose computed price leaves the band (never a stop past zero)', () => {
    const fromLimit = thrown(() => planOrder(order({ symbol: 'MES', type: 'limit', price: 5000, stopLoss: { ticks: 100_000 } }), '42', NOW));
    expect(fromLimit.code).toBe('PRICE_OUT_OF_RANGE');
    expect(fromLimit.message).toContain('stopLoss.ticks: 100000 ticks from the entry price 5000 is -20000');
    const sell = thrown(() => planOrder(order({ side: 'sell', type: 'limit', price: 5000, takeProfit: { ticks: 16_001 } }), '42', NOW));
    expect(paths(sell)).toEqual(['takeProfit.ticks']);
    expect(planOrder(order({ side: 'sell', type: 'limit', price: 5000, takeProfit: { ticks: 16_000 } }), '42', NOW).takeProfit?.price).toBe(1000);
  });

  it('projects a market order’s relative legs from the reference price for the band check only', () => {
    const err = thrown(() => planOrder(order({ symbol: 'MES', stopLoss: { ticks: 100_000 } }), '42', NOW));
    expect(err.code).toBe('PRICE_OUT_OF_RANGE');
    expect(err.message).toContain('from the reference price 5000');
    const upward = thrown(() => planOrder(order({ takeProfit: { ticks: 80_001 } }), '42', NOW));
    expect(paths(upward)).toEqual(['takeProfit.ticks']);
    const ok = planOrder(order({ takeProfit: { ticks: 80_000 }, stopLoss: { ticks: 16_000 } }), '42', NOW);
    expect([ok.takeProfit?.price, ok.stopLoss?.price]).toEqual([null, null]);
  });

  it('refuses non-integer or non-positive leg ticks', () => {
    for (const ticks of [0, -4, 2.5, Number.NaN]) {
      expect(paths(thrown(() => planOrder(order({ stopLoss: { ticks } }), '42', NOW))), String(ticks)).toEqual(['stopLoss.ticks']);
    }
  });
});
