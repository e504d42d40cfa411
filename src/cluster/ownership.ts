/**
 * Which node runs which connection's actor (README "Running a cluster"). Every enabled
 * connection has an owner record in KV, `owner.<connection>` → `{node, boot, epoch}`; a node
 * runs a connection only after it wrote itself into that record (a KV create, or a
 * revision-checked update that bumps the epoch), and only while its node lease holds.
 *
 * Every CLUSTER.scanMs each node looks at its mirror of the records (no round trip) for
 * connections without a live owner: never owned, released by a node that shut down, or owned
 * by a node whose lease ended. It takes such a connection at once while it runs fewer than its
 * fair share (enabled connections / live nodes, rounded up), and after CLUSTER.overShareDelayMs
 * otherwise, so a restarted cluster spreads its actors and an orphan never waits for a balance
 * that cannot come. Before taking a connection from a node, it reads that node's lease from
 * the stream leaders (NodeLease.confirmEnded). A move is a reconnect, so running actors move
 * only to even out a clear imbalance, in one handover (see `rebalance`).
 */
import type { KV } from '@nats-io/kv';
import type { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { openBucket } from '../store/nats/index.js';
import { KvMirror } from '../store/nats/kv-mirror.js';
import { CLUSTER, type ClusterTuning } from '../tuning.js';
import type { Holder, NodeLease } from './node-lease.js';

/** An owner record; `node: null` once its owner let go (graceful shutdown). */
export interface OwnerRecord {
  node: string | null;
  boot: string | null;
  epoch: number;
}

/** Where ownership starts and stops actors (the cluster gateway). */
export interface ActorHost {
  /** Starts the actor under `epoch`; `resume`: the connection ran before, elsewhere. */
  start(connectionId: string, epoch: number, resume: boolean): Promise<void>;
  /**
   * Stops the actor: `disabled` announces DISABLED; otherwise it stops silently (another node takes
   * it). `drain`: calls already in the actor finish first (this node still holds the connection).
   */
  stop(connectionId: string, disabled: boolean, opts?: { drain?: boolean }): Promise<void>;
}

/** Options of Ownership.start. */
export interface OwnershipOptions {
  nc: NatsConnection;
  kvm: Kvm;
  prefix: string;
  replicas: number;
  lease: NodeLease;
  host: ActorHost;
  /** Ids of the enabled connections (from the records mirror). */
  enabled(): string[];
  /** Whether the connection is stored at all (a disabled one is; a deleted one is not). */
  exists(connectionId: string): boolean;
  /**
   * The highest owner epoch this node has seen events of for the connection (the event feed):
   * a new owner's epoch is above it even where the owner record was lost, or its events would
   * be dropped as a previous owner's everywhere.
   */
  epochSeen(connectionId: string): number;
  logger: Logger;
  clock?: () => number;
  timing?: Partial<OwnershipTiming>;
}

/** Timing of ownership (CLUSTER in tuning.ts; tests shorten it). */
export type OwnershipTiming = Pick<ClusterTuning, 'scanMs' | 'overShareDelayMs' | 'rebalanceMs' | 'kvTimeoutMs'>;

const keyOf = (connectionId: string): string => `owner.${connectionId}`;

/** See module comment. */
export class Ownership {
  /** Connections this node runs, with the epoch it runs them under and since when (ms). */
  private readonly running = new Map<string, { epoch: number; since: number }>();
  private lastShed = 0;
  /** Takes in flight (counted toward this node's share before they land). */
  private taking = 0;
  /** Connections being started or stopped (one change at a time per connection). */
  private readonly busy = new Set<string>();
  /** When this node first saw a connection without a live owner. */
  private readonly orphanSince = new Map<string, number>();
  /** Since when this node has seen each other node live (a joiner gets connections once it has settled). */
  private readonly liveSince = new Map<string, number>();
  private readonly timing: OwnershipTiming;
  private readonly clock: () => number;
  private readonly log: Logger;
  private scanTimer: NodeJS.Timeout | undefined;
  private scanning = false;
  private closed = false;

  private constructor(
    private readonly opts: OwnershipOptions,
    private readonly mirror: KvMirror,
  ) {
    this.timing = { ...CLUSTER, ...opts.timing };
    this.clock = opts.clock ?? Date.now;
    this.log = opts.logger.child({ component: 'ownership' });
  }

  /** Opens the owners bucket and starts scanning. */
  static async start(opts: OwnershipOptions): Promise<Ownership> {
    const name = `${opts.prefix}_owners`;
    const republishTo = `${opts.prefix}.owners`;
    const kv: KV = await openBucket(opts.kvm, name, { history: 1, ttl: 0, replicas: opts.replicas, republishTo, allowDirect: false, timeout: (opts.timing?.kvTimeoutMs ?? CLUSTER.kvTimeoutMs) }, opts.logger);
    const mirror = new KvMirror(kv, name, { logger: opts.logger, republish: { nc: opts.nc, subject: republishTo } });
    await mirror.start();
    const own = new Ownership(opts, mirror);
    own.scheduleScan(0);
    return own;
  }

  /** The epoch this node runs a connection under, if it runs it. */
  epochOf(connectionId: string): number | undefined {
    return this.running.get(connectionId)?.epoch;
  }

  /** The current owner record of a connection (this node's view). */
  ownerOf(connectionId: string): OwnerRecord | undefined {
    return this.mirror.get<OwnerRecord>(keyOf(connectionId));
  }

  /** Looks at the connections now (a connection was added or removed here). */
  scanSoon(): void {
    this.scheduleScan(0);
  }

  /** The lease lapsed: stop every actor now, silently (another node will take them). */
  async stopAll(): Promise<void> {
    const ids = [...this.running.keys()];
    await Promise.all(ids.map((id) => this.stopLocal(id, false)));
    if (ids.length > 0) this.log.error({ stopped: ids.length, at: Date.now() }, 'lease lapsed: actors stopped');
  }

  /**
   * Graceful shutdown: stops every actor, then marks each connection free (epoch kept) so
   * another node takes it at once instead of waiting for this node's lease to end.
   */
  async releaseAll(): Promise<void> {
    this.closed = true;
    clearTimeout(this.scanTimer);
    await Promise.all([...this.running.keys()].map((id) => this.handOver(id)));
    this.mirror.close();
  }

  /** Stops scanning and following the bucket (actors are the host's to stop). */
  close(): void {
    this.closed = true;
    clearTimeout(this.scanTimer);
    this.mirror.close();
  }

  private isMine(r: OwnerRecord): boolean {
    return r.node === this.opts.lease.self.node && r.boot === this.opts.lease.self.boot;
  }

  private scheduleScan(ms: number): void {
    if (this.closed) return;
    clearTimeout(this.scanTimer);
    this.scanTimer = setTimeout(() => void this.scan(), ms);
    this.scanTimer.unref();
  }

  private async scan(): Promise<void> {
    if (this.closed) return;
    if (this.scanning) return this.scheduleScan(this.timing.scanMs);
    this.scanning = true;
    try {
      this.scanOnce();
    } catch (err) {
      this.log.error({ err }, 'ownership scan failed');
    } finally {
      this.scanning = false;
      this.scheduleScan(this.timing.scanMs);
    }
  }

  /** Decides from the mirrors; every change it starts runs on its own (one per connection). */
  private scanOnce(): void {
    const { lease } = this.opts;
    if (!lease.holding) return;
    const enabled = new Set(this.opts.enabled());
    // Removed or disabled: stop and forget the record.
    for (const id of this.running.keys()) if (!enabled.has(id)) this.change(id, () => this.retire(id));
    const live = lease.liveNodes();
    const share = Math.ceil(enabled.size / Math.max(1, live.size));
    const seenAt = this.clock();
    for (const n of live) if (!this.liveSince.has(n)) this.liveSince.set(n, seenAt);
    for (const n of this.liveSince.keys()) if (!live.has(n)) this.liveSince.delete(n);
    /** Connections each live node runs, by the owner records. */
    const load = new Map<string, number>([...live].map((n) => [n, 0]));
    const now = this.clock();
    /** What this node will run once the takes started so far (this scan or earlier) land. */
    let planned = this.running.size + this.taking;
    for (const id of enabled) {
      const owner = this.ownerOf(id);
      if (owner && this.isMine(owner)) {
        // Ours but not running: a lapse stopped it, or a start failed: take it again (new epoch).
        if (!this.running.has(id)) this.change(id, () => this.take(id, owner));
        continue;
      }
      if (this.running.has(id)) {
        // The record names another node: it took the connection while this one was cut off.
        this.change(id, () => this.stopLocal(id, false));
        continue;
      }
      if (owner?.node && owner.boot && lease.isAlive({ node: owner.node, boot: owner.boot })) {
        load.set(owner.node, (load.get(owner.node) ?? 0) + 1);
        this.orphanSince.delete(id);
        continue;
      }
      const since = this.orphanSince.get(id) ?? now;
      this.orphanSince.set(id, since);
      // An orphan of a node that died goes at once (the 10 s budget); a free one (new, or
      // handed over) waits a little for a node below its share.
      const ownerDied = owner?.node !== null && owner !== undefined;
      if (!ownerDied && planned >= share && now - since < this.timing.overShareDelayMs) continue;
      if (this.change(id, () => this.take(id, owner))) planned++;
    }
    for (const id of this.orphanSince.keys()) if (!enabled.has(id)) this.orphanSince.delete(id);
    this.rebalance(share, load, now);
  }

  /**
   * Hands connections over while this node runs more than its share and another live node
   * runs at least two fewer than this one (see CLUSTER.rebalanceMs): stop, then mark free, so
   * the less loaded node takes them at its next scan. A move only happens when it evens the
   * load out, so two nodes never pass a connection back and forth.
   *
   * The whole move goes at once: the longest-running actors, once the youngest of them has run
   * rebalanceMs. Handing over only those ready now would leave the rest for one more
   * rebalanceMs (`lastShed`), a second wave of reconnects at a moment nobody chose: actors taken
   * in one scan land milliseconds apart, so the first check past the mark finds some of them
   * ready and some not.
   */
  private rebalance(share: number, load: Map<string, number>, now: number): void {
    const mine = this.running.size;
    const excess = mine - share;
    if (excess <= 0 || now - this.lastShed < this.timing.rebalanceMs) return;
    // Only to nodes live for a rebalance period: one that just joined may still be starting, and a
    // connection freed for it went after overShareDelayMs to a node already at its share, which
    // then handed another one on (cluster re-probe: two moves, or a node taking its own back).
    let room = 0;
    for (const [node, n] of load) {
      if (node === this.opts.lease.self.node || n > mine - 2 || now - (this.liveSince.get(node) ?? now) < this.timing.rebalanceMs) continue;
      room += Math.max(0, share - n);
    }
    if (room === 0) return;
    const count = Math.min(excess, room);
    const give = [...this.running].filter(([id]) => !this.busy.has(id)).sort(([, a], [, b]) => a.since - b.since).slice(0, count);
    if (give.length < count || give.some(([, r]) => now - r.since < this.timing.rebalanceMs)) return;
    this.lastShed = now;
    this.log.info({ moving: give.length, share }, 'handing connections to a less loaded node');
    for (const [id] of give) this.change(id, () => this.handOver(id));
  }

  /** Runs one start/stop for a connection unless one is already running for it; false when one was. */
  private change(id: string, work: () => Promise<void>): boolean {
    if (this.busy.has(id)) return false;
    this.busy.add(id);
    void work()
      .catch((err: unknown) => this.log.error({ err, connectionId: id }, 'ownership change failed'))
      .finally(() => this.busy.delete(id));
    return true;
  }

  /** Writes this node into the record (if `previous` is still what it holds) and starts the actor. */
  private async take(id: string, previous: OwnerRecord | undefined): Promise<void> {
    this.taking++;
    try {
      await this.takeNow(id, previous);
    } finally {
      this.taking--;
    }
  }

  private async takeNow(id: string, previous: OwnerRecord | undefined): Promise<void> {
    const { lease } = this.opts;
    const from: Holder | undefined = previous?.node && previous.boot ? { node: previous.node, boot: previous.boot } : undefined;
    const mine = previous !== undefined && this.isMine(previous);
    if (from && !mine && !(await lease.confirmEnded(from))) return;
    if (!lease.holding || this.closed) return;
    const epoch = Math.max(previous?.epoch ?? 0, this.opts.epochSeen(id)) + 1;
    const wrote = await this.mirror.mutate(keyOf(id), (cur) => {
      const r = cur as OwnerRecord | undefined;
      // Someone else changed it since we looked: the next scan sees what they wrote.
      const same = r === previous || (r !== undefined && previous !== undefined && r.node === previous.node && r.boot === previous.boot && r.epoch === previous.epoch);
      if (!same) return { next: undefined, result: false };
      return { next: { node: lease.self.node, boot: lease.self.boot, epoch } satisfies OwnerRecord, result: true };
    });
    if (!wrote) return;
    this.orphanSince.delete(id);
    if (!lease.holding || this.closed) return;
    this.running.set(id, { epoch, since: this.clock() });
    if (from && !mine) this.log.warn({ connectionId: id, from: from.node, epoch, at: Date.now() }, 'connection taken over from a node whose lease ended');
    else this.log.info({ connectionId: id, epoch }, 'connection taken');
    try {
      await this.opts.host.start(id, epoch, previous !== undefined);
    } catch (err) {
      this.running.delete(id);
      throw err;
    }
  }

  /** Stops the actor; `drain` while this node still holds the connection (hand-over, retirement), never once another may run it. */
  private async stopLocal(id: string, disabled: boolean, drain = false): Promise<void> {
    if (!this.running.has(id)) return;
    this.running.delete(id);
    await this.opts.host.stop(id, disabled, { drain });
  }

  /** Stops the actor silently (its calls finished), then marks the connection free (epoch kept) for another node to take at once. */
  private async handOver(id: string): Promise<void> {
    await this.stopLocal(id, false, true);
    await this.mirror
      .mutate(keyOf(id), (cur) => {
        const r = cur as OwnerRecord | undefined;
        return r && this.isMine(r) ? { next: { ...r, node: null, boot: null }, result: undefined } : { next: undefined, result: undefined };
      })
      .catch((err: unknown) => this.log.warn({ err, connectionId: id }, 'freeing a connection failed; it moves when this node\'s lease ends'));
  }

  /**
   * A connection removed or disabled: stop its actor (DISABLED). A disabled one's record is kept
   * free with its epoch, so the owner that takes it once enabled again counts on from there (a
   * record deleted here restarted at epoch 1, whose events every node dropped as older than the
   * DISABLED it had seen: enabled again, the connection read DISABLED for good). A deleted
   * connection's record goes.
   */
  private async retire(id: string): Promise<void> {
    await this.stopLocal(id, true, true);
    await this.mirror.mutate(keyOf(id), (cur) => {
      const r = cur as OwnerRecord | undefined;
      if (!r || !this.isMine(r)) return { next: undefined, result: undefined };
      return { next: this.opts.exists(id) ? { ...r, node: null, boot: null } : null, result: undefined };
    });
  }
}
