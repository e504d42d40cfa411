/**
 * The whole service in-process, wired as `tradegate serve` wires it: a real LMDB store, the
 * actor supervisor with its worker threads, the HTTP front on a loopback port, and a paper
 * broker on loopback with one user and its accounts — plus what a process cannot offer: the
 * actors' clock is a fake shared with the test (tuning.fakeClock), and `restart()` stops the
 * front and the actors and starts them again on the reopened store (the broker keeps running).
 */
import { connectionSpecFor } from '../../src/actors/connection-spec.js';
import { createSupervisor, type Supervisor } from '../../src/actors/supervisor.js';
import { configSchema } from '../../src/config.js';
import { buildRoutes } from '../../src/http/routes/index.js';
import { startHttpServer, type HttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/log.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { accountGuardsOf } from '../../src/store/guards.js';
import type { Store } from '../../src/store/index.js';
import type { ConnectionTuning } from '../../src/tuning.js';
import type { ConnectionSpec } from '../../src/domain/connections.js';
import { eventually, http, type Reply } from './http.js';
import { control } from './sim.js';
import { tempStore, type TempStore } from './store.js';

export interface InProcessService {
  url: string;
  sim: SimHandle;
  store: Store;
  gateway: Supervisor;
  apiKey: string;
  userId: string;
  connectionId: string;
  /** The broker login (to trade at the broker directly, as a user on another platform would). */
  login: { name: string; password: string };
  accounts: string[];
  /** Sets the actors' clock (ms since the epoch); 0 = the real clock. */
  setClock(ms: number): void;
  api(method: string, path: string, body?: unknown, key?: string): Promise<Reply>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

/** Starts the service in-process with one user, an API key and a paper connection with `accounts`. */
export async function startInProcessService(
  opts: { accounts?: string[]; tuning?: Partial<ConnectionTuning>; spec?: Partial<ConnectionSpec>; sim?: { maxSessionsPerUser?: number } } = {},
): Promise<InProcessService> {
  const sim = await startSim({ priceStepMs: 0, heartbeatMs: 500, ...opts.sim });
  const t: TempStore = await tempStore({ clock: Date.now });
  const clock = new BigInt64Array(new SharedArrayBuffer(8));
  const logger = createLogger('silent');
  const name = `svc${++counter}_${process.pid}`;
  const password = 'pw-secret-1';
  const created = await control(sim, 'POST', '/users', { name, password, accounts: (opts.accounts ?? ['A1', 'A2']).map((a) => ({ name: `${a}_${name}` })) });
  const user = await t.store.users.create({ name: 'trader' });
  const key = await t.store.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read', 'trade'] });
  const record = await t.store.connections.create({
    userId: user.id, name: 'Paper', broker: 'paper', environment: 'paper', restUrl: sim.restUrl, wsUrl: sim.wsUrl, credentials: { name, password },
  });
  const config = Object.freeze(
    configSchema.parse({ port: 0, host: '127.0.0.1', dataDir: t.dir, logLevel: 'silent', rateLimitPerMin: 100_000, webhookRateLimitPerMin: 100_000 }),
  );
  const tuning: Partial<ConnectionTuning> = { backoffBaseMs: 100, backoffMaxMs: 1000, settleMs: 3000, accountPollMs: 0, guardTickMs: 25, fakeClock: clock, ...opts.tuning };

  let gateway!: Supervisor;
  let server!: HttpServer;
  const up = async () => {
    const store = t.store;
    gateway = createSupervisor({ threadsMax: 2, logger, tuning, guards: (userId) => accountGuardsOf(store, userId) });
    let listening: string | undefined;
    server = await startHttpServer({ config, store, gateway, routes: buildRoutes({ config, store, gateway, listenUrl: () => listening }), logger });
    listening = server.url;
    await gateway.addConnection({ ...connectionSpecFor(record, store.connections.credentials(record.id)), ...opts.spec });
    await eventually(async () => gateway.status(record.id)?.status === 'CONNECTED' && gateway.accounts(record.id).length > 0, 'connection CONNECTED', 15_000);
  };
  const down = async () => {
    await server.close({ graceMs: 1000 });
    await gateway.close();
  };
  await up();

  const s: InProcessService = {
    get url() {
      return server.url;
    },
    sim,
    get store() {
      return t.store;
    },
    get gateway() {
      return gateway;
    },
    apiKey: key.key,
    userId: user.id,
    connectionId: record.id,
    login: { name, password },
    accounts: (created.accounts as { id: number }[]).map((a) => String(a.id)),
    setClock(ms) {
      Atomics.store(clock, 0, BigInt(Math.round(ms)));
    },
    api: (method, path, body, apiKey = key.key) => http(server.url, method, path, { key: apiKey, ...(body !== undefined ? { body } : {}) }),
    async restart() {
      await down();
      await t.reopen();
      await up();
    },
    async close() {
      await down();
      await sim.close();
      await t.cleanup();
    },
  };
  return s;
}
