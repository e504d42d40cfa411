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

test('notes merge field by field per order', () => {
  const { model } = setup();
  expect(model.noteOf(1)).toBeUndefined();
  model.note(1, { requestedSymbol: 'ES1!' });
  model.note(1, { clientOrderId: 'mine' });
  expect(model.noteOf(1)).toEqual({ requestedSymbol: 'ES1!', clientOrderId: 'mine' });
  expect(model.noteOf(2)).toBeUndefined();
});

test('accounts are listed by numeric id, named after their id when the broker gives no name, archived ones inactive', () => {
  const { m, model } = setup();
  m.replace({ accounts: [{ id: 10, name: 'J' }, { id: 9 }, { id: 2, name: 'B', archived: true }] });
  const list = model.refreshAccounts()!;
  expect(list.map((a) => [a.id, a.name, a.active])).toEqual([['2', 'B', false], ['9', '9', true], ['10', 'J', true]]);
  expect(model.accounts().map((a) => a.id)).toEqual(['2', '9', '10']);
});

test('account(): NOT_FOUND names the id; a known active account whose entity vanished is ACCOUNT_INACTIVE with its id', () => {
  const { m, model } = setup();
  m.replace({ accounts: [{ id: 1, name: 'A' }] });
  model.refreshAccounts();
  expect(model.account('1').id).toBe(1);
  expect(() => model.account('7')).toThrow(expect.objectContaining({ code: 'NOT_FOUND', message: 'account 7 is not on this connection' }));
  m.replace({ accounts: [] });
  expect(() => model.account('1')).toThrow(expect.objectContaining({ code: 'ACCOUNT_INACTIVE', extensions: { accountId: '1' } }));
});

test('orderEntity is scoped to the account and refuses ids that are not canonical decimal integers', () => {
  const { m, model } = setup();
  m.replace({ orders: [{ id: 10, accountId: 1 }, { id: 11, accountId: 2 }] });
  expect(model.orderEntity('1', '10')?.id).toBe(10);
  expect(model.orderEntity('1', '11')).toBeUndefined();
  expect(model.orderEntity('2', '11')?.id).toBe(11);
  expect(model.orderEntity('1', '10.5')).toBeUndefined();
  expect(model.orderEntity('1', 'x')).toBeUndefined();
  expect(model.orderEntity('1', '99')).toBeUndefined();
  for (const loose of ['010', '0xa', '1e1', '10.0', '+10', ' 10', '10 ']) expect(model.orderEntity('1', loose), loose).toBeUndefined();
});

test('record() builds an order record with what tradegate noted, or null for an unknown id', () => {
  const { m, model } = setup();
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders: [{ id: 10, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' }] });
  model.note(10, { requestedSymbol: 'ES1!' });
  expect(model.record(10)).toMatchObject({ orderId: '10', accountId: '1', symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'buy' });
  expect(model.record(11)).toBeNull();
});

test('working orders are sorted by numeric order id', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [100, 20, 3].map((id) => ({ id, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' })),
  });
  expect(model.workingOrders('1').map((o) => o.orderId)).toEqual(['3', '20', '100']);
});

test('positions are sorted by symbol and fall back to the position timestamp when no fill explains them', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'NQZ6' }, { id: 6, name: 'ESZ6' }],
    positions: [
      { id: 30, accountId: 1, contractId: 5, netPos: -2, netPrice: 20000, timestamp: '2026-01-02T00:00:00.000Z' },
      { id: 31, accountId: 1, contractId: 6, netPos: 1, netPrice: 5000 },
      { id: 32, accountId: 2, contractId: 6, netPos: 3, netPrice: 5000 },
    ],
  });
  expect(model.positions('1')).toEqual([
    { accountId: '1', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null },
    { accountId: '1', symbol: 'NQZ6', netQty: -2, avgPrice: 20000, openedAt: '2026-01-02T00:00:00.000Z' },
  ]);
});

test('openPositionEntities: the newest entity per contract, flat ones and other accounts left out', () => {
  const { m, model } = setup();
  m.replace({
    positions: [
      { id: 31, accountId: 1, contractId: 5, netPos: 2 },
      { id: 30, accountId: 1, contractId: 5, netPos: 0 },
      { id: 40, accountId: 1, contractId: 6, netPos: 1 },
      { id: 41, accountId: 1, contractId: 6, netPos: 0 },
      { id: 50, accountId: 2, contractId: 7, netPos: 4 },
      { id: 60, accountId: 1, contractId: 8 },
    ],
  });
  expect(model.openPositionEntities('1').map((p) => p.id)).toEqual([31]);
  expect(model.openPositionEntities('2').map((p) => p.id)).toEqual([50]);
});

