/**
 * The front side of the actor system (implements ActorGateway). One worker thread per
 * connection up to `threadsMax`; beyond it, connections share workers by hash of their id.
 * A crashed worker is restarted with its connections re-added (reconnecting to the broker is
 * the actor's own job); calls in flight on it fail with BROKER_UNAVAILABLE. The supervisor
 * alone announces DISABLED, once, when a connection is removed: the actor stops silently.
 *
 * An account's id is unique per user (DESIGN §4): a connection that reports an account id another
 * connection of the same user served first is refused (account-claims.ts): its actor is stopped,
 * its accounts dropped, and it stays FAILED, answering 409, until the refusal no longer holds.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Logger } from '../log.js';
import { AppError } from '../domain/problems.js';
import { distPath } from '../paths.js';
import { ActorClient } from './actor-client.js';
import { SUPERVISOR, type ConnectionTuning } from '../tuning.js';
import { settledWithin } from '../wait.js';
import type { WorkerHostData, WorkerStats } from './protocol.js';
import type { AccountRecord } from '../domain/orders.js';
import type { ActorCallOptions, ActorEvent, ActorGateway, ActorRequest, OwedLegsChanged, ResultFor, WorkerEventMessage, WorkingOrdersPage } from './protocol.js';
import { WorkingOrdersCache } from './page-cache.js';
import { AccountClaims, type ClaimsStore } from './account-claims.js';
import { connectionFailed, type ConnectionSpec, type StatusEvent } from '../domain/connections.js';
import { NO_GUARDS, type AccountGuards, type OwedLeg } from '../domain/guards.js';

/** The compiled worker-host entry every actor thread runs. */
export const ACTOR_HOST_FILE = 'workers/connection-actor/host.js';

/** createSupervisor options; `threadsMax` is ACTOR_THREADS_MAX. */
export interface SupervisorOptions {
  threadsMax: number;
  logger: Logger;
  workerFile?: string;
  /** Deadline of one call into a worker (default SUPERVISOR.callTimeoutMs). */
  callTimeoutMs?: number;
  /** Actor timing knobs (tests shorten backoff and watchdogs). */
  tuning?: Partial<ConnectionTuning>;
  /** Log level inside workers; defaults to the front logger's level. */
  workerLogLevel?: string;
  /** Requests one connection may have in flight (default SUPERVISOR.maxInFlightPerConnection, see there). */
  maxInFlightPerConnection?: number;
  /**
   * The stored risk guards and locks of a user's accounts: every actor starts with its owner's,
   * whoever adds the connection (the supervisor then keeps them current for restarts).
   */
  guards?: (userId: string) => Record<string, AccountGuards>;
  /**
   * Stores the bracket legs an actor owes an account (OwedLegsChanged) with its guards, so an
   * actor started after a crash still places them; the actor waits for this before it cancels.
   */
  keepOwedLegs?: (userId: string, accountId: string, legs: OwedLeg[]) => Promise<unknown>;
  /** Connection actors it runs at most (ACTORS_MAX); a new one past it is ACTOR_LIMIT_REACHED. */
  maxActors?: number;
  /**
   * The stored connections of a user with the account ids each served (the claims that decide
   * who keeps an account id two connections report: account-claims.ts), and where a change is
   * stored. Without it, only running connections count and the older one keeps the id.
   */
  served?: ClaimsStore;
}

interface Slot {
  worker: Worker;
  client: ActorClient;
  eventPort: MessagePort;
  connections: Set<string>;
  closing: boolean;
  restarts: number;
}

