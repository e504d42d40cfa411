/**
 * The load generator's HTTP/1.1 client: keep-alive TCP sockets, requests written as ready
 * bytes, and a parser that reads only what a measurement needs (status, Content-Length or
 * chunked framing, one named header) and hands the body over only when asked. One request
 * per socket at a time (no pipelining: clients do not); a new socket opens only when every
 * open one is busy. Generator CPU per request at 1,000 req/s against a bare uWS answer (same
 * open-loop schedule, this 2-core machine): this client ~110 µs, node:http's keep-alive Agent
 * ~220 µs, undici's Pool ~200 µs; so the bench uses this one (bench/README.md).
 */
import { connect, type Socket } from 'node:net';

/** One answer: status, the header asked for (lower-case name), the body when asked for. */
export interface RawAnswer {
  status: number;
  header?: string;
  body?: Buffer;
}

interface Waiting {
  payload: Buffer;
  wantBody: boolean;
  settle(err: Error | null, answer?: RawAnswer): void;
}

const CRLF2 = Buffer.from('\r\n\r\n');

/** Reads HTTP/1.1 responses off one socket, one at a time. */
class Conn {
  private buf: Buffer = Buffer.alloc(0);
  current: Waiting | undefined;
  private head: { status: number; header?: string; length: number; chunked: boolean; bodyStart: number; close: boolean } | undefined;
  closed = false;
  /** performance.now() when it was last parked idle. */
  idleSince = 0;

  constructor(
    readonly socket: Socket,
    private readonly headerName: string,
    private readonly done: (conn: Conn) => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const end = (err?: Error) => this.fail(err ?? new Error('socket hang up'));
    socket.on('error', end);
    socket.on('close', () => end());
  }

  send(w: Waiting): void {
    this.current = w;
    this.socket.write(w.payload);
  }

  /** Closes an idle connection (no request on it). */
  retire(): void {
    this.fail(new Error('retired idle connection'));
  }

  private fail(err: Error): void {
    if (this.closed) return;
    this.closed = true;
    const w = this.current;
    this.current = undefined;
    w?.settle(err);
    this.socket.destroy();
    this.done(this);
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    for (;;) {
      if (!this.head) {
        const end = this.buf.indexOf(CRLF2);
        if (end < 0) return;
        this.head = this.parseHead(this.buf.toString('latin1', 0, end), end + 4);
      }
      const h = this.head;
      let bodyEnd: number;
      let body: Buffer | undefined;
      if (h.chunked) {
        const parsed = dechunk(this.buf, h.bodyStart);
        if (!parsed) return;
        bodyEnd = parsed.end;
        body = parsed.body;
      } else {
        bodyEnd = h.bodyStart + h.length;
        if (this.buf.length < bodyEnd) return;
        body = this.buf.subarray(h.bodyStart, bodyEnd);
      }
      const w = this.current;
      this.current = undefined;
      this.head = undefined;
      this.buf = this.buf.length > bodyEnd ? this.buf.subarray(bodyEnd) : Buffer.alloc(0);
      if (w) w.settle(null, { status: h.status, ...(h.header !== undefined && { header: h.header }), ...(w.wantBody && { body: Buffer.from(body) }) });
      if (h.close) return this.fail(new Error('server closed the connection'));
      this.done(this);
      if (this.buf.length === 0) return;
    }
  }

  private parseHead(text: string, bodyStart: number) {
    const status = Number(text.slice(9, 12));
    let length = 0;
    let chunked = false;
    let close = false;
    let header: string | undefined;
    let at = text.indexOf('\r\n');
    while (at >= 0) {
      const next = text.indexOf('\r\n', at + 2);
      const line = text.slice(at + 2, next < 0 ? undefined : next);
      const colon = line.indexOf(':');
      if (colon > 0) {
        const name = line.slice(0, colon).toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === 'content-length') length = Number(value);
        else if (name === 'transfer-encoding') chunked = /chunked/i.test(value);
        else if (name === 'connection') close = /close/i.test(value);
        else if (name === this.headerName) header = value;
      }
      at = next;
    }
    return { status, header, length, chunked, bodyStart, close };
  }
}

