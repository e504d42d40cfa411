import { describe, expect, it, test, vi } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';

test('a snapshot replaces everything that was there before', () => {
  const m = new Mirror();
  m.apply('order', 'Created', { id: 1, accountId: 9 });
  m.replace({ orders: [{ id: 2, accountId: 9 }], accounts: [{ id: 9, name: 'A' }], users: [{ id: 1 }] });
  expect(m.all('order').map((o) => o.id)).toEqual([2]);
  expect(m.by('order', 'accountId', 9).map((o) => o.id)).toEqual([2]);
  expect(m.get('account', 9)?.name).toBe('A');
});

test('a snapshot keeps the contracts known before: a position is never named by its contract id while they are fetched again (re-probe: an exit naming the symbol found no position during a resync, and left it open)', () => {
  const m = new Mirror();
  m.put('contract', { id: 3, name: 'ESZ6' });
  m.apply('position', 'Created', { id: 7, accountId: 9, contractId: 3, netPos: 1 });
  m.replace({ positions: [{ id: 7, accountId: 9, contractId: 3, netPos: 1 }], contracts: [{ id: 4, name: 'NQZ6' }] });
  expect(m.get('contract', 3)?.name).toBe('ESZ6');
  expect(m.get('contract', 4)?.name).toBe('NQZ6');
  expect(m.missingContractIds()).toEqual([]);
  expect(m.all('position').map((p) => p.id)).toEqual([7]);
});

test('props entity may be an array; Deleted removes and unindexes', () => {
  const m = new Mirror();
  m.apply('fill', 'Created', [{ id: 1, orderId: 5, qty: 1 }, { id: 2, orderId: 5, qty: 2 }]);
  expect(m.by('fill', 'orderId', 5)).toHaveLength(2);
  m.apply('fill', 'Deleted', { id: 1 });
  expect(m.by('fill', 'orderId', 5).map((f) => f.id)).toEqual([2]);
});

test('events apply independently of order: a fill before its order, a partial Updated merges', () => {
  const m = new Mirror();
  m.apply('fill', 'Created', { id: 10, orderId: 5, qty: 1 });
  m.apply('order', 'Updated', { id: 5, ordStatus: 'Filled' });
  m.apply('order', 'Created', { id: 5, accountId: 3, action: 'Buy' });
  expect(m.get('order', 5)).toMatchObject({ ordStatus: 'Filled', accountId: 3, action: 'Buy' });
  expect(m.by('fill', 'orderId', 5)).toHaveLength(1);
});

test('an index follows a changed field value', () => {
  const m = new Mirror();
  m.apply('order', 'Created', { id: 5, parentId: 1 });
  m.apply('order', 'Updated', { id: 5, parentId: 2 });
  expect(m.by('order', 'parentId', 1)).toEqual([]);
  expect(m.by('order', 'parentId', 2).map((o) => o.id)).toEqual([5]);
});

test('an index value shared by several entities keeps them in arrival order, through removals down to none and back', () => {
  const m = new Mirror();
  m.apply('fill', 'Created', { id: 3, orderId: 7 });
  expect(m.by('fill', 'orderId', 7).map((f) => f.id)).toEqual([3]);
  m.apply('fill', 'Created', [{ id: 1, orderId: 7 }, { id: 2, orderId: 7 }]);
  expect(m.by('fill', 'orderId', 7).map((f) => f.id)).toEqual([3, 1, 2]);
  // The same entity again (an Updated with the same value) is not filed twice.
  m.apply('fill', 'Updated', { id: 1, orderId: 7, qty: 2 });
  expect(m.by('fill', 'orderId', 7).map((f) => f.id)).toEqual([3, 1, 2]);
  m.apply('fill', 'Deleted', { id: 3 });
  m.apply('fill', 'Updated', { id: 2, orderId: 8 });
  expect(m.by('fill', 'orderId', 7).map((f) => f.id)).toEqual([1]);
  expect(m.by('fill', 'orderId', 8).map((f) => f.id)).toEqual([2]);
  m.apply('fill', 'Deleted', { id: 1 });
  expect(m.by('fill', 'orderId', 7)).toEqual([]);
  m.apply('fill', 'Created', { id: 4, orderId: 7 });
  expect(m.by('fill', 'orderId', 7).map((f) => f.id)).toEqual([4]);
  // A value that one entity leaves and another takes names only the newcomer.
  m.apply('order', 'Created', { id: 10, clOrdId: 'a' });
  m.apply('order', 'Updated', { id: 10, clOrdId: 'b' });
  m.apply('order', 'Created', { id: 11, clOrdId: 'a' });
  expect(m.by('order', 'clOrdId', 'a').map((o) => o.id)).toEqual([11]);
  expect(m.by('order', 'clOrdId', 'b').map((o) => o.id)).toEqual([10]);
  // Fields that are not indexed, and types without indexes, find nothing.
  expect(m.by('order', 'action', 'Buy')).toEqual([]);
  expect(m.by('account', 'id', 10)).toEqual([]);
});

