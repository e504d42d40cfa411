/**
 * Actor events across the cluster (README "Running a cluster"): the node that runs a
 * connection's actor publishes its events to the JetStream stream `<prefix>_events` on
 * `<prefix>.events.<connection>.<epoch>.<type>`; every node follows the whole stream with one ordered
 * consumer and learns from it each connection's status and accounts (so any node answers
 * snapshots, account lookups and ACCOUNT_INACTIVE) and hands every event to its listeners with
 * the stream sequence as its id: the SSE id, the same on every node, so Last-Event-ID resumes
 * on any of them.
 *
 * Each event carries the owner's epoch (bumped at every change of owner): events of an older
 * epoch than one already seen for that connection come from a node that lost it, and are
 * dropped. Publishing is in order per node, retried while JetStream cannot take it (a leader
 * election), so a status change is late rather than lost.
 */
import { randomBytes } from 'node:crypto';
import { DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { ConsumerMessages } from '@nats-io/jetstream';
import type { ActorEvent } from '../actors/protocol.js';
import type { StatusEvent } from '../domain/connections.js';
import type { AccountRecord } from '../domain/orders.js';
import type { Logger } from '../log.js';
import { CLUSTER } from '../tuning.js';
import { settledWithin } from '../wait.js';
import { ensureStream } from '../store/nats/index.js';
import { whileStarting } from '../store/nats/startup.js';

/** What travels in the stream. */
interface Envelope {
  event: ActorEvent;
  node: string;
  epoch: number;
}

interface Known {
  epoch: number;
  status?: StatusEvent;
  accounts: AccountRecord[];
}

/** Events kept per connection and type (resume needs recent history, not all of it). */
const MAX_PER_SUBJECT = 1000;
/** How often the feed checks that its consumer keeps up (see checkForStall). */
const STALL_CHECK_MS = 1000;
/** A publish backlog past this is dropped, oldest first (JetStream down for minutes). */
const MAX_OUTBOX = 10_000;

/** Options of EventFeed.start. */
export interface EventFeedOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  prefix: string;
  replicas: number;
  nodeId: string;
  logger: Logger;
}

/** See module comment. */
export class EventFeed {
  private readonly known = new Map<string, Known>();
  private readonly listeners = new Set<(event: ActorEvent, id: number) => void>();
  private readonly outbox: { subject: string; data: string; msgID: string }[] = [];
  /** Numbers this node's events: with the node id and its start, the message id JetStream dedupes a retried publish by. */
  private published = 0;
  private readonly bootId = randomBytes(6).toString('base64url');
  private publishing = false;
  private messages: ConsumerMessages | undefined;
  private applied = 0;
  /** The newest stream sequence the consumer delivered (duplicates after a restart are skipped). */
  private delivered = 0;
  /** The stream's end when this node started: messages up to it only fill the caches. */
  private catchUpTo = 0;
  private caughtUp: () => void = () => undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private checking = false;
  private behindAt: number | undefined;
  private closed = false;
  private readonly log: Logger;
  private readonly stream: string;

  private constructor(private readonly opts: EventFeedOptions) {
    this.log = opts.logger.child({ component: 'event-feed' });
    this.stream = `${opts.prefix}_events`;
  }

  /** Creates the stream when missing, loads the latest status and accounts of every connection, and follows the stream. */
  static async start(opts: EventFeedOptions): Promise<EventFeed> {
    const feed = new EventFeed(opts);
    await feed.ensureStream();
    await whileStarting('following health events', () => feed.follow(), { logger: feed.log });
    return feed;
  }

  /** The newest stream sequence applied here (the current SSE id). */
  position(): number {
    return this.applied;
  }

  /** Last known status of a connection, from whichever node runs it. */
  status(connectionId: string): StatusEvent | undefined {
    return this.known.get(connectionId)?.status;
  }

  /** Last known accounts of a connection. */
  accounts(connectionId: string): AccountRecord[] {
    return this.known.get(connectionId)?.accounts ?? [];
  }

  /** Highest owner epoch seen for a connection (0 when none). */
  epochOf(connectionId: string): number {
    return this.known.get(connectionId)?.epoch ?? 0;
  }

