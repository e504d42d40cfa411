/**
 * Open-loop HTTP load: one schedule over a list of request templates (arrival i uses
 * template i mod n), keep-alive raw sockets with pre-serialised requests (raw-http.ts),
 * per-(tag, status) latency histograms. Runs inside a piscina worker (see load-worker.ts) so
 * the driver never shares a thread with it.
 */
import { encodeHistogram, type Histogram } from './hdr.js';
import { runOpenLoop } from './open-loop.js';
import { RawHttpPool, requestBytes } from './raw-http.js';

/** One request shape. `{{seq}}` in the path, headers or body becomes a run-unique id. */
export interface HttpRequestSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Histogram label prefix, e.g. `order`, `order-idem`, `over-limit`. */
  tag: string;
  /** Return every answer (parsed JSON body; status 0 for transport errors and timeouts) to the driver. */
  collect?: boolean;
  /** Opaque value echoed in the collected answer (e.g. which key or token sent it). */
  meta?: string;
}

/** One open-loop HTTP schedule for a load worker. */
export interface HttpLoadTask {
  kind: 'http';
  /** e.g. http://127.0.0.1:8080 */
  origin: string;
  ratePerSec: number;
  durationMs?: number;
  count?: number;
  /** Wall-clock time (ms since the epoch) of arrival 0, so several workers share one schedule. */
  startAtEpochMs?: number;
  requests: HttpRequestSpec[];
  /** Makes `{{seq}}` unique across workers and runs. */
  uniquePrefix: string;
  /** Per-request deadline; a request past it is recorded as `<tag>:timeout`. */
  timeoutMs?: number;
  drainTimeoutMs?: number;
  maxSockets?: number;
}

/** An answer returned for correctness checks (`status` 0: no HTTP answer). */
export interface CollectedResponse {
  tag: string;
  status: number;
  seq: string;
  meta?: string;
  /** `idempotent-replayed` response header, when present. */
  replayed?: boolean;
  body: unknown;
}

/** What an HTTP schedule returns to the driver (histograms encoded). */
export interface HttpLoadResult {
  kind: 'http';
  /** `<tag>:<status>` (or `<tag>:error` / `<tag>:timeout`) → encoded latency histogram (µs). */
  histograms: Record<string, string>;
  sendLag: string;
  sent: number;
  completed: number;
  timedOut: number;
  /** Error messages of failed requests (connection refused, reset, …) with counts. */
  errors: Record<string, number>;
  collected: CollectedResponse[];
  /** First arrival to last completion. */
  elapsedMs: number;
  /** Sockets the schedule opened, and the most requests it had in flight at once. */
  sockets: number;
  peakInFlight: number;
}

/** Converts a wall-clock time to this thread's performance.now() timeline. */
export function epochToMonotonic(epochMs: number): number {
  return epochMs - performance.timeOrigin;
}

/** Current wall-clock time with sub-millisecond resolution (comparable across threads). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

function fill(template: string, seq: string): string {
  return template.includes('{{seq}}') ? template.replaceAll('{{seq}}', seq) : template;
}

/** Runs the schedule and returns serialized histograms and collected bodies. */
export async function runHttpLoad(task: HttpLoadTask): Promise<HttpLoadResult> {
  if (task.requests.length === 0) throw new RangeError('requests must not be empty');
  const url = new URL(task.origin);
  const pool = new RawHttpPool(url.hostname, Number(url.port || 80), task.maxSockets ?? 512, 'idempotent-replayed');
  const timeoutMs = task.timeoutMs ?? 30_000;
  const errors: Record<string, number> = {};
  const collected: CollectedResponse[] = [];
  // Pre-serialised: a template without {{seq}} is the same bytes every time.
  const fixed = task.requests.map((spec) =>
    /\{\{seq\}\}/.test(`${spec.path}${JSON.stringify(spec.headers ?? {})}${spec.body ?? ''}`) ? undefined : bytesOf(spec, url.host, ''),
  );

  const send = (index: number): Promise<string> => {
    const j = index % task.requests.length;
    const spec = task.requests[j]!;
    const seq = `${task.uniquePrefix}-${index}`;
    const payload = fixed[j] ?? bytesOf(spec, url.host, seq);
    return new Promise<string>((settle) => {
      let done = false;
      const finish = (label: string): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        settle(label);
      };
      const collect = (status: number, body: unknown, replayed = false): void => {
        if (spec.collect) collected.push({ tag: spec.tag, status, seq, meta: spec.meta, replayed, body });
      };
      // The deadline runs from the send, so time spent queued for a free socket counts too.
      const timer = setTimeout(() => {
        if (done) return;
        collect(0, { error: 'timeout' });
        finish(`${spec.tag}:timeout`);
      }, timeoutMs);
      pool.request(payload, !!spec.collect).then(
        (answer) => {
          if (done) return;
          if (spec.collect) {
            const text = answer.body?.toString('utf8') ?? '';
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON: keep the text
            }
            collect(answer.status, parsed, answer.header === 'true');
          }
          finish(`${spec.tag}:${answer.status}`);
        },
        (err: Error) => {
          if (done) return;
          const key = err.message || err.name;
          errors[key] = (errors[key] ?? 0) + 1;
          collect(0, { error: key });
          finish(`${spec.tag}:error`);
        },
      );
    });
  };

  const result = await runOpenLoop({
    ratePerSec: task.ratePerSec,
    count: task.count,
    durationMs: task.durationMs,
    startAt: task.startAtEpochMs === undefined ? undefined : epochToMonotonic(task.startAtEpochMs),
    drainTimeoutMs: task.drainTimeoutMs ?? timeoutMs + 5_000,
    send,
  });
  // Nothing may keep sending after the phase: a request still queued would hit the next one.
  pool.destroy();
  return {
    kind: 'http',
    histograms: encodeAll(result.histograms),
    sendLag: encodeHistogram(result.sendLag),
    sent: result.sent,
    completed: result.completed,
    timedOut: result.timedOut,
    errors,
    collected,
    elapsedMs: result.finishedAt - result.startedAt,
    sockets: pool.socketsOpened,
    peakInFlight: pool.peakInFlight,
  };
}

function bytesOf(spec: HttpRequestSpec, host: string, seq: string): Buffer {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(spec.headers ?? {})) headers[k] = fill(v, seq);
  const body = spec.body === undefined ? undefined : Buffer.from(fill(spec.body, seq));
  return requestBytes(spec.method, fill(spec.path, seq), host, headers, body);
}

/** Encodes a label → histogram map for posting across threads. */
export function encodeAll(histograms: Map<string, Histogram>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [label, h] of histograms) out[label] = encodeHistogram(h);
  return out;
}
