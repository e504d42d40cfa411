/**
 * The health stream (DESIGN §8), both ends of it: the bridge that turns actor events into
 * messages on their owner's streams, and `GET /connection-health/stream`, which opens an SSE
 * stream on a uWS response, writes `retry:` and either the resumed messages (Last-Event-ID
 * inside the ring) or one `snapshot` per connection the user owns, then hands the stream to
 * the hub.
 *
 * Everything from the cap check to `subscribe` runs synchronously in one turn, so no
 * event can slip between the snapshot and the subscription.
 */
import { z } from 'zod';
import { printable } from '../domain/plain-text.js';
import type { ActorGateway } from '../actors/protocol.js';
import type { ConnectionStatus } from '../domain/connections.js';
import { AppError } from '../domain/problems.js';
import type { HealthHub, SseHub, SseSink, SseSubscription } from './sse-hub.js';
import { formatRetry, formatSseEvent, parseLastEventId, statusMessage, type ConnectionStatusMessage, type GapMessage } from './sse.js';
import type { ResponseHandle } from './respond.js';
import { statusLine } from './respond.js';
import { defineRoute, type AuthContext } from './route-types.js';

/** The slice of the store the stream reads. */
export interface StreamStore {
  connections: {
    listByUser(userId: string): readonly { id: string; disabled?: boolean }[];
  };
}

/** The slice of the store the bridge reads: who owns a connection. */
export interface OwnerStore {
  connections: {
    byId(connectionId: string): { userId: string } | undefined;
  };
}

/**
 * Publishes status, bracket-alert and guard events to the streams of the connection's owner
 * (with their cluster-wide id in cluster mode); returns the unsubscribe function. Owners are
 * cached per connection, and the entry is dropped when
 * the connection is removed (DISABLED) or started afresh (CONNECTING on `connect`, as a re-added
 * connection is), so a connection that comes back under another user reports to that user.
 */
export function bridgeActorEvents(gateway: Pick<ActorGateway, 'onEvent'>, store: OwnerStore, hub: Pick<SseHub, 'publish'>): () => void {
  const owners = new Map<string, string>();
  const ownerOf = (connectionId: string): string | undefined => {
    let owner = owners.get(connectionId);
    if (!owner) {
      owner = store.connections.byId(connectionId)?.userId;
      if (owner) owners.set(connectionId, owner);
    }
    return owner;
  };
  return gateway.onEvent((event, id) => {
    if (event.type === 'accounts') return;
    const lifecycle = event.type === 'status' ? event : undefined;
    if (lifecycle?.status === 'CONNECTING' && lifecycle.reason === 'connect') owners.delete(event.connectionId);
    const userId = ownerOf(event.connectionId);
    if (userId) hub.publish(userId, event, id);
    if (lifecycle?.status === 'DISABLED') owners.delete(event.connectionId);
  });
}

/** The `gap` message of a resume that cannot be exact (GapMessage). */
function gapMessage(lastId: string, ts: number): GapMessage {
  return {
    type: 'gap',
    lastEventId: printable(lastId, 32),
    ts,
    detail:
      'messages after this Last-Event-ID are no longer kept (a client far behind, or a service restart): the snapshots give every ' +
      'connection’s status now; guard actions in between are not repeated (GET …/guards and the orders show the state); the bracket alerts this process raised in the last 15 minutes are sent again (those from before a restart are not; on connecting, the actors report again every position whose bracket legs have all ended)',
  };
}

const healthStreamQuerySchema = z.strictObject({
  lastEventId: z.string().max(32).optional().describe('Last-Event-ID for clients that cannot send the header on a reconnect (EventSource polyfills); the header wins'),
  user: z
    .string()
    .max(64)
    .optional()
    .describe(
      'The id of the user the client acts for (what X-Tradegate-User says on other requests, which EventSource cannot send): a stream the credential opens for another user is refused 401. ' +
        'The web app sends it: the browser reopens a dropped stream by itself with the cookie it holds then, which may be another user\'s',
    ),
});

/** The route-table entry (auth, rate limit and /api-docs treat it like any route). */
export const HEALTH_STREAM_ROUTE = defineRoute({
  method: 'GET',
  path: '/connection-health/stream',
  scope: 'read',
  operationId: 'streamConnectionHealth',
  summary: 'Server-sent events: broker connection health',
  description:
    'Send `Accept: text/event-stream`. On open: `retry: 3000`, then one `snapshot` per connection you own, ' +
    'then a `status` message on every change and a `heartbeat` every SSE_HEARTBEAT_MS. Each message is ' +
    '`id: <seq>` + `data: <json>`. Reconnect with `Last-Event-ID` (or `?lastEventId=`) to resume; when the id is too old (or ' +
    'from before a restart) you get a `gap` message and fresh snapshots. At most SSE_MAX_STREAMS_PER_KEY streams per key (429 TOO_MANY_STREAMS beyond). ' +
    'A client that stops reading is cut once its buffer passes a bound; it resumes with Last-Event-ID. ' +
    'Risk guards report `{"type":"guard","accountId","guard","action","ts","detail"}` when they refuse an entry, lock or unlock an ' +
    'account, or flatten it (`action`: refused, locked, unlocked, flattened, flatten-failed).',
  tags: ['health'],
  query: healthStreamQuerySchema,
  responses: [
    { status: 200, description: 'text/event-stream of snapshot, status, heartbeat, bracket-alert, guard, gap and revoked messages' },
    { status: 429, description: 'TOO_MANY_STREAMS: SSE_MAX_STREAMS_PER_KEY streams of this key are open (Retry-After: 5); RATE_LIMITED: the key’s request rate' },
  ],
  handler: async () => {
    throw new Error('the health stream is served by the pipeline (openHealthStream), not a route handler');
  },
});

