import { describe, expect, it, vi } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import type { ConnectionSpec } from '../../../../src/domain/connections.js';
import type { Logger } from '../../../../src/log.js';
import { OrderModel } from '../../../../workers/connection-actor/order-model.js';
import { placementKey, UnknownOutcomes } from '../../../../workers/connection-actor/unknown-outcomes.js';

const spec = { connectionId: 'c1', broker: 'paper', environment: 'paper' } as ConnectionSpec;
const CL = 'tg-key-1';
const KEY = placementKey('7', CL);

function setup(maxAgeMs = 60_000) {
  const mirror = new Mirror();
  mirror.replace({ accounts: [{ id: 7, name: 'DEMO7' }] });
  const errors: unknown[][] = [];
  const logger = { info() {}, warn() {}, error: (...args: unknown[]) => errors.push(args) } as unknown as Logger;
  const unknown = new UnknownOutcomes(mirror, new OrderModel(mirror, spec), logger, 100, maxAgeMs);
  const hold = { bind: vi.fn(), release: vi.fn() };
  const listeners = () => (mirror as unknown as { listeners: Set<unknown> }).listeners.size;
  return { mirror, unknown, hold, errors, listeners };
}

describe('UnknownOutcomes', () => {
  it('stays unknown until the late answer’s order is in the mirror; the hold is bound to that order', async () => {
    const { mirror, unknown, hold } = setup();
    const placement = unknown.open('7', CL, hold);
    expect(unknown.has(KEY)).toBe(true);
    expect(await unknown.wait(KEY, 20)).toBeUndefined();
    placement.answered({ status: 200, data: { orderId: 50 } });
    expect(hold.bind).toHaveBeenCalledWith(50);
    // The answer alone is not enough: a retry must find the order where it looks.
    expect(unknown.has(KEY)).toBe(true);
    const outcome = unknown.wait(KEY, 1000);
    mirror.apply('order', 'Created', { id: 50, accountId: 7, ordStatus: 'Working' });
    expect(await outcome).toEqual({ how: 'answer', orderId: 50 });
    expect(unknown.has(KEY)).toBe(false);
    expect(hold.release).not.toHaveBeenCalled();
  });

  it('an order with the clOrdId showing up in the mirror (its command names it) is the outcome', async () => {
    const { mirror, unknown, hold } = setup();
    unknown.open('7', CL, hold);
    const outcome = unknown.wait(KEY, 1000);
    mirror.apply('order', 'Created', { id: 51, accountId: 7, ordStatus: 'Working' });
    expect(unknown.has(KEY)).toBe(true);
    mirror.apply('command', 'Created', { id: 51, orderId: 51, clOrdId: CL });
    expect(await outcome).toEqual({ how: 'mirror', orderId: 51 });
    expect(hold.bind).toHaveBeenCalledWith(51);
  });

  it('an order with the same clOrdId on another account is not it', () => {
    const { mirror, unknown, hold } = setup();
    unknown.open('7', CL, hold);
    mirror.apply('order', 'Created', { id: 52, accountId: 8, clOrdId: CL, ordStatus: 'Working' });
    expect(unknown.has(KEY)).toBe(true);
  });

  it('a late refusal — a 4xx, a p-ticket, a refusal in a 200 body, no order id — means nothing was placed: the hold is released', () => {
    const refusals = [
      { status: 400, data: 'No usable value for symbol' },
      { status: 200, data: { 'p-ticket': 'PT', 'p-time': 5 } },
      { status: 200, data: { failureReason: 'UnknownReason', failureText: 'Access is denied' } },
      { status: 200, data: {} },
    ];
    for (const answer of refusals) {
      const { unknown, hold } = setup();
      unknown.open('7', CL, hold).answered(answer);
      expect(unknown.has(KEY), JSON.stringify(answer)).toBe(false);
      expect(hold.release).toHaveBeenCalled();
      expect(hold.bind).not.toHaveBeenCalled();
    }
  });

  it('a late 5xx says nothing about the order: the outcome stays unknown', () => {
    const { unknown, hold } = setup();
    unknown.open('7', CL, hold).answered({ status: 500, data: 'Internal error' });
    expect(unknown.has(KEY)).toBe(true);
    expect(hold.release).not.toHaveBeenCalled();
  });

  it('a full sync is authoritative: the order it holds, else nothing was placed', async () => {
    const { mirror, unknown, hold } = setup();
    unknown.open('7', CL, hold);
    const outcome = unknown.wait(KEY, 1000);
    mirror.replace({ accounts: [{ id: 7 }] });
    expect(await outcome).toEqual({ how: 'sync', orderId: null });
    expect(hold.release).toHaveBeenCalled();

    const again = setup();
    again.unknown.open('7', CL, again.hold);
    again.mirror.replace({ accounts: [{ id: 7 }], orders: [{ id: 53, accountId: 7, clOrdId: CL, ordStatus: 'Working' }] });
    expect(again.unknown.has(KEY)).toBe(false);
    expect(again.hold.bind).toHaveBeenCalledWith(53);
  });

  it('a strategy started under the clOrdId: its entry (through its link) is the outcome; a sync showing it active without the entry does not end the wait; a failed one placed nothing', async () => {
    const { mirror, unknown, hold } = setup();
    mirror.apply('orderStrategy', 'Created', { id: 60, accountId: 7, action: 'Buy', uuid: CL, status: 'ActiveStrategy' });
    unknown.open('7', CL, hold).answered({ status: 200, data: { orderStrategy: { id: 60 } } });
    mirror.replace({ accounts: [{ id: 7 }], orderStrategies: [{ id: 60, accountId: 7, action: 'Buy', uuid: CL, status: 'ActiveStrategy' }] });
    expect(unknown.has(KEY)).toBe(true);
    const outcome = unknown.wait(KEY, 1000);
    mirror.apply('order', 'Created', { id: 61, accountId: 7, action: 'Buy', ordStatus: 'Working' });
    mirror.apply('orderStrategyLink', 'Created', { id: 62, orderStrategyId: 60, orderId: 61 });
    expect(await outcome).toEqual({ how: 'mirror', orderId: 61 });

    const failed = setup();
    failed.mirror.apply('orderStrategy', 'Created', { id: 70, accountId: 7, action: 'Buy', uuid: CL, status: 'ActiveStrategy' });
    failed.unknown.open('7', CL, failed.hold);
    failed.mirror.apply('orderStrategy', 'Updated', { id: 70, accountId: 7, action: 'Buy', uuid: CL, status: 'ExecutionFailed' });
    expect(failed.unknown.has(KEY)).toBe(false);
    expect(failed.hold.release).toHaveBeenCalled();
  });

  it('past the maximum age the key is released, loudly: an error names the clOrdId', async () => {
    const { unknown, hold, errors } = setup(30);
    unknown.open('7', CL, hold);
    expect(await unknown.wait(KEY, 1000)).toEqual({ how: 'expired', orderId: null });
    expect(hold.release).toHaveBeenCalled();
    expect(errors).toHaveLength(1);
    expect(errors[0]![0]).toMatchObject({ accountId: '7', clOrdId: CL });
  });

  it('watches the mirror only while an outcome is unknown', () => {
    const { mirror, unknown, listeners } = setup();
    const idle = listeners();
    const placement = unknown.open('7', CL, null);
    unknown.open('7', 'tg-key-2', null);
    expect(listeners()).toBe(idle + 1);
    placement.answered({ status: 400, data: 'refused' });
    expect(listeners()).toBe(idle + 1);
    mirror.replace({ accounts: [{ id: 7 }] });
    expect(unknown.size).toBe(0);
    expect(listeners()).toBe(idle);
  });
});
