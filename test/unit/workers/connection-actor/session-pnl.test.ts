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

  it('a new trading day starts realized and fees from zero; open P&L carries on', () => {
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
    expect(of()).toMatchObject({ realized: 0, open: 50, total: 50 });
  });

  it('a contract outside the catalogue is valued at 0 per point (unknown point value)', () => {
    const { mirror, pnl, of } = setup();
    mirror.put('contract', { id: 9, name: 'XYZZ6' });
    mirror.apply('position', 'Created', { id: 21, accountId: A, contractId: 9, netPos: 1, netPrice: 10 });
    pnl.mark(9, 20);
    expect(of().open).toBe(0);
  });
});
