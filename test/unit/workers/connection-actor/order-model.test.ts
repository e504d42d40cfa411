import { expect, test } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { OrderModel } from '../../../../workers/connection-actor/order-model.js';
import type { ConnectionSpec } from '../../../../src/domain/connections.js';

const spec = { connectionId: 'c1', broker: 'tradovate', environment: 'demo' } as ConnectionSpec;

function setup() {
  const m = new Mirror();
  return { m, model: new OrderModel(m, spec) };
}

test('accounts: active while reported; kept inactive when gone; a change is reported once', () => {
  const { m, model } = setup();
  m.replace({ accounts: [{ id: 1, name: 'A' }, { id: 2, name: 'B' }] });
  expect(model.refreshAccounts()?.map((a) => [a.id, a.active])).toEqual([['1', true], ['2', true]]);
  expect(model.refreshAccounts()).toBeNull();
  m.apply('account', 'Deleted', { id: 1 });
  expect(model.refreshAccounts()?.map((a) => [a.id, a.active])).toEqual([['1', false], ['2', true]]);
  m.replace({ accounts: [{ id: 1, name: 'A' }] });
  expect(model.refreshAccounts()?.map((a) => [a.id, a.active])).toEqual([['1', true], ['2', false]]);
  expect(model.accounts()[0]).toEqual({ id: '1', name: 'A', connectionId: 'c1', broker: 'tradovate', environment: 'demo', active: true });
});

test('an account the broker flags inactive or closed is inactive; requests on it are ACCOUNT_INACTIVE', () => {
  const { m, model } = setup();
  m.replace({ accounts: [{ id: 1, name: 'A', active: false }, { id: 2, name: 'B', closed: true }] });
  model.refreshAccounts();
  expect(model.accounts().every((a) => !a.active)).toBe(true);
  expect(() => model.account('1')).toThrow(expect.objectContaining({ code: 'ACCOUNT_INACTIVE', message: 'Account is inactive' }));
  expect(() => model.account('9')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
});

test('positions: the newest entity per contract, flat ones omitted, opened at the oldest open fill', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }, { id: 6, name: 'NQZ6' }],
    orders: [{ id: 10, accountId: 1, contractId: 5 }, { id: 11, accountId: 1, contractId: 5 }, { id: 12, accountId: 1, contractId: 6 }],
    fills: [
      { id: 20, orderId: 10, contractId: 5, action: 'Buy', qty: 2, price: 100, timestamp: '2026-01-01T10:00:00.000Z' },
      { id: 21, orderId: 11, contractId: 5, action: 'Sell', qty: 1, price: 101, timestamp: '2026-01-01T11:00:00.000Z' },
      { id: 22, orderId: 12, contractId: 6, action: 'Buy', qty: 1, price: 50, timestamp: '2026-01-01T12:00:00.000Z' },
      { id: 23, orderId: 12, contractId: 6, action: 'Sell', qty: 1, price: 51, timestamp: '2026-01-01T13:00:00.000Z' },
    ],
    positions: [
      { id: 30, accountId: 1, contractId: 5, netPos: 2, netPrice: 100 },
      { id: 31, accountId: 1, contractId: 5, netPos: 1, netPrice: 100, timestamp: '2026-01-01T11:00:00.000Z' },
      { id: 32, accountId: 1, contractId: 6, netPos: 0 },
    ],
  });
  expect(model.positions('1')).toEqual([{ accountId: '1', symbol: 'ESZ6', netQty: 1, avgPrice: 100, openedAt: '2026-01-01T10:00:00.000Z' }]);
  expect(model.tradeHistory('1', () => 50).map((t) => [t.symbol, t.pnl])).toEqual([['ESZ6', 50], ['NQZ6', 50]]);
});

test('findByClOrdId answers the entry even when its legs carry the same clOrdId', () => {
  const { m, model } = setup();
  m.replace({
    orders: [{ id: 3, accountId: 1, parentId: 2 }, { id: 2, accountId: 1 }],
    commands: [{ id: 3, orderId: 3, clOrdId: 'k' }, { id: 2, orderId: 2, clOrdId: 'k' }],
  });
  expect(model.findByClOrdId('1', 'k')?.id).toBe(2);
  expect(model.findByClOrdId('2', 'k')).toBeUndefined();
});

test('findByClOrdId finds a strategy entry by the strategy uuid', () => {
  const { m, model } = setup();
  m.replace({
    orderStrategies: [{ id: 50, accountId: 1, uuid: 'u1', action: 'Buy' }],
    orderStrategyLinks: [{ id: 51, orderStrategyId: 50, orderId: 52 }],
    orders: [{ id: 52, accountId: 1, action: 'Buy' }],
  });
  expect(model.findByClOrdId('1', 'u1')?.id).toBe(52);
});

test('working orders follow snapshots and props events: final, deleted and other accounts’ orders drop out', () => {
  const { m, model } = setup();
  const ids = () => model.workingOrders('1').map((o) => o.orderId);
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [
      { id: 10, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' },
      { id: 11, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Filled' },
      { id: 12, accountId: 1, contractId: 5, action: 'Sell', ordStatus: 'Suspended' },
      { id: 13, accountId: 2, contractId: 5, action: 'Buy', ordStatus: 'Working' },
    ],
  });
  expect(ids()).toEqual(['10', '12']);
  m.apply('order', 'Created', { id: 14, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'PendingNew' });
  m.apply('order', 'Updated', { id: 10, ordStatus: 'Canceled' }); // a partial update, merged
  m.apply('order', 'Deleted', { id: 12 });
  expect(ids()).toEqual(['14']);
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders: [{ id: 20, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' }] });
  expect(ids()).toEqual(['20']);
});

test('working orders: only live orders are walked; pages are the records’ JSON, kept until the mirror changes', () => {
  const { m, model } = setup();
  const orders = Array.from({ length: 400 }, (_, i) => ({ id: 100 + i, accountId: 1, contractId: 5, action: 'Buy', ordStatus: i < 395 ? 'Filled' : 'Working' }));
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders, orderVersions: orders.map((o) => ({ id: o.id, orderId: o.id, orderQty: 1, orderType: 'Limit', price: 1 })) });
  const all = model.workingOrders('1');
  expect(all.map((o) => o.orderId)).toEqual(['495', '496', '497', '498', '499']);
  const page = model.workingOrdersPage('1', 1, 3);
  expect(page).toEqual({ json: JSON.stringify(all.slice(1, 4)), total: 5 });
  expect(model.workingOrdersPage('1', 1, 3).json).toBe(page.json);
  // A fill ends one; a new order starts working: the next page shows both.
  m.apply('order', 'Updated', { id: 496, ordStatus: 'Filled' });
  m.apply('order', 'Created', { id: 600, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' });
  expect(model.workingOrdersPage('1', 0, 10).total).toBe(5);
  expect(JSON.parse(model.workingOrdersPage('1', 0, 10).json).map((o: { orderId: string }) => o.orderId)).toEqual(['495', '497', '498', '499', '600']);
  // What tradegate notes about an order is in its record at once.
  model.note(600, { clientOrderId: 'mine' });
  expect(JSON.parse(model.workingOrdersPage('1', 4, 1).json)[0].clientOrderId).toBe('mine');
});