/** Decodes a chunked body starting at `start`; undefined until the last chunk is in. */
function dechunk(buf: Buffer, start: number): { body: Buffer; end: number } | undefined {
  const parts: Buffer[] = [];
  let at = start;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) return undefined;
    const size = Number.parseInt(buf.toString('latin1', at, eol), 16);
    if (size === 0) {
      // Trailers are not used by the service; the body ends with an empty line.
      const end = buf.indexOf(CRLF2, eol - 2);
      return end < 0 ? undefined : { body: Buffer.concat(parts), end: end + 4 };
    }
    if (buf.length < eol + 2 + size + 2) return undefined;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** A keep-alive pool of raw HTTP/1.1 connections to one origin. */
export class RawHttpPool {
  private readonly idle: Conn[] = [];
  private readonly queue: Waiting[] = [];
  private readonly all = new Set<Conn>();
  private opening = 0;
  /** Sockets opened so far, and the most requests ever in flight at once. */
  socketsOpened = 0;
  peakInFlight = 0;
  private inFlight = 0;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly maxSockets: number,
    /** One response header to report (lower-case), e.g. `idempotent-replayed`. */
    private readonly headerName = '',
    /**
     * A connection idle longer than this is closed instead of reused. uWS closes a keep-alive
     * connection after 10 s without traffic, and a request written while it closes is lost
     * ("socket hang up", ECONNRESET): a client must retire idle sockets before the server does
     * (undici's default keep-alive timeout is 4 s, the same idea).
     */
    private readonly idleReuseMs = 4_000,
  ) {}

  /** Sends `payload` (a whole request) and resolves with the answer. */
  request(payload: Buffer, wantBody: boolean): Promise<RawAnswer> {
    this.inFlight++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    return new Promise((resolve, reject) => {
      const w: Waiting = {
        payload,
        wantBody,
        settle: (err, answer) => {
          this.inFlight--;
          if (err) reject(err);
          else resolve(answer!);
        },
      };
      const conn = this.takeIdle();
      if (conn) conn.send(w);
      else {
        this.queue.push(w);
        if (this.all.size + this.opening < this.maxSockets && this.opening < this.queue.length) this.open();
      }
    });
  }

  /** The most recently parked connection still safe to reuse; older ones are closed. */
  private takeIdle(): Conn | undefined {
    const now = performance.now();
    let conn = this.idle.pop();
    while (conn && now - conn.idleSince > this.idleReuseMs) {
      // Parked idle, so no request rides on it; release() drops it from `all`.
      conn.retire();
      conn = this.idle.pop();
    }
    return conn;
  }

  private open(): void {
    this.opening++;
    this.socketsOpened++;
    const socket = connect({ host: this.host, port: this.port });
    let conn: Conn | undefined;
    socket.once('connect', () => {
      this.opening--;
      conn = new Conn(socket, this.headerName, (c) => this.release(c));
      this.all.add(conn);
      this.release(conn);
    });
    socket.once('error', (err) => {
      if (conn) return;
      this.opening--;
      // Could not connect: the request that asked for this socket fails.
      this.queue.shift()?.settle(err);
    });
  }

  /** A connection finished a response (or died): give it the next request, or park it. */
  private release(conn: Conn): void {
    if (conn.closed) {
      this.all.delete(conn);
      const i = this.idle.indexOf(conn);
      if (i >= 0) this.idle.splice(i, 1);
      if (this.queue.length > this.opening && this.all.size + this.opening < this.maxSockets) this.open();
      return;
    }
    if (conn.current) return;
    const next = this.queue.shift();
    if (next) conn.send(next);
    else {
      conn.idleSince = performance.now();
      this.idle.push(conn);
    }
  }

  /** Fails whatever is pending and closes every socket. */
  destroy(): void {
    for (const w of this.queue.splice(0)) w.settle(new Error('pool closed'));
    for (const c of this.all) c.socket.destroy();
  }
}

/** The bytes of one request. */
export function requestBytes(method: string, path: string, host: string, headers: Record<string, string>, body: Buffer | undefined): Buffer {
  let head = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  if (body) head += `Content-Length: ${body.length}\r\n`;
  head += '\r\n';
  return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
}