test('fills and P&L of two accounts on one connection never mix', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [{ id: 10, accountId: 1, contractId: 5 }, { id: 11, accountId: 2, contractId: 5 }, { id: 12, accountId: 1, contractId: 5 }, { id: 13, accountId: 2, contractId: 5 }],
    fills: [
      { id: 20, orderId: 10, contractId: 5, action: 'Buy', qty: 1, price: 100, timestamp: '2026-01-01T10:00:00.000Z' },
      { id: 21, orderId: 11, contractId: 5, action: 'Sell', qty: 2, price: 100, timestamp: '2026-01-01T10:00:01.000Z' },
      { id: 22, orderId: 12, contractId: 5, action: 'Sell', qty: 1, price: 110, timestamp: '2026-01-01T10:00:02.000Z' },
      { id: 23, orderId: 13, contractId: 5, action: 'Buy', qty: 2, price: 90, timestamp: '2026-01-01T10:00:03.000Z' },
      // A fill carrying its own accountId wins over its order's; an inactive (busted) fill counts nowhere.
      { id: 24, orderId: 10, accountId: 2, contractId: 5, action: 'Buy', qty: 1, price: 1, timestamp: '2026-01-01T10:00:04.000Z', active: false },
    ],
  });
  expect(model.fills('1').map((f) => f.fillId)).toEqual(['20', '22']);
  expect(model.fills('2').map((f) => [f.fillId, f.accountId, f.side, f.qty, f.price])).toEqual([['21', '2', 'sell', 2, 100], ['23', '2', 'buy', 2, 90]]);
  expect(model.tradeHistory('1', () => 50).map((t) => [t.accountId, t.direction, t.pnl])).toEqual([['1', 'long', 500]]);
  expect(model.tradeHistory('2', () => 50).map((t) => [t.accountId, t.direction, t.qty, t.pnl])).toEqual([['2', 'short', 2, 1000]]);
});

test('fills: a fill’s own accountId, the contract filter, and defaults for missing fields', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [{ id: 10, accountId: 1, contractId: 5 }],
    fills: [
      { id: 20, orderId: 10, accountId: 2, contractId: 5, action: 'Buy', qty: 1, price: 100, timestamp: '2026-01-01T10:00:00.000Z' },
      { id: 21, orderId: 10, contractId: 6, action: 'Sell' },
    ],
  });
  expect(model.fills('2').map((f) => f.fillId)).toEqual(['20']);
  expect(model.fills('1')).toEqual([{ fillId: '21', orderId: '10', accountId: '1', symbol: '6', side: 'sell', qty: 0, price: 0, timestamp: new Date(0).toISOString() }]);
  expect(model.fills('1', 5)).toEqual([]);
  expect(model.fills('1', 6).map((f) => f.fillId)).toEqual(['21']);
});

test('openedAt takes fills in time order whatever order the broker listed them, and restarts when a position flips', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [{ id: 10, accountId: 1, contractId: 5 }],
    fills: [
      { id: 23, orderId: 10, contractId: 5, action: 'Sell', qty: 3, price: 100, timestamp: '2026-01-01T12:00:00.000Z' },
      { id: 21, orderId: 10, contractId: 5, action: 'Buy', qty: 1, price: 100, timestamp: '2026-01-01T10:00:00.000Z' },
      { id: 22, orderId: 10, contractId: 5, action: 'Buy', qty: 1, price: 100, timestamp: '2026-01-01T11:00:00.000Z' },
    ],
    positions: [{ id: 30, accountId: 1, contractId: 5, netPos: -1, netPrice: 100 }],
  });
  expect(model.positions('1')[0]!.openedAt).toBe('2026-01-01T12:00:00.000Z');
});

