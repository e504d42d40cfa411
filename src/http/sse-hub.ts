/**
 * Fan-out of health events to SSE subscribers. Built for many subscribers: an event is
 * serialized once per user (not once per subscriber) and the same string is handed to
 * every stream of that user; heartbeats are one timer for the whole hub.
 *
 * Backpressure: a sink reports whether a write went out without buffering. While a
 * subscriber is congested its messages queue here, up to `maxBufferedBytes`; past that the
 * stream is cut (the client reconnects with Last-Event-ID and resumes from the ring), so a
 * client that stops reading can never grow the server's memory without bound.
 */
import type { Logger } from '../log.js';
import {
  EventRing,
  bracketAlertMessage,
  guardMessage,
  formatSseEvent,
  statusMessage,
  type ConnectionStatusMessage,
  type PublishedMessage,
  type StreamEndReason,
} from './sse.js';

/** The transport under one stream (the uWS response, or a fake in tests). */
export interface SseSink {
  /** Writes a chunk; false when the transport had to buffer it (backpressure). */
  write(chunk: string): boolean;
  /** Ends the stream gracefully. */
  end(): void;
  /** Cuts the stream at once. */
  close(): void;
  /**
   * Calls `drain` whenever the transport can take more (its result: whether everything queued
   * went out). Registered at a stream's first congestion: most streams never congest, and a
   * callback held for every open stream is memory.
   */
  whenWritable(drain: () => boolean): void;
}

/** A registered stream. */
export interface SseSubscription {
  readonly userId: string;
  readonly principalId: string;
  /** Sends a frame (through the backpressure queue). */
  send(chunk: string): void;
  /** The transport can take more: flush the queue. Returns true when the queue emptied. */
  drain(): boolean;
  /** Removes the stream from the hub (the client went away). */
  unsubscribe(): void;
}

/** What serve and the routes use to push events. */
export interface SseHub {
  /**
   * Publishes a `status`, `bracket-alert` or `guard` event to every stream of the user (and
   * the resume ring). `id`: the event's cluster-wide id (cluster mode); otherwise the hub numbers it.
   */
  publish(userId: string, event: PublishedMessage, id?: number): void;
  /** Number of open streams. */
  subscriberCount(): number;
  /** Ends every stream (graceful shutdown). */
  closeAll(): void;
  /**
   * Ends the streams of a principal (an API key id, `session:<id>`) or of every principal of a
   * user at once, after a final `revoked` message saying why; returns how many were ended.
   */
  closeStreams(match: StreamMatch, reason: StreamEndReason, detail?: string): number;
}

/**
 * Which streams closeStreams ends: those of one principal, or every stream of one user (only
 * those opened with a web session when `sessionsOnly`: a password change does not end API keys).
 */
export type StreamMatch = { principalId: string } | { userId: string; sessionsOnly?: boolean };

export interface SseHubOptions {
  clock?: () => number;
  heartbeatMs: number;
  /** Messages kept per user for Last-Event-ID resume. */
  ringSize?: number;
  /** Bytes a congested stream may queue before it is cut. */
  maxBufferedBytes?: number;
  log?: Logger;
  /**
   * Cluster mode: event ids are given with each event (the sequence of the cluster's event
   * stream, the same on every node, so Last-Event-ID resumes on any node); `position()` is the
   * newest id this node has applied.
   */
  externalIds?: { position(): number };
  /** One node: the first event id (above every id of an earlier run; LmdbStore.claimStreamIdBase). Default: the clock. */
  firstId?: number;
}

interface Channel {
  seq: number;
  ring: EventRing;
  subscribers: Set<Subscriber>;
  /** The user's bracket alerts of the last RECENT_ALERTS_MS, oldest first (created at the first one). */
  recentAlerts?: { at: number; frame: string }[];
}

/**
 * How long a bracket alert is shown again to a stream that opens without a resume (new, or after a
 * gap): an unprotected position found ~1 s after a restart was published before any dashboard was
 * back (the browser retries after 3 s), and reached no one (ops probe).
 */
export const RECENT_ALERTS_MS = 15 * 60_000;
const RECENT_ALERTS_MAX = 50;

class Subscriber implements SseSubscription {
  /** Created when the stream first congests (most never do). */
  private queue: string[] | undefined;
  private queued = 0;
  private congested = false;
  /** The sink calls drain when writable (from the first congestion on). */
  private watching = false;
  closed = false;

