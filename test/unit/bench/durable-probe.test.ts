/**
 * The durable-commit probe stores real records through the product's LMDB store, one commit
 * each, and leaves no data directory behind.
 */
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { measureDurableCommit } from '../../../bench/durable-probe.js';

const probeDirs = async () => (await readdir(tmpdir())).filter((d) => d.startsWith('tradegate-bench-durable-'));

describe('measureDurableCommit', () => {
  it('times every record from its call to its flush and removes its store', async () => {
    const before = await probeDirs();
    const r = await measureDurableCommit({ ratePerSec: 100, durationMs: 300 });
    // 100/s for 300 ms: 30 arrivals, each stored (a failed put throws).
    expect(r.records).toBe(30);
    expect(r.latencyMs.count).toBe(30);
    // Timed from the call, the fastest commit is no longer than the slowest timed from its intended send.
    expect(r.minMs).toBeGreaterThan(0);
    expect(r.minMs).toBeLessThanOrEqual(r.latencyMs.max);
    expect(await probeDirs()).toEqual(before);
  });
});