test('findByClOrdId: among entries with the same clOrdId the oldest wins; other accounts’ commands, orders and strategies never answer', () => {
  const { m, model } = setup();
  m.replace({
    orders: [
      { id: 7, accountId: 1, action: 'Buy' },
      { id: 5, accountId: 1, action: 'Buy' },
      { id: 4, accountId: 2, action: 'Buy' },
      { id: 30, accountId: 2, action: 'Buy', clOrdId: 'o1' },
      { id: 31, accountId: 1, action: 'Buy', clOrdId: 'o1' },
      { id: 40, accountId: 1, action: 'Sell' },
      { id: 41, accountId: 1, action: 'Buy' },
      { id: 42, accountId: 2, action: 'Buy' },
    ],
    commands: [{ id: 1, orderId: 7, clOrdId: 'k' }, { id: 2, orderId: 5, clOrdId: 'k' }, { id: 3, orderId: 4, clOrdId: 'k' }],
    orderStrategies: [{ id: 60, accountId: 2, uuid: 's1', action: 'Buy' }, { id: 61, accountId: 1, uuid: 's1', action: 'Buy' }],
    orderStrategyLinks: [{ id: 70, orderStrategyId: 60, orderId: 42 }, { id: 71, orderStrategyId: 61, orderId: 41 }, { id: 72, orderStrategyId: 61, orderId: 40 }],
  });
  expect(model.findByClOrdId('1', 'k')?.id).toBe(5);
  expect(model.findByClOrdId('2', 'k')?.id).toBe(4);
  expect(model.findByClOrdId('1', 'o1')?.id).toBe(31);
  expect(model.findByClOrdId('2', 'o1')?.id).toBe(30);
  expect(model.findByClOrdId('1', 's1')?.id).toBe(41);
  expect(model.findByClOrdId('2', 's1')?.id).toBe(42);
  expect(model.findByClOrdId('3', 's1')).toBeUndefined();
});

test('openedAt follows fill time, not the broker’s id order, and restarts at a flip through zero', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [{ id: 9, accountId: 1, contractId: 5 }],
    // Listed (and numbered) in another order than they happened.
    fills: [
      { id: 10, orderId: 9, contractId: 5, action: 'Sell', qty: 1, price: 100, timestamp: '2026-01-01T11:00:00.000Z' },
      { id: 20, orderId: 9, contractId: 5, action: 'Sell', qty: 2, price: 100, timestamp: '2026-01-01T12:00:00.000Z' },
      { id: 30, orderId: 9, contractId: 5, action: 'Buy', qty: 2, price: 100, timestamp: '2026-01-01T10:00:00.000Z' },
    ],
    positions: [{ id: 40, accountId: 1, contractId: 5, netPos: -1, netPrice: 100 }],
  });
  expect(model.positions('1')[0]!.openedAt).toBe('2026-01-01T12:00:00.000Z');
});

test('openedAt is unknown when the fills do not explain the position’s side (the position timestamp is used)', () => {
  const { m, model } = setup();
  m.replace({
    contracts: [{ id: 5, name: 'ESZ6' }],
    orders: [{ id: 9, accountId: 1, contractId: 5 }],
    fills: [{ id: 30, orderId: 9, contractId: 5, action: 'Sell', qty: 1, price: 100, timestamp: '2026-01-01T10:00:00.000Z' }],
    positions: [{ id: 40, accountId: 1, contractId: 5, netPos: 1, netPrice: 100, timestamp: '2026-01-02T00:00:00.000Z' }],
  });
  expect(model.positions('1')[0]!.openedAt).toBe('2026-01-02T00:00:00.000Z');
});

test('a fill of an order the mirror does not know, without an account of its own, belongs to no account', () => {
  const { m, model } = setup();
  m.replace({ fills: [{ id: 30, orderId: 404, contractId: 5, action: 'Buy', qty: 1, price: 1 }] });
  expect(model.fills('1')).toEqual([]);
});

test('findByClOrdId prefers the entry over a leg with a lower id that carries the same clOrdId', () => {
  const { m, model } = setup();
  m.replace({
    orders: [{ id: 2, accountId: 1, parentId: 3 }, { id: 3, accountId: 1 }, { id: 4, accountId: 1, parentId: 3 }],
    commands: [{ id: 1, orderId: 2, clOrdId: 'k' }, { id: 2, orderId: 3, clOrdId: 'k' }, { id: 3, orderId: 4, clOrdId: 'k' }],
  });
  expect(model.findByClOrdId('1', 'k')?.id).toBe(3);
});

test('findByClOrdId: a strategy’s entry is its lowest linked order with the strategy’s action; none, no answer', () => {
  const { m, model } = setup();
  m.replace({
    orderStrategies: [{ id: 50, accountId: 1, uuid: 'u1', action: 'Buy' }, { id: 60, accountId: 1, uuid: 'u2', action: 'Sell' }],
    orderStrategyLinks: [{ id: 70, orderStrategyId: 50, orderId: 53 }, { id: 71, orderStrategyId: 50, orderId: 52 }, { id: 72, orderStrategyId: 50, orderId: 51 }, { id: 73, orderStrategyId: 60, orderId: 61 }],
    orders: [{ id: 51, accountId: 1, action: 'Sell' }, { id: 52, accountId: 1, action: 'Buy' }, { id: 53, accountId: 1, action: 'Buy' }, { id: 61, accountId: 1, action: 'Buy' }],
  });
  expect(model.findByClOrdId('1', 'u1')?.id).toBe(52);
  expect(model.findByClOrdId('1', 'u2')).toBeUndefined();
});

