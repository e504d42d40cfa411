/**
 * This node's lease, and what it knows of every other node's (README "Running a cluster").
 *
 * A node's lease is one KV record, `node.<id>` → `{node, boot, expiresAt}`, written every
 * CLUSTER.renewMs. With JetStream replicas 3 it is written to two buckets, and the two
 * buckets' stream leaders are kept on different NATS servers: a leader election (4–9 s after
 * a server dies on nats-server 2.9) then stops at most one copy, and the node renews through
 * the other. The lease holds while either copy is fresh.
 *
 * The two rules that keep one connection on one node:
 * - the holder counts its lease from when it *sent* the last renewal that was acknowledged
 *   (monotonic clock) and calls `onLapse` at `sent + leaseMs − holderMarginMs`, once, even
 *   while its renewals merely fail: it cannot know whether others can write;
 * - another node treats the lease as ended only at `expiresAt + takerMarginMs` by its own
 *   clock, and before acting on that it reads every copy from its stream leader
 *   (`confirmEnded`, the buckets refuse direct reads).
 * `boot` names one process: a restarted node with the same id is another holder, and it waits
 * at start until the previous process's lease has ended.
 */
import type { KV } from '@nats-io/kv';
import type { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { randomBase62 } from '../store/crypto.js';
import { openBucket } from '../store/nats/index.js';
import { KvMirror } from '../store/nats/kv-mirror.js';
import { CLUSTER, type ClusterTuning } from '../tuning.js';

/** One node's lease as stored. */
export interface NodeRecord {
  node: string;
  boot: string;
  /** Wall-clock ms (the holder's clock) after which the lease has ended. */
  expiresAt: number;
}

/** Who holds something: a node process. */
export interface Holder {
  node: string;
  boot: string;
}

/** Timing of the lease (CLUSTER in tuning.ts; tests may shorten some). */
export type LeaseTiming = Pick<ClusterTuning, 'leaseMs' | 'renewMs' | 'renewRetryMs' | 'holderMarginMs' | 'takerMarginMs' | 'kvTimeoutMs' | 'unreachableMs' | 'placementCheckMs'>;

/** Options of NodeLease.start. */
export interface NodeLeaseOptions {
  nc: NatsConnection;
  kvm: Kvm;
  prefix: string;
  replicas: number;
  nodeId: string;
  /** Names this process (default: random); see `holderName`. */
  boot?: string;
  logger: Logger;
  clock?: () => number;
  timing?: Partial<LeaseTiming>;
  /** Called once when the lease lapses (stop every actor now). */
  onLapse(): void;
  /** Called when renewals succeed again after a lapse. */
  onRestore(): void;
  /**
   * Called when this node stops reaching NATS (no renewal sent in the last `unreachableMs` was
   * acknowledged) and when it reaches it again (the next acknowledged renewal). Long before
   * the lease lapses: requests through this node already fail while it cannot reach NATS.
   */
  onReach?(reachable: boolean): void;
}

const keyOf = (node: string): string => `node.${node}`;

/** A holder as one string (`<node>.<boot>`; node ids never contain a dot), for records that name their node. */
export const holderName = (h: Holder): string => `${h.node}.${h.boot}`;

/** The holder a `holderName` names, if it is one. */
export function parseHolder(name: string): Holder | undefined {
  const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9]+)$/.exec(name);
  return m ? { node: m[1]!, boot: m[2]! } : undefined;
}
/** How long a starting node keeps trying to write its first lease. */
const STARTUP_MS = 15_000;
/** Dead nodes' records are cleaned up by the buckets' TTL. */
const NODE_BUCKET_TTL_MS = 60 * 60 * 1000;