test('latestVersion passes over a modify the broker rejected: the order stays as it was (re-probe 4: a leg cut below what it had filled was refused, and was taken for cut)', () => {
  const m = new Mirror();
  m.apply('orderVersion', 'Created', { id: 5, orderId: 5, orderQty: 3, price: 5010 });
  // The modify's version comes with its command; the command's report then says it was refused.
  m.apply('orderVersion', 'Created', { id: 9, orderId: 5, orderQty: 1, price: 5010 });
  expect(m.latestVersion(5)?.orderQty).toBe(1);
  m.apply('commandReport', 'Created', { id: 10, commandId: 9, commandStatus: 'ExecutionRejected', text: 'Quantity must exceed the filled quantity' });
  expect(m.latestVersion(5)?.orderQty).toBe(3);
  // A later modify that passed is the order's.
  m.apply('orderVersion', 'Created', { id: 11, orderId: 5, orderQty: 2, price: 5010 });
  m.apply('commandReport', 'Created', { id: 12, commandId: 11, commandStatus: 'RiskPassed' });
  expect(m.latestVersion(5)?.orderQty).toBe(2);
});

test('latestVersion is the orderVersion with the highest id (a modify)', () => {
  const m = new Mirror();
  m.apply('orderVersion', 'Created', { id: 20, orderId: 5, price: 2 });
  m.apply('orderVersion', 'Created', { id: 10, orderId: 5, price: 1 });
  expect(m.latestVersion(5)?.price).toBe(2);
});

test('waitFor resolves on the change that satisfies it, and with undefined at the deadline', async () => {
  const m = new Mirror();
  const p = m.waitFor(() => m.get('order', 1)?.ordStatus === 'Working' || undefined, 1000);
  m.apply('order', 'Created', { id: 1, ordStatus: 'PendingNew' });
  m.apply('order', 'Updated', { id: 1, ordStatus: 'Working' });
  await expect(p).resolves.toBe(true);
  vi.useFakeTimers();
  try {
    const q = m.waitFor(() => undefined, 500);
    vi.advanceTimersByTime(500);
    await expect(q).resolves.toBeUndefined();
  } finally {
    vi.useRealTimers();
  }
});

test('missingContractIds names contracts referenced but not known', () => {
  const m = new Mirror();
  m.replace({ contracts: [{ id: 1, name: 'ESZ6' }], orders: [{ id: 5, contractId: 1 }, { id: 6, contractId: 2 }], positions: [{ id: 7, contractId: 3 }] });
  expect(m.missingContractIds().sort()).toEqual([2, 3]);
});

test('events that arrive before the sync answer survive it: they are applied again over the snapshot', () => {
  const m = new Mirror();
  m.expectSnapshot();
  // The broker pushed the fill (and the order going Filled) before answering the syncrequest ...
  m.apply('order', 'Updated', { id: 5, accountId: 9, ordStatus: 'Filled' });
  m.apply('fill', 'Created', { id: 6, orderId: 5, qty: 1 });
  // ... and its snapshot was taken before them.
  m.replace({ orders: [{ id: 5, accountId: 9, ordStatus: 'Working', action: 'Buy' }], fills: [] });
  expect(m.get('order', 5)).toMatchObject({ ordStatus: 'Filled', action: 'Buy' });
  expect(m.by('fill', 'orderId', 5)).toHaveLength(1);
  // After the answer, events are no longer journalled: a later snapshot replaces everything again.
  m.apply('order', 'Updated', { id: 5, ordStatus: 'Canceled' });
  m.replace({ orders: [] });
  expect(m.get('order', 5)).toBeUndefined();
});

test('keeps entity types and fields it does not know (accountRiskStatus, new fields), and ignores unknown snapshot keys', () => {
  const m = new Mirror();
  m.replace({ accounts: [{ id: 1, name: 'A', brandNewField: 3 }], annualReviews: [{ id: 2 }], users: 'not-an-array' });
  expect(m.get('account', 1)).toMatchObject({ brandNewField: 3 });
  m.apply('accountRiskStatus', 'Updated', { id: 1, adminAction: 'LockTradingImmediately' });
  m.apply('order', 'Created', { id: 'not-a-number' });
  m.apply('order', 'Created', null);
  expect(m.get('accountRiskStatus', 1)?.adminAction).toBe('LockTradingImmediately');
  expect(m.all('order')).toEqual([]);
});

describe('waitForOrder', () => {
  it('re-checks only on changes of its order (and on a snapshot), and resolves with the probe’s value', async () => {
    const m = new Mirror();
    let probes = 0;
    const settled = m.waitForOrder(7, () => {
      probes++;
      return m.get('order', 7)?.ordStatus === 'Working' ? 'working' : undefined;
    }, 1000);
    for (let id = 100; id < 150; id++) m.apply('order', 'Created', { id, ordStatus: 'Working' });
    m.apply('executionReport', 'Created', { id: 500, orderId: 99, ordStatus: 'Working' });
    expect(probes).toBe(1);
    m.apply('order', 'Created', { id: 7, ordStatus: 'PendingNew' });
    m.apply('commandReport', 'Created', { id: 501, commandId: 7, commandStatus: 'RiskPassed' });
    expect(probes).toBe(3);
    m.apply('order', 'Updated', { id: 7, ordStatus: 'Working' });
    expect(await settled).toBe('working');
    m.apply('order', 'Updated', { id: 7, ordStatus: 'Filled' });
    expect(probes).toBe(4);
  });

  it('resolves undefined at its deadline', async () => {
    const m = new Mirror();
    expect(await m.waitForOrder(1, () => undefined, 20)).toBeUndefined();
  });
});
