/**
 * The cluster-wide rate limit (src/cluster/rate-limit.ts) over a real nats-server: exact
 * across nodes, the same half-open window as the single-node log, and closed (503) when KV
 * cannot answer.
 */
import { jetstream } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SharedLogLimiter } from '../../../src/cluster/rate-limit.js';
import { AppError } from '../../../src/domain/problems.js';
import { randomBase62 } from '../../../src/store/crypto.js';
import { startNats, type NatsServer } from '../../support/nats.js';

let nats: NatsServer & { stopAndRemove(): Promise<void> };
let conns: NatsConnection[];
beforeAll(async () => {
  nats = await startNats();
  conns = await Promise.all([0, 1, 2].map(() => connect({ servers: nats.url })));
});
afterAll(async () => {
  await Promise.all((conns ?? []).map((c) => c.close()));
  await nats?.stopAndRemove();
});

/** The same bucket seen by each connection ("node"). */
async function buckets(): Promise<KV[]> {
  const name = `rl${randomBase62(8)}`;
  await new Kvm(conns[0]!).create(name, { history: 1, ttl: 60_000 });
  return Promise.all(conns.map((c) => new Kvm(jetstream(c)).open(name)));
}

describe('SharedLogLimiter', () => {
  it('admits exactly 120 of 1,000 concurrent requests for one key spread over three nodes, and says so in its headers’ numbers', async () => {
    const kvs = await buckets();
    const limiters = kvs.map((kv) => new SharedLogLimiter(kv, 'key', 120));
    const decisions = await Promise.all(Array.from({ length: 1000 }, (_, i) => limiters[i % 3]!.hit('k1')));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(120);
    const remaining = decisions.filter((d) => d.allowed).map((d) => d.remaining).sort((a, b) => a - b);
    expect(remaining[0]).toBe(0);
    expect(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0 && d.retryAfterSeconds >= 1)).toBe(true);
    // The log in KV holds exactly the admitted requests; other keys are untouched.
    expect((await kvs[0]!.get('key.k1'))!.json<number[]>()).toHaveLength(120);
    expect((await limiters[1]!.hit('k2')).remaining).toBe(119);
    // Batching: far fewer writes than requests.
    const writes = limiters.reduce((n, l) => n + l.stats.writes, 0);
    expect(writes).toBeLessThan(60);
  });

  it('rejects from a log it last saw full without a round trip', async () => {
    const [kv] = await buckets();
    const limiter = new SharedLogLimiter(kv!, 'key', 3);
    for (let i = 0; i < 3; i++) expect((await limiter.hit('k')).allowed).toBe(true);
    const writes = limiter.stats.writes;
    const refused = await limiter.hit('k');
    expect(refused).toMatchObject({ allowed: false, remaining: 0 });
    expect(limiter.stats.writes).toBe(writes);
  });

  it('uses the single-node window rule: an entry stops counting exactly 60 s after it was accepted, across nodes', async () => {
    const [a, b] = await buckets();
    const now = { value: 1_000_000 };
    const clock = () => now.value;
    const na = new SharedLogLimiter(a!, 'key', 2, { clock });
    const nb = new SharedLogLimiter(b!, 'key', 2, { clock });
    expect((await na.hit('k')).allowed).toBe(true);
    now.value += 10_000;
    expect((await nb.hit('k')).allowed).toBe(true);
    const full = await na.hit('k');
    expect(full).toMatchObject({ allowed: false, retryAfterSeconds: 50 });
    now.value = 1_000_000 + 59_999;
    expect((await nb.hit('k')).allowed).toBe(false);
    now.value = 1_000_000 + 60_000;
    expect((await nb.hit('k')).allowed).toBe(true);
    expect((await na.hit('k')).allowed).toBe(false);
  });

  it('fails closed with 503 CLUSTER_UNAVAILABLE when KV cannot answer', async () => {
    const nc = await connect({ servers: nats.url });
    const name = `rl${randomBase62(8)}`;
    const kv = await new Kvm(nc).create(name, { history: 1, ttl: 60_000 });
    const limiter = new SharedLogLimiter(kv, 'key', 120);
    await nc.close();
    const err = await limiter.hit('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'CLUSTER_UNAVAILABLE', status: 503, retryAfterSeconds: 1 });
  });
});
