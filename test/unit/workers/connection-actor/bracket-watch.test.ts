import { expect, test } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { BracketWatch } from '../../../../workers/connection-actor/bracket-watch.js';
import type { BracketAlertEvent } from '../../../../src/actors/protocol.js';

function oso(entryFilled: boolean) {
  const m = new Mirror();
  const watch = new BracketWatch(m, 'c1');
  const alerts: BracketAlertEvent[] = [];
  m.onChange((c) => {
    const a = watch.check(c);
    if (a) alerts.push(a);
  });
  m.apply('order', 'Created', [
    { id: 1, accountId: 7, action: 'Buy', ordStatus: entryFilled ? 'Filled' : 'Working' },
    { id: 2, accountId: 7, action: 'Sell', ordStatus: 'Working', parentId: 1 },
  ]);
  m.apply('orderVersion', 'Created', { id: 2, orderId: 2, orderType: 'Stop', orderQty: 1 });
  if (entryFilled) m.apply('fill', 'Created', { id: 3, orderId: 1, qty: 1, price: 100 });
  return { m, alerts };
}

test('a stop-loss rejected after its entry filled raises one alert naming the exposure', () => {
  const { m, alerts } = oso(true);
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Rejected' });
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Rejected' });
  expect(alerts).toHaveLength(1);
  expect(alerts[0]).toMatchObject({ type: 'bracket-alert', connectionId: 'c1', accountId: '7', orderId: '1' });
  expect(alerts[0]!.detail).toContain('unprotected');
});

test('the alert names the broker’s reason for a rejected leg', () => {
  const { m, alerts } = oso(true);
  m.apply('command', 'Created', { id: 2, orderId: 2, commandType: 'New' });
  m.apply('commandReport', 'Created', { id: 4, commandId: 2, commandStatus: 'ExecutionRejected', rejectReason: 'InvalidPrice', text: 'Price must be positive' });
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Rejected' });
  expect(alerts[0]!.detail).toBe('stop_loss leg 2 of filled entry 1 is rejected (InvalidPrice: Price must be positive): position unprotected');
});

test('a leg rejected before any fill is not an exposure', () => {
  const { m, alerts } = oso(false);
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Rejected' });
  expect(alerts).toEqual([]);
});

test('a cancelled leg (user cancel, OCO) is not an alert', () => {
  const { m, alerts } = oso(true);
  m.apply('order', 'Updated', { id: 2, ordStatus: 'Canceled' });
  expect(alerts).toEqual([]);
});
