/**
 * `/metrics` in the Prometheus text format (prom-client), served on its own listener
 * (METRICS_HOST:METRICS_PORT, loopback by default) so it is never reachable through the API
 * port. What it measures:
 *
 * - request duration by route template, method and status (the pipeline's one exit);
 * - actor RPC duration by request type and outcome, and the broker round trip the actor
 *   reports (`brokerMs`), both recorded by a decorator around the ActorGateway;
 * - CPU time and event-loop utilisation of every thread of the service (front, each actor
 *   worker, the paper broker): the workers report theirs, read when Prometheus scrapes;
 * - SSE subscribers, idempotency replays, 429s by bucket, connections by status;
 * - the process's resident memory and the front's heap, read at each scrape.
 *
 * Hot-path cost: three Map lookups and a bucket count per request (request-histogram.ts); the
 * actor histograms' label children are cached.
 */
import { foreignHostCheck } from './host-check.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ActorCallOptions, ActorGateway, ActorRequest, ResultFor } from '../actors/protocol.js';
import { AppError, RequestNotSentError } from '../domain/problems.js';
import type { ThreadUsage } from '../thread-usage.js';
import { RequestHistogram } from './request-histogram.js';

/** One thread's usage, named as in the `thread` label (`front`, `actor-<threadId>`, `paper-broker`). */
export interface NamedThreadUsage {
  thread: string;
  usage: ThreadUsage;
}

/** What the registry reads when it is scraped. */
export interface MetricsSources {
  /** Every thread of the service, the front first. */
  threads(): Promise<NamedThreadUsage[]>;
  sseSubscribers(): number;
  /** Connections by status (CONNECTED, RECONNECTING, …). */
  connectionStatuses(): Record<string, number>;
}

/** Seconds: from 50 µs (a cached read) to 30 s (a broker deadline). */
const LATENCY_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

type Observer = { observe(value: number): void };

