/**
 * The front's handle on one worker host. comlink alone drops error codes and leaves calls
 * pending forever when the worker dies; this client owns deadlines (BROKER_TIMEOUT), rejects
 * every pending call with a retryable BROKER_UNAVAILABLE on worker exit or error, and rebuilds
 * AppError from ErrorData by code.
 */
import type { Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { AppError, fromErrorData } from '../domain/problems.js';
import { nodeEndpoint } from './comlink-node.js';
import type { WorkerHostApi } from './protocol.js';
import type { ActorRequest, Result, WorkerStats } from './protocol.js';
import type { ConnectionSpec } from '../domain/connections.js';

interface Pending {
  reject(err: AppError): void;
}

/** RPC client for one worker host. */
export class ActorClient {
  private readonly remote: Comlink.Remote<WorkerHostApi>;
  private readonly pending = new Set<Pending>();
  private dead: string | null = null;

  constructor(
    readonly worker: Worker,
    private readonly defaultTimeoutMs: number,
  ) {
    this.remote = Comlink.wrap<WorkerHostApi>(nodeEndpoint(worker as unknown as Parameters<typeof nodeEndpoint>[0]));
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
    for (const p of this.pending) p.reject(err);
    this.pending.clear();
  }

  /** Runs one RPC with a deadline; settles exactly once. */
  private call<T>(what: string, invoke: () => Promise<T>, timeoutMs: number): Promise<T> {
    if (this.dead !== null) return Promise.reject(new AppError('BROKER_UNAVAILABLE', this.dead));
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = {
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        this.pending.delete(entry);
        reject(new AppError('BROKER_TIMEOUT', `${what} did not complete within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.add(entry);
      invoke().then(
        (value) => {
          if (!this.pending.delete(entry)) return;
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          if (!this.pending.delete(entry)) return;
          clearTimeout(timer);
          reject(new AppError('INTERNAL', `${what} failed in the actor worker: ${err instanceof Error ? err.message : String(err)}`));
        },
      );
    });
  }

  /** Sends a request to an actor on this worker; throws the actor's coded error. */
  async request(connectionId: string, req: ActorRequest, timeoutMs = this.defaultTimeoutMs): Promise<unknown> {
    const result = await this.call<Result<unknown>>(`actor request ${req.type}`, () => this.remote.request(connectionId, req) as Promise<Result<unknown>>, timeoutMs);
    if (!result.ok) throw fromErrorData(result.error);
    return result.value;
  }

  /** Starts (or restarts) an actor on this worker. */
  add(spec: ConnectionSpec, resume = false, timeoutMs = this.defaultTimeoutMs): Promise<void> {
    return this.call('actor add', () => this.remote.add(spec, resume), timeoutMs);
  }

  /** Stops an actor on this worker. */
  remove(connectionId: string, timeoutMs = this.defaultTimeoutMs): Promise<void> {
    return this.call('actor remove', () => this.remote.remove(connectionId), timeoutMs);
  }

  /** Memory and actor count of the worker. */
  stats(timeoutMs = this.defaultTimeoutMs): Promise<WorkerStats> {
    return this.call('actor stats', () => this.remote.stats(), timeoutMs);
  }
}
