/**
 * The front's handle on one worker host. Requests (the hot path) go as plain arrays on a
 * dedicated MessagePort, batched per event-loop turn and matched back by a numeric id; the
 * control plane (add, remove, stats) stays on comlink. This client owns what comlink alone
 * lacks: deadlines (BROKER_TIMEOUT), a retryable BROKER_UNAVAILABLE for every pending call
 * when the worker exits or errors (BROKER_TIMEOUT, outcome unknown, for an order or flatten the
 * worker had been handed: it may have reached the broker), and AppError rebuilt from ErrorData by code.
 */
import type { MessagePort, Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { AppError, fromErrorData, RequestNotSentError } from '../domain/problems.js';
import { nodeEndpoint } from './comlink-node.js';
import { EFFECTFUL_REQUESTS, type ActorRequest, type ReplyEnvelope, type RequestEnvelope, type WorkerHostApi, type WorkerStats } from './protocol.js';
import type { ConnectionSpec } from '../domain/connections.js';

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** Withdraws the call when true at the flush (ActorCallOptions.cancelled). */
  cancelled?: (() => boolean) | undefined;
  /** Changes something at the broker (what, in words): once handed to the worker, its outcome is unknown if the worker dies. */
  mayExecute: 'the order' | 'the request' | false;
}


/** RPC client for one worker host. */
export class ActorClient {
  private readonly remote: Comlink.Remote<WorkerHostApi>;
  /** Control-plane calls in flight (rejected when the worker dies). */
  private readonly control = new Set<{ reject(err: AppError): void }>();
  /** Hot-path requests in flight, by id. */
  private readonly pending = new Map<number, Pending>();
  private outbox: RequestEnvelope[] = [];
  private flushing = false;
  private nextId = 1;
  private dead: string | null = null;

  constructor(
    readonly worker: Worker,
    private readonly defaultTimeoutMs: number,
    private readonly requestPort: MessagePort,
  ) {
    this.remote = Comlink.wrap<WorkerHostApi>(nodeEndpoint(worker as unknown as Parameters<typeof nodeEndpoint>[0]));
    requestPort.on('message', (replies: ReplyEnvelope[]) => this.settle(replies));
    // The port must not keep the process alive; the worker does that while it runs.
    requestPort.unref();
    worker.once('exit', (code) => this.fail(`actor worker exited (code ${code})`));
    worker.once('error', (err) => this.fail(`actor worker failed: ${err.message}`));
  }

  /** False once the worker has exited or errored. */
  get alive(): boolean {
    return this.dead === null;
  }

