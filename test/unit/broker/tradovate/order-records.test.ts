import { expect, test } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { fillsOf, isFinal, linkageOf, orderStatus, rejectReasonOf, statusOf, toOrderRecord } from '../../../../src/broker/tradovate/order-records.js';

function mirror(): Mirror {
  const m = new Mirror();
  m.replace({ contracts: [{ id: 1, name: 'ESZ6' }] });
  return m;
}

test('broker statuses map to service statuses; a partly filled Working order is partially_filled', () => {
  expect(statusOf('Working', 0)).toBe('working');
  expect(statusOf('Working', 1)).toBe('partially_filled');
  expect(statusOf('Suspended', 0)).toBe('pending');
  expect(statusOf('PendingNew', 0)).toBe('pending');
  expect(statusOf('Filled', 2)).toBe('filled');
  expect(statusOf('Completed', 2)).toBe('filled');
  expect(statusOf('Canceled', 1)).toBe('cancelled');
  expect(statusOf('Rejected', 0)).toBe('rejected');
  expect(statusOf('Expired', 0)).toBe('expired');
});

test('an order is final once filled, cancelled, rejected or expired; unknown orders are not final', () => {
  const m = mirror();
  m.apply('order', 'Created', [{ id: 1, ordStatus: 'Working' }, { id: 2, ordStatus: 'Canceled' }, { id: 3, ordStatus: 'Filled' }]);
  m.apply('fill', 'Created', { id: 30, orderId: 1, qty: 1, price: 100 });
  expect(orderStatus(m, m.get('order', 1)!)).toBe('partially_filled');
  expect(isFinal(m, 1)).toBe(false);
  expect(isFinal(m, 2)).toBe(true);
  expect(isFinal(m, 3)).toBe(true);
  expect(isFinal(m, 99)).toBe(false);
});

test('filled qty sums split fills with a weighted average; cumQty is a fallback, not added', () => {
  const m = mirror();
  m.apply('fill', 'Created', [{ id: 10, orderId: 5, qty: 2, price: 100 }, { id: 11, orderId: 5, qty: 1, price: 103 }]);
  m.apply('executionReport', 'Created', { id: 12, orderId: 5, cumQty: 3, avgPx: 101 });
  expect(fillsOf(m, 5)).toMatchObject({ qty: 3, avg: 101 });
  m.apply('executionReport', 'Created', { id: 20, orderId: 6, cumQty: 2, avgPx: 50 });
  expect(fillsOf(m, 6)).toMatchObject({ qty: 2, avg: 50 });
});

test('an OSO: legs point at the entry with parentId; roles follow the leg order types', () => {
  const m = mirror();
  m.apply('order', 'Created', [
    { id: 1, accountId: 7, contractId: 1, action: 'Buy', ordStatus: 'Working' },
    { id: 2, accountId: 7, contractId: 1, action: 'Sell', ordStatus: 'Suspended', parentId: 1, ocoId: 3 },
    { id: 3, accountId: 7, contractId: 1, action: 'Sell', ordStatus: 'Suspended', parentId: 1, ocoId: 2 },
  ]);
  m.apply('orderVersion', 'Created', [
    { id: 1, orderId: 1, orderQty: 1, orderType: 'Limit', price: 100 },
    { id: 2, orderId: 2, orderQty: 1, orderType: 'Stop', stopPrice: 95 },
    { id: 3, orderId: 3, orderQty: 1, orderType: 'Limit', price: 110 },
  ]);
  expect(linkageOf(m, m.get('order', 1)!)).toEqual({ role: 'entry', entryId: 1, takeProfit: 3, stopLoss: 2 });
  expect(linkageOf(m, m.get('order', 2)!).role).toBe('stop_loss');
  const entry = toOrderRecord(m, m.get('order', 1)!, undefined);
  expect(entry).toMatchObject({ role: 'entry', bracketId: '1', legs: { takeProfit: '3', stopLoss: '2' }, symbol: 'ESZ6', price: 100 });
  const leg = toOrderRecord(m, m.get('order', 3)!, undefined);
  expect(leg).toMatchObject({ role: 'take_profit', bracketId: '1', legs: { takeProfit: null, stopLoss: null }, status: 'pending' });
});

test('a strategy: members come from orderStrategyLink; the entry is the order on the strategy side', () => {
  const m = mirror();
  m.apply('orderStrategy', 'Created', { id: 50, action: 'Sell', accountId: 7 });
  m.apply('order', 'Created', [
    { id: 51, accountId: 7, contractId: 1, action: 'Sell', ordStatus: 'Filled' },
    { id: 53, accountId: 7, contractId: 1, action: 'Buy', ordStatus: 'Working' },
    { id: 54, accountId: 7, contractId: 1, action: 'Buy', ordStatus: 'Working' },
  ]);
  m.apply('orderVersion', 'Created', [
    { id: 51, orderId: 51, orderQty: 1, orderType: 'Market' },
    { id: 53, orderId: 53, orderQty: 1, orderType: 'Limit', price: 90 },
    { id: 54, orderId: 54, orderQty: 1, orderType: 'Stop', stopPrice: 105 },
  ]);
  m.apply('orderStrategyLink', 'Created', [
    { id: 52, orderStrategyId: 50, orderId: 51, label: 'entry' },
    { id: 55, orderStrategyId: 50, orderId: 53, label: 'tp1' },
    { id: 56, orderStrategyId: 50, orderId: 54, label: 'sl1' },
  ]);
  expect(linkageOf(m, m.get('order', 54)!)).toEqual({ role: 'stop_loss', entryId: 51, takeProfit: 53, stopLoss: 54 });
  expect(linkageOf(m, m.get('order', 51)!).role).toBe('entry');
});

test('a plain order is single; notes (requested symbol, re-placed leg role) override what the broker cannot say', () => {
  const m = mirror();
  m.apply('order', 'Created', { id: 9, accountId: 7, contractId: 1, action: 'Buy', ordStatus: 'Working', timestamp: '2026-01-01T00:00:00.000Z' });
  m.apply('orderVersion', 'Created', { id: 9, orderId: 9, orderQty: 2, orderType: 'Stop', stopPrice: 99, timeInForce: 'GTC', text: 'client-1' });
  expect(toOrderRecord(m, m.get('order', 9)!, undefined)).toMatchObject({
    role: 'single', requestedSymbol: null, clientOrderId: 'client-1', type: 'stop', stopPrice: 99, timeInForce: 'gtc', qty: 2, accountId: '7', orderId: '9',
  });
  expect(toOrderRecord(m, m.get('order', 9)!, { requestedSymbol: 'ES1!', role: 'stop_loss', bracketId: '1' })).toMatchObject({
    role: 'stop_loss', bracketId: '1', requestedSymbol: 'ES1!',
  });
});

test('the reject reason comes from the commandReport of the order\'s command', () => {
  const m = mirror();
  m.apply('order', 'Created', { id: 9, accountId: 7, contractId: 1, action: 'Buy', ordStatus: 'Rejected' });
  m.apply('command', 'Created', { id: 9, orderId: 9, commandType: 'New' });
  m.apply('commandReport', 'Created', { id: 10, commandId: 9, commandStatus: 'RiskRejected', rejectReason: 'MaxOrderQtyLimitReached', text: 'Your maximum order quantity has been met.' });
  expect(rejectReasonOf(m, 9)).toBe('MaxOrderQtyLimitReached: Your maximum order quantity has been met.');
  expect(toOrderRecord(m, m.get('order', 9)!, undefined)).toMatchObject({ status: 'rejected', rejectReason: 'MaxOrderQtyLimitReached: Your maximum order quantity has been met.' });
});
