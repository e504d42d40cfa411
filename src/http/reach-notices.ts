/**
 * Cluster mode: what a node's health streams say while the node cannot reach NATS (README
 * "Running a cluster"). The connections' own events travel through NATS, so without this a
 * cut-off node's streams would keep showing CONNECTED, heartbeats and all, while every trading
 * request through the node answers 503: a silent disconnect.
 *
 * When the node stops reaching NATS, every connection its streams show as CONNECTED is reported
 * RECONNECTING (reason `disconnect`, the detail says it is this node's link to the cluster), and
 * snapshots of new streams say the same. Once the node reaches NATS again and has delivered the
 * events of the outage, each of those connections that is CONNECTED is reported CONNECTED again
 * (reason `reconnect`); one that moved or dropped meanwhile has already reported that itself.
 *
 * These notices are not cluster events: they carry the current id and stay out of the resume
 * ring (a stream resumed while the node is cut off gets them after the ring's frames).
 */
import type { ActorGateway } from '../actors/protocol.js';
import type { StatusEvent } from '../domain/connections.js';
import type { HealthHub } from './sse-hub.js';
import { formatSseEvent, statusMessage } from './sse.js';

/** Whether the node reaches the cluster store (ClusterNode `reach`). */
export interface NodeReach {
  reachable(): boolean;
  onChange(listener: (reachable: boolean) => void): () => void;
}

/** The slice of the store the notices read. */
export interface ReachStore {
  connections: {
    all(): readonly { id: string; userId: string; disabled?: boolean }[];
    byId(connectionId: string): { userId: string } | undefined;
  };
}

export const CUT_OFF_DETAIL =
  'this node cannot reach the cluster store (NATS): requests through it answer 503 CLUSTER_UNAVAILABLE; the broker connection may still be up on its node';
export const REACHED_AGAIN_DETAIL = 'this node reaches the cluster store again';

/** See module comment. */
export class ReachNotices {
  /** Connections this node's streams were told are RECONNECTING. */
  private readonly masked = new Set<string>();
  /** When the node stopped reaching NATS (the notices' `ts`). */
  private cutAt = 0;
  private readonly unlisten: () => void;

  constructor(
    private readonly reach: NodeReach,
    private readonly store: ReachStore,
    private readonly gateway: Pick<ActorGateway, 'status'>,
    private readonly hub: Pick<HealthHub, 'notify' | 'currentId'>,
    private readonly clock: () => number,
  ) {
    this.unlisten = reach.onChange((reachable) => (reachable ? this.reachedAgain() : this.cutOff()));
  }

  /** A connection's status as this node's snapshots show it. */
  status(connectionId: string): StatusEvent | undefined {
    const known = this.gateway.status(connectionId);
    if (known?.status === 'CONNECTED' && !this.reach.reachable()) return this.cutOffStatus(connectionId);
    return known;
  }

  /** What a stream resumed from the ring also needs while the node is cut off. */
  resumeNotices(userId: string, connectionIds: readonly string[]): string[] {
    if (this.reach.reachable()) return [];
    const id = this.hub.currentId(userId);
    return connectionIds.filter((c) => this.masked.has(c)).map((c) => formatSseEvent(id, statusMessage(this.cutOffStatus(c))));
  }

  close(): void {
    this.unlisten();
  }

  private cutOff(): void {
    this.cutAt = this.clock();
    for (const c of this.store.connections.all()) {
      if (c.disabled || this.gateway.status(c.id)?.status !== 'CONNECTED') continue;
      this.masked.add(c.id);
      this.hub.notify(c.userId, statusMessage(this.cutOffStatus(c.id)));
    }
  }

  private reachedAgain(): void {
    for (const id of this.masked) {
      const known = this.gateway.status(id);
      const owner = this.store.connections.byId(id)?.userId;
      if (owner && known?.status === 'CONNECTED') {
        this.hub.notify(owner, statusMessage({ connectionId: id, status: 'CONNECTED', reason: 'reconnect', ts: this.clock(), detail: REACHED_AGAIN_DETAIL }));
      }
    }
    this.masked.clear();
  }

  private cutOffStatus(connectionId: string): StatusEvent {
    return { type: 'status', connectionId, status: 'RECONNECTING', reason: 'disconnect', ts: this.cutAt, detail: CUT_OFF_DETAIL };
  }
}
