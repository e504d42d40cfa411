/**
 * Measurements behind the cluster rate-limit design (docs/cluster-design.md): the round trip
 * of a KV compare-and-set and of a NATS request/reply on loopback (one server, and a 3-server
 * cluster with replicas 3), and the chosen limiter (src/cluster/rate-limit.ts) — the key's
 * sliding log kept in KV and changed only by compare-and-set, each node batching its own
 * concurrent requests — which must admit exactly 120 of 1,000 concurrent requests spread over
 * three connections.
 * Latencies are printed for the design note, never asserted (shared cores make them noisy).
 */
import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SharedLogLimiter } from '../../../src/cluster/rate-limit.js';
import { openBucket } from '../../../src/store/nats/index.js';
import { serializesRevisionChecks } from '../../../src/store/nats/startup.js';
import { startNats, startNatsCluster, type NatsCluster, type NatsServer } from '../../support/nats.js';

const LIMIT = 120;
const WINDOW_MS = 60_000;

function percentiles(samples: number[]): string {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!.toFixed(2);
  return `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${s.at(-1)!.toFixed(2)} ms (n=${s.length})`;
}

async function casRoundTrips(kv: KV, n: number): Promise<number[]> {
  let rev = await kv.put('rtt', '0');
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    rev = await kv.update('rtt', String(i), rev);
    out.push(performance.now() - t);
  }
  return out;
}

async function requestRoundTrips(a: NatsConnection, b: NatsConnection, n: number): Promise<number[]> {
  const sub = a.subscribe('rtt.owner', {
    callback: (_err, msg) => {
      msg.respond('ok');
    },
  });
  await a.flush();
  // Interest crosses cluster routes asynchronously: until it reaches b's server, b gets
  // "no responders". Wait for it (bounded) before measuring.
  for (let tries = 0; ; tries++) {
    try {
      await b.request('rtt.owner', 'x', { timeout: 1000 });
      break;
    } catch (err) {
      if (tries >= 100) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await b.request('rtt.owner', 'x', { timeout: 5000 });
    out.push(performance.now() - t);
  }
  sub.unsubscribe();
  return out;
}

async function burst(conns: NatsConnection[], bucket: string): Promise<{ admitted: number; latencies: number[]; stored: number; attempts: number; conflicts: number }> {
  const limiters = await Promise.all(conns.map(async (c) => new SharedLogLimiter(await new Kvm(c).open(bucket), 'key', LIMIT)));
  const latencies: number[] = [];
  const results = await Promise.all(
    Array.from({ length: 1000 }, async (_, i) => {
      const t = performance.now();
      const d = await limiters[i % limiters.length]!.hit('key-1');
      latencies.push(performance.now() - t);
      return d.allowed;
    }),
  );
  const stored = (await (await new Kvm(conns[0]!).open(bucket)).get('key.key-1'))!.json<number[]>().length;
  return {
    admitted: results.filter(Boolean).length,
    latencies,
    stored,
    attempts: limiters.reduce((n, l) => n + l.stats.writes, 0),
    conflicts: limiters.reduce((n, l) => n + l.stats.conflicts, 0),
  };
}

for (const setup of ['one server (replicas 1)', '3-server cluster (replicas 3)'] as const) {
  describe(`KV compare-and-set on ${setup}`, () => {
    let single: (NatsServer & { stopAndRemove(): Promise<void> }) | undefined;
    let cluster: NatsCluster | undefined;
    let conns: NatsConnection[];
    let kv: KV;
    const replicas = setup.startsWith('one') ? 1 : 3;
    beforeAll(async () => {
      const urls = replicas === 1 ? [(single = await startNats()).url] : (cluster = await startNatsCluster(3)).urls;
      conns = await Promise.all([0, 1, 2].map((i) => connect({ servers: [...urls.slice(i % urls.length), ...urls.slice(0, i % urls.length)], noRandomize: true })));
      // As the node opens its rate-limit bucket: a cluster just started may not place three replicas yet.
      kv = await openBucket(new Kvm(conns[0]!), 'ratelimit', { history: 1, ttl: WINDOW_MS, replicas });
    });
    afterAll(async () => {
      await Promise.all((conns ?? []).map((c) => c.close()));
      await single?.stopAndRemove();
      await cluster?.stop();
    });

    it('admits exactly 120 of 1,000 concurrent requests for one key over three connections, and prints the round trips', async () => {
      const cas = await casRoundTrips(kv, 1000);
      const req = await requestRoundTrips(conns[1]!, conns[2]!, 1000);
      const alone = new SharedLogLimiter(kv, 'key', LIMIT);
      const sequential: number[] = [];
      for (let i = 0; i < LIMIT; i++) {
        const t = performance.now();
        expect((await alone.hit('key-alone')).allowed).toBe(true);
        sequential.push(performance.now() - t);
      }
      expect((await alone.hit('key-alone')).allowed).toBe(false);
      const b = await burst(conns, 'ratelimit');
      if (replicas === 1 || serializesRevisionChecks(conns[0]!.info?.version)) {
        expect(b.admitted).toBe(LIMIT);
        expect(b.stored).toBe(LIMIT);
      } else {
        // nats-server before 2.9.21 (Debian's 2.9.10 here) may accept two concurrent writes of one
        // key with the same expected revision on a replicated stream (nats-io/nats-server#4320):
        // exactness on a replicated bucket needs a fixed server. Warned at start-up, in README.
        // What still holds: nothing within the limit is refused, and the log never exceeds it.
        expect(b.admitted).toBeGreaterThanOrEqual(LIMIT);
        expect(b.stored).toBeLessThanOrEqual(LIMIT);
        if (b.admitted > LIMIT) console.warn(`nats-server ${conns[0]!.info?.version}: ${b.admitted} admitted for a limit of ${LIMIT} (nats-io/nats-server#4320)`);
      }
      console.info(
        [
          `${setup}:`,
          `  KV CAS (update with revision) round trip: ${percentiles(cas)}`,
          `  NATS request/reply round trip (owner forwarding): ${percentiles(req)}`,
          `  one client's hits in sequence (one CAS each, revision cached): ${percentiles(sequential)}`,
          `  1,000 concurrent hits, one key, three connections: admitted ${b.admitted}; ${b.attempts} CAS writes, ${b.conflicts} lost races; per-request ${percentiles(b.latencies)}`,
        ].join('\n'),
      );
    });
  });
}
