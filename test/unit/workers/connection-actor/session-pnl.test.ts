import { describe, expect, it } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { tradingDay } from '../../../../src/domain/trading-time.js';
import { SessionPnl } from '../../../../workers/connection-actor/session-pnl.js';

const A = 7;
const ES = 1;
// Tuesday 2026-11-24 10:00 CT: the trading day began Monday 17:00 CT (23:00 UTC).
const NOW = Date.UTC(2026, 10, 24, 16, 0);
const DAY = tradingDay(NOW);

function setup(snapshot: Record<string, unknown[]> = {}) {
  const mirror = new Mirror();
  const clock = { now: NOW };
  const changed: string[] = [];
  const pnl = new SessionPnl(mirror, () => clock.now, (a) => changed.push(a));
  mirror.replace({ contracts: [{ id: ES, name: 'ESZ6' }], ...snapshot });
  return { mirror, pnl, clock, changed, of: () => pnl.of(String(A)) };
}

const at = (ms: number) => new Date(ms).toISOString();

describe('SessionPnl', () => {
  it('realized P&L of the day’s fill pairs in account currency, fees of the day’s fills subtracted', () => {
    const { mirror, of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES, action: 'Buy' }, { id: 11, accountId: A, contractId: ES, action: 'Sell' }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 0 }],
    });
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Buy', qty: 2, price: 5000, timestamp: at(NOW) });
    mirror.apply('fill', 'Created', { id: 31, orderId: 11, contractId: ES, action: 'Sell', qty: 2, price: 4996, timestamp: at(NOW) });
    mirror.apply('fillPair', 'Created', { id: 40, positionId: 20, buyFillId: 30, sellFillId: 31, qty: 2, buyPrice: 5000, sellPrice: 4996 });
    // ES: $50 a point → 2 × −4 × 50.
    expect(of()).toMatchObject({ realized: -400, fees: 0, total: -400 });
    mirror.apply('fillFee', 'Created', { id: 31, commission: 1.29, exchangeFee: 1.38, nfaFee: 0.02 });
    expect(of()).toMatchObject({ realized: -400, fees: 2.69, total: -402.69 });
  });

  it('open P&L from the last quote, the last fill until one comes', () => {
    const { mirror, pnl, of, changed } = setup();
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Sell', qty: 3, price: 5000 });
    mirror.apply('position', 'Created', { id: 20, accountId: A, contractId: ES, netPos: -3, netPrice: 5000 });
    expect(of().open).toBe(0);
    pnl.mark(ES, 5002.5);
    expect(of()).toMatchObject({ open: -375, total: -375 });
    // After a quote, fills no longer move the mark.
    mirror.apply('fill', 'Created', { id: 31, orderId: 12, contractId: ES, action: 'Buy', qty: 1, price: 4990 });
    expect(of().open).toBe(-375);
    expect(changed).toContain(String(A));
    expect(pnl.held(String(A))).toEqual([ES]);
    mirror.apply('position', 'Updated', { id: 20, accountId: A, contractId: ES, netPos: 0 });
    expect(of().open).toBe(0);
    expect(pnl.held(String(A))).toEqual([]);
  });

  it('a resync counts only pairs closed inside the day (by the broker’s fill times)', () => {
    const { of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 0 }],
      fills: [
        { id: 30, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start - 3_600_000) },
        { id: 31, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start - 60_000) },
        { id: 32, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start + 60_000) },
      ],
      fillPairs: [
        { id: 40, positionId: 20, buyFillId: 30, sellFillId: 31, qty: 1, buyPrice: 5000, sellPrice: 5010 },
        { id: 41, positionId: 20, buyFillId: 30, sellFillId: 32, qty: 1, buyPrice: 5000, sellPrice: 4990 },
      ],
    });
    expect(of().realized).toBe(-500);
  });

  it('a new trading day starts realized and fees from zero, and a position carried into it counts from its value at the roll (a carried profit cushions nothing)', () => {
    const { mirror, pnl, clock, of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 }],
    });
    mirror.apply('fillPair', 'Created', { id: 40, positionId: 20, buyFillId: 1, sellFillId: 2, qty: 1, buyPrice: 5000, sellPrice: 4990 });
    pnl.mark(ES, 5001);
    expect(of()).toMatchObject({ realized: -500, open: 50 });
    expect(pnl.roll()).toBe(false);
    clock.now = DAY.end;
    expect(pnl.roll()).toBe(true);
    expect(pnl.window).toEqual(tradingDay(DAY.end));
    expect(of()).toMatchObject({ realized: 0, open: 0, total: 0 });
    // As the firm measures the day: 3 points under the 17:00 mark is −$150, not +$50 − $200.
    pnl.mark(ES, 4998);
    expect(of()).toMatchObject({ realized: 0, open: -150, total: -150 });
    // Closed today at 4998: the pair books 5000 → 4998 (−$100), of which +$50 was yesterday's.
    mirror.apply('fillPair', 'Created', { id: 41, positionId: 20, buyFillId: 3, sellFillId: 4, qty: 1, buyPrice: 5000, sellPrice: 4998 });
    mirror.apply('position', 'Updated', { id: 20, accountId: A, contractId: ES, netPos: 0, netPrice: 0 });
    expect(of()).toMatchObject({ realized: -100, open: -50, total: -150 });
  });

  it('a resync during the day keeps what the day began with', () => {
    const { mirror, pnl, clock, of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 2, netPrice: 5000 }],
    });
    pnl.mark(ES, 5006);
    clock.now = DAY.end;
    pnl.roll();
    pnl.mark(ES, 4998.25);
    expect(of().total).toBe(-775);
    mirror.replace({ contracts: [{ id: ES, name: 'ESZ6' }], orders: [{ id: 10, accountId: A, contractId: ES }], positions: [{ id: 20, accountId: A, contractId: ES, netPos: 2, netPrice: 5000 }] });
    pnl.mark(ES, 4998.25);
    expect(of().total).toBe(-775);
  });

  it('a contract outside the catalogue is valued at 0 per point (unknown point value)', () => {
    const { mirror, pnl, of } = setup();
    mirror.put('contract', { id: 9, name: 'XYZZ6' });
    mirror.apply('position', 'Created', { id: 21, accountId: A, contractId: 9, netPos: 1, netPrice: 10 });
    pnl.mark(9, 20);
    expect(of().open).toBe(0);
  });

  it('an account without P&L has zeros and holds nothing', () => {
    const { pnl } = setup();
    expect(pnl.of('nobody')).toEqual({ realized: 0, fees: 0, open: 0, total: 0 });
    expect(pnl.held('nobody')).toEqual([]);
  });

  it('a contract the mirror does not know yet counts 0 per point until it arrives, then its point value', () => {
    const { mirror, pnl, of } = setup();
    mirror.apply('position', 'Created', { id: 21, accountId: A, contractId: 5, netPos: 2, netPrice: 100 });
    pnl.mark(5, 110);
    expect(of().open).toBe(0);
    // NQ: $20 a point → 2 × 10 × 20.
    mirror.apply('contract', 'Created', { id: 5, name: 'NQZ6' });
    expect(of().open).toBe(400);
  });

  it('a resync whose snapshot carries no contracts (they come after it) counts the day’s realized P&L once they arrive, not $0', () => {
    const mirror = new Mirror();
    const pnl = new SessionPnl(mirror, () => NOW, () => undefined);
    // The day so far: -$500, then a reconnect: the snapshot replaces the mirror without contracts.
    mirror.replace({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 0 }],
      fills: [
        { id: 30, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start + 60_000) },
        { id: 31, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start + 120_000) },
      ],
      fillPairs: [{ id: 40, positionId: 20, buyFillId: 30, sellFillId: 31, qty: 1, buyPrice: 5000, sellPrice: 4990 }],
    });
    // A live pair of the same contract before its contract arrives waits too.
    mirror.apply('fill', 'Created', { id: 32, orderId: 10, contractId: ES, qty: 1, timestamp: at(NOW) });
    mirror.apply('fill', 'Created', { id: 33, orderId: 10, contractId: ES, qty: 1, timestamp: at(NOW) });
    mirror.apply('fillPair', 'Created', { id: 41, positionId: 20, buyFillId: 32, sellFillId: 33, qty: 1, buyPrice: 4990, sellPrice: 4985 });
    mirror.apply('fillPair', 'Updated', { id: 41, positionId: 20, buyFillId: 32, sellFillId: 33, qty: 1, buyPrice: 4990, sellPrice: 4985 });
    expect(pnl.of(String(A)).realized).toBe(0);
    mirror.apply('contract', 'Created', { id: ES, name: 'ESZ6' });
    expect(pnl.of(String(A)).realized).toBe(-750);
    // Once, however often the contract comes again.
    mirror.apply('contract', 'Updated', { id: ES, name: 'ESZ6' });
    expect(pnl.of(String(A)).realized).toBe(-750);
  });

  it('a price that is not a number leaves the mark as it was', () => {
    const { mirror, pnl, of } = setup();
    mirror.apply('position', 'Created', { id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 });
    pnl.mark(ES, 5002);
    pnl.mark(ES, Number.NaN);
    expect(of().open).toBe(100);
  });

  it('until a quote comes, every fill of the contract moves the mark', () => {
    const { mirror, pnl, of } = setup();
    mirror.apply('position', 'Created', { id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 });
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 5004 });
    expect(of().open).toBe(200);
    mirror.apply('fill', 'Created', { id: 31, orderId: 11, contractId: ES, action: 'Buy', qty: 1, price: 4998 });
    expect(of().open).toBe(-100);
    pnl.mark(ES, 5001);
    mirror.apply('fill', 'Created', { id: 32, orderId: 12, contractId: ES, action: 'Buy', qty: 1, price: 4990 });
    expect(of().open).toBe(50);
  });

  it('deletions never count: not a deleted fill pair, nor a deleted fill’s price', () => {
    const { mirror, of } = setup({ orders: [{ id: 10, accountId: A, contractId: ES }] });
    mirror.apply('position', 'Created', { id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 });
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 5000 });
    mirror.apply('fill', 'Deleted', { id: 31, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 4000 });
    mirror.apply('fillPair', 'Deleted', { id: 40, positionId: 20, buyFillId: 30, sellFillId: 31, qty: 1, buyPrice: 5000, sellPrice: 4000 });
    expect(of()).toEqual({ realized: 0, fees: 0, open: 0, total: 0 });
  });

  it('a quote revalues every account holding the contract, and no longer one that went flat', () => {
    const { mirror, pnl, of, changed } = setup();
    mirror.apply('position', 'Created', { id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 });
    mirror.apply('position', 'Created', { id: 21, accountId: 8, contractId: ES, netPos: -1, netPrice: 5000 });
    pnl.mark(ES, 5001);
    expect([of().open, pnl.of('8').open]).toEqual([50, -50]);
    mirror.apply('position', 'Updated', { id: 20, accountId: A, contractId: ES, netPos: 0, netPrice: 0 });
    changed.length = 0;
    pnl.mark(ES, 5002);
    expect(changed).toEqual(['8']);
  });

  it('every fill pair and fee counts once: repeats and inactive (busted) pairs do not', () => {
    const { mirror, of } = setup({ orders: [{ id: 10, accountId: A, contractId: ES }], positions: [{ id: 20, accountId: A, contractId: ES, netPos: 0 }] });
    const pair = { id: 40, positionId: 20, buyFillId: 1, sellFillId: 2, qty: 1, buyPrice: 5000, sellPrice: 5001, active: true };
    mirror.apply('fillPair', 'Created', pair);
    mirror.apply('fillPair', 'Updated', pair);
    mirror.apply('fillPair', 'Created', { ...pair, id: 41, sellPrice: 5002 });
    mirror.apply('fillPair', 'Created', { ...pair, id: 42, sellPrice: 5100, active: false });
    for (const id of [30, 31]) mirror.apply('fill', 'Created', { id, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 5000 });
    mirror.apply('fillFee', 'Created', { id: 30, commission: 1 });
    mirror.apply('fillFee', 'Updated', { id: 30, commission: 1 });
    mirror.apply('fillFee', 'Created', { id: 31, commission: 2 });
    expect(of()).toMatchObject({ realized: 150, fees: 3, total: 147 });
  });

  it('every fee kind of a fillFee counts, other fields do not', () => {
    const { mirror, of } = setup({ orders: [{ id: 10, accountId: A, contractId: ES }] });
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 5000, timestamp: at(NOW) });
    const kinds = ['commission', 'clearingFee', 'exchangeFee', 'nfaFee', 'brokerageFee', 'ipFee', 'orderRoutingFee', 'datafeedFee', 'otherFee'];
    // 1, 2, 4, … 256: any kind left out shows in the sum.
    mirror.apply('fillFee', 'Created', { id: 30, ...Object.fromEntries(kinds.map((k, i) => [k, 2 ** i])), fillId: 30, currencyId: 1 });
    expect(of().fees).toBe(511);
  });

  it('a live fee counts even when its fill carries no time', () => {
    const { mirror, of } = setup({ orders: [{ id: 10, accountId: A, contractId: ES }] });
    mirror.apply('fill', 'Created', { id: 30, orderId: 10, contractId: ES, action: 'Buy', qty: 1, price: 5000 });
    mirror.apply('fillFee', 'Created', { id: 30, commission: 1.5 });
    expect(of().fees).toBe(1.5);
  });

  it('pairs of an unknown position and fees of an unknown fill or order are ignored', () => {
    const { mirror, of } = setup({ fills: [{ id: 31, orderId: 99, contractId: ES, qty: 1, timestamp: at(NOW) }] });
    mirror.apply('fillPair', 'Created', { id: 40, positionId: 999, buyFillId: 1, sellFillId: 2, qty: 1, buyPrice: 5000, sellPrice: 4000 });
    mirror.apply('fillFee', 'Created', { id: 30, commission: 1 });
    mirror.apply('fillFee', 'Created', { id: 31, commission: 1 });
    expect(of()).toEqual({ realized: 0, fees: 0, open: 0, total: 0 });
  });

  it('a resync counts only the fees of fills inside the day', () => {
    const { of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      fills: [
        { id: 30, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start - 60_000) },
        { id: 31, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start + 60_000) },
      ],
      fillFees: [{ id: 30, commission: 5 }, { id: 31, commission: 2 }],
    });
    expect(of().fees).toBe(2);
  });

  it('a resync dates a pair by its latest known fill time: from the day’s first millisecond on', () => {
    const { of } = setup({
      orders: [{ id: 10, accountId: A, contractId: ES }],
      positions: [{ id: 20, accountId: A, contractId: ES, netPos: 0 }],
      fills: [
        { id: 31, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start + 60_000) },
        { id: 32, orderId: 10, contractId: ES, qty: 1 },
        { id: 33, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start) },
        { id: 34, orderId: 10, contractId: ES, qty: 1, timestamp: at(DAY.start - 1) },
      ],
      fillPairs: [
        // One fill unknown to the mirror, the other inside the day: $50.
        { id: 40, positionId: 20, buyFillId: 30, sellFillId: 31, qty: 1, buyPrice: 5000, sellPrice: 5001 },
        // One fill without a time, the other inside the day: $100.
        { id: 41, positionId: 20, buyFillId: 32, sellFillId: 31, qty: 1, buyPrice: 5000, sellPrice: 5002 },
        // Closed at the very start of the day: $200.
        { id: 42, positionId: 20, buyFillId: 34, sellFillId: 33, qty: 1, buyPrice: 5000, sellPrice: 5004 },
        // Closed a millisecond before the day: not counted.
        { id: 43, positionId: 20, buyFillId: 34, sellFillId: 34, qty: 1, buyPrice: 5000, sellPrice: 5008 },
      ],
    });
    expect(of().realized).toBe(350);
  });

  it('a resync reports an account whose day is gone from the snapshot', () => {
    const { mirror, changed, of } = setup({ positions: [{ id: 20, accountId: A, contractId: ES, netPos: 1, netPrice: 5000 }] });
    changed.length = 0;
    mirror.replace({ contracts: [{ id: ES, name: 'ESZ6' }] });
    expect(changed).toEqual([String(A)]);
    expect(of()).toEqual({ realized: 0, fees: 0, open: 0, total: 0 });
  });
});
