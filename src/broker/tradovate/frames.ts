/**
 * Tradovate WebSocket framing (SockJS-style): the server sends `o`, `h`, `a[...]` and `c[...]`
 * text frames; the client sends 4-line requests and `[]` heartbeats. Pure functions, no I/O.
 */

/** A response to a client request: `{s, i, d}`. */
export interface ResponseMessage {
  kind: 'response';
  status: number;
  requestId: number;
  data: unknown;
}

/** A server push: `{e, d}` (props, shutdown, ...). */
export interface EventMessage {
  kind: 'event';
  event: string;
  data: unknown;
}

/** One message inside an `a` frame. */
export type ServerMessage = ResponseMessage | EventMessage;

/** One server text frame, classified. */
export type ServerFrame =
  | { kind: 'open' }
  | { kind: 'heartbeat' }
  | { kind: 'close'; code: number | null; reason: string }
  | { kind: 'data'; messages: ServerMessage[] }
  | { kind: 'unknown'; text: string };

/** The client heartbeat frame. */
export const CLIENT_HEARTBEAT = '[]';

function toMessage(raw: unknown): ServerMessage | null {
  if (!raw || typeof raw !== 'object') return null;
  const m = raw as Record<string, unknown>;
  if (typeof m.e === 'string') return { kind: 'event', event: m.e, data: m.d };
  if (m.i !== undefined && m.s !== undefined) {
    const requestId = Number(m.i);
    if (!Number.isFinite(requestId)) return null;
    return { kind: 'response', status: Number(m.s), requestId, data: m.d };
  }
  return null;
}

/**
 * Parses one server text frame. A bare JSON array (seen for 429 answers) is treated like an
 * `a` frame; anything unparseable comes back as `unknown` so the caller can log and move on.
 */
export function parseFrame(text: string): ServerFrame {
  const first = text.charAt(0);
  if (first === 'o' && text.length === 1) return { kind: 'open' };
  if (first === 'h' && text.length === 1) return { kind: 'heartbeat' };
  if (first === 'c') {
    try {
      const body = JSON.parse(text.slice(1)) as unknown;
      if (Array.isArray(body)) return { kind: 'close', code: typeof body[0] === 'number' ? body[0] : null, reason: String(body[1] ?? '') };
    } catch {
      // a close frame without a JSON payload is still a close
    }
    return { kind: 'close', code: null, reason: text.slice(1) };
  }
  const json = first === 'a' ? text.slice(1) : first === '[' ? text : null;
  if (json === null) return { kind: 'unknown', text };
  try {
    const arr = JSON.parse(json) as unknown;
    if (!Array.isArray(arr)) return { kind: 'unknown', text };
    const messages: ServerMessage[] = [];
    for (const raw of arr) {
      const m = toMessage(raw);
      if (m) messages.push(m);
    }
    return { kind: 'data', messages };
  } catch {
    return { kind: 'unknown', text };
  }
}

/**
 * Formats a 4-line request: endpoint, id, query, body. Empty lines stay present (a missing
 * query line makes the broker read the body as the query). A string body is sent raw
 * (`authorize` takes the bare token); objects are JSON.
 */
export function formatRequest(endpoint: string, requestId: number, query = '', body?: unknown): string {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  return `${endpoint}\n${requestId}\n${query}\n${text}`;
}

/** The p-ticket penalty shape, which arrives inside successful (200) answers. */
export interface PenaltyTicket {
  ticket: string;
  seconds: number;
  captcha: boolean;
}

/** Extracts a p-ticket from a response payload, if it is one. */
export function penaltyOf(data: unknown): PenaltyTicket | null {
  if (!data || typeof data !== 'object') return null;
  const d = data as Record<string, unknown>;
  if (typeof d['p-ticket'] !== 'string') return null;
  return { ticket: d['p-ticket'], seconds: Number(d['p-time'] ?? 0) || 0, captcha: d['p-captcha'] === true };
}
