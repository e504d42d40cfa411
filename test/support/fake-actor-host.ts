/**
 * A worker host for supervisor tests: speaks WorkerHostApi and the request plane like workers/connection-actor/host.ts
 * but runs no broker connection. Its behaviour is scripted by request type:
 * `accounts` answers [], `positions` never answers, `working-orders` kills the thread
 * mid-call, `find-by-clordid` answers a coded NOT_FOUND, `trade-history` reports the adds
 * this thread has seen (as `{ connectionId, resume, guards? }`), and `lock` reports a guard
 * `locked` event with the lock, as the real actor does. Adding reports CONNECTED and an
 * account (`acc-<connectionId>`, or the ids of a login named `account:<id>,<id>…`); removing reports a late RECONNECTING (a stale event the supervisor must drop).
 * Working-order pages: `working-orders-page` answers `[n]` for its n-th call (so a test tells
 * a kept page from a fresh one) at the current version; `unlock` moves the version, announces
 * it (WorkingOrdersChanged) and then a guard `unlocked` event; `cancel-order` reports
 * RECONNECTING and `flatten` CONNECTED.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { nodeEndpoint } from '../../src/actors/comlink-node.js';
import type { ActorEvent, ActorRequest, Result, WorkerHostApi, WorkerHostData } from '../../src/actors/protocol.js';
import type { ConnectionSpec } from '../../src/domain/connections.js';
import { threadUsage } from '../../src/thread-usage.js';
import { serveRequests } from '../../workers/connection-actor/request-port.js';

const data = workerData as WorkerHostData;
const emit = (e: ActorEvent) => data.eventPort.postMessage(e);
const adds: { connectionId: string; resume: boolean; guards?: ConnectionSpec['guards'] }[] = [];
let pageCalls = 0;
let pageVersion = 1;
const actors = new Set<string>();

const api: WorkerHostApi = {
  async add(spec: ConnectionSpec, resume = false) {
    adds.push({ connectionId: spec.connectionId, resume, ...(spec.guards ? { guards: spec.guards } : {}) });
    actors.add(spec.connectionId);
    emit({ type: 'status', connectionId: spec.connectionId, status: 'CONNECTED', reason: resume ? 'reconnect' : 'connect', ts: Date.now() });
    emit({
      type: 'accounts',
      connectionId: spec.connectionId,
      accounts: (spec.credentials.name.startsWith('account:') ? spec.credentials.name.slice('account:'.length).split(',') : [`acc-${spec.connectionId}`]).map((id) => ({
        id, name: 'A', connectionId: spec.connectionId, broker: 'paper' as const, environment: 'paper' as const, active: true,
      })),
    });
  },
  async remove(connectionId: string) {
    actors.delete(connectionId);
    emit({ type: 'status', connectionId, status: 'RECONNECTING', reason: 'disconnect', ts: Date.now(), detail: 'late event of a removed actor' });
  },
  async stats() {
    return { actors: actors.size, heapUsed: 0, rss: 0, usage: threadUsage() };
  },
};

/** The scripted answers of the request plane. */
async function request(connectionId: string, req: ActorRequest): Promise<Result<unknown>> {
  switch (req.type) {
    case 'positions':
      return new Promise(() => undefined);
    case 'working-orders':
      process.exit(7);
    case 'find-by-clordid':
      return { ok: false, error: { code: 'NOT_FOUND', message: `no order ${req.clOrdId}`, retryable: false } };
    case 'trade-history':
      return { ok: true, value: adds };
    case 'lock': {
      const lock = { guard: 'kill_switch' as const, since: 1, until: null, detail: req.detail ?? 'kill switch' };
      emit({ type: 'guard', connectionId, accountId: req.accountId, guard: 'kill_switch', action: 'locked', ts: 1, detail: lock.detail, lock });
      return { ok: true, value: null };
    }
    case 'working-orders-page':
      pageCalls++;
      return { ok: true, value: { json: `[${pageCalls}]`, total: 1, version: pageVersion } };
    case 'unlock':
      pageVersion++;
      data.eventPort.postMessage({ type: 'working-orders-changed', connectionId, version: pageVersion });
      emit({ type: 'guard', connectionId, accountId: req.accountId, guard: 'kill_switch', action: 'unlocked', ts: 1, detail: 'unlocked', lock: null });
      return { ok: true, value: null };
    case 'cancel-order':
      emit({ type: 'status', connectionId, status: 'RECONNECTING', reason: 'disconnect', ts: Date.now() });
      return { ok: true, value: null };
    case 'flatten':
      emit({ type: 'status', connectionId, status: 'CONNECTED', reason: 'reconnect', ts: Date.now() });
      return { ok: true, value: null };
    default:
      return { ok: true, value: [] };
  }
}

Comlink.expose(api, nodeEndpoint(parentPort!));
serveRequests(data.requestPort, request);