export interface HealthStreamDeps {
  hub: HealthHub;
  store: StreamStore;
  gateway: Pick<ActorGateway, 'status'>;
  maxStreamsPerKey: number;
  clock: () => number;
  /** Cluster mode: what a stream resumed while the node cannot reach NATS also gets (ReachNotices). */
  resumeNotices?(userId: string, connectionIds: readonly string[]): string[];
}

/** The headers of a health stream (no proxy buffering, no caching); the charset said, as python requests decoded it as ISO-8859-1 without (clients probe). */
export const SSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });

/** Retry-After of TOO_MANY_STREAMS: a slot frees only when one of the key's streams ends. */
export const TOO_MANY_STREAMS_RETRY_S = 5;

/** Opens one stream; throws TOO_MANY_STREAMS before anything is written. */
export function openHealthStream(
  deps: HealthStreamDeps,
  handle: ResponseHandle,
  auth: AuthContext,
  headers: Readonly<Record<string, string>>,
  responseHeaders: Record<string, string>,
  lastEventIdParam?: string,
): void {
  const { hub } = deps;
  if (hub.streamsOf(auth.principalId) >= deps.maxStreamsPerKey) {
    throw new AppError(
      'TOO_MANY_STREAMS',
      `At most ${deps.maxStreamsPerKey} concurrent streams per API key`,
      { limit: deps.maxStreamsPerKey },
      TOO_MANY_STREAMS_RETRY_S,
    );
  }
  if (!handle.open) return;
  // The header, or `?lastEventId=` (EventSource polyfills that cannot set headers on a reconnect).
  const lastIdText = headers['last-event-id'] ?? lastEventIdParam;
  const lastId = parseLastEventId(lastIdText);
  let frames = lastId !== undefined ? hub.resume(auth.userId, lastId) : undefined;
  if (frames && deps.resumeNotices) frames.push(...deps.resumeNotices(auth.userId, deps.store.connections.listByUser(auth.userId).map((c) => c.id)));
  if (!frames) {
    const id = hub.currentId(auth.userId);
    // Recent bracket alerts first (their own, older ids), then the snapshots: the last id the client sees is the current one.
    frames = hub.recentAlerts(auth.userId);
    for (const c of deps.store.connections.listByUser(auth.userId)) frames.push(formatSseEvent(id, snapshot(deps, c)));
    // Any id given (a garbled one too) means the client had messages: say what it may have missed.
    if (lastIdText !== undefined) frames.unshift(formatSseEvent(id, gapMessage(lastIdText, deps.clock())));
  }

  handle.finished = true;
  writeStreamHead(handle.res, responseHeaders);
  const sub = hub.subscribe(auth.userId, auth.principalId, new UwsSink(handle.res));
  listen(handle, sub);
  sub.send(formatRetry() + frames.join(''));
}

/** The status line and headers of a stream. */
function writeStreamHead(res: ResponseHandle['res'], responseHeaders: Readonly<Record<string, string>>): void {
  res.cork(() => {
    res.writeStatus(statusLine(200));
    for (const name in responseHeaders) if (!Object.hasOwn(SSE_HEADERS, name)) res.writeHeader(name, responseHeaders[name]!);
    for (const name in SSE_HEADERS) res.writeHeader(name, SSE_HEADERS[name]!);
  });
}

/**
 * The stream's abort callback, made here: a closure keeps its whole scope alive as long as it
 * lives (hours), and this scope holds only the subscription, not the request's headers.
 */
function listen(handle: ResponseHandle, sub: SseSubscription): void {
  handle.onAbort(() => sub.unsubscribe());
}

/**
 * A stream's uWS transport: one object with prototype methods (an open stream is held for
 * hours, ten thousand of them at once, so per-stream closures count).
 */
/** An SSE comment line written behind every message (see UwsSink.write). */
const CHUNK_CLOSER = ':\n';

class UwsSink implements SseSink {
  constructor(private readonly res: ResponseHandle['res']) {}

  write(chunk: string): boolean {
    let ok = false;
    this.res.cork(() => {
      // uWS (20.30) sends a chunk's closing CRLF only with the next write: a client whose chunked
      // decoder waits for it (Python's urllib3, so requests) got each message one message late, up
      // to a heartbeat (15 s) late (client probe). An SSE comment right behind each message closes
      // its chunk in the same packet; only the comment waits.
      ok = this.res.write(chunk);
      ok = this.res.write(CHUNK_CLOSER) && ok;
    });
    return ok;
  }

  end(): void {
    this.res.cork(() => this.res.end());
  }

  close(): void {
    this.res.close();
  }

  whenWritable(drain: () => boolean): void {
    this.res.onWritable(drain);
  }
}

function snapshot(deps: HealthStreamDeps, connection: { id: string; disabled?: boolean }): ConnectionStatusMessage {
  const known = deps.gateway.status(connection.id);
  if (known) return statusMessage(known, 'snapshot');
  const status: ConnectionStatus = connection.disabled ? 'DISABLED' : 'CONNECTING';
  const msg: ConnectionStatusMessage = { type: 'snapshot', connectionId: connection.id, status, ts: deps.clock() };
  if (connection.disabled) msg.reason = 'disabled';
  return msg;
}
