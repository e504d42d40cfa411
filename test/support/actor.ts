/**
 * Shared setup for the actor integration tests: a real paper broker on loopback, a user with
 * accounts created through its control API, and a ConnectionActor (in-process) talking to it.
 */
import { control as controlSim } from './sim.js';
import { startSim, type SimHandle, type SimOptions } from '../../src/sim/index.js';
import { createLogger } from '../../src/log.js';
import { ConnectionActor } from '../../workers/connection-actor/actor.js';
import type { ConnectionTuning } from '../../src/tuning.js';
import { fromErrorData, type AppError } from '../../src/domain/problems.js';
import type { ActorEvent, ActorRequest, ResultFor } from '../../src/actors/protocol.js';
import type { ConnectionSpec, ConnectionStatus, StatusEvent } from '../../src/domain/connections.js';

export const SYMBOL = 'ESZ6';
export const quietLogger = createLogger('silent');

/** Fast timings for tests: short backoff, frequent polls. */
export const TEST_TUNING: Partial<ConnectionTuning> = { backoffBaseMs: 100, backoffMaxMs: 1000, settleMs: 3000, accountPollMs: 0 };

export interface ActorHarness {
  sim: SimHandle;
  control(method: string, path: string, body?: unknown): Promise<any>;
  user: { userId: number; name: string; password: string; accounts: { id: number; name: string }[] };
  spec: ConnectionSpec;
  actor: ConnectionActor;
  events: ActorEvent[];
  call<R extends ActorRequest>(req: R): Promise<ResultFor<R>>;
  callError(req: ActorRequest): Promise<AppError>;
  nextStatus(status: ConnectionStatus, timeoutMs?: number): Promise<StatusEvent>;
  until<T>(probe: () => T | undefined, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

let counter = 0;

/** Starts a sim and a user; `makeActor: false` leaves connecting to the test. */
export async function startActorHarness(
  opts: {
    tuning?: Partial<ConnectionTuning>;
    accounts?: string[];
    password?: string;
    restUrl?: (sim: SimHandle) => string;
    sim?: SimOptions;
    budget?: ConnectionSpec['budget'];
    /** The broker request deadline (default 5000 ms). */
    requestTimeoutMs?: number;
    /** The spec's guards, given the created account ids. */
    guardsFor?: (accountIds: number[]) => ConnectionSpec['guards'];
  } = {},
): Promise<ActorHarness> {
  const sim = await startSim({ priceStepMs: 0, heartbeatMs: 500, ...opts.sim });
  const control = (method: string, path: string, body?: unknown) => controlSim(sim, method, path, body);
  const name = `trader${++counter}_${process.pid}`;
  const password = 'pw-secret-1';
  const created = await control('POST', '/users', { name, password, accounts: (opts.accounts ?? ['A1', 'A2']).map((n) => ({ name: `${n}_${name}` })) });
  await control('POST', '/prices', { symbol: SYMBOL, price: 5000 });
  const spec: ConnectionSpec = {
    connectionId: `conn-${name}`,
    userId: 'u1',
    broker: 'paper',
    environment: 'paper',
    restUrl: opts.restUrl ? opts.restUrl(sim) : sim.restUrl,
    wsUrl: sim.wsUrl,
    credentials: { name, password: opts.password ?? password },
    budget: opts.budget ?? { perMinute: 100_000, perHour: 1_000_000 },
    requestTimeoutMs: opts.requestTimeoutMs ?? 5000,
    ...(opts.guardsFor ? { guards: opts.guardsFor((created.accounts as { id: number }[]).map((a) => a.id)) } : {}),
  };
  const events: ActorEvent[] = [];
  const waiters = new Set<() => void>();
  const actor = new ConnectionActor(
    spec,
    (e) => {
      events.push(e);
      for (const w of [...waiters]) w();
    },
    quietLogger,
    { ...TEST_TUNING, ...opts.tuning },
  );
  let seen = 0;
  const h: ActorHarness = {
    sim,
    control,
    user: { userId: created.userId, name, password, accounts: created.accounts },
    spec,
    actor,
    events,
    async call(req) {
      const r = await actor.handle(req);
      if (!r.ok) throw fromErrorData(r.error);
      return r.value as never;
    },
    async callError(req) {
      const r = await actor.handle(req);
      if (r.ok) throw new Error(`expected ${req.type} to fail, got ${JSON.stringify(r.value)}`);
      return fromErrorData(r.error);
    },
    /** The next status event with this status after the previously awaited one. */
    nextStatus(status, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (let i = seen; i < events.length; i++) {
            const e = events[i]!;
            if (e.type === 'status' && e.status === status) {
              seen = i + 1;
              waiters.delete(check);
              clearTimeout(timer);
              resolve(e);
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${status} within ${timeoutMs} ms; saw ${JSON.stringify(events.filter((e) => e.type === 'status').map((e) => (e as StatusEvent).status))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async until(probe, timeoutMs = 5000) {
      const v = await actor.conn.mirror.waitFor(probe, timeoutMs);
      if (v === undefined) throw new Error('condition not reached in time');
      return v;
    },
    async close() {
      await actor.stop();
      await sim.close();
    },
  };
  return h;
}