test('working orders: only live orders are walked; pages are the records’ JSON, kept until the mirror changes', () => {
  const { m, model } = setup();
  const orders = Array.from({ length: 400 }, (_, i) => ({ id: 100 + i, accountId: 1, contractId: 5, action: 'Buy', ordStatus: i < 395 ? 'Filled' : 'Working' }));
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders, orderVersions: orders.map((o) => ({ id: o.id, orderId: o.id, orderQty: 1, orderType: 'Limit', price: 1 })) });
  const all = model.workingOrders('1');
  expect(all.map((o) => o.orderId)).toEqual(['495', '496', '497', '498', '499']);
  const page = model.workingOrdersPage('1', 495, 3);
  expect(page).toEqual({ json: JSON.stringify(all.slice(1, 4)), total: 5, version: expect.any(Number), more: true, lastId: 498 });
  expect(model.workingOrdersPage('1', 495, 3)).toEqual(page);
  expect(model.workingOrdersPage('1', 498, 3)).toMatchObject({ json: JSON.stringify(all.slice(4)), more: false, lastId: 499 });
  expect(model.workingOrdersPage('1', 499, 3)).toEqual({ json: '[]', total: 5, version: expect.any(Number), more: false });
  // A fill ends one; a new order starts working: the next page shows both.
  m.apply('order', 'Updated', { id: 496, ordStatus: 'Filled' });
  m.apply('order', 'Created', { id: 600, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' });
  expect(model.workingOrdersPage('1', 0, 10).total).toBe(5);
  expect(JSON.parse(model.workingOrdersPage('1', 0, 10).json).map((o: { orderId: string }) => o.orderId)).toEqual(['495', '497', '498', '499', '600']);
  // What tradegate notes about an order is in its record at once.
  model.note(600, { clientOrderId: 'mine' });
  expect(JSON.parse(model.workingOrdersPage('1', 599, 1).json)[0].clientOrderId).toBe('mine');
});

test('working orders: a page continues after the last order the previous one showed, so orders cancelled while paging never make it skip one', () => {
  const { m, model } = setup();
  const orders = Array.from({ length: 6 }, (_, i) => ({ id: 10 + i, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' }));
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders, orderVersions: orders.map((o) => ({ id: o.id, orderId: o.id, orderQty: 1, orderType: 'Limit', price: 1 })) });
  const ids = (page: { json: string }) => JSON.parse(page.json).map((o: { orderId: string }) => o.orderId);
  const seen: string[] = [];
  let after = 0;
  for (;;) {
    const page = model.workingOrdersPage('1', after, 2);
    seen.push(...ids(page));
    // "Cancel everything by paging": what the page showed ends before the next page is read.
    for (const id of ids(page)) m.apply('order', 'Updated', { id: Number(id), ordStatus: 'Canceled' });
    if (!page.more) break;
    after = page.lastId!;
  }
  expect(seen).toEqual(['10', '11', '12', '13', '14', '15']);
  expect(model.workingOrders('1')).toEqual([]);
});

test('working orders: a change after a page was served is announced once, with a newer version; none while nobody reads', () => {
  const m = new Mirror();
  const changed: number[] = [];
  const model = new OrderModel(m, spec, (version) => changed.push(version));
  m.replace({ contracts: [{ id: 5, name: 'ESZ6' }], orders: [{ id: 1, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' }] });
  // No page served yet: order traffic costs no notices.
  m.apply('order', 'Created', { id: 2, accountId: 1, contractId: 5, action: 'Buy', ordStatus: 'Working' });
  expect(changed).toEqual([]);
  const first = model.workingOrdersPage('1', 0, 10);
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Filled' });
  m.apply('order', 'Updated', { id: 1, ordStatus: 'Filled' });
  expect(changed).toHaveLength(1);
  expect(changed[0]).toBeGreaterThan(first.version!);
  // Served again: the next change (a note too) is announced again, newer still.
  const second = model.workingOrdersPage('1', 0, 10);
  expect(second.version).toBeGreaterThanOrEqual(changed[0]!);
  model.note(1, { clientOrderId: 'x' });
  expect(changed).toHaveLength(2);
  expect(changed[1]).toBeGreaterThan(second.version!);
  // Account and cash changes leave the records as they are.
  model.workingOrdersPage('1', 0, 10);
  m.apply('cashBalance', 'Updated', { id: 9, accountId: 1, amount: 5 });
  expect(changed).toHaveLength(2);
});