/** See module comment. */
export class NodeLease {
  readonly self: Holder;
  private readonly timing: LeaseTiming;
  private readonly clock: () => number;
  private readonly log: Logger;
  private readonly mirrors: KvMirror[];
  /** Monotonic ms until which this node may run actors. */
  private validUntil = -Infinity;
  private lapsed = true;
  private closed = false;
  private renewTimer: NodeJS.Timeout | undefined;
  private lapseTimer: NodeJS.Timeout | undefined;
  private placementTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private heldBefore = false;
  /** Copies (bucket indexes) with a renewal write in flight, each with its write's token. */
  private readonly writing = new Map<number, object>();
  /** Monotonic send time of the newest acknowledged renewal. */
  private lastAckSent = -Infinity;
  private reaching = true;
  private reachTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly opts: NodeLeaseOptions,
    private readonly buckets: { kv: KV; name: string; republishTo: string }[],
  ) {
    this.self = { node: opts.nodeId, boot: opts.boot ?? randomBase62(10) };
    this.timing = { ...CLUSTER, ...opts.timing };
    this.clock = opts.clock ?? Date.now;
    this.log = opts.logger.child({ component: 'node-lease' });
    this.mirrors = buckets.map((b) => new KvMirror(b.kv, b.name, { logger: this.log, republish: { nc: opts.nc, subject: b.republishTo } }));
  }

  /**
   * Opens the lease buckets, waits until a previous process with this node id has surely
   * stopped, and takes the lease. Resolves once this node holds it.
   */
  static async start(opts: NodeLeaseOptions): Promise<NodeLease> {
    const names = opts.replicas > 1 ? ['nodes', 'nodes2'] : ['nodes'];
    const timing = { ...CLUSTER, ...opts.timing };
    const buckets = await Promise.all(
      names.map(async (n) => {
        const name = `${opts.prefix}_${n}`;
        const republishTo = `${opts.prefix}.${n}`;
        const kv = await openBucket(opts.kvm, name, { history: 1, ttl: NODE_BUCKET_TTL_MS, replicas: opts.replicas, republishTo, allowDirect: false, timeout: timing.kvTimeoutMs }, opts.logger);
        return { kv, name, republishTo };
      }),
    );
    const lease = new NodeLease(opts, buckets);
    await Promise.all(lease.mirrors.map((m) => m.start()));
    await lease.waitForPredecessor();
    // A bucket just created on a NATS cluster takes a moment to be reachable from every server
    // (no responders meanwhile): keep trying for a while before giving up.
    const deadline = performance.now() + STARTUP_MS;
    while (lease.lapsed) {
      await lease.renew();
      if (!lease.lapsed) break;
      if (performance.now() > deadline) {
        lease.close();
        throw new Error('could not write this node\'s lease to NATS');
      }
      await new Promise((r) => setTimeout(r, lease.timing.renewRetryMs));
    }
    lease.scheduleRenewal();
    void lease.renewOnReconnect();
    lease.reachTimer = setInterval(() => lease.checkReach(), lease.timing.renewRetryMs);
    lease.reachTimer.unref();
    lease.placementTimer = setInterval(() => void lease.keepLeadersApart(), lease.timing.placementCheckMs);
    lease.placementTimer.unref();
    return lease;
  }

  /** Whether this node may run actors now (its lease has not lapsed). */
  get holding(): boolean {
    return !this.lapsed;
  }

  /**
   * Whether the lease holds at this moment by the monotonic clock, not only by the lapse timer: a
   * process that was frozen (SIGSTOP, a VM pause) past its lease handles the I/O that waited for it
   * before that timer runs, and must not act on it (another node may run its actors by then).
   */
  holdsNow(): boolean {
    return !this.lapsed && performance.now() < this.validUntil;
  }

  /** Whether this node reaches NATS: a renewal sent in the last `unreachableMs` was acknowledged. */
  get reachable(): boolean {
    return this.reaching;
  }

  /** Whether `h` holds a lease by this node's view (its mirrors; no round trip). */
  isAlive(h: Holder): boolean {
    if (h.node === this.self.node && h.boot === this.self.boot) return !this.lapsed;
    const now = this.clock();
    return this.mirrors.some((m) => {
      const r = m.get<NodeRecord>(keyOf(h.node));
      return r !== undefined && r.boot === h.boot && now < r.expiresAt + this.timing.takerMarginMs;
    });
  }

  /** Node ids holding a lease by this node's view, this node included while it holds its own. */
  liveNodes(): Set<string> {
    const now = this.clock();
    const out = new Set<string>();
    for (const m of this.mirrors) for (const r of m.values<NodeRecord>('node.')) if (now < r.expiresAt + this.timing.takerMarginMs) out.add(r.node);
    if (this.lapsed) out.delete(this.self.node);
    else out.add(this.self.node);
    return out;
  }

  /**
   * Whether `h`'s lease has surely ended: every copy read from its stream leader shows another
   * process, no record, or a lease that ended more than takerMarginMs ago. A copy that cannot
   * be read (its stream is electing a leader) means "not sure".
   */
  async confirmEnded(h: Holder): Promise<boolean> {
    const now = this.clock();
    try {
      const copies = await Promise.all(this.buckets.map((b) => b.kv.get(keyOf(h.node))));
      return copies.every((e) => {
        if (!e || e.operation !== 'PUT') return true;
        const r = e.json<NodeRecord>();
        return r.boot !== h.boot || now >= r.expiresAt + this.timing.takerMarginMs;
      });
    } catch {
      return false;
    }
  }

  /** Stops renewing and removes this node's records (graceful shutdown: others need not wait for expiry). */
  async release(): Promise<void> {
    this.close();
    this.lapsed = true;
    await Promise.all(this.buckets.map((b) => b.kv.delete(keyOf(this.self.node)).catch(() => undefined)));
  }

  /** Stops renewing (the lease then lapses by itself). */
  close(): void {
    this.closed = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.lapseTimer);
    clearInterval(this.placementTimer);
    clearInterval(this.reachTimer);
    for (const m of this.mirrors) m.close();
  }

  /**
   * Writes the lease to every copy that has no write in flight (one at a time per copy, so a
   * copy's writes land in order; a copy whose stream is electing a leader holds its write up
   * to kvTimeoutMs and is skipped meanwhile). Each acknowledgement extends the lease at once,
   * so a slow copy never delays what the other one proves. Resolves once this round settled.
   */
  private async renew(): Promise<void> {
    if (this.closed) return;
    const sent = performance.now();
    const record = JSON.stringify({ ...this.self, expiresAt: this.clock() + this.timing.leaseMs } satisfies NodeRecord);
    let acked = 0;
    let failed: unknown;
    await Promise.all(
      this.buckets.map(async (b, i) => {
        if (this.writing.has(i)) return;
        const token = {};
        this.writing.set(i, token);
        try {
          await b.kv.put(keyOf(this.self.node), record);
          acked++;
          if (!this.closed) this.acknowledged(sent);
        } catch (err) {
          failed ??= err;
        } finally {
          if (this.writing.get(i) === token) this.writing.delete(i);
        }
      }),
    );
    if (this.closed || acked > 0 || failed === undefined) return;
    // One line per streak of rounds without any acknowledgement, not one per retry.
    if (this.failures++ === 0) this.log.warn({ err: failed }, 'lease renewal failed; retrying');
  }

  /**
   * A write sent while the connection was down waits out its kvTimeoutMs although NATS is back:
   * once the client reconnects, renew at once on the new connection (what was written to the
   * old one landed before this, or never).
   */
  private async renewOnReconnect(): Promise<void> {
    for await (const s of this.opts.nc.status()) {
      if (this.closed) return;
      if (s.type !== 'reconnect') continue;
      this.writing.clear();
      void this.renew();
    }
  }

  /** A copy took the renewal sent at `sent` (monotonic). */
  private acknowledged(sent: number): void {
    this.failures = 0;
    this.lastAckSent = Math.max(this.lastAckSent, sent);
    this.extend(sent + this.timing.leaseMs - this.timing.holderMarginMs);
    this.checkReach();
  }

  /** Renews every renewMs while acknowledgements keep coming, every renewRetryMs otherwise, without waiting for a write in flight. */
  private scheduleRenewal(): void {
    if (this.closed) return;
    const fresh = performance.now() - this.lastAckSent <= this.timing.renewMs + this.timing.renewRetryMs;
    this.renewTimer = setTimeout(() => {
      void this.renew();
      this.scheduleRenewal();
    }, fresh ? this.timing.renewMs : this.timing.renewRetryMs);
    this.renewTimer.unref();
  }

  private extend(until: number): void {
    if (until <= this.validUntil) return;
    this.validUntil = until;
    clearTimeout(this.lapseTimer);
    this.lapseTimer = setTimeout(() => this.checkLapse(), Math.max(0, until - performance.now()));
    this.lapseTimer.unref();
    if (this.lapsed) {
      this.lapsed = false;
      if (this.heldBefore) {
        this.log.warn({ node: this.self.node }, 'lease renewed after a lapse');
        this.opts.onRestore();
      }
      this.heldBefore = true;
    }
  }

  /** Reports a change of `reachable` (see onReach). */
  private checkReach(): void {
    if (this.closed) return;
    const reaching = performance.now() - this.lastAckSent <= this.timing.unreachableMs;
    if (reaching === this.reaching) return;
    this.reaching = reaching;
    if (reaching) this.log.warn({ node: this.self.node }, 'NATS reached again: lease renewal acknowledged');
    else this.log.error({ node: this.self.node, sinceMs: Math.round(performance.now() - this.lastAckSent) }, 'NATS unreachable: no lease renewal acknowledged; this node reports itself not ready');
    this.opts.onReach?.(reaching);
  }

  private checkLapse(): void {
    if (this.lapsed || this.closed) return;
    const left = this.validUntil - performance.now();
    if (left > 0) {
      this.lapseTimer = setTimeout(() => this.checkLapse(), left);
      this.lapseTimer.unref();
      return;
    }
    this.lapsed = true;
    this.log.error({ node: this.self.node }, 'lease lapsed: no renewal acknowledged in time; stopping every actor on this node');
    this.opts.onLapse();
  }

  /**
   * A process that ran under this node id before (killed, or still running by mistake) may
   * still hold the lease: wait until it has surely ended, and refuse to start when it keeps
   * being renewed (two processes must not share a node id).
   */
  private async waitForPredecessor(): Promise<void> {
    const deadline = performance.now() + this.timing.leaseMs + this.timing.takerMarginMs + 2000;
    let seen: number | undefined;
    for (;;) {
      const now = this.clock();
      const live = this.mirrors
        .map((m) => m.get<NodeRecord>(keyOf(this.self.node)))
        .filter((r): r is NodeRecord => r !== undefined && now < r.expiresAt + this.timing.takerMarginMs);
      if (live.length === 0) return;
      const latest = Math.max(...live.map((r) => r.expiresAt));
      if (seen !== undefined && latest > seen) throw new Error(`node id '${this.self.node}' is in use by a running node`);
      seen ??= latest;
      if (performance.now() > deadline) throw new Error(`node id '${this.self.node}' is still leased`);
      this.log.warn({ node: this.self.node, waitMs: latest + this.timing.takerMarginMs - now }, 'a previous process of this node id may still hold its lease; waiting');
      await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(50, latest + this.timing.takerMarginMs - now))));
    }
  }

  /**
   * With two copies, their stream leaders must sit on different NATS servers (else one server's
   * death stops both). The live node with the lowest id checks now and then and asks the second
   * copy's leader to step down (JetStream then elects another replica).
   */
  private async keepLeadersApart(): Promise<void> {
    if (this.buckets.length < 2 || this.lapsed) return;
    const [first] = [...this.liveNodes()].sort();
    if (first !== this.self.node) return;
    try {
      const [a, b] = await Promise.all(this.buckets.map((bk) => bk.kv.status()));
      const la = a!.streamInfo.cluster?.leader;
      const lb = b!.streamInfo.cluster?.leader;
      if (!la || la !== lb) return;
      this.log.info({ leader: la }, 'both lease copies are led by one NATS server; asking one to step down');
      await this.opts.nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.KV_${this.buckets[1]!.name}`, undefined, { timeout: this.timing.kvTimeoutMs });
    } catch (err) {
      this.log.debug({ err }, 'lease placement check failed');
    }
  }
}
