/**
 * Finished orders leave the actor a while after they end (load probe: ~4.5–6 KB kept per
 * finished order for the connection's life).
 */
import { expect, test } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { CONNECTION_TUNING, FINISHED_ORDER_RETENTION_MS, IDEMPOTENCY_TTL_MS } from '../../../../src/tuning.js';
import { FinishedOrders } from '../../../../workers/connection-actor/finished-orders.js';

const RETENTION = FINISHED_ORDER_RETENTION_MS;

function setup() {
  const m = new Mirror();
  let now = 1_000_000;
  const forgotten: number[] = [];
  const finished = new FinishedOrders(m, (id) => forgotten.push(id), RETENTION, () => now);
  m.onChange((c) => finished.onChange(c));
  m.replace({});
  /** An order as the broker reports one, with its version, New command and report, and an execution report. */
  const order = (id: number, extra: Record<string, unknown> = {}) => {
    m.apply('order', 'Created', { id, accountId: 1, contractId: 5, ordStatus: 'Working', ...extra });
    m.apply('orderVersion', 'Created', { id: id + 1000, orderId: id, orderQty: 1 });
    m.apply('command', 'Created', { id, orderId: id, clOrdId: `k${id}`, commandType: 'New' });
    m.apply('commandReport', 'Created', { id: id + 2000, commandId: id, commandStatus: 'OnBook' });
    m.apply('executionReport', 'Created', { id: id + 3000, orderId: id, execType: 'New', cumQty: 0 });
  };
  const end = (id: number, ordStatus: string) => m.apply('order', 'Updated', { id, ordStatus });
  return { m, finished, forgotten, order, end, advance: (ms: number) => (now += ms) };
}

const kept = (m: Mirror, id: number) => ({
  order: !!m.get('order', id),
  versions: m.by('orderVersion', 'orderId', id).length,
  commands: m.by('command', 'orderId', id).length,
  byClOrdId: m.by('command', 'clOrdId', `k${id}`).length,
  reports: m.by('commandReport', 'commandId', id).length,
  executions: m.by('executionReport', 'orderId', id).length,
});
const GONE = { order: false, versions: 0, commands: 0, byClOrdId: 0, reports: 0, executions: 0 };
const WHOLE = { order: true, versions: 1, commands: 1, byClOrdId: 1, reports: 1, executions: 1 };

test('a cancelled, rejected or expired order with nothing filled leaves with its records and note once its retention has passed, not before', () => {
  const { m, finished, forgotten, order, end, advance } = setup();
  for (const [id, status] of [[1, 'Canceled'], [2, 'Rejected'], [3, 'Expired']] as const) {
    order(id);
    end(id, status);
  }
  advance(RETENTION - 1);
  expect(finished.sweep()).toBe(0);
  expect(kept(m, 1)).toEqual(WHOLE);
  advance(1);
  expect(finished.sweep()).toBe(3);
  for (const id of [1, 2, 3]) expect(kept(m, id)).toEqual(GONE);
  expect(forgotten).toEqual([1, 2, 3]);
  expect(finished.pending).toBe(0);
});

test('kept: a working order, a filled one, one cancelled after a partial fill, a cancelled entry whose bracket leg still works, and a leg whose re-placement works', () => {
  const { m, finished, order, end, advance } = setup();
  order(1);
  order(2);
  m.apply('fill', 'Created', { id: 90, orderId: 2, qty: 1, price: 100, action: 'Buy', contractId: 5 });
  end(2, 'Filled');
  order(3);
  m.apply('fill', 'Created', { id: 91, orderId: 3, qty: 1, price: 100, action: 'Buy', contractId: 5 });
  end(3, 'Canceled');
  order(4);
  order(5, { parentId: 4 });
  end(4, 'Canceled');
  // A leg cancelled and re-placed under clOrdId rp-6 (cancel.ts): a cancel of 6 goes to 7.
  order(6);
  end(6, 'Canceled');
  m.apply('order', 'Created', { id: 7, accountId: 1, contractId: 5, ordStatus: 'Working' });
  m.apply('command', 'Created', { id: 7, orderId: 7, clOrdId: 'rp-6', commandType: 'New' });
  advance(2 * RETENTION);
  expect(finished.sweep()).toBe(0);
  for (const id of [1, 2, 3, 4, 5, 6, 7]) expect(kept(m, id).order, `order ${id}`).toBe(true);
  expect(m.by('fill', 'orderId', 2)).toHaveLength(1);
  // Once what named them has ended, they go a retention later.
  end(5, 'Canceled');
  end(7, 'Canceled');
  advance(RETENTION);
  expect(finished.sweep()).toBe(4);
  for (const id of [4, 5, 6, 7]) expect(kept(m, id).order, `order ${id}`).toBe(false);
});

test('after a re-sync, what the snapshot holds finished is due one retention from then', () => {
  const { m, finished, advance } = setup();
  advance(5 * RETENTION);
  m.replace({ orders: [{ id: 7, accountId: 1, ordStatus: 'Canceled' }, { id: 8, accountId: 1, ordStatus: 'Working' }], commands: [{ id: 7, orderId: 7, clOrdId: 'k7' }] });
  expect(finished.pending).toBe(1);
  advance(RETENTION - 1);
  expect(finished.sweep()).toBe(0);
  advance(1);
  expect(finished.sweep()).toBe(1);
  expect(m.get('order', 7)).toBeUndefined();
  expect(m.by('command', 'clOrdId', 'k7')).toEqual([]);
  expect(m.get('order', 8)).toBeDefined();
});

test('the actor keeps finished orders past the idempotency window: a retry with the same key (or an alert repeat) is reconciled by clOrdId against them (re-probe: at 30 minutes the retry placed a second order)', () => {
  expect(CONNECTION_TUNING.finishedOrderRetentionMs).toBe(FINISHED_ORDER_RETENTION_MS);
  expect(FINISHED_ORDER_RETENTION_MS).toBeGreaterThan(IDEMPOTENCY_TTL_MS);
});
