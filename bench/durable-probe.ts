/**
 * The durable-commit floor: what storing one idempotency record costs on this machine's disk,
 * measured in the same run as the service.
 *
 * An idempotent order answers only after its record is committed and flushed (DESIGN §3: every
 * answer a client has seen must replay, also after a power loss), and that commit comes after the
 * broker's answer. So no idempotent order can add less latency than the shape floor adds plus one
 * durable commit. The probe opens the product's own store (the same lmdb-js sync options) in a
 * fresh directory next to the service's data dirs, and stores one record at a time through
 * `idempotency.put`, which resolves once the record is committed and flushed. Arrivals are
 * open-loop at a rate where two commits never overlap, so each one is a whole commit.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.js';
import { percentiles, type Percentiles } from './hdr.js';
import { runOpenLoop } from './open-loop.js';
import { r2 } from './scenario.js';

/** `orders.durableCommit` of latest.json. */
export interface DurableCommitSummary {
  ratePerSec: number;
  /** Records stored (each its own commit and flush). */
  records: number;
  /** From the intended send time until `idempotency.put` resolved (committed and flushed). */
  latencyMs: Percentiles;
  /** The fastest commit of the run, from the call to its resolution: every idempotent order waits at least this long for its record. */
  minMs: number;
}

/** A record the size of a bracket order's 201 answer (~500 bytes of body). */
const ANSWER = {
  fingerprint: 'f'.repeat(64),
  status: 201,
  headers: { 'Content-Type': 'application/json', Location: '/api/v1/accounts/acc/orders/ord' },
  body: JSON.stringify({ orderId: 'x'.repeat(24), status: 'working', legs: [{ role: 'takeProfit' }, { role: 'stopLoss' }], pad: 'p'.repeat(380) }),
};

/** Stores records one at a time, open-loop at `ratePerSec`, for `durationMs`. */
export async function measureDurableCommit(opts: { ratePerSec: number; durationMs: number }): Promise<DurableCommitSummary> {
  // Where the service's own data dirs go (bench/service.ts): the same file system.
  const dir = await mkdtemp(join(tmpdir(), 'tradegate-bench-durable-'));
  const store = await openStore({ dataDir: dir });
  let min = Number.POSITIVE_INFINITY;
  try {
    const run = await runOpenLoop({
      ratePerSec: opts.ratePerSec,
      durationMs: opts.durationMs,
      send: async (index) => {
        // The floor's bound is the commit itself, from the call (not from the intended send time).
        const t = performance.now();
        await store.idempotency.put('bench-durable', `k-${index}`, ANSWER);
        min = Math.min(min, performance.now() - t);
        return 'stored';
      },
    });
    // Latency from the intended send time, as every probe of the bench (bench/open-loop.ts).
    const stored = run.histograms.get('stored');
    const failed = run.sent - (stored?.totalCount ?? 0);
    if (!stored || failed > 0) throw new Error(`durable-commit probe: ${failed} of ${run.sent} records were not stored`);
    return { ratePerSec: opts.ratePerSec, records: run.sent, latencyMs: percentiles(stored), minMs: r2(min) };
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}
