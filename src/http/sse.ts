/**
 * The one SSE serializer of the service (DESIGN §8) and the per-user event ring used for
 * `Last-Event-ID` resume. Pure: no sockets, no timers.
 */
import type { BracketAlertEvent, GuardEvent } from '../actors/protocol.js';
import type { ConnectionStatus, StatusEvent, StatusReason } from '../domain/connections.js';

/** Reconnection delay announced to clients on open. */
export const SSE_RETRY_MS = 3000;

/** `snapshot` (on open) and `status` (on change) messages. */
export interface ConnectionStatusMessage {
  type: 'snapshot' | 'status';
  connectionId: string;
  status: ConnectionStatus;
  ts: number;
  reason?: StatusReason;
  detail?: string;
}

export interface HeartbeatMessage {
  type: 'heartbeat';
  ts: number;
}

/** Why a stream was ended by the server because its credential no longer holds. */
export type StreamEndReason = 'key-revoked' | 'user-deleted' | 'password-changed' | 'session-ended';

/** The last message of a stream whose credential was revoked: then the stream ends (a reconnect gets 401). */
export interface RevokedMessage {
  type: 'revoked';
  reason: StreamEndReason;
  ts: number;
  detail: string;
}

/** The last message of every stream when the service shuts down (SIGTERM): reconnect once it is back. */
export interface ClosingMessage {
  type: 'closing';
  ts: number;
  detail: string;
}

/** Bracket-integrity alarm, sent as the actor reported it. */
export type BracketAlertMessage = BracketAlertEvent;

/** A risk guard acted on an account (DESIGN §8 stream, risk guards). */
export interface GuardMessage {
  type: 'guard';
  accountId: string;
  guard: GuardEvent['guard'];
  action: GuardEvent['action'];
  ts: number;
  detail: string;
}

/**
 * Sent on a resume whose Last-Event-ID the stream can no longer replay exactly (older than the
 * messages kept, or from before a restart): the snapshots that follow give every connection's
 * status, and the bracket alerts of the last 15 minutes; guard actions in between are not repeated.
 */
export interface GapMessage {
  type: 'gap';
  lastEventId: string;
  ts: number;
  detail: string;
}

/** Every payload the health stream carries. */
export type SseMessage = ConnectionStatusMessage | HeartbeatMessage | BracketAlertMessage | GuardMessage | RevokedMessage | GapMessage | ClosingMessage;

/** Events the hub publishes to a user's stream (snapshots and heartbeats are per stream). */
export type PublishedMessage = (Omit<ConnectionStatusMessage, 'type'> & { type: 'status' }) | BracketAlertMessage | GuardEvent;

/** The `retry:` field sent first on every stream. */
export function formatRetry(ms: number = SSE_RETRY_MS): string {
  return `retry: ${Math.max(0, Math.floor(ms))}\n\n`;
}

/**
 * Frames one message: `id: <id>` then one `data:` line per line of the payload, then a blank
 * line. Line breaks inside the data are split into separate `data:` lines (the client joins
 * them with `\n`); an id containing a line break or NUL would corrupt the stream and is refused.
 */
export function formatSseMessage(id: string | number | undefined, data: string): string {
  let out = '';
  if (id !== undefined) {
    const text = String(id);
    if (/[\r\n\0]/.test(text)) throw new Error('SSE id must not contain CR, LF or NUL');
    out += `id: ${text}\n`;
  }
  for (const line of data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  return `${out}\n`;
}

/** Serializes a payload as JSON and frames it. */
export function formatSseEvent(id: string | number | undefined, message: SseMessage): string {
  return formatSseMessage(id, JSON.stringify(message));
}

/** A `status` message from an actor's StatusEvent (`reason`/`detail` only when present). */
export function statusMessage(
  event: Pick<StatusEvent, 'connectionId' | 'status' | 'ts'> & { reason?: StatusReason | undefined; detail?: string | undefined },
  type: 'snapshot' | 'status' = 'status',
): ConnectionStatusMessage {
  const msg: ConnectionStatusMessage = { type, connectionId: event.connectionId, status: event.status, ts: event.ts };
  if (event.reason) msg.reason = event.reason;
  if (event.detail !== undefined) msg.detail = event.detail;
  return msg;
}

/** A `bracket-alert` message from the actor event. */
export function bracketAlertMessage(event: BracketAlertEvent): BracketAlertMessage {
  return {
    type: 'bracket-alert',
    connectionId: event.connectionId,
    accountId: event.accountId,
    orderId: event.orderId,
    ts: event.ts,
    detail: event.detail,
  };
}

/** A `guard` message from the actor event: `{type, accountId, guard, action, ts, detail}`. */
export function guardMessage(event: GuardEvent): GuardMessage {
  return { type: 'guard', accountId: event.accountId, guard: event.guard, action: event.action, ts: event.ts, detail: event.detail };
}

/**
 * The last `capacity` framed messages of one user's stream with their sequence numbers.
 * `floor` is the newest sequence number no longer held: a client whose Last-Event-ID is at
 * or above it can be resumed exactly; below it, it gets fresh snapshots.
 */
export class EventRing {
  private readonly seqs: number[] = [];
  private readonly frames: string[] = [];
  private start = 0;

  constructor(
    readonly capacity: number,
    public floor: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
  }

  /** Appends a message; sequence numbers must increase. */
  push(seq: number, frame: string): void {
    if (this.seqs.length - this.start === this.capacity) {
      this.floor = this.seqs[this.start] as number;
      this.start++;
      // Compact now and then instead of shifting on every push.
      if (this.start >= this.capacity) {
        this.seqs.splice(0, this.start);
        this.frames.splice(0, this.start);
        this.start = 0;
      }
    }
    this.seqs.push(seq);
    this.frames.push(frame);
  }

  /** Frames after `lastSeq`, or undefined when the ring no longer covers that point. */
  since(lastSeq: number, currentSeq: number): string[] | undefined {
    if (!Number.isSafeInteger(lastSeq) || lastSeq < this.floor || lastSeq > currentSeq) return undefined;
    const out: string[] = [];
    for (let i = this.start; i < this.seqs.length; i++) if ((this.seqs[i] as number) > lastSeq) out.push(this.frames[i] as string);
    return out;
  }

  /** Messages currently held. */
  get size(): number {
    return this.seqs.length - this.start;
  }
}

/** Parses a Last-Event-ID header value; undefined when absent or not a plain integer. */
export function parseLastEventId(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,16}$/.test(raw.trim())) return undefined;
  const n = Number(raw.trim());
  return Number.isSafeInteger(n) ? n : undefined;
}
