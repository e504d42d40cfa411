/** The per-order matching decision: MIT touches, trailing stops that only ratchet, trailing stop-limits. */
import { describe, expect, it } from 'vitest';
import { decide, type MatchInput } from '../../../src/sim/matching.js';

const TICK = 0.25;
const order = (o: Partial<MatchInput>): MatchInput => ({ buy: false, orderType: 'Market', triggered: false, ...o });

describe('MIT', () => {
  it('a buy MIT fills at the last price once the price touches it from above; a sell MIT from below', () => {
    const buy = order({ buy: true, orderType: 'MIT', price: 4990 });
    expect(decide(buy, 4995, true, TICK).fillPrice).toBeUndefined();
    expect(decide(buy, 4990, false, TICK)).toMatchObject({ fillPrice: 4990, triggered: true });
    expect(decide(buy, 4989.5, false, TICK).fillPrice).toBe(4989.5);
    const sell = order({ orderType: 'MIT', price: 5010 });
    expect(decide(sell, 5009.75, false, TICK).fillPrice).toBeUndefined();
    expect(decide(sell, 5010.25, false, TICK).fillPrice).toBe(5010.25);
  });
});

describe('TrailingStop', () => {
  it('a sell trailing stop follows the price up at its distance and never back down', () => {
    const o = order({ orderType: 'TrailingStop', stopPrice: 4995, trail: 5 });
    expect(decide(o, 5001, false, TICK)).toEqual({ triggered: false, trailTo: { stopPrice: 4996 } });
    expect(decide(o, 4999, false, TICK)).toEqual({ triggered: false, trailTo: undefined });
    expect(decide({ ...o, stopPrice: 4996 }, 4996, false, TICK)).toMatchObject({ fillPrice: 4996, triggered: true });
  });

  it('a buy trailing stop follows the price down and triggers on the way back up', () => {
    const o = order({ buy: true, orderType: 'TrailingStop', stopPrice: 5005, trail: 5 });
    expect(decide(o, 4998, false, TICK).trailTo).toEqual({ stopPrice: 5003 });
    expect(decide({ ...o, stopPrice: 5003 }, 5003.25, false, TICK)).toMatchObject({ fillPrice: 5003.25, triggered: true });
  });

  it('rounds a trailed stop to the tick', () => {
    const o = order({ orderType: 'TrailingStop', stopPrice: 99, trail: 0.3 });
    expect(decide(o, 100, false, TICK).trailTo).toEqual({ stopPrice: 99.75 });
  });
});

describe('TrailingStopLimit', () => {
  it('moves the limit with the stop and works as a limit once triggered', () => {
    const o = order({ orderType: 'TrailingStopLimit', stopPrice: 4995, price: 4994, trail: 5 });
    expect(decide(o, 5002, false, TICK).trailTo).toEqual({ stopPrice: 4997, price: 4996 });
    const triggered = decide({ ...o, stopPrice: 4997, price: 4996 }, 4996.5, false, TICK);
    expect(triggered).toMatchObject({ fillPrice: 4996.5, triggered: true });
    expect(decide({ ...o, stopPrice: 4997, price: 4996, triggered: true }, 4995.75, false, TICK).fillPrice).toBeUndefined();
  });
});

it('keeps the plain types as before: stops trigger, limits fill at the limit when reached later', () => {
  expect(decide(order({ orderType: 'Stop', stopPrice: 4990 }), 4990, false, TICK).fillPrice).toBe(4990);
  expect(decide(order({ orderType: 'Limit', price: 5010 }), 5011, false, TICK).fillPrice).toBe(5010);
  expect(decide(order({ orderType: 'Limit', price: 5010 }), 5011, true, TICK).fillPrice).toBe(5011);
});
