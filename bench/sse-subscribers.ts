/**
 * SSE fan-out subscribers: opens N health streams, reports on a MessagePort when every one
 * has its snapshot, then records the wall-clock time at which each sees its first `status`
 * event. The driver triggers the status change (a broker drop) and subtracts its own
 * wall-clock trigger time, so the measure spans thread and process boundaries.
 */
import http from 'node:http';
import type { MessagePort } from 'node:worker_threads';
import { epochNow } from './http-load.js';

/** S subscribers for one load worker. */
export interface SseTask {
  kind: 'sse';
  origin: string;
  /** Stream i authenticates with keys[i % keys.length]. */
  keys: string[];
  count: number;
  /** Streams being opened at once (a bounded ramp, not a SYN flood). */
  openConcurrency?: number;
  /** Receives `{type:'ready', open, failed}` once every stream has its snapshot (or failed). */
  port: MessagePort;
  /** After `ready`, give up waiting for the status event after this long (default 60 s). */
  waitTimeoutMs?: number;
}

/** Open/failed counts and the arrival time of each status event. */
export interface SseResult {
  kind: 'sse';
  open: number;
  failed: number;
  /** Wall-clock ms (epoch, sub-ms) at which each open stream saw its first `status` event. */
  receivedAt: number[];
  /** Open streams that never saw a status event before the deadline. */
  missing: number;
  errors: Record<string, number>;
}

/** Yields each complete SSE message's `data` payload from a byte stream. */
export function createSseParser(onData: (data: string) => void): (chunk: string) => void {
  let buffer = '';
  let heldCr = false;
  return (chunk) => {
    let text = (heldCr ? '\r' : '') + chunk;
    // A CRLF split across two chunks must stay one line break, not become two.
    heldCr = text.endsWith('\r');
    if (heldCr) text = text.slice(0, -1);
    buffer += text.replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) onData(data);
    }
  };
}

/** Opens the streams, waits for the status event, closes everything and reports. */
export async function runSseSubscribers(task: SseTask): Promise<SseResult> {
  const url = new URL(task.origin);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const errors: Record<string, number> = {};
  const requests: http.ClientRequest[] = [];
  const receivedAt: number[] = [];
  let open = 0;
  let failed = 0;
  let statusSeen = 0;
  let onAllStatus: (() => void) | undefined;

  const note = (message: string): void => {
    errors[message] = (errors[message] ?? 0) + 1;
  };

  const openOne = (i: number): Promise<void> =>
    new Promise((resolve) => {
      let settled = false;
      let sawStatus = false;
      const settle = (ok: boolean, why?: string): void => {
        if (settled) return;
        settled = true;
        if (ok) open++;
        else {
          failed++;
          if (why) note(why);
        }
        resolve();
      };
      const req = http.get(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: '/api/v1/connection-health/stream',
          headers: { accept: 'text/event-stream', 'x-api-key': task.keys[i % task.keys.length]! },
        },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            settle(false, `HTTP ${res.statusCode}`);
            return;
          }
          res.setEncoding('utf8');
          const parse = createSseParser((data) => {
            let type: unknown;
            try {
              type = (JSON.parse(data) as { type?: unknown }).type;
            } catch {
              return;
            }
            if (type === 'snapshot') settle(true);
            else if (type === 'status' && !sawStatus && settled) {
              sawStatus = true;
              receivedAt.push(epochNow());
              if (++statusSeen === open) onAllStatus?.();
            }
          });
          res.on('data', parse);
          res.on('error', (err) => settle(false, err.message));
          res.on('close', () => settle(false, 'stream closed before its snapshot'));
        },
      );
      req.on('error', (err) => settle(false, err.message));
      requests.push(req);
    });

  // Bounded ramp: at most `openConcurrency` handshakes in flight.
  const concurrency = task.openConcurrency ?? 200;
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, task.count) }, async () => {
    while (next < task.count) await openOne(next++);
  });
  await Promise.all(lanes);
  task.port.postMessage({ type: 'ready', open, failed });

  if (open > 0 && statusSeen < open) {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      onAllStatus = resolve;
      timer = setTimeout(resolve, task.waitTimeoutMs ?? 60_000);
    });
    clearTimeout(timer);
  }
  for (const req of requests) req.destroy();
  agent.destroy();
  task.port.close();
  return { kind: 'sse', open, failed, receivedAt, missing: open - receivedAt.length, errors };
}
