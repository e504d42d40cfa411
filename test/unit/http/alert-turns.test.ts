/**
 * Alerts on one account take turns where the position decides (alert-turns.ts): shared turns run
 * together, an exclusive one runs alone, nobody overtakes a waiting alert, and a shared turn that
 * finds a reversal waits for an exclusive one.
 */
import { describe, expect, it } from 'vitest';
import { AlertTurns } from '../../../src/http/alert-turns.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('AlertTurns', () => {
  it('grants shared turns together and an exclusive one only alone, in arrival order', async () => {
    const turns = new AlertTurns();
    const log: string[] = [];
    const a = await turns.take('acc', 'shared');
    const b = await turns.take('acc', 'shared');
    const x = turns.take('acc', 'exclusive').then((t) => (log.push('x'), t));
    // A shared alert after the waiting exclusive one does not overtake it.
    const c = turns.take('acc', 'shared').then((t) => (log.push('c'), t));
    await tick();
    expect(log).toEqual([]);
    a.end();
    await tick();
    expect(log).toEqual([]);
    b.end();
    await tick();
    expect(log).toEqual(['x']);
    (await x).end();
    await tick();
    expect(log).toEqual(['x', 'c']);
    (await c).end();
    expect(turns.busy).toBe(0);
  });

  it('keeps accounts apart, and an idle account grants at once', async () => {
    const turns = new AlertTurns();
    const one = await turns.take('one', 'exclusive');
    const other = await turns.take('two', 'exclusive');
    expect(turns.busy).toBe(2);
    one.end();
    other.end();
    // Ending twice changes nothing.
    one.end();
    expect(turns.busy).toBe(0);
  });

  it('a shared turn that needs an exclusive one gives its place up and waits for the alerts before it', async () => {
    const turns = new AlertTurns();
    const log: string[] = [];
    const first = await turns.take('acc', 'shared');
    const second = await turns.take('acc', 'shared');
    const upgraded = second.exclusive().then(() => log.push('second exclusive'));
    await tick();
    expect(log).toEqual([]);
    first.end();
    await upgraded;
    expect(second.mode).toBe('exclusive');
    const later = turns.take('acc', 'shared').then((t) => (log.push('later'), t));
    await tick();
    expect(log).toEqual(['second exclusive']);
    second.end();
    (await later).end();
    expect(log).toEqual(['second exclusive', 'later']);
    expect(turns.busy).toBe(0);
  });

  it('ends a turn held past its bound, so a lost alert cannot stop the account for good', async () => {
    const turns = new AlertTurns(20);
    await turns.take('acc', 'exclusive');
    const next = await turns.take('acc', 'exclusive');
    next.end();
    expect(turns.busy).toBe(0);
  });
});