  constructor(
    readonly userId: string,
    readonly principalId: string,
    private readonly sink: SseSink,
    private readonly hub: HealthHub,
  ) {}

  send(chunk: string): void {
    if (this.closed) return;
    if (this.congested) {
      (this.queue ??= []).push(chunk);
      this.queued += chunk.length;
      if (this.queued > this.hub.maxBufferedBytes) this.hub.cut(this);
      return;
    }
    if (!this.sink.write(chunk)) this.congest();
  }

  private congest(): void {
    this.congested = true;
    if (this.watching) return;
    this.watching = true;
    this.sink.whenWritable(() => this.drain());
  }

  drain(): boolean {
    if (this.closed) return true;
    this.congested = false;
    while (this.queue && this.queue.length > 0) {
      const chunk = this.queue.shift() as string;
      this.queued -= chunk.length;
      if (!this.sink.write(chunk)) {
        this.congest();
        return false;
      }
    }
    return true;
  }

  unsubscribe(): void {
    this.closed = true;
    this.hub.remove(this);
  }

  end(graceful: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = undefined;
    if (graceful) this.sink.end();
    else this.sink.close();
  }
}

const DEFAULT_DETAIL: Record<StreamEndReason, string> = {
  'key-revoked': 'The API key of this stream was revoked',
  'user-deleted': 'The user of this stream was deleted',
  'password-changed': 'The password was changed; sign in again',
  'session-ended': 'The web session of this stream ended',
};

/** The service's SSE hub (one per server). */
export class HealthHub implements SseHub {
  readonly maxBufferedBytes: number;
  private readonly clock: () => number;
  private readonly ringSize: number;
  private readonly base: number;
  private readonly channels = new Map<string, Channel>();
  private readonly byPrincipal = new Map<string, number>();
  private count = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly log: Logger | undefined;
  private readonly externalIds: { position(): number } | undefined;

  constructor(options: SseHubOptions) {
    this.clock = options.clock ?? Date.now;
    this.ringSize = options.ringSize ?? 512;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 256 * 1024;
    this.log = options.log;
    this.externalIds = options.externalIds;
    // Ids start above every id of a previous run, so those fall below every ring's floor and
    // get fresh snapshots instead of a wrong resume. With cluster ids, every event after
    // `position()` reaches this hub, so rings hold everything from there.
    this.base = this.externalIds ? this.externalIds.position() : (options.firstId ?? Math.floor(this.clock()));
    this.timer = setInterval(() => this.heartbeat(), options.heartbeatMs);
    this.timer.unref();
  }

  /** Current sequence number of a user's stream (the id snapshots and heartbeats carry). */
  currentId(userId: string): number {
    return this.externalIds ? this.externalIds.position() : this.channel(userId).seq;
  }

  /** Frames after `lastId` for resume, or undefined when the ring no longer covers it. */
  resume(userId: string, lastId: number): string[] | undefined {
    return this.channel(userId).ring.since(lastId, this.currentId(userId));
  }

  /** Open streams of one principal (API key), for the per-key cap. */
  streamsOf(principalId: string): number {
    return this.byPrincipal.get(principalId) ?? 0;
  }

  /** Registers a stream; the caller has already written the opening frames. */
  subscribe(userId: string, principalId: string, sink: SseSink): SseSubscription {
    const sub = new Subscriber(userId, principalId, sink, this);
    this.channel(userId).subscribers.add(sub);
    this.byPrincipal.set(principalId, this.streamsOf(principalId) + 1);
    this.count++;
    return sub;
  }

  publish(userId: string, event: PublishedMessage, id?: number): void {
    const ch = this.channel(userId);
    if (this.externalIds) {
      // Each node applies the stream in order, so ids only grow; a repeat is a duplicate.
      if (id === undefined || id <= ch.seq) return;
      ch.seq = id;
    } else ch.seq++;
    const message =
      event.type === 'bracket-alert' ? bracketAlertMessage(event) : event.type === 'guard' ? guardMessage(event) : statusMessage(event, 'status');
    const frame = formatSseEvent(ch.seq, message);
    ch.ring.push(ch.seq, frame);
    if (event.type === 'bracket-alert') {
      const recent = (ch.recentAlerts ??= []);
      // Marked, so a client that reacts to alerts can tell one it may have seen on an earlier stream.
      recent.push({ at: this.clock(), frame: formatSseEvent(ch.seq, Object.assign({}, message, { replayed: true })) });
      if (recent.length > RECENT_ALERTS_MAX) recent.shift();
    }
    for (const sub of ch.subscribers) sub.send(frame);
  }

