/**
 * The cluster's ActorGateway (README "Running a cluster"): the HTTP front calls it exactly as
 * it calls the supervisor on a single node. A request for a connection whose actor runs on
 * this node goes straight to the local supervisor; any other goes by NATS request/reply to
 * `<prefix>.actor.<connection>.<epoch>`, which only the node running that actor under that owner
 * epoch subscribes to. Addressed by the epoch of the current owner record, a request never reaches
 * a previous owner: a node that hangs (a long pause, a half-open link) keeps its subscriptions
 * until the NATS server stops waiting for its pings, minutes later, and with one subject per
 * connection it went on getting a share of the requests after another node took the connection
 * over: orders timed out, alerts waited on it, and a kill switch answered 200 never reached the
 * running actor (cluster probe). The
 * request and its result are the same plain data as across the thread boundary
 * (actors/protocol.ts), errors as ErrorData. No responders (nobody runs it right now: a node
 * died and its lease has not ended yet) → 503 BROKER_UNAVAILABLE with Retry-After; no answer
 * in time → 504 BROKER_TIMEOUT, whose retry with the same Idempotency-Key reconciles by
 * clOrdId wherever the actor runs by then.
 *
 * Statuses, accounts and events of every connection come from the event feed (events.ts);
 * events of the actors this node runs go into it, stamped with their owner epoch.
 *
 * Webhook alerts take their turns on an account (alert-turns.ts) on the node that runs its
 * connection, through the same subject: alerts for one account that reach different nodes wait
 * for each other as they would on one node (each node kept its own turns before).
 */
