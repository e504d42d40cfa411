/**
 * pino with redaction. Secrets must never reach a log line: API keys, passwords, webhook
 * tokens, broker access tokens. Redaction works on paths, so code logs structured objects
 * and never interpolates secrets into messages; `redactUrl` strips tokens from URLs.
 */
import { isMainThread } from 'node:worker_threads';
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

const SECRET_KEYS = [
  'x-api-key',
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'apiKey',
  'key',
  'secret',
  'token',
  'webhookToken',
  'accessToken',
  'mdAccessToken',
  'sec',
  'p-ticket',
  'dataKey',
];

/** Redaction paths: each secret name at the top level and one or two levels deep. */
export const REDACT_PATHS = SECRET_KEYS.flatMap((k) => {
  const plain = /^[A-Za-z_$][\w$]*$/.test(k);
  const top = plain ? k : `["${k}"]`;
  const nested = plain ? `.${k}` : `["${k}"]`;
  return [top, `*${nested}`, `*.*${nested}`];
});

/**
 * How the main thread's lines reach stdout: gathered up to `bufferBytes` and written together,
 * and whatever is gathered written every `flushMs` (and at exit, which pino does for a buffered
 * destination of the main thread). Written one by one, every access line of a busy front was a
 * write handed to libuv's thread pool and its completion back. A process killed outright
 * (SIGKILL) loses at most the last `flushMs` of lines.
 */
export const LOG_OUTPUT = { bufferBytes: 4096, flushMs: 200, maxBufferedBytes: 16 * 1024 * 1024, stopWaitMs: 5000 } as const;

/**
 * Standard output that takes nothing more (a log pipe nobody reads: a stalled collector) must
 * neither grow the process without bound nor keep it from ending (load probe: after SIGTERM the
 * service stopped listening but never exited, its last lines retried every 100 ms for good, and
 * `process.exit` hung in pino's flush at exit). While it runs, lines past `maxBufferedBytes`
 * waiting to be written are dropped; once it is stopping, lines that could not be written for
 * `stopWaitMs` are given up. (Linux frees a pipe's space a page at a time: a reader of 1 KB/s
 * lets the writer in every ~4 s, and a 2 s bound cut its last lines, `stopped` among them.)
 */
let stoppingAt: number | undefined;
let stalledSince: number | undefined;
let stalledBytes = Number.POSITIVE_INFINITY;

/** The process is stopping (a signal, or its exit): from now on a stalled output is waited for at most LOG_OUTPUT.stopWaitMs. */
export function logOutputStopping(): void {
  stoppingAt ??= Date.now();
}

/** sonic-boom's `retryEAGAIN`: always while running; once stopping, while the output took something in the last stopWaitMs. */
function retryStalledWrite(_err: Error, writing: number, waiting: number): boolean {
  if (stoppingAt === undefined) return true;
  const now = Date.now();
  const bytes = writing + waiting;
  if (stalledSince === undefined || bytes < stalledBytes) stalledSince = now;
  stalledBytes = bytes;
  return now - stalledSince < LOG_OUTPUT.stopWaitMs;
}

const stalled = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code === 'EAGAIN' || (err as NodeJS.ErrnoException | undefined)?.code === 'EBUSY';