/** FNV-1a, enough to spread connection ids over workers. */
export function hashId(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** Supervisor with the extra introspection tests and bench use. */
export interface Supervisor extends ActorGateway {
  /** The worker currently hosting a connection (tests terminate it to simulate a crash). */
  workerOf(connectionId: string): Worker | undefined;
  /** Number of live worker threads. */
  workerCount(): number;
  /** Memory stats of every worker. */
  stats(): Promise<WorkerStats[]>;
  /** Ids of the connections it runs an actor for (added and not removed). */
  running(): string[];
}

/** Creates the actor supervisor. */
export function createSupervisor(opts: SupervisorOptions): Supervisor {
  const workerFile = opts.workerFile ?? distPath(ACTOR_HOST_FILE);
  const callTimeoutMs = opts.callTimeoutMs ?? SUPERVISOR.callTimeoutMs;
  const maxInFlight = opts.maxInFlightPerConnection ?? SUPERVISOR.maxInFlightPerConnection;
  /** Requests in flight per connection (the front thread is the only caller). */
  const inFlight = new Map<string, number>();
  const log = opts.logger.child({ component: 'supervisor' });
  const specs = new Map<string, ConnectionSpec>();
  const placement = new Map<string, Slot>();
  const slots = new Set<Slot>();
  const statuses = new Map<string, StatusEvent>();
  const accounts = new Map<string, AccountRecord[]>();
  const listeners = new Set<(e: ActorEvent) => void>();
  /** Working-order pages served by the actors, read again without a round trip (page-cache.ts). */
  const pages = new WorkingOrdersCache();
  let closed = false;

  /** Keeps a connection's spec in step with its guards, so a restarted worker starts with the current ones. */
  function noteGuards(connectionId: string, accountId: string, change: Partial<AccountGuards>): void {
    const spec = specs.get(connectionId);
    if (!spec) return;
    const current = spec.guards?.[accountId];
    const owedLegs = change.owedLegs ?? current?.owedLegs ?? [];
    const next: AccountGuards = {
      config: change.config ?? current?.config ?? { ...NO_GUARDS },
      lock: change.lock !== undefined ? change.lock : (current?.lock ?? null),
      ...(owedLegs.length > 0 && { owedLegs }),
    };
    spec.guards = { ...spec.guards, [accountId]: next };
  }

  /**
   * Owed legs changed: noted in the spec (a restarted worker starts with them), stored, and the
   * actor told once they are durable. Writes of one connection stay in notice order.
   */
  const owedWrites = new Map<string, Promise<unknown>>();
  function keepOwedLegs(notice: OwedLegsChanged): void {
    const { connectionId, accountId, legs, seq } = notice;
    noteGuards(connectionId, accountId, { owedLegs: legs });
    const userId = specs.get(connectionId)?.userId;
    const write = (owedWrites.get(connectionId) ?? Promise.resolve())
      .then(() => (userId !== undefined ? opts.keepOwedLegs?.(userId, accountId, legs) : undefined))
      .catch((err: unknown) => log.error({ err, connectionId, accountId }, 'storing owed bracket legs failed'))
      .then(() => {
        const slot = placement.get(connectionId);
        if (slot?.client.alive) return slot.client.request(connectionId, { type: 'owed-legs-stored', seq });
        return undefined;
      })
      .catch((err: unknown) => log.warn({ err, connectionId }, 'telling the actor its owed legs are stored failed'));
    owedWrites.set(connectionId, write);
    void write.finally(() => {
      if (owedWrites.get(connectionId) === write) owedWrites.delete(connectionId);
    });
  }

  /** Who serves an account id two connections of a user report; the connections refused over one. */
  const claims = new AccountClaims(
    {
      specs,
      liveAccounts: (connectionId) => accounts.get(connectionId),
      stop(connectionId, refusal) {
        void stopActor(connectionId);
        accounts.delete(connectionId);
        publish({ type: 'accounts', connectionId, accounts: [] });
        publish({ type: 'status', connectionId, status: 'FAILED', reason: 'fatal-error', ts: Date.now(), detail: refusal.detail });
      },
      start(connectionId) {
        startActor(specs.get(connectionId)!, false).catch((err: unknown) => log.error({ err, connectionId }, 'starting a refused connection again failed'));
      },
    },
    opts.served,
    log,
  );
  const refusalCheck = setInterval(() => {
    if (claims.anyRefused) claims.recheck();
  }, SUPERVISOR.refusalRecheckMs);
  refusalCheck.unref();

  function publish(event: ActorEvent): void {
    if (event.type === 'accounts' && !claims.refusalOf(event.connectionId) && !claims.admit(event.connectionId, event.accounts)) return;
    if (event.type === 'guard' && event.lock !== undefined) noteGuards(event.connectionId, event.accountId, { lock: event.lock });
    if (event.type === 'status') statuses.set(event.connectionId, event);
    if (event.type === 'accounts') accounts.set(event.connectionId, event.accounts);
    if (event.type === 'status' || event.type === 'accounts') pages.reset(event.connectionId);
    for (const l of [...listeners]) {
      try {
        l(event);
      } catch (err) {
        log.error({ err }, 'actor event listener threw');
      }
    }
  }

  function spawn(restarts = 0): Slot {
    const { port1, port2 } = new MessageChannel();
    const requests = new MessageChannel();
    const data: WorkerHostData = { eventPort: port2, requestPort: requests.port2, logLevel: opts.workerLogLevel ?? opts.logger.level, tuning: opts.tuning ?? {} };
    const worker = new Worker(workerFile, { workerData: data, transferList: [port2, requests.port2] });
    const client = new ActorClient(worker, callTimeoutMs, requests.port1);
    const slot: Slot = { worker, client, eventPort: port1, connections: new Set(), closing: false, restarts };
    port1.on('message', (message: WorkerEventMessage) => {
      // Events of a connection removed or moved elsewhere are stale.
      if (placement.get(message.connectionId) !== slot) return;
      if (message.type === 'working-orders-changed') pages.changed(message.connectionId, message.version);
      else if (message.type === 'owed-legs-changed') keepOwedLegs(message);
      else publish(message);
    });
    worker.on('exit', (code) => onExit(slot, code));
    worker.on('error', (err) => log.error({ err }, 'actor worker error'));
    slots.add(slot);
    return slot;
  }

  function onExit(slot: Slot, code: number): void {
    slots.delete(slot);
    slot.eventPort.close();
    if (slot.closing || closed) return;
    const ids = [...slot.connections].filter((id) => placement.get(id) === slot);
    log.error({ code, connections: ids.length }, 'actor worker exited; restarting');
    for (const id of ids) {
      publish({ type: 'status', connectionId: id, status: 'RECONNECTING', reason: 'disconnect', ts: Date.now(), detail: `actor worker exited (code ${code})` });
    }
    if (!ids.length) return;
    const delay = Math.min(SUPERVISOR.restartMaxMs, SUPERVISOR.restartBaseMs * 2 ** slot.restarts);
    setTimeout(() => {
      if (closed) return;
      const live = ids.filter((id) => specs.has(id) && placement.get(id) === slot);
      if (!live.length) return;
      const next = spawn(slot.restarts + 1);
      for (const id of live) {
        placement.set(id, next);
        next.connections.add(id);
        next.client.add(withHold(specs.get(id)!, statuses.get(id)), true).catch((err) => log.error({ err, connectionId: id }, 're-adding actor failed'));
      }
      // A worker that stays up for a while has recovered: forget its crash history.
      setTimeout(() => {
        if (next.client.alive) next.restarts = 0;
      }, SUPERVISOR.restartStableMs).unref();
    }, delay).unref();
  }

  /** A page read again while nothing changed (the actor answers 503 itself while not CONNECTED). */
  function keptPage(connectionId: string, accountId: string, after: number, limit: number): WorkingOrdersPage | undefined {
    if (!specs.has(connectionId) || statuses.get(connectionId)?.status !== 'CONNECTED') return undefined;
    return pages.get(connectionId, accountId, after, limit);
  }

  function pick(connectionId: string): Slot {
    const live = [...slots].filter((s) => !s.closing && s.client.alive);
    if (live.length < opts.threadsMax) return spawn();
    return live[hashId(connectionId) % live.length]!;
  }

  /** Places a connection's actor on a worker and adds it there (CONNECTING, or RECONNECTING when resumed, until it reports). */
  async function startActor(spec: ConnectionSpec, resume: boolean): Promise<void> {
    let slot = placement.get(spec.connectionId);
    if (!slot || !slot.client.alive) {
      slot = pick(spec.connectionId);
      placement.set(spec.connectionId, slot);
      slot.connections.add(spec.connectionId);
    }
    // Known as CONNECTING (RECONNECTING when resumed) until the actor reports; the actor itself emits the event.
    const status = resume ? ({ status: 'RECONNECTING', reason: 'disconnect' } as const) : ({ status: 'CONNECTING', reason: 'connect' } as const);
    statuses.set(spec.connectionId, { type: 'status', connectionId: spec.connectionId, ...status, ts: Date.now() });
    pages.reset(spec.connectionId);
    await slot.client.add(spec, resume);
  }

  /** Stops a connection's actor (its worker too when it hosts no other); its later events are dropped. */
  async function stopActor(connectionId: string): Promise<void> {
    pages.reset(connectionId);
    const slot = placement.get(connectionId);
    placement.delete(connectionId);
    if (!slot) return;
    slot.connections.delete(connectionId);
    await slot.client.remove(connectionId).catch((err) => log.warn({ err, connectionId }, 'actor remove failed'));
    if (!slot.connections.size) {
      slot.closing = true;
      await slot.worker.terminate();
    }
  }

  return {
    async addConnection(given, addOpts) {
      if (closed) throw new AppError('SHUTTING_DOWN', 'actor supervisor is closed');
      if (addOpts?.ifStopped && specs.has(given.connectionId)) return;
      const spec = opts.guards ? { ...given, guards: opts.guards(given.userId) } : given;
      // A restart of a running connection is not a new actor; a new one past the ceiling is refused.
      if (!specs.has(spec.connectionId) && opts.maxActors !== undefined && specs.size >= opts.maxActors) {
        throw new AppError('ACTOR_LIMIT_REACHED', `The service runs its maximum of ${opts.maxActors} broker connections (ACTORS_MAX)`, { limit: opts.maxActors }, 60);
      }
      specs.set(spec.connectionId, spec);
      // A refused connection restarted by hand (reconnect, new credentials) is checked again when it reports.
      claims.forget(spec.connectionId);
      await startActor(spec, addOpts?.resume ?? false);
    },

    async removeConnection(connectionId) {
      const known = specs.delete(connectionId);
      claims.forget(connectionId);
      await stopActor(connectionId);
      if (known) publish({ type: 'status', connectionId, status: 'DISABLED', reason: 'disabled', ts: Date.now(), detail: 'connection stopped: disabled or deleted' });
      claims.recheck();
    },

    async request<R extends ActorRequest>(connectionId: string, req: R, ropts?: ActorCallOptions): Promise<ResultFor<R>> {
      if (closed) throw new AppError('SHUTTING_DOWN', 'actor supervisor is closed');
      if (!specs.has(connectionId)) throw new AppError('NOT_FOUND', `connection ${connectionId} not found`);
      const refusal = claims.refusalOf(connectionId);
      if (refusal) throw connectionFailed(connectionId, refusal.detail);
      // A page read again while nothing changed is answered here (the actor answers 503 itself while not CONNECTED).
      let ticket = 0;
      if (req.type === 'working-orders-page') {
        const kept = keptPage(connectionId, req.accountId, req.after, req.limit);
        if (kept) return kept as ResultFor<R>;
        ticket = pages.ticket(connectionId);
      }
      // Noted before the call: a worker restarting now starts with the new guards.
      if (req.type === 'set-guards') noteGuards(connectionId, req.accountId, { config: req.config });
      const slot = placement.get(connectionId);
      if (!slot || !slot.client.alive) throw new AppError('BROKER_UNAVAILABLE', `actor for ${connectionId} is restarting`);
      const pending = inFlight.get(connectionId) ?? 0;
      if (pending >= maxInFlight) throw new AppError('BROKER_UNAVAILABLE', `connection ${connectionId} is at capacity (${maxInFlight} requests in flight)`, {}, 1);
      inFlight.set(connectionId, pending + 1);
      try {
        const value = (await slot.client.request(connectionId, req, ropts?.timeoutMs, ropts?.cancelled)) as ResultFor<R>;
        if (req.type === 'working-orders-page') pages.keep(connectionId, ticket, req.accountId, req.after, req.limit, value as WorkingOrdersPage);
        return value;
      } finally {
        const left = (inFlight.get(connectionId) ?? 1) - 1;
        if (left > 0) inFlight.set(connectionId, left);
        else inFlight.delete(connectionId);
      }
    },

    keptPage,
    status: (connectionId) => statuses.get(connectionId),
    accounts: (connectionId) => accounts.get(connectionId) ?? [],

    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    workerOf: (connectionId) => placement.get(connectionId)?.worker,
    workerCount: () => [...slots].filter((s) => s.client.alive).length,
    running: () => [...specs.keys()],
    stats: () => Promise.all([...slots].filter((s) => s.client.alive).map((s) => s.client.stats())),

    async close() {
      closed = true;
      clearInterval(refusalCheck);
      const all = [...slots];
      for (const s of all) s.closing = true;
      await Promise.all(
        all.map(async (s) => {
          // Bounded (its timer cleared: a pending one would hold the process 2.5 s past shutdown).
          await settledWithin(Promise.all([...s.connections].map((id) => s.client.remove(id, SUPERVISOR.closeRemoveMs).catch(() => undefined))), SUPERVISOR.closeBoundMs);
          await s.worker.terminate();
        }),
      );
      specs.clear();
      placement.clear();
    },
  };
}

/** A spec restarted while its connection is in the broker's rate-limit hold: the new actor waits it out too. */
export function withHold(spec: ConnectionSpec, last: StatusEvent | undefined, now = Date.now()): ConnectionSpec {
  return last?.status === 'FAILED' && last.retryAt !== undefined && last.retryAt > now ? { ...spec, rateLimitedUntil: last.retryAt } : spec;
}