  private fail(reason: string): void {
    if (this.dead !== null) return;
    this.dead = reason;
    const err = new AppError('BROKER_UNAVAILABLE', reason);
    const unsent = new Set(this.outbox.map((env) => env.id));
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      // Handed to the worker, an order may have reached the broker before it died: not "nothing
      // was sent" (503) but outcome unknown (504); a retry with the same key finds it or places it.
      p.reject(p.mayExecute && !unsent.has(id) ? new AppError('BROKER_TIMEOUT', `${reason} before it answered: ${p.mayExecute} may have reached the broker`) : err);
    }
    this.pending.clear();
    this.outbox = [];
    for (const c of this.control) c.reject(err);
    this.control.clear();
    this.requestPort.close();
  }

  /**
   * Sends a request to an actor on this worker; throws the actor's coded error, or
   * RequestNotSentError when `cancelled` says so at the flush (nothing was sent).
   */
  request(connectionId: string, req: ActorRequest, timeoutMs = this.defaultTimeoutMs, cancelled?: () => boolean): Promise<unknown> {
    if (this.dead !== null) return Promise.reject(new AppError('BROKER_UNAVAILABLE', this.dead));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const p = this.pending.get(id);
        if (!p) return;
        this.pending.delete(id);
        // An effectful request goes on in the actor: said, so that nobody sends it again blind
        // (cluster probe: a bare "did not complete" 504 while the order filled, and a retry without a key doubled it).
        const goesOn = p.mayExecute ? `; ${p.mayExecute} may still reach the broker: retry with the same Idempotency-Key, never as a new request` : '';
        reject(new AppError('BROKER_TIMEOUT', `actor request ${req.type} did not complete within ${timeoutMs} ms${goesOn}`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer, cancelled, mayExecute: req.type === 'place-order' ? 'the order' : EFFECTFUL_REQUESTS.has(req.type) ? 'the request' : false });
      this.outbox.push({ id, connectionId, req, waitsMs: timeoutMs });
      if (!this.flushing) {
        this.flushing = true;
        // One message per turn: requests arriving together share one wake-up of the worker.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushing = false;
    if (this.outbox.length === 0 || this.dead !== null) return;
    let batch = this.outbox;
    this.outbox = [];
    // The last moment a call can be withdrawn: uWS has parsed this turn's input by now, so a
    // client that closed (or pipelined, which uWS answers by closing) is known to be gone.
    for (let i = 0; i < batch.length; i++) {
      const p = this.pending.get(batch[i]!.id);
      if (p?.cancelled?.()) {
        batch = batch.filter((env) => !this.withdraw(env.id));
        break;
      }
    }
    if (batch.length > 0) this.post(batch);
  }

  /**
   * Posts a batch; a request that cannot be cloned fails alone (500, nothing sent), never the
   * process (fuzz probe: a function in one webhook alert's order threw DataCloneError out of
   * setImmediate and stopped the service for every user).
   */
  private post(batch: RequestEnvelope[]): void {
    try {
      this.requestPort.postMessage(batch);
      return;
    } catch {
      // Which one: each is sent on its own.
    }
    for (const env of batch) {
      try {
        this.requestPort.postMessage([env]);
      } catch (err) {
        const p = this.pending.get(env.id);
        if (!p) continue;
        this.pending.delete(env.id);
        clearTimeout(p.timer);
        p.reject(new AppError('INTERNAL', `request ${env.req.type} could not be handed to the connection's actor (nothing was sent): ${err instanceof Error ? err.message : String(err)}`));
      }
    }
  }

  /** Rejects a pending call whose caller is gone, before it is sent; true when withdrawn. */
  private withdraw(id: number): boolean {
    const p = this.pending.get(id);
    if (!p?.cancelled?.()) return false;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.reject(new RequestNotSentError('the client went away before the request was sent'));
    return true;
  }

  private settle(replies: ReplyEnvelope[]): void {
    for (const { id, result } of replies) {
      const p = this.pending.get(id);
      // Gone: it timed out, or the worker died and everything was rejected already.
      if (!p) continue;
      this.pending.delete(id);
      clearTimeout(p.timer);
      if (result.ok) p.resolve(result.value);
      else p.reject(fromErrorData(result.error));
    }
  }

  /** Runs one control-plane call with a deadline; settles exactly once. */
  private call<T>(what: string, invoke: () => Promise<T>, timeoutMs: number): Promise<T> {
    if (this.dead !== null) return Promise.reject(new AppError('BROKER_UNAVAILABLE', this.dead));
    return new Promise<T>((resolve, reject) => {
      const entry = {
        reject: (err: AppError) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        this.control.delete(entry);
        reject(new AppError('BROKER_TIMEOUT', `${what} did not complete within ${timeoutMs} ms`));
      }, timeoutMs);
      this.control.add(entry);
      invoke().then(
        (value) => {
          if (!this.control.delete(entry)) return;
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          if (!this.control.delete(entry)) return;
          clearTimeout(timer);
          reject(new AppError('INTERNAL', `${what} failed in the actor worker: ${err instanceof Error ? err.message : String(err)}`));
        },
      );
    });
  }

  /** Starts (or restarts) an actor on this worker. */
  add(spec: ConnectionSpec, resume = false, timeoutMs = this.defaultTimeoutMs): Promise<void> {
    return this.call('actor add', () => this.remote.add(spec, resume), timeoutMs);
  }

  /** Stops an actor on this worker. */
  remove(connectionId: string, timeoutMs = this.defaultTimeoutMs): Promise<void> {
    return this.call('actor remove', () => this.remote.remove(connectionId), timeoutMs);
  }

  /** Memory, actor count and thread usage of the worker. */
  stats(timeoutMs = this.defaultTimeoutMs): Promise<WorkerStats> {
    return this.call('actor stats', () => this.remote.stats(), timeoutMs);
  }
}
