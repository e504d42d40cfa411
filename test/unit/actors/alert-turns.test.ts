/**
 * Alerts on one account take turns where the position decides (alert-turns.ts): shared turns run
 * together, an exclusive one runs alone, nobody overtakes a waiting alert.
 */
import { describe, expect, it } from 'vitest';
import { AlertTurns } from '../../../src/actors/alert-turns.js';

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

  it('takeNow grants only when nobody is in the way, and then counts like take', async () => {
    const turns = new AlertTurns();
    const shared = turns.takeNow('acc', 'shared')!;
    expect(turns.takeNow('acc', 'shared')).toBeDefined();
    expect(turns.takeNow('acc', 'exclusive')).toBeUndefined();
    const waiting = turns.take('acc', 'exclusive');
    // Behind a waiting alert even a shared one does not go first.
    expect(turns.takeNow('acc', 'shared')).toBeUndefined();
    shared.end();
    expect(turns.busy).toBe(1);
    expect(await Promise.race([waiting.then(() => 'granted'), new Promise((r) => setTimeout(() => r('waiting'), 20))])).toBe('waiting');
  });

  it('ends a turn held past its bound, so a lost alert cannot stop the account for good', async () => {
    const turns = new AlertTurns(20);
    await turns.take('acc', 'exclusive');
    const next = await turns.take('acc', 'exclusive');
    next.end();
    expect(turns.busy).toBe(0);
  });

  it('a turn given with a shorter bound (lent to an alert on another node) ends at it, not at the queue\'s (re-probe: a dead node\'s turn held the account 30 s)', async () => {
    const turns = new AlertTurns(60_000);
    const started = performance.now();
    turns.takeNow('acc', 'exclusive', 30);
    const next = await turns.take('acc', 'exclusive');
    expect(performance.now() - started).toBeLessThan(1000);
    next.end();
    expect(turns.busy).toBe(0);
  });
});
