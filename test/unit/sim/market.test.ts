/** The recorded tape of a contract: minute bars, the trade date's statistics and histogram, bounded rings. */
import { expect, it } from 'vitest';
import { ContractTape, Ring } from '../../../src/sim/market.js';

const T0 = Date.parse('2026-11-20T15:00:10Z');

it('rolls trades into one-minute bars with up/down volume', () => {
  const tape = new ContractTape(1, 0.25, 5000, T0);
  tape.record(5000.25, 3, T0 + 1000, 20261120);
  tape.record(5000, 2, T0 + 2000, 20261120);
  tape.record(5001, 1, T0 + 60_000, 20261120);
  expect(tape.minutes.length).toBe(2);
  expect(tape.minutes.at(0)).toMatchObject({ t: Date.parse('2026-11-20T15:00:00Z'), open: 5000.25, high: 5000.25, low: 5000, close: 5000, upVolume: 3, downVolume: 2, upTicks: 1, downTicks: 1 });
  expect(tape.minutes.at(1)).toMatchObject({ open: 5001, close: 5001 });
  expect(tape.last).toBe(5001);
});

it('keeps the trade date’s open, high, low, volume and volume at price; a new trade date starts over with a settlement', () => {
  const tape = new ContractTape(1, 0.25, 5000, T0);
  tape.record(5000.5, 2, T0, 20261120);
  tape.record(5001, 3, T0 + 1, 20261120);
  tape.record(5000.5, 4, T0 + 2, 20261120);
  expect(tape.day).toMatchObject({ tradeDateKey: 20261120, open: 5000.5, high: 5001, low: 5000.5, volume: 9, base: 5000.5 });
  expect([...tape.day!.histogram]).toEqual([[0, 6], [2, 3]]);
  tape.record(4999, 1, T0 + 3, 20261123);
  expect(tape.day).toMatchObject({ tradeDateKey: 20261123, open: 4999, volume: 1, settlement: 5000.5 });
});

it('a ring keeps the newest entries only', () => {
  const ring = new Ring<number>(3);
  for (let i = 0; i < 5000; i++) ring.push(i);
  expect(ring.length).toBe(3);
  expect(ring.tail(10)).toEqual([4997, 4998, 4999]);
  expect(ring.at(0)).toBe(4997);
  expect(ring.last()).toBe(4999);
});
