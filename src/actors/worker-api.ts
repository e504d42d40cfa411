/**
 * The supervisor ↔ worker-host boundary (one worker may host several actors). Exposed by
 * workers/connection-actor.ts over comlink; every answer is plain data.
 */
import type { MessagePort } from 'node:worker_threads';
import type { ActorTuning } from './connection.js';
import type { ActorRequest, ConnectionSpec, Result } from './protocol.js';

/** What a worker host answers over comlink. */
export interface WorkerHostApi {
  /** `resume`: re-added after a worker crash (status continues from RECONNECTING). */
  add(spec: ConnectionSpec, resume?: boolean): Promise<void>;
  remove(connectionId: string): Promise<void>;
  request(connectionId: string, req: ActorRequest): Promise<Result<unknown>>;
  stats(): Promise<{ actors: number; heapUsed: number; rss: number }>;
}

/** `workerData` of a worker host. */
export interface WorkerHostData {
  /** Events (status, accounts, bracket alerts) flow one way on this port. */
  eventPort: MessagePort;
  logLevel: string;
  tuning?: Partial<ActorTuning>;
}
