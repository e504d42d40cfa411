import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IN_FLIGHT_LEASE_MS, type ClaimOutcome } from '../../../../src/store/nats/idempotency.js';
import { IDEMPOTENCY_TTL_MS } from '../../../../src/tuning.js';
import { startNats, type NatsServer } from '../../../support/nats.js';
import { T0 } from '../../../support/store.js';
import { openNodes, type Nodes } from './nodes.js';

let server: NatsServer & { stopAndRemove(): Promise<void> };
let nodes: Nodes;
const now = { value: T0 };
beforeAll(async () => {
  server = await startNats();
});
afterAll(() => server.stopAndRemove());
beforeEach(async () => {
  now.value = T0;
  nodes = await openNodes([server.url], 3, { clock: () => now.value });
});
afterEach(() => nodes.close());

const FP = 'f'.repeat(64);
// Multi-byte characters, a lone surrogate escape, quotes and newlines: replay must give back the very same string.
const answer = { status: 201, headers: { 'content-type': 'application/json', location: '/v1/orders/9' }, body: '{"orderId":"9","note":"Stücke → ✓ \\ud800\\n"}\n' };
const claimOf = (o: ClaimOutcome) => (o.kind === 'claimed' ? o.claim : undefined);

describe('cluster idempotency claims', () => {
  it('of 50 concurrent claims of one key over three connections, exactly one wins; the rest see it in flight', async () => {
    for (let round = 0; round < 5; round++) {
      const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => nodes.stores[i % 3]!.idempotency.claim('user:u', `key-${round}`, FP)));
      expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'in-flight')).toHaveLength(49);
    }
  });

  it('after the winner commits, every node replays the stored answer exactly', async () => {
    const [a, b, c] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0], typeof nodes.stores[0]];
    const won = claimOf(await a.idempotency.claim('user:u', 'k', FP))!;
    expect(await won.commit(answer)).toBe(true);
    for (const node of [a, b, c]) {
      const o = await node.idempotency.claim('user:u', 'k', FP);
      expect(o).toEqual({ kind: 'done', record: { fingerprint: FP, ...answer, createdAt: T0 } });
      expect(o.kind === 'done' && Buffer.from(o.record.body).equals(Buffer.from(answer.body))).toBe(true);
      expect(await node.idempotency.get('user:u', 'k')).toEqual({ fingerprint: FP, ...answer, createdAt: T0 });
    }
    // Another request under the same key gets the stored record too; the gate answers 422 from its fingerprint.
    const other = await b.idempotency.claim('user:u', 'k', 'e'.repeat(64));
    expect(other.kind === 'done' && other.record.fingerprint).toBe(FP);
  });

  it('a released key can be claimed again, and finishing a claim twice is refused', async () => {
    const [a, b] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const first = claimOf(await a.idempotency.claim('user:u', 'k', FP))!;
    expect((await b.idempotency.claim('user:u', 'k', FP)).kind).toBe('in-flight');
    await first.release();
    await expect(first.commit(answer)).rejects.toThrow(/already finished/);
    const second = claimOf(await b.idempotency.claim('user:u', 'k', FP));
    expect(second).toBeDefined();
    expect(await b.idempotency.get('user:u', 'k')).toBeUndefined();
  });

  it("takes over the marker of a node that died once it expired; the dead claim can no longer store or release", async () => {
    const [a, b] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const dead = claimOf(await a.idempotency.claim('user:u', 'k', FP))!;
    now.value = T0 + IN_FLIGHT_LEASE_MS;
    expect((await b.idempotency.claim('user:u', 'k', FP)).kind).toBe('in-flight');
    now.value = T0 + IN_FLIGHT_LEASE_MS + 1;
    const taker = claimOf(await b.idempotency.claim('user:u', 'k', FP))!;
    expect(taker).toBeDefined();
    // The old holder comes back late: nothing it does may disturb the new claim.
    expect(await dead.commit({ ...answer, body: 'stale' })).toBe(false);
    expect((await a.idempotency.claim('user:u', 'k', FP)).kind).toBe('in-flight');
    expect(await taker.commit(answer)).toBe(true);
    expect((await a.idempotency.get('user:u', 'k'))?.body).toBe(answer.body);
  });

  it('takes over the marker of a node the cluster knows is dead before it expires; a live node keeps its marker', async () => {
    const alive = new Set(['n1.boot1']);
    const holderAlive = (h: string) => alive.has(h);
    const a = await nodes.open(undefined, { nodeId: 'n1.boot1', holderAlive });
    const b = await nodes.open(undefined, { nodeId: 'n2.boot2', holderAlive });
    const dead = claimOf(await a.idempotency.claim('user:u', 'k', FP))!;
    expect((await b.idempotency.claim('user:u', 'k', FP)).kind).toBe('in-flight');
    alive.delete('n1.boot1');
    const taker = claimOf(await b.idempotency.claim('user:u', 'k', FP));
    expect(taker).toBeDefined();
    expect(await dead.commit(answer)).toBe(false);
  });

  it('the marker of a node that stopped holds its key for the dead-holder hold past its latest possible stop, then is taken over (cluster re-probe: a hung owner’s order filled twice)', async () => {
    const alive = new Set(['n1.boot1']);
    const holderAlive = (h: string) => alive.has(h);
    const hold = 30_000;
    const opts = { clock: () => now.value, holderAlive, deadHolderHoldMs: hold };
    const a = await nodes.open(undefined, { nodeId: 'n1.boot1', ...opts });
    const b = await nodes.open(undefined, { nodeId: 'n2.boot2', ...opts });
    const hung = claimOf(await a.idempotency.claim('user:u', 'hung', FP))!;
    // The node hangs right after its claim: no renewal; its lease ends a few seconds later.
    alive.delete('n1.boot1');
    now.value = T0 + 6_000;
    expect((await b.idempotency.claim('user:u', 'hung', FP)).kind).toBe('in-flight');
    // Past the marker's own expiry, still held: it may have stopped as late as a third of a lease after its claim.
    now.value = T0 + IN_FLIGHT_LEASE_MS + 1;
    expect((await b.idempotency.claim('user:u', 'hung', FP)).kind).toBe('in-flight');
    now.value = T0 + IN_FLIGHT_LEASE_MS / 3 + hold;
    expect((await b.idempotency.claim('user:u', 'hung', FP)).kind).toBe('in-flight');
    now.value = T0 + IN_FLIGHT_LEASE_MS / 3 + hold + 1;
    const taker = claimOf(await b.idempotency.claim('user:u', 'hung', FP));
    expect(taker).toBeDefined();
    expect(await hung.commit(answer)).toBe(false);
  });

  it('a request that runs past the lease keeps its key on every node: its node renews the marker (a flatten answered 504 goes on, and a retry sent to another node after 30 s ran it again)', async () => {
    const lease = { clock: () => Date.now(), inFlightLeaseMs: 300 };
    const a = await nodes.open(undefined, lease);
    const b = await nodes.open(undefined, lease);
    const held = claimOf(await a.idempotency.claim('user:u', 'long', FP))!;
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 250));
      expect((await b.idempotency.claim('user:u', 'long', FP)).kind).toBe('in-flight');
    }
    expect(await held.commit(answer)).toBe(true);
    expect(await b.idempotency.claim('user:u', 'long', FP)).toMatchObject({ kind: 'done', record: { body: answer.body } });
    // Finished, the marker is no longer renewed: a released key stays free.
    const released = claimOf(await a.idempotency.claim('user:u', 'short', FP))!;
    await released.release();
    await new Promise((r) => setTimeout(r, 250));
    expect((await b.idempotency.claim('user:u', 'short', FP)).kind).toBe('claimed');
  });

  it('an update of its own marker that was applied after the client gave up on it does not lose the answer (cluster probe: the commit took it for a takeover)', async () => {
    const [a, b] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    const held = claimOf(await a.idempotency.claim('user:u', 'late-ack', FP))!;
    // A renewal NATS applied while the client timed out: the marker moved on, still this claim's.
    const kv = await new Kvm(nodes.connections[0]!).open(`${nodes.prefix}_idempotency`);
    const hash = (await kv.keys().then(async (it) => { for await (const k of it) return k; })) as string;
    const entry = (await kv.get(hash))!;
    await kv.update(hash, entry.string(), entry.revision);
    expect(await held.commit(answer)).toBe(true);
    expect(await b.idempotency.claim('user:u', 'late-ack', FP)).toMatchObject({ kind: 'done', record: { body: answer.body } });
  });

  it('a late release of a taken-over claim does not free the new holder', async () => {
    const [a, b, c] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0], typeof nodes.stores[0]];
    const dead = claimOf(await a.idempotency.claim('user:u', 'k', FP))!;
    now.value = T0 + IN_FLIGHT_LEASE_MS + 1;
    expect(claimOf(await b.idempotency.claim('user:u', 'k', FP))).toBeDefined();
    await dead.release();
    expect((await c.idempotency.claim('user:u', 'k', FP)).kind).toBe('in-flight');
  });

  it('a stored answer older than 24 h (by the clock) reads as absent and its key runs again', async () => {
    const [a, b] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    await claimOf(await a.idempotency.claim('user:u', 'k', FP))!.commit(answer);
    now.value = T0 + IDEMPOTENCY_TTL_MS + 1;
    expect(await b.idempotency.get('user:u', 'k')).toBeUndefined();
    expect((await b.idempotency.claim('user:u', 'k', FP)).kind).toBe('claimed');
  });

  it('keys are scoped: another user with the same key claims independently', async () => {
    const [a, b] = nodes.stores as [typeof nodes.stores[0], typeof nodes.stores[0]];
    expect((await a.idempotency.claim('user:u1', 'same', FP)).kind).toBe('claimed');
    expect((await b.idempotency.claim('user:u2', 'same', FP)).kind).toBe('claimed');
  });
});