/** The service's metrics (one per server). */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly requestDuration: RequestHistogram;
  private readonly actorRpc: Histogram<'type' | 'outcome'>;
  private readonly brokerRoundTrip: Histogram<'type'>;
  private readonly replays: Counter;
  private readonly rateLimited: Counter<'bucket'>;
  private readonly children = new Map<string, Observer>();
  private sources: MetricsSources | undefined;
  private readonly lastLoop = new Map<string, { active: number; idle: number }>();

  constructor() {
    const registers = [this.registry];
    this.requestDuration = new RequestHistogram(
      'tradegate_http_request_duration_seconds',
      'HTTP requests from arrival to the answer, by route template, method and status',
      LATENCY_BUCKETS,
      this.registry,
    );
    this.actorRpc = new Histogram({
      name: 'tradegate_actor_rpc_duration_seconds',
      help: 'Front-to-actor requests from send to answer, by request type and outcome (ok or the error code)',
      labelNames: ['type', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.brokerRoundTrip = new Histogram({
      name: 'tradegate_broker_round_trip_seconds',
      help: 'Broker round trip of trading requests as the actor measured it (request sent to answer)',
      labelNames: ['type'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.replays = new Counter({ name: 'tradegate_idempotency_replays_total', help: 'Answers replayed from an idempotency record', registers });
    this.rateLimited = new Counter({
      name: 'tradegate_rate_limited_total',
      help: 'Requests answered 429 by a rate limiter, by bucket (key, webhook, failed-auth)',
      labelNames: ['bucket'],
      registers,
    });
    const metrics = this;
    // The process's memory, read when scraped (no sampling timer on the front thread, as
    // prom-client's default metrics would start): for watching growth under load.
    new Gauge({
      name: 'process_resident_memory_bytes',
      help: 'Resident memory of the whole service process (every thread), in bytes',
      registers,
      collect() {
        this.set(process.memoryUsage.rss());
      },
    });
    new Gauge({
      name: 'nodejs_heap_size_used_bytes',
      help: 'V8 heap in use on the front thread, in bytes (workers have heaps of their own)',
      registers,
      collect() {
        this.set(process.memoryUsage().heapUsed);
      },
    });
    new Gauge({
      name: 'nodejs_external_memory_bytes',
      help: 'Memory of objects outside the V8 heap bound to it (buffers), in bytes',
      registers,
      collect() {
        this.set(process.memoryUsage().external);
      },
    });
    new Gauge({
      name: 'tradegate_sse_subscribers',
      help: 'Open health-stream (SSE) subscribers',
      registers,
      collect() {
        if (metrics.sources) this.set(metrics.sources.sseSubscribers());
      },
    });
    new Gauge({
      name: 'tradegate_connections',
      help: 'Broker connections by status',
      labelNames: ['status'],
      registers,
      collect() {
        if (!metrics.sources) return;
        this.reset();
        for (const [status, n] of Object.entries(metrics.sources.connectionStatuses())) this.set({ status }, n);
      },
    });
    // The four thread families are filled from one reading of every thread per scrape: the
    // registry collects families concurrently, so each awaits the same snapshot.
    new Counter({
      name: 'tradegate_thread_cpu_seconds_total',
      help: 'CPU time of each service thread (front, actor-<threadId>, paper-broker)',
      labelNames: ['thread'],
      registers,
      async collect() {
        this.reset();
        for (const { thread, usage } of await metrics.threadSnapshot()) this.inc({ thread }, usage.cpuMs / 1000);
      },
    });
    new Counter({
      name: 'tradegate_thread_event_loop_active_seconds_total',
      help: 'Time each thread spent running callbacks (event-loop active time)',
      labelNames: ['thread'],
      registers,
      async collect() {
        this.reset();
        for (const { thread, usage } of await metrics.threadSnapshot()) this.inc({ thread }, usage.loopActiveMs / 1000);
      },
    });
    new Gauge({
      name: 'tradegate_thread_event_loop_utilization',
      help: 'Event-loop utilisation of each thread since the previous scrape (0..1)',
      labelNames: ['thread'],
      registers,
      async collect() {
        this.reset();
        for (const { thread, usage } of await metrics.threadSnapshot()) this.set({ thread }, metrics.utilisation(thread, usage));
      },
    });
    new Gauge({
      name: 'tradegate_thread_info',
      help: 'Thread names, Node thread ids (as in --cpu-prof file names) and kernel tids; cpu_source proc = measured, elu = event-loop time stands in',
      labelNames: ['thread', 'thread_id', 'tid', 'cpu_source'],
      registers,
      async collect() {
        this.reset();
        for (const { thread, usage } of await metrics.threadSnapshot()) {
          this.set({ thread, thread_id: String(usage.threadId), tid: String(usage.tid), cpu_source: usage.cpuSource }, 1);
        }
      },
    });
  }

  private snapshot: Promise<NamedThreadUsage[]> | undefined;

  /** Every thread's usage, read once per scrape however many families ask. */
  private threadSnapshot(): Promise<NamedThreadUsage[]> {
    if (!this.sources) return Promise.resolve([]);
    if (!this.snapshot) {
      this.snapshot = this.sources.threads();
      const clear = (): void => void setImmediate(() => (this.snapshot = undefined));
      this.snapshot.then(clear, clear);
    }
    return this.snapshot;
  }

  /** Connects the scrape-time sources (the server's hub and gateway, serve's threads). */
  attach(sources: MetricsSources): void {
    this.sources = sources;
  }

  /** Records one finished request. */
  request(route: string, method: string, status: number, seconds: number): void {
    this.requestDuration.observe(route, method, status, seconds);
  }

  /** Records one actor RPC (and the broker round trip it reports). */
  actorCall(type: string, outcome: string, seconds: number, brokerMs: number | undefined): void {
    this.child(this.actorRpc, `rpc ${type} ${outcome}`, { type, outcome }).observe(seconds);
    if (brokerMs !== undefined) this.child(this.brokerRoundTrip, `broker ${type}`, { type }).observe(brokerMs / 1000);
  }

  /** An answer was replayed from its idempotency record. */
  replayed(): void {
    this.replays.inc();
  }

  /** A request was answered 429 by the limiter of `bucket`. */
  limited(bucket: string): void {
    this.rateLimited.inc({ bucket });
  }

  /** The text exposition. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  private child<L extends string>(h: Histogram<L>, key: string, labels: Record<L, string>): Observer {
    let c = this.children.get(key);
    if (!c) this.children.set(key, (c = h.labels(labels)));
    return c;
  }

  /** Event-loop utilisation of `thread` since the previous scrape. */
  utilisation(thread: string, u: ThreadUsage): number {
    const last = this.lastLoop.get(thread) ?? { active: 0, idle: 0 };
    this.lastLoop.set(thread, { active: u.loopActiveMs, idle: u.loopIdleMs });
    const active = u.loopActiveMs - last.active;
    const total = active + (u.loopIdleMs - last.idle);
    return total > 0 ? Math.max(0, Math.min(1, active / total)) : 0;
  }
}

/**
 * The gateway with every request timed (actor RPC duration, broker round trip). A decorator,
 * so every ActorGateway implementation (local supervisor, cluster routing) is measured alike.
 */
export function measuredGateway(gateway: ActorGateway, metrics: ServiceMetrics): ActorGateway {
  return {
    addConnection: (spec, opts) => gateway.addConnection(spec, opts),
    removeConnection: (id) => gateway.removeConnection(id),
    // Not an actor call: nothing to measure.
    keptPage: (id, accountId, offset, limit) => gateway.keptPage?.(id, accountId, offset, limit),
    // Kept optional: without it the webhook route keeps the turns itself (one process).
    ...(gateway.takeTurn && { takeTurn: gateway.takeTurn.bind(gateway) }),
    status: (id) => gateway.status(id),
    accounts: (id) => gateway.accounts(id),
    onEvent: (listener) => gateway.onEvent(listener),
    close: () => gateway.close(),
    async request<R extends ActorRequest>(connectionId: string, req: R, opts?: ActorCallOptions): Promise<ResultFor<R>> {
      const t0 = performance.now();
      try {
        const result = await gateway.request(connectionId, req, opts);
        const brokerMs = (result as { brokerMs?: unknown } | null)?.brokerMs;
        metrics.actorCall(req.type, 'ok', (performance.now() - t0) / 1000, typeof brokerMs === 'number' && brokerMs > 0 ? brokerMs : undefined);
        return result;
      } catch (err) {
        metrics.actorCall(req.type, err instanceof AppError ? err.code : err instanceof RequestNotSentError ? 'NOT_SENT' : 'INTERNAL', (performance.now() - t0) / 1000, undefined);
        throw err;
      }
    },
  };
}

/** A running metrics listener. */
export interface MetricsListener {
  port: number;
  url: string;
  close(): Promise<void>;
}

/** Serves `GET /metrics` on host:port (0 = a free port). */
export async function startMetricsListener(metrics: ServiceMetrics, host: string, port: number): Promise<MetricsListener> {
  // On loopback (the default), only requests that name it: a DNS-rebound page could read it otherwise (host-check.ts).
  const foreignHost = foreignHostCheck(host, undefined);
  const server: Server = createServer((req, res) => {
    if (foreignHost?.(req.headers.host)) {
      res.writeHead(421, { 'content-type': 'text/plain', connection: 'close' }).end('the Host header does not name this listener\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found; try /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('use GET\n');
      return;
    }
    metrics.text().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    port: bound,
    url: `http://${shown}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
