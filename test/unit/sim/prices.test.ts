/** Seeded, tick-aligned price walk; pinned prices stay put. */
import { expect, it } from 'vitest';
import { isOnTick } from '../../../src/domain/ticks.js';
import { ContractRegistry } from '../../../src/sim/contracts.js';
import { PriceBook, seededRandom } from '../../../src/sim/prices.js';

function walk(seed: number, steps: number): number[] {
  const contracts = new ContractRegistry();
  const book = new PriceBook(contracts, seededRandom(seed));
  const id = contracts.find('ZNZ6')!.id;
  const out = [book.last(id)];
  for (let i = 0; i < steps; i++) {
    book.step();
    out.push(book.last(id));
  }
  return out;
}

it('produces the same walk for the same seed and a different one for another seed', () => {
  expect(walk(42, 50)).toEqual(walk(42, 50));
  expect(walk(42, 50)).not.toEqual(walk(43, 50));
});

it('keeps every price on the tick grid and moves at most one tick per step', () => {
  const prices = walk(9, 200);
  expect(prices.every((p) => isOnTick(p, 0.015625))).toBe(true);
  for (let i = 1; i < prices.length; i++) expect(Math.abs(prices[i]! - prices[i - 1]!)).toBeLessThanOrEqual(0.015625 + 1e-9);
  expect(new Set(prices).size).toBeGreaterThan(3);
});

it('leaves a pinned contract alone until it is unpinned', () => {
  const contracts = new ContractRegistry();
  const book = new PriceBook(contracts, seededRandom(1));
  const id = contracts.find('ESZ6')!.id;
  book.set(id, 5000);
  for (let i = 0; i < 20; i++) book.step();
  expect(book.last(id)).toBe(5000);
  book.unpin(id);
  const moved = Array.from({ length: 20 }, () => book.step()).flat();
  expect(moved).toContain(id);
  expect(book.snapshot()).toEqual({ ESZ6: book.last(id) });
});
