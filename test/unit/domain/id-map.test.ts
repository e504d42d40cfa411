import { describe, expect, it } from 'vitest';
import { IdMap, IdSet } from '../../../src/domain/id-map.js';

describe('IdMap', () => {
  it('behaves as a Map of ids: get, has, set over an existing id, delete, size, clear', () => {
    const m = new IdMap<string>();
    expect(m.size).toBe(0);
    expect(m.get(1)).toBeUndefined();
    m.set(1, 'a').set(5000, 'b').set(123_456_789_012, 'c');
    expect(m.size).toBe(3);
    expect(m.get(5000)).toBe('b');
    expect(m.get(123_456_789_012)).toBe('c');
    m.set(5000, 'B');
    expect(m.size).toBe(3);
    expect(m.get(5000)).toBe('B');
    expect(m.has(1)).toBe(true);
    expect(m.has(2)).toBe(false);
    expect(m.delete(2)).toBe(false);
    expect(m.delete(1)).toBe(true);
    expect(m.delete(1)).toBe(false);
    expect(m.has(1)).toBe(false);
    expect(m.size).toBe(2);
    m.clear();
    expect(m.size).toBe(0);
    expect(m.get(5000)).toBeUndefined();
    expect([...m]).toEqual([]);
  });

  it('never keeps more than 4,096 ids in one hash table, so no insert rehashes the whole map', () => {
    const m = new IdMap<number>();
    for (let id = 1_000_000; id < 1_300_000; id++) m.set(id, id);
    expect(m.size).toBe(300_000);
    const sizes = m.tableSizes();
    expect(Math.max(...sizes)).toBeLessThanOrEqual(4096);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(300_000);
  });

  it('gives an emptied table back, and finds ids again after one was dropped', () => {
    const m = new IdMap<number>();
    for (let id = 0; id < 3 * 4096; id++) m.set(id, id);
    expect(m.tableSizes()).toEqual([4096, 4096, 4096]);
    for (let id = 4096; id < 2 * 4096; id++) m.delete(id);
    expect(m.tableSizes()).toEqual([4096, 4096]);
    expect(m.get(4095)).toBe(4095);
    expect(m.get(4096)).toBeUndefined();
    expect(m.get(2 * 4096)).toBe(2 * 4096);
    m.set(5000, 1);
    expect(m.get(5000)).toBe(1);
    expect(m.size).toBe(2 * 4096 + 1);
  });

  it('iterates growing ids in insertion order; keys, values and entries agree', () => {
    const m = new IdMap<string>();
    const ids = [3, 10_000, 10_001, 50_000, 200_000];
    for (const id of ids) m.set(id, `v${id}`);
    expect([...m.keys()]).toEqual(ids);
    expect([...m.values()]).toEqual(ids.map((id) => `v${id}`));
    expect([...m]).toEqual(ids.map((id) => [id, `v${id}`]));
  });
});

describe('IdSet', () => {
  it('behaves as a Set of ids', () => {
    const s = new IdSet([7, 8]);
    expect(s.size).toBe(2);
    s.add(9000).add(7);
    expect(s.size).toBe(3);
    expect(s.has(9000)).toBe(true);
    expect(s.delete(8)).toBe(true);
    expect(s.delete(8)).toBe(false);
    expect([...s]).toEqual([7, 9000]);
    expect([...s.values()]).toEqual([7, 9000]);
    s.clear();
    expect(s.size).toBe(0);
  });
});