import { randomUUID } from 'node:crypto';
import { errors, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { AlertTurns, type Turn, type TurnMode } from '../actors/alert-turns.js';
import { EFFECTFUL_REQUESTS, type ActorCallOptions, type ActorEvent, type ActorGateway, type ActorRequest, type Result, type ResultFor, type WorkingOrdersPage } from '../actors/protocol.js';
import { withHold, type Supervisor } from '../actors/supervisor.js';
import type { ConnectionSpec, StatusEvent } from '../domain/connections.js';
import type { AccountRecord } from '../domain/orders.js';
import { AppError, fromErrorData, RequestNotSentError, toErrorData } from '../domain/problems.js';
import type { Logger } from '../log.js';
import { CLUSTER, SUPERVISOR } from '../tuning.js';
import { settledWithin } from '../wait.js';
import type { EventFeed } from './events.js';
import type { ActorHost, Ownership } from './ownership.js';

/** A forwarded call: the request and the owner's own deadline for it. */
interface Forwarded {
  req: ActorRequest;
  timeoutMs: number;
}

/** Asks the owner for an alert's turn on an account; answered once the alert may go. */
interface TurnAsked {
  turn: { id: string; key: string; mode: TurnMode };
}

/** Ends a turn the owner gave (or cancels one asked for and no longer waited for). Published, no answer. */
interface TurnEnded {
  endTurn: string;
}

/** Asks the owner to restart its actor with the stored credentials (a PATCH with new ones, a manual reconnect). */
interface RestartAsked {
  restart: true;
  /** A manual reconnect (or the same credentials saved again): at most one per interval, cluster-wide. */
  manual?: boolean;
}

interface Local {
  epoch: number;
  sub: Subscription;
  /** Set before a silent stop: the supervisor's DISABLED for it must not be published. */
  silent: boolean;
  /** Being stopped: calls get 503 (retry: the connection is moving), never the supervisor's 404. */
  stopping: boolean;
  /** The start in progress (a stop waits for it). */
  started: Promise<void>;
  /** Calls in the actor now (this node's and forwarded ones): a hand-over lets them finish. */
  calls: Set<Promise<unknown>>;
}

/** The longest a hand-over waits for the calls in its actor (each ends at its own deadline before this). */
const HAND_OVER_DRAIN_MS = 30_000;

/**
 * The longest an alert waits for its turn on another node; past it the alert fails as the broker
 * being unavailable, unplaced. Well past the turns ahead of it (each ends within LENT_TURN_HOLD_MS
 * or the queue's 30 s): at 30 s, as long as the queue's own safety net, a waiter behind a dead
 * node's turn was dropped or placed by a few ms (re-probe).
 */
const TURN_WAIT_MS = 120_000;

/**
 * A turn lent to an alert on another node ends at the latest this long after it was given: that
 * node's alert makes at most three broker calls, each within its 2.5 s deadline. When the node
 * dies holding it, nothing else ends it (re-probe: the account's next alert waited 30 s).
 */
const LENT_TURN_HOLD_MS = 10_000;

/** How long the owner remembers a turn cancelled before it was given (the requester gave up waiting). */
const CANCELLED_TURN_MEMORY_MS = 2 * TURN_WAIT_MS;

/** Options of ClusterGateway. */

/**
 * Extensions of a refusal while a connection changes node: nothing was sent, and the connection is
 * being connected again (as the actor says of a reconnect), so a webhook alert tries again
 * (webhooks.ts throughReconnect) instead of being lost to a handover (cluster probe).
 */
/** A connection changing node: retried like a reconnect; `nodeChanging` says a turn held on its old node is gone with it. */
const moving = (): Record<string, unknown> => ({ connectionStatus: 'RECONNECTING', nodeChanging: true });

export interface ClusterGatewayOptions {
  nc: NatsConnection;
  prefix: string;
  supervisor: Supervisor;
  feed: EventFeed;
  /** The actor spec of a stored connection (opens its credentials). */
  specFor(connectionId: string): ConnectionSpec;
  /** Resolves once this node's records mirror holds every record written so far (another node's credentials update). */
  recordsCurrent(): Promise<void>;
  logger: Logger;
  callTimeoutMs?: number;
  /** Manual restarts of one connection, at most one per this interval on its owner (RECONNECT_MIN_INTERVAL_S). */
  manualRestartMinIntervalMs?: number;
  /** Whether this node's lease holds right now (NodeLease.holdsNow); absent: always. */
  leaseHeld?: () => boolean;
}

/** See module comment. Implements ActorHost for Ownership, which decides what runs here. */
export class ClusterGateway implements ActorGateway, ActorHost {
  private readonly local = new Map<string, Local>();
  /** Stops in progress, which a start of the same connection waits for. */
  private readonly stopping = new Map<string, Promise<void>>();
  /** Stops asked for, per connection: a start that waited for a stop gives up when another came meanwhile. */
  private readonly stopsAsked = new Map<string, number>();
  private ownership: Ownership | undefined;
  private readonly log: Logger;
  private readonly callTimeoutMs: number;
  private readonly unlisten: () => void;
  private readonly ownListeners = new Set<(event: ActorEvent) => void>();
  /** Forwarded calls and restarts waiting, per connection, to learn that another node took it over (whenOwnerChanges). */
  private readonly ownerWatch = new Map<string, Set<() => void>>();
  /** When this node last restarted each connection by hand (owner side of the cluster-wide interval). */
  private readonly manualRestarts = new Map<string, number>();
  private readonly unwatchFeed: () => void;
  /** Alert turns on the accounts of the actors this node runs, for its own alerts and other nodes'. */
  private readonly turns = new AlertTurns();
  /** Turns this node gave to alerts on other nodes, by turn id, until they end them. */
  private readonly lentTurns = new Map<string, Turn>();
  /** Turns whose requester gave up waiting before they were given (id → when), ended as they are given. */
  private readonly cancelledTurns = new Map<string, number>();

  constructor(private readonly opts: ClusterGatewayOptions) {
    this.log = opts.logger.child({ component: 'cluster-gateway' });
    this.callTimeoutMs = opts.callTimeoutMs ?? SUPERVISOR.callTimeoutMs;
    this.unlisten = opts.supervisor.onEvent((event) => {
      const run = this.local.get(event.connectionId);
      if (!run || run.silent) return;
      opts.feed.publish(run.epoch, event);
      for (const listener of [...this.ownListeners]) listener(event);
    });
    this.unwatchFeed = opts.feed.onEvent((event) => {
      const watching = this.ownerWatch.get(event.connectionId);
      if (watching) for (const watch of [...watching]) watch();
    });
  }

  /**
   * The events of the actors this node runs, as it publishes them: what only the emitting node
   * may act on (journaling a guard event, storing a lock), where every node would otherwise do
   * it once per node from the feed.
   */
  readonly ownEvents = {
    onEvent: (listener: (event: ActorEvent) => void): (() => void) => {
      this.ownListeners.add(listener);
      return () => this.ownListeners.delete(listener);
    },
  };

  /** Connects the ownership that drives start/stop (created after the gateway). */
  attach(ownership: Ownership): void {
    this.ownership = ownership;
  }

  // ---- ActorHost: what ownership asks of this node.

  async start(connectionId: string, epoch: number, resume: boolean): Promise<void> {
    // Started again while its stop is still under way (a lapse, then renewals back within
    // moments): the stop finishes first. Its removal would otherwise come after this start's
    // add, and its DISABLED would be published under this start's epoch. Stopped again while
    // waiting (another lapse): it does not start at all (ownership no longer counts it).
    const stops = this.stopsAsked.get(connectionId) ?? 0;
    await this.stopping.get(connectionId)?.catch(() => undefined);
    if ((this.stopsAsked.get(connectionId) ?? 0) !== stops) return;
    // Its epoch's own subject: no other node ever runs the connection under this epoch.
    const sub = this.opts.nc.subscribe(this.subjectOf(connectionId, epoch), { callback: (err, msg) => (err ? undefined : void this.serve(connectionId, msg)) });
    let release!: () => void;
    const run: Local = { epoch, sub, silent: false, stopping: false, started: new Promise<void>((r) => (release = r)), calls: new Set() };
    this.local.set(connectionId, run);
    try {
      if (resume) {
        // Subscribers everywhere learn first that the connection is moving.
        this.opts.feed.publish(epoch, { type: 'status', connectionId, status: 'RECONNECTING', reason: 'disconnect', ts: Date.now(), detail: 'owner node changed' });
      }
      // Taken over inside the broker's rate-limit hold (the last status says until when): the new
      // actor waits it out as the old one would have (re-probe: it logged in 2.7 s into the hold).
      await this.opts.supervisor.addConnection(withHold(this.opts.specFor(connectionId), this.opts.feed.status(connectionId)), { resume });
    } catch (err) {
      sub.unsubscribe();
      if (this.local.get(connectionId) === run) this.local.delete(connectionId);
      throw err;
    } finally {
      release();
    }
  }

  async stop(connectionId: string, disabled: boolean, opts?: { drain?: boolean }): Promise<void> {
    this.stopsAsked.set(connectionId, (this.stopsAsked.get(connectionId) ?? 0) + 1);
    const run = this.local.get(connectionId);
    if (!run) return;
    run.silent = !disabled;
    // New calls are refused from here (503, nothing sent: retry); those already in the actor
    // finish first when this node still holds the connection (a graceful stop, a rebalance, a
    // removal): stopped under them, an order forwarded from another node was answered 504 "may
    // still place it" and never placed (cluster probe).
    run.stopping = true;
    run.sub.unsubscribe();
    const done = (async () => {
      await run.started;
      if (opts?.drain && run.calls.size > 0) await settledWithin(Promise.allSettled([...run.calls]), HAND_OVER_DRAIN_MS);
      await this.opts.supervisor.removeConnection(connectionId);
    })();
    this.stopping.set(connectionId, done);
    try {
      await done;
    } finally {
      if (this.stopping.get(connectionId) === done) this.stopping.delete(connectionId);
      if (this.local.get(connectionId) === run) this.local.delete(connectionId);
    }
  }

  // ---- ActorGateway: what the HTTP front asks.

  /**
   * A connection added or changed on this node. A new one: ownership picks it up (here or
   * elsewhere) at once. One already running (new credentials, a manual reconnect) restarts on
   * the node that runs it, with the credentials stored: scanning alone left a FAILED
   * connection FAILED on its owner (cluster probe: 202, and nothing happened).
   */
  async addConnection(spec: ConnectionSpec, opts?: { manual?: boolean; resume?: boolean; ifStopped?: boolean }): Promise<void> {
    this.ownership?.scanSoon();
    const id = spec.connectionId;
    const manual = opts?.manual ?? false;
    if (this.local.has(id)) return this.restartLocal(id, manual);
    const epoch = this.ownerEpoch(id);
    const watch = this.whenOwnerChanges(id, epoch);
    let reply;
    try {
      const asked: RestartAsked = { restart: true, ...(manual && { manual }) };
      reply = await Promise.race([this.opts.nc.request(this.subjectOf(id, epoch), JSON.stringify(asked), { timeout: this.callTimeoutMs }), watch.moved]);
    } catch (err) {
      // Nobody runs it: whichever node takes it starts it with what is stored now.
      if (isNoResponders(err)) return;
      throw new AppError('BROKER_UNAVAILABLE', `the node running connection ${id} did not confirm its restart (${errorText(err)}); its stored settings stand: look at its status, then retry`, {}, 1);
    } finally {
      watch.stop();
    }
    // Taken over meanwhile (its owner died): the new owner started it with what is stored.
    if (reply === null) return;
    const result = reply.json<Result<unknown>>();
    if (!result.ok) throw fromErrorData(result.error);
  }

  /** A connection removed: its owner stops it once the record is gone (here: at the next scan, now). */
  async removeConnection(_connectionId: string): Promise<void> {
    this.ownership?.scanSoon();
  }

  /**
   * Restarts an actor this node runs, with the credentials stored (as written on any node). A
   * manual one within the interval of the last is refused here, on the owner, so that several
   * nodes asked at once still log in once (re-probe: three nodes, two logins).
   */
  private async restartLocal(connectionId: string, manual: boolean): Promise<void> {
    const run = this.local.get(connectionId);
    // Moving: the node that takes it next starts it with what is stored.
    if (!run || run.stopping) return;
    if (manual) {
      const interval = this.opts.manualRestartMinIntervalMs ?? 0;
      const now = Date.now();
      const last = this.manualRestarts.get(connectionId);
      if (last !== undefined && now - last < interval) {
        const wait = Math.ceil((interval - (now - last)) / 1000);
        throw new AppError('RATE_LIMITED', `Connection ${connectionId} was reconnected by hand ${Math.round((now - last) / 1000)} s ago; each reconnect is a broker login: retry in ${wait} s`, {}, wait);
      }
      // Times past the interval say nothing any more (connections deleted or moved away).
      for (const [id, at] of this.manualRestarts) if (now - at >= interval) this.manualRestarts.delete(id);
      this.manualRestarts.set(connectionId, now);
    }
    await this.opts.recordsCurrent();
    await run.started;
    if (this.local.get(connectionId) !== run || run.stopping) return;
    await this.opts.supervisor.addConnection(this.opts.specFor(connectionId));
  }

  async request<R extends ActorRequest>(connectionId: string, req: R, opts?: ActorCallOptions): Promise<ResultFor<R>> {
    const timeoutMs = opts?.timeoutMs ?? this.callTimeoutMs;
    // Frozen past its lease, this node forwards nothing that waited for it either: the client may
    // have sent it again to another node meanwhile (see requestLocal).
    if (this.opts.leaseHeld && !this.opts.leaseHeld()) throw new AppError('CLUSTER_UNAVAILABLE', 'This node’s cluster lease lapsed (it was paused or cut off): use another node or retry', {}, 1);
    if (this.local.has(connectionId)) return this.requestLocal(connectionId, req, timeoutMs, opts?.cancelled);
    const cancelled = opts?.cancelled;
    if (cancelled) {
      // What the actor client's batch does locally: wait until the turn's input is parsed, so a
      // client already gone (closed, or pipelined: uWS closes) is known before anything is sent.
      await new Promise((resolve) => setImmediate(resolve));
      if (cancelled()) throw new RequestNotSentError('the client went away before the request was sent');
    }
    let reply;
    const epoch = this.ownerEpoch(connectionId);
    const watch = this.whenOwnerChanges(connectionId, epoch);
    try {
      const body: Forwarded = { req, timeoutMs };
      reply = await Promise.race([this.opts.nc.request(this.subjectOf(connectionId, epoch), JSON.stringify(body), { timeout: timeoutMs + CLUSTER.forwardGraceMs }), watch.moved]);
    } catch (err) {
      throw forwardError(connectionId, err, timeoutMs);
    } finally {
      watch.stop();
    }
    // Another node took the connection over while the call waited: its owner died. An order,
    // cancel or flatten may have reached the broker first: 504, whose retry with the same
    // Idempotency-Key reconciles on the new owner; anything else 503 (cluster probe: ~15 s wait).
    if (reply === null) {
      throw EFFECTFUL_REQUESTS.has(req.type)
        ? new AppError('BROKER_TIMEOUT', `the node running ${connectionId} stopped before it answered (another node took the connection over): ${req.type} may have reached the broker; retry with the same Idempotency-Key`, { ownerChanged: true })
        : new AppError('BROKER_UNAVAILABLE', `the node running ${connectionId} stopped before it answered (another node took the connection over); retry`, moving(), 1);
    }
    const result = reply.json<Result<ResultFor<R>>>();
    if (!result.ok) throw fromErrorData(result.error);
    return result.value;
  }

  /**
   * An alert's turn on an account of `connectionId`, from the node that runs it (module comment).
   * Nobody runs the connection right now: 503 (its actor call would get the same), nothing placed.
   */
  async takeTurn(connectionId: string, key: string, mode: TurnMode, moves = 0): Promise<Turn> {
    const run = this.local.get(connectionId);
    if (run && !run.stopping) return this.turns.takeNow(key, mode) ?? this.turns.take(key, mode);
    const id = randomUUID();
    const epoch = this.ownerEpoch(connectionId);
    // Its end goes where the turn was asked for, whoever runs the connection by then.
    const subject = this.subjectOf(connectionId, epoch);
    const end = (): void => {
      try {
        this.opts.nc.publish(subject, JSON.stringify({ endTurn: id } satisfies TurnEnded));
      } catch (err) {
        this.log.warn({ err, connectionId }, 'ending an alert turn on the owner failed (its safety timer ends it)');
      }
    };
    const watch = this.whenOwnerChanges(connectionId, epoch);
    let reply;
    try {
      const asked: TurnAsked = { turn: { id, key, mode } };
      reply = await Promise.race([this.opts.nc.request(subject, JSON.stringify(asked), { timeout: TURN_WAIT_MS }), watch.moved]);
    } catch (err) {
      end();
      throw isNoResponders(err)
        ? new AppError('BROKER_UNAVAILABLE', `connection ${connectionId} has no running actor right now (its node is changing); retry`, moving(), 1)
        : new AppError('BROKER_UNAVAILABLE', `the alerts before this one on the account did not finish within ${TURN_WAIT_MS} ms; nothing was placed for it`, {}, 1);
    } finally {
      watch.stop();
    }
    if (reply === null) {
      // Another node took the connection over while the alert waited: its turn is taken there.
      end();
      if (moves >= 2) throw new AppError('BROKER_UNAVAILABLE', `connection ${connectionId} is moving between nodes; retry`, moving(), 1);
      return this.takeTurn(connectionId, key, mode, moves + 1);
    }
    const result = reply.json<Result<unknown>>();
    if (!result.ok) throw fromErrorData(result.error);
    let ended = false;
    return {
      end: () => {
        if (ended) return;
        ended = true;
        end();
      },
    };
  }

  /** The owner's side of takeTurn: gives the turn once the alert may go. */
  private async lendTurn(asked: TurnAsked['turn']): Promise<void> {
    const turn = this.turns.takeNow(asked.key, asked.mode, LENT_TURN_HOLD_MS) ?? (await this.turns.take(asked.key, asked.mode, LENT_TURN_HOLD_MS));
    if (this.cancelledTurns.delete(asked.id)) return turn.end();
    this.lentTurns.set(asked.id, turn);
    // Ended by its alert, or by its hold's end (the alert's node died): forgotten either way.
    setTimeout(() => this.lentTurns.delete(asked.id), LENT_TURN_HOLD_MS + 1000).unref();
  }

  /** A turn's end from the alert's node (or its cancellation while it still waited). */
  private endLentTurn(id: string): void {
    const turn = this.lentTurns.get(id);
    if (turn) {
      this.lentTurns.delete(id);
      return turn.end();
    }
    const now = Date.now();
    for (const [old, at] of this.cancelledTurns) {
      if (now - at < CANCELLED_TURN_MEMORY_MS) break;
      this.cancelledTurns.delete(old);
    }
    this.cancelledTurns.set(id, now);
  }

  /**
   * The owner epoch a request for the connection is addressed to: its owner record's, as this
   * node mirrors it, or a newer one its events already carry. 0 when neither is known yet (no
   * node runs it: the request finds no responders, a retryable 503).
   */
  private ownerEpoch(connectionId: string): number {
    return Math.max(this.ownership?.ownerOf(connectionId)?.epoch ?? 0, this.opts.feed.epochOf(connectionId));
  }

  /**
   * Resolves with null once another node has taken the connection over from the owner of `epoch`
   * (its events show a higher owner epoch): a call or restart waiting on that owner will get no answer.
   */
  private whenOwnerChanges(connectionId: string, epoch: number): { moved: Promise<null>; stop(): void } {
    const feed = this.opts.feed;
    let stop = (): void => undefined;
    const moved = new Promise<null>((resolve) => {
      // Nothing known of its owner yet: no change to look for.
      if (epoch === 0) return;
      const watch = (): void => {
        if (feed.epochOf(connectionId) <= epoch) return;
        stop();
        resolve(null);
      };
      let set = this.ownerWatch.get(connectionId);
      if (!set) this.ownerWatch.set(connectionId, (set = new Set()));
      set.add(watch);
      stop = () => {
        set.delete(watch);
        if (set.size === 0 && this.ownerWatch.get(connectionId) === set) this.ownerWatch.delete(connectionId);
      };
    });
    return { moved, stop: () => stop() };
  }

  /** Pages of the actors this node runs only (others answer through their node). */
  keptPage(connectionId: string, accountId: string, offset: number, limit: number): WorkingOrdersPage | undefined {
    const run = this.local.get(connectionId);
    if (!run || run.stopping) return undefined;
    return this.opts.supervisor.keptPage?.(connectionId, accountId, offset, limit);
  }

  status(connectionId: string): StatusEvent | undefined {
    return this.opts.feed.status(connectionId) ?? this.opts.supervisor.status(connectionId);
  }

  accounts(connectionId: string): AccountRecord[] {
    const known = this.opts.feed.accounts(connectionId);
    return known.length > 0 ? known : this.opts.supervisor.accounts(connectionId);
  }

  onEvent(listener: (event: ActorEvent, id?: number) => void): () => void {
    return this.opts.feed.onEvent(listener);
  }

  /** Stops serving; the actors themselves are stopped by ownership (release) and the supervisor. */
  async close(): Promise<void> {
    for (const run of this.local.values()) run.sub.unsubscribe();
    this.unlisten();
    this.unwatchFeed();
    await this.opts.supervisor.close();
  }

  private subjectOf(connectionId: string, epoch: number): string {
    return `${this.opts.prefix}.actor.${connectionId}.${epoch}`;
  }

  /** A call into the actor this node runs; one stopped (or stopping) since the caller looked is a 503 (it is moving). */
  private requestLocal<R extends ActorRequest>(connectionId: string, req: R, timeoutMs: number, cancelled?: () => boolean): Promise<ResultFor<R>> {
    const run = this.local.get(connectionId);
    if (!run || run.stopping) return Promise.reject(new AppError('BROKER_UNAVAILABLE', `connection ${connectionId} is moving to another node; retry`, moving(), 1));
    // Frozen past its lease (a long pause), this node hands on nothing it finds waiting once it runs
    // again, before its lapse stops the actors: another node may run the connection by then, and
    // an order waiting here would be placed twice, once by each (cluster re-probe).
    if (this.opts.leaseHeld && !this.opts.leaseHeld()) return Promise.reject(new AppError('BROKER_UNAVAILABLE', `this node's lease on connection ${connectionId} lapsed; retry`, moving(), 1));
    const call = this.opts.supervisor.request(connectionId, req, cancelled ? { timeoutMs, cancelled } : { timeoutMs });
    run.calls.add(call);
    const done = (): void => void run.calls.delete(call);
    call.then(done, done);
    return call;
  }

  /** Answers a forwarded call from the local actor. */
  private async serve(connectionId: string, msg: Msg): Promise<void> {
    let result: Result<unknown>;
    try {
      const asked = msg.json<Forwarded | RestartAsked | TurnAsked | TurnEnded>();
      if ('endTurn' in asked) return this.endLentTurn(asked.endTurn);
      if ('turn' in asked) {
        await this.lendTurn(asked.turn);
        result = { ok: true, value: null };
      } else if ('restart' in asked) {
        await this.restartLocal(connectionId, asked.manual === true);
        result = { ok: true, value: null };
      } else {
        result = { ok: true, value: await this.requestLocal(connectionId, asked.req, asked.timeoutMs) };
      }
    } catch (err) {
      result = { ok: false, error: toErrorData(err) };
    }
    try {
      msg.respond(JSON.stringify(result));
    } catch (err) {
      this.log.warn({ err, connectionId }, 'answering a forwarded actor call failed');
    }
  }
}

/** What a failed forward means to the client (see module comment). */
function forwardError(connectionId: string, err: unknown, timeoutMs: number): AppError {
  if (isNoResponders(err)) return new AppError('BROKER_UNAVAILABLE', `connection ${connectionId} has no running actor right now (its node is changing); retry`, moving(), 1);
  if (err instanceof errors.TimeoutError || (err instanceof Error && err.cause instanceof errors.TimeoutError)) {
    return new AppError('BROKER_TIMEOUT', `the actor of ${connectionId} did not answer within ${timeoutMs} ms; retry with the same Idempotency-Key`);
  }
  return new AppError('BROKER_UNAVAILABLE', `forwarding to the actor of ${connectionId} failed: ${err instanceof Error ? err.message : String(err)}`, {}, 1);
}

/** Nobody subscribes to the subject: no node runs the actor right now. */
function isNoResponders(err: unknown): boolean {
  return (
    err instanceof errors.NoRespondersError ||
    (err instanceof errors.RequestError && err.isNoResponders()) ||
    (err instanceof Error && err.cause instanceof errors.NoRespondersError)
  );
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