  /** Receives every event published after this node caught up, with its id. */
  onEvent(listener: (event: ActorEvent, id: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Publishes an event of a connection this node runs under `epoch` (in order, retried). */
  publish(epoch: number, event: ActorEvent): void {
    if (this.closed) return;
    const envelope: Envelope = { event, node: this.opts.nodeId, epoch };
    // The epoch is part of the subject, so "the last message of each subject" (how a starting
    // node loads the current state) can never be a late event of a previous owner.
    this.outbox.push({
      subject: `${this.opts.prefix}.events.${event.connectionId}.${epoch}.${event.type}`,
      data: JSON.stringify(envelope),
      msgID: `${this.opts.nodeId}.${this.bootId}.${++this.published}`,
    });
    if (this.outbox.length > MAX_OUTBOX) {
      this.outbox.shift();
      this.log.error('event backlog full: oldest unpublished event dropped');
    }
    if (!this.publishing) void this.drain();
  }

  /** Resolves once every event published so far is in the stream, the feed closed, or `withinMs` passed. */
  async flushed(withinMs = CLUSTER.kvTimeoutMs): Promise<void> {
    const deadline = performance.now() + withinMs;
    while (this.outbox.length > 0 && !this.closed && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  /**
   * Resolves once this feed has delivered every event the stream held when called (after NATS
   * comes back, the events of the outage), or `withinMs` passed; never rejects.
   */
  async synced(withinMs = CLUSTER.kvTimeoutMs * 2): Promise<void> {
    const deadline = performance.now() + withinMs;
    let last: number | undefined;
    while (!this.closed && performance.now() < deadline) {
      try {
        last ??= (await this.opts.jsm.streams.info(this.stream)).state.last_seq;
        if (this.delivered >= last || this.applied >= last) return;
      } catch {
        // NATS busy: ask again.
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Stops following the stream; unpublished events are dropped. */
  close(): void {
    this.closed = true;
    clearInterval(this.stallTimer);
    this.outbox.length = 0;
    void this.messages?.close();
  }

  private ensureStream(): Promise<void> {
    return ensureStream(
      this.opts.jsm,
      {
        name: this.stream,
        subjects: [`${this.opts.prefix}.events.>`],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        num_replicas: this.opts.replicas,
        max_age: CLUSTER.eventsMaxAgeMs * 1_000_000,
        max_msgs_per_subject: MAX_PER_SUBJECT,
        discard: DiscardPolicy.Old,
      },
      this.log,
    );
  }

  private async drain(): Promise<void> {
    this.publishing = true;
    while (this.outbox.length > 0 && !this.closed) {
      const next = this.outbox[0]!;
      try {
        // A publish whose answer timed out may still have been stored: the retry carries the same
        // message id, so JetStream keeps one copy (cluster probe: a status event delivered twice).
        await this.opts.js.publish(next.subject, next.data, { timeout: CLUSTER.kvTimeoutMs, msgID: next.msgID });
        if (this.outbox[0] === next) this.outbox.shift();
      } catch (err) {
        this.log.warn({ err }, 'publishing an actor event failed; retrying');
        await new Promise((r) => setTimeout(r, CLUSTER.renewRetryMs));
      }
    }
    this.publishing = false;
  }

  /**
   * One ordered consumer over the whole stream, starting from the last message of every
   * subject (the latest status and accounts of each connection); it recreates itself after
   * a failure from where it stopped. Messages up to the stream's end at start only fill the
   * caches; later ones also go to the listeners.
   */
  private async follow(): Promise<void> {
    const { state } = await this.opts.jsm.streams.info(this.stream);
    this.catchUpTo = state.last_seq;
    this.applied = state.last_seq;
    this.delivered = 0;
    const ready = new Promise<void>((resolve) => (this.caughtUp = resolve));
    if (state.messages === 0) this.caughtUp();
    await this.consume(state.messages > 0 ? { deliver_policy: DeliverPolicy.LastPerSubject } : { deliver_policy: DeliverPolicy.New });
    // A stream whose newest message is gone (max age) never delivers `catchUpTo`: do not wait forever.
    const bound = setTimeout(this.caughtUp, CLUSTER.kvTimeoutMs * 2);
    await ready;
    clearTimeout(bound);
    this.stallTimer = setInterval(() => void this.checkForStall(), STALL_CHECK_MS);
    this.stallTimer.unref();
  }

  private async consume(from: { deliver_policy: DeliverPolicy; opt_start_seq?: number }): Promise<void> {
    const consumer = await this.opts.js.consumers.get(this.stream, { filter_subjects: `${this.opts.prefix}.events.>`, ...from });
    const messages = await consumer.consume();
    this.messages = messages;
    void (async () => {
      for await (const m of messages) {
        try {
          if (m.seq <= this.delivered) continue;
          this.delivered = m.seq;
          const live = m.seq > this.catchUpTo;
          this.apply(m.json<Envelope>(), m.seq, live);
          if (!live && m.seq === this.catchUpTo) this.caughtUp();
        } catch (err) {
          this.log.error({ err, seq: m.seq }, 'unreadable actor event; skipped');
        }
      }
    })();
  }

  /**
   * After the NATS server that held the consumer dies, an ordered consumer can stay silent for
   * many seconds before the client recreates it (as the record mirrors' watches did): when the
   * stream holds events this feed has not seen and nothing arrived since the last check, the
   * consumer is recreated from the next sequence.
   */
  private async checkForStall(): Promise<void> {
    if (this.closed || this.checking) return;
    this.checking = true;
    try {
      const { state } = await this.opts.jsm.streams.info(this.stream);
      if (state.last_seq <= this.delivered) this.behindAt = undefined;
      else if (this.behindAt === undefined || this.delivered > this.behindAt) this.behindAt = this.delivered;
      else {
        this.log.warn({ delivered: this.delivered, last: state.last_seq }, 'event stream consumer stalled; recreating it');
        this.behindAt = undefined;
        // Not awaited: closing a consumer whose server is gone may never answer.
        void this.messages?.close().catch(() => undefined);
        // Bounded: creating it may hang while the stream elects a leader, and a check that never
        // ends would stop every later one (the feed silent for good). A late one only repeats
        // what `delivered` already skips.
        const recreated = this.consume({ deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: this.delivered + 1 });
        await settledWithin(recreated, CLUSTER.kvTimeoutMs * 2);
      }
    } catch {
      // NATS busy (e.g. electing a leader): check again next time.
    } finally {
      this.checking = false;
    }
  }

  private apply(env: Envelope, seq: number, live: boolean): void {
    const { event, epoch } = env;
    if (seq > this.applied) this.applied = seq;
    let k = this.known.get(event.connectionId);
    if (!k) this.known.set(event.connectionId, (k = { epoch, accounts: [] }));
    if (epoch < k.epoch) return;
    k.epoch = epoch;
    if (event.type === 'status') k.status = event;
    else if (event.type === 'accounts') k.accounts = event.accounts;
    if (!live) return;
    for (const l of [...this.listeners]) {
      try {
        l(event, seq);
      } catch (err) {
        this.log.error({ err }, 'actor event listener threw');
      }
    }
  }
}
