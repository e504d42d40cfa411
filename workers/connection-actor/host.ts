/**
 * Worker-thread host for connection actors. Usually carries one actor (one broker connection);
 * past ACTOR_THREADS_MAX the supervisor places several here. Control calls (add, remove,
 * stats) arrive over comlink on parentPort, requests on the request port (request-port.ts);
 * events leave on the event port. Both ports are handed over in workerData.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { nodeEndpoint } from '../../src/actors/comlink-node.js';
import { createLogger } from '../../src/log.js';
import { threadUsage } from '../../src/thread-usage.js';
import { AppError, toErrorData } from '../../src/domain/problems.js';
import { ConnectionActor } from './actor.js';
import { serveRequests } from './request-port.js';
import type { ActorRequest, Result, WorkerEventMessage, WorkerHostApi, WorkerHostData } from '../../src/actors/protocol.js';
import type { ConnectionSpec } from '../../src/domain/connections.js';
import type { LevelWithSilent } from 'pino';

const data = workerData as WorkerHostData;
const logger = createLogger(data.logLevel as LevelWithSilent, undefined, { worker: 'connection-actor' });
const actors = new Map<string, ConnectionActor>();

function emit(event: WorkerEventMessage): void {
  data.eventPort.postMessage(event);
}

const api: WorkerHostApi = {
  async add(spec: ConnectionSpec, resume = false): Promise<void> {
    const old = actors.get(spec.connectionId);
    if (old) await old.stop();
    const actor = new ConnectionActor(spec, emit, logger, data.tuning, emit);
    actors.set(spec.connectionId, actor);
    actor.start(resume);
  },
  async remove(connectionId: string): Promise<void> {
    const actor = actors.get(connectionId);
    actors.delete(connectionId);
    await actor?.stop();
  },
  async stats() {
    const m = process.memoryUsage();
    return { actors: actors.size, heapUsed: m.heapUsed, rss: m.rss, usage: threadUsage() };
  },
};

Comlink.expose(api, nodeEndpoint(parentPort!));
serveRequests(data.requestPort, async (connectionId: string, req: ActorRequest): Promise<Result<unknown>> => {
  const actor = actors.get(connectionId);
  if (!actor) return { ok: false, error: toErrorData(new AppError('BROKER_UNAVAILABLE', `no actor for connection ${connectionId}`)) };
  return actor.handle(req);
});