  /** The user's bracket alerts of the last RECENT_ALERTS_MS (frames with their own ids), oldest first. */
  recentAlerts(userId: string): string[] {
    const recent = this.channels.get(userId)?.recentAlerts;
    if (!recent) return [];
    const since = this.clock() - RECENT_ALERTS_MS;
    while (recent.length > 0 && recent[0]!.at < since) recent.shift();
    return recent.map((r) => r.frame);
  }

  /**
   * Sends a message to every open stream of the user under the current id, outside the resume
   * ring (a node's own notice, not an event of the stream: see reach-notices.ts).
   */
  notify(userId: string, message: ConnectionStatusMessage): void {
    const ch = this.channels.get(userId);
    if (!ch || ch.subscribers.size === 0) return;
    const frame = formatSseEvent(this.currentId(userId), message);
    for (const sub of ch.subscribers) sub.send(frame);
  }

  /** Sends one heartbeat to every stream (one serialization per user). */
  heartbeat(): void {
    const ts = this.clock();
    const position = this.externalIds?.position();
    for (const ch of this.channels.values()) {
      if (ch.subscribers.size === 0) continue;
      const frame = formatSseEvent(position ?? ch.seq, { type: 'heartbeat', ts });
      for (const sub of ch.subscribers) sub.send(frame);
    }
  }

  subscriberCount(): number {
    return this.count;
  }

  closeAll(): void {
    const ts = this.clock();
    for (const [userId, ch] of this.channels) {
      if (ch.subscribers.size === 0) continue;
      // Said, so a dashboard can tell a shutdown from a network drop (ops probe: streams just ended).
      const frame = formatSseEvent(this.currentId(userId), { type: 'closing', ts, detail: 'tradegate is shutting down: reconnect with Last-Event-ID once it is back' });
      for (const sub of [...ch.subscribers]) {
        sub.send(frame);
        this.remove(sub);
        sub.end(true);
      }
    }
  }

  closeStreams(match: StreamMatch, reason: StreamEndReason, detail: string = DEFAULT_DETAIL[reason]): number {
    const channels = 'userId' in match ? [this.channels.get(match.userId)] : [...this.channels.values()];
    let ended = 0;
    for (const ch of channels) {
      if (!ch) continue;
      for (const sub of [...ch.subscribers]) {
        if ('principalId' in match && sub.principalId !== match.principalId) continue;
        if ('sessionsOnly' in match && match.sessionsOnly && !sub.principalId.startsWith('session:')) continue;
        sub.send(formatSseEvent(ch.seq, { type: 'revoked', reason, ts: this.clock(), detail }));
        this.remove(sub);
        sub.end(true);
        ended++;
      }
    }
    if (ended) this.log?.info({ ...match, reason, ended }, 'SSE streams ended: credential no longer valid');
    return ended;
  }

  /** Every principal with an open stream, with its user (for the credential re-check). */
  principals(): { principalId: string; userId: string }[] {
    const out = new Map<string, string>();
    for (const [userId, ch] of this.channels) for (const sub of ch.subscribers) out.set(sub.principalId, userId);
    return [...out].map(([principalId, userId]) => ({ principalId, userId }));
  }

  /** Stops the heartbeat timer and ends every stream. */
  shutdown(): void {
    clearInterval(this.timer);
    this.closeAll();
  }

  /** Cuts a slow consumer (its queue passed the bound). */
  cut(sub: Subscriber): void {
    this.log?.warn({ userId: sub.userId, principalId: sub.principalId }, 'SSE client too slow; stream cut');
    this.remove(sub);
    sub.end(false);
  }

  /** Forgets a stream; idempotent. */
  remove(sub: Subscriber): void {
    const ch = this.channels.get(sub.userId);
    if (!ch || !ch.subscribers.delete(sub)) return;
    this.count--;
    const left = this.streamsOf(sub.principalId) - 1;
    if (left > 0) this.byPrincipal.set(sub.principalId, left);
    else this.byPrincipal.delete(sub.principalId);
  }

  private channel(userId: string): Channel {
    let ch = this.channels.get(userId);
    if (!ch) {
      ch = { seq: this.base, ring: new EventRing(this.ringSize, this.base), subscribers: new Set() };
      this.channels.set(userId, ch);
    }
    return ch;
  }
}
