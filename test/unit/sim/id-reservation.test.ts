import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { idFileReservation } from '../../../src/sim/index.js';
import { SimState } from '../../../src/sim/state.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const fileIn = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-sim-ids-'));
  dirs.push(dir);
  return join(dir, 'paper-ids');
};
const state = (file?: string) => new SimState(() => 0, Math.random, 'none', file === undefined ? undefined : idFileReservation(file));

describe('paper broker ids across restarts (clients probe: a restarted serve --paper gave a new order the id of an old one, and a cancel of the old id cancelled it)', () => {
  it('a run with an id file starts past every id an earlier run may have given, also after a crash', () => {
    const file = fileIn();
    const first = state(file);
    const given = Array.from({ length: 250_000 }, () => first.id());
    expect(given[0]).toBe(10_000_001);
    expect(Number(readFileSync(file, 'utf8'))).toBeGreaterThan(given.at(-1)!);
    // A second run (the first killed without a word) never gives an id the first gave.
    const second = state(file);
    const next = second.id();
    expect(next).toBeGreaterThan(given.at(-1)!);
    expect(Number(readFileSync(file, 'utf8'))).toBeGreaterThan(next);
  });

  it('ids start over without a file; a file that holds no id is refused', () => {
    expect(state().id()).toBe(10_000_001);
    const file = fileIn();
    // An empty or blank file too (re-probe: it read as 0, and the ids given before were given again).
    for (const text of ['garbage', '', ' \n', '-5', '1e9', '0x10']) {
      writeFileSync(file, text);
      expect(() => idFileReservation(file), JSON.stringify(text)).toThrow(/does not hold an id/);
    }
  });
});