/** The main thread's batched stdout (LOG_OUTPUT), which a stalled reader cannot hold up for good. */
function bufferedStdout(): pino.DestinationStream {
  // Before pino's own flush at exit (registered as the destination is made): it runs bounded too.
  if (process.listeners('exit').indexOf(logOutputStopping) === -1) process.once('exit', logOutputStopping);
  const dest = pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_OUTPUT.bufferBytes,
    periodicFlush: LOG_OUTPUT.flushMs,
    maxLength: LOG_OUTPUT.maxBufferedBytes,
    retryEAGAIN: retryStalledWrite,
  });
  // Given up (stopping, stalled): the lines still waiting are dropped, not thrown. (A closed pipe,
  // EPIPE, pino handles itself: logging stops.)
  dest.on('error', (err: unknown) => {
    if (!stalled(err) && (err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
  });
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => {
    try {
      flushSync();
    } catch (err) {
      if (!stalled(err)) throw err;
    }
  };
  return dest;
}

/** Creates the process logger. `destination` exists for tests that capture output. */
export function createLogger(
  level: LevelWithSilent = 'info',
  destination?: NodeJS.WritableStream,
  bindings: Record<string, unknown> = {},
): Logger {
  const options = {
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: isoTime,
  };
  if (destination) return pino(options, destination as pino.DestinationStream);
  // A worker thread's buffer would not be written at its exit: its lines go out one by one.
  if (!isMainThread) return pino(options);
  return pino(options, bufferedStdout());
}

let isoAt = Number.NaN;
let isoField = '';

/**
 * pino's `isoTime`, formatted once per millisecond: `toISOString` on every line was the largest
 * single item of the front's JavaScript on a cached read (7 % in V8's profile).
 */
export function isoTime(): string {
  const now = Date.now();
  if (now !== isoAt) {
    isoAt = now;
    isoField = `,"time":"${new Date(now).toISOString()}"`;
  }
  return isoField;
}

type LogStream = { write(text: string): unknown; flush?(cb?: (err?: Error) => void): void };

function streamOf(logger: Logger): LogStream {
  return (logger as unknown as Record<symbol, LogStream>)[pino.symbols.streamSym]!;
}

/**
 * Prints text for people (serve's banner, "stopped") on the logger's own output and sends it now:
 * written beside the buffered log lines it would overtake them ("stopped" before the lines of
 * the shutdown).
 */
export function printOut(logger: Logger, text: string): void {
  const stream = streamOf(logger);
  stream.write(text);
  stream.flush?.();
}

/** One request's access line (pipeline.ts `logLine`). */
export interface AccessFields {
  reqId: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  principal?: string | undefined;
}

/**
 * Writes access lines at info level to `logger`'s destination, byte for byte as
 * `logger.info(fields, 'request')` would (its bindings, its clock), without pino's generic
 * serialiser, which was a fifth of a cached read's JavaScript with the line's garbage. Nothing
 * in the fields is secret (the path comes through `redactUrl`), so there is no redaction pass.
 * Silent below info.
 */
export function accessLineWriter(logger: Logger): (fields: AccessFields) => void {
  const stream = streamOf(logger);
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] ?? '';
  const time = (logger as unknown as Record<symbol, () => string>)[pino.symbols.timeSym] ?? isoTime;
  const head = `{"level":${pino.levels.values.info}`;
  return (f) => {
    if (!logger.isLevelEnabled('info')) return;
    let line = `${head}${time()}${bindings},"reqId":${JSON.stringify(f.reqId)},"method":${JSON.stringify(f.method)},"path":${JSON.stringify(f.path)},"status":${f.status},"ms":${f.ms}`;
    if (f.principal !== undefined) line += `,"principal":${JSON.stringify(f.principal)}`;
    stream.write(`${line},"msg":"request"}\n`);
  };
}

const WEBHOOK_TOKEN = /whk_[A-Za-z0-9]+_[A-Za-z0-9]+/g;
const API_KEY = /tgk_[A-Za-z0-9]+_[A-Za-z0-9]+/g;
/** What a path must contain for redactUrl to look closer (an escape may spell any of them). */
const SUSPECT = /%|whk_|tgk_|webhooks/i;

function decodeSegment(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Replaces webhook tokens and API keys inside a URL or path with a marker, however the path
 * spells them: the router decodes every segment (`/webhooks/%77hk_…` and `whk%5F…` authenticate),
 * so segments are decoded here too, and everything after a `webhooks` segment is redacted
 * whatever it looks like. A path with nothing to redact is returned as it came.
 */
export function redactUrl(url: string): string {
  // Most paths hold none of it: one regex test.
  if (!SUSPECT.test(url)) return url;
  let redacted = false;
  let afterWebhooks = false;
  const parts = url.split('/').map((raw) => {
    const segment = decodeSegment(raw);
    if (afterWebhooks && segment !== '') {
      redacted = true;
      return segment.startsWith('whk_') ? 'whk_[redacted]' : '[redacted]';
    }
    if (segment.toLowerCase() === 'webhooks') afterWebhooks = true;
    const out = segment.replace(WEBHOOK_TOKEN, 'whk_[redacted]').replace(API_KEY, 'tgk_[redacted]');
    if (out === segment) return raw;
    redacted = true;
    return out;
  });
  return redacted ? parts.join('/') : url;
}
