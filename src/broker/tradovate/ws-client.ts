/**
 * One authorized Tradovate WebSocket: 4-line requests with ids and deadlines, `[]` heartbeats
 * every 2.5 s, a silence watchdog, p-ticket resends. It never reconnects by itself: when the
 * socket dies every pending request is rejected and `onClose` fires once; the actor decides.
 * A request that asks for it (an order) keeps its id past the deadline, so the broker's late
 * answer still reaches whoever must learn what became of it.
 */
import WebSocket from 'ws';
import { AppError } from '../../domain/problems.js';
import { AUTHORIZE_GRACE_MS, BROKER_RATE_LIMIT_HOLD_MS, BROKER_TIMEOUTS, CONNECTION_TUNING, MAX_PENALTY_SECONDS, ORDER_PENALTY_WAIT_S, UNKNOWN_OUTCOME_MAX_MS } from '../../tuning.js';
import { CLIENT_HEARTBEAT, formatRequest, parseFrame, penaltyOf, type EventMessage, type ServerMessage } from './frames.js';

/** A non-200 answer from the broker (`d` is usually a message string). */
export class BrokerStatusError extends Error {
  override name = 'BrokerStatusError';
  constructor(
    readonly status: number,
    readonly data: unknown,
  ) {
    super(`broker answered ${status}: ${typeof data === 'string' ? data : JSON.stringify(data ?? null)}`);
  }
}

/** `authorize` was refused: the token is expired or invalid. */
export class AuthRejectedError extends Error {
  override name = 'AuthRejectedError';
}

/** Why a socket ended. */
export type CloseReason = 'closed' | 'silence' | 'unauthorized' | 'rate-limited' | 'shutdown' | 'error' | 'client';

/** Socket timings. */
export interface SocketOptions {
  heartbeatMs?: number;
  /** No frame at all for this long (the server sends `h` every ~2.5 s) → the socket is dead. */
  silenceMs?: number;
  requestTimeoutMs?: number;
  openTimeoutMs?: number;
  maxPenaltySeconds?: number;
  /** How long a timed-out request with `onLate` stays routed to it. */
  lateAnswerMs?: number;
}

/** Callbacks of a live socket. */
export interface SocketHandlers {
  onEvent(message: EventMessage): void;
  onClose(reason: CloseReason, detail: string): void;
}

interface Pending {
  resolve(data: unknown): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
  /** Set once the request has timed out: where its late answer goes. */
  late?: (answer: LateAnswer) => void;
  /** What may be executed though unanswered: an order (it asked for its late answer), another change, or nothing. */
  mayExecute: 'order' | 'request' | false;
}

/** The broker's answer to a request that had already timed out (status and `d`, unchecked). */
export interface LateAnswer {
  status: number;
  data: unknown;
}

/** One request: query line, body, deadline. */
export interface RequestOptions {
  query?: string;
  body?: unknown;
  timeoutMs?: number;
  /**
   * For a request whose effect outlives its deadline (an order may still be executed): after
   * BROKER_TIMEOUT its id stays known, and the broker's answer, if it comes while the socket
   * lives (and within `lateAnswerMs`), is handed here instead of being dropped.
   */
  onLate?: (answer: LateAnswer) => void;
  /**
   * The request changes something at the broker (an order, a cancel, a modify, a liquidation):
   * written to a socket that is then lost, its outcome is unknown (504), not "nothing sent" (503).
   * Implied by `onLate`.
   */
  mayExecute?: boolean;
}

/** A 429, or the 423 Tradovate sends just before one ("you are about to be locked out"): stop every call for the hour. */
function rateLimitedDetail(status: number): string {
  return (
    `broker rate limit (${status}): Tradovate holds the login out for up to an hour, and every request meanwhile extends it; ` +
    'the connection stopped sending (FAILED) and logs in again by itself once the hour has passed'
  );
}

/** An authorized broker socket. Create with `TradovateSocket.connect`. */
export class TradovateSocket {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private lastFrameAt = Date.now();
  private heartbeat: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private closed = false;
  private constructor(
    private readonly ws: WebSocket,
    private readonly handlers: SocketHandlers,
    private readonly opts: Required<SocketOptions>,
  ) {}

  /** Opens the socket, waits for `o` (or a short grace), sends `authorize` and awaits its 200. */
  static connect(url: string, accessToken: string, handlers: SocketHandlers, options: SocketOptions = {}): Promise<TradovateSocket> {
    const opts: Required<SocketOptions> = {
      heartbeatMs: options.heartbeatMs ?? CONNECTION_TUNING.heartbeatMs,
      silenceMs: options.silenceMs ?? CONNECTION_TUNING.silenceMs,
      requestTimeoutMs: options.requestTimeoutMs ?? BROKER_TIMEOUTS.requestMs,
      openTimeoutMs: options.openTimeoutMs ?? BROKER_TIMEOUTS.openMs,
      maxPenaltySeconds: options.maxPenaltySeconds ?? MAX_PENALTY_SECONDS,
      lateAnswerMs: options.lateAnswerMs ?? UNKNOWN_OUTCOME_MAX_MS,
    };
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { handshakeTimeout: opts.openTimeoutMs });
      let settled = false;
      let authorizeSent = false;
      let grace: NodeJS.Timeout | undefined;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        clearTimeout(grace);
        ws.removeAllListeners();
        ws.on('error', () => {});
        ws.terminate();
        reject(err);
      };
      const deadline = setTimeout(() => fail(new AppError('BROKER_UNAVAILABLE', 'broker socket did not open in time')), opts.openTimeoutMs);
      const authorize = () => {
        if (authorizeSent) return;
        authorizeSent = true;
        clearTimeout(grace);
        ws.send(formatRequest('authorize', 0, '', accessToken));
      };
      ws.on('open', () => {
        // Some deployments never send `o`; authorize anyway after a short grace.
        grace = setTimeout(authorize, AUTHORIZE_GRACE_MS);
      });
      ws.on('error', (err) => fail(new AppError('BROKER_UNAVAILABLE', `broker socket error: ${err.message}`)));
      ws.on('close', (code) => fail(new AppError('BROKER_UNAVAILABLE', `broker socket closed during connect (${code})`)));
      ws.on('message', (raw) => {
        const frame = parseFrame(raw.toString());
        if (frame.kind === 'open') return authorize();
        if (frame.kind === 'close') return fail(new AppError('BROKER_UNAVAILABLE', `broker closed: ${frame.reason}`));
        if (frame.kind !== 'data') return;
        for (const [index, m] of frame.messages.entries()) {
          if (m.kind !== 'response' || m.requestId !== 0) continue;
          if (m.status === 200) {
            if (settled) return;
            settled = true;
            clearTimeout(deadline);
            ws.removeAllListeners();
            const sock = new TradovateSocket(ws, handlers, opts);
            sock.start();
            // A broker may batch events behind the authorize answer in the same frame.
            sock.dispatch(frame.messages.slice(index + 1));
            resolve(sock);
          } else if (m.status === 401) {
            fail(new AuthRejectedError(typeof m.data === 'string' ? m.data : 'authorize refused'));
          } else {
            fail(new AppError('BROKER_UNAVAILABLE', `authorize answered ${m.status}`));
          }
          return;
        }
      });
    });
  }

  private start(): void {
    this.lastFrameAt = Date.now();
    this.ws.on('message', (raw) => this.onFrame(raw.toString()));
    this.ws.on('close', (code, reason) => this.shutdown('closed', `socket closed (${code}${reason.length ? ` ${reason.toString()}` : ''})`));
    this.ws.on('error', (err) => this.shutdown('error', err.message));
    this.heartbeat = setInterval(() => this.sendRaw(CLIENT_HEARTBEAT), this.opts.heartbeatMs);
    const tick = Math.max(20, Math.min(1000, Math.floor(this.opts.silenceMs / 4)));
    this.watchdog = setInterval(() => {
      if (Date.now() - this.lastFrameAt > this.opts.silenceMs) this.shutdown('silence', `no frame for ${this.opts.silenceMs} ms`);
    }, tick);
  }

  /** True until the socket has closed for any reason. */
  get open(): boolean {
    return !this.closed;
  }

  private corked: { uncork(): void } | undefined;

  private sendRaw(text: string): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    // Requests sent in one turn (a batch from the front) leave in one write: the socket is
    // corked until the turn's I/O is done, instead of one system call per frame.
    const socket = (this.ws as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
    if (socket && !this.corked) {
      socket.cork();
      this.corked = socket;
      setImmediate(() => {
        this.corked = undefined;
        socket.uncork();
      });
    }
    this.ws.send(text);
  }

  private onFrame(text: string): void {
    this.lastFrameAt = Date.now();
    const frame = parseFrame(text);
    if (frame.kind === 'close') return this.shutdown('closed', `broker closed: ${frame.code ?? ''} ${frame.reason}`.trim());
    if (frame.kind === 'data') this.dispatch(frame.messages);
  }

  /**
   * Routes messages in arrival order: events to `onEvent` (whatever their type), answers to
   * their pending request. An answer may come before or after the events it caused, and data of
   * a subscription (a quote) may precede its answer: neither depends on the other here.
   */
  private dispatch(messages: ServerMessage[]): void {
    for (const m of messages) {
      if (this.closed) return;
      if (m.kind === 'event') {
        this.handlers.onEvent(m);
        continue;
      }
      const p = this.pending.get(m.requestId);
      if (!p) continue;
      this.pending.delete(m.requestId);
      clearTimeout(p.timer);
      if (p.late) p.late({ status: m.status, data: m.data });
      else if (m.status === 200) p.resolve(m.data);
      else if (m.status === 429 || m.status === 423) {
        // Tradovate holds the login out for up to an hour and every request meanwhile extends it:
        // the socket closes, so nothing more is sent (ops probe: the next order went out 11 s after
        // a 503 that said Retry-After: 3600), and the connection goes FAILED until the hour has passed.
        const detail = rateLimitedDetail(m.status);
        p.reject(new AppError('BROKER_UNAVAILABLE', detail, { brokerStatus: m.status }, BROKER_RATE_LIMIT_HOLD_MS / 1000));
        this.shutdown('rate-limited', detail);
        return;
      } else p.reject(new BrokerStatusError(m.status, m.data));
      // A 401 on a live socket means the token died: the session is useless from here on.
      if (m.status === 401) this.shutdown('unauthorized', typeof m.data === 'string' ? m.data : 'access denied');
    }
  }

  private sendOnce(endpoint: string, opts: RequestOptions): Promise<unknown> {
    if (this.closed) return Promise.reject(new AppError('BROKER_UNAVAILABLE', 'broker socket is closed'));
    const id = this.nextId++;
    const timeoutMs = opts.timeoutMs ?? this.opts.requestTimeoutMs;
    return new Promise((resolve, reject) => {
      const p: Pending = {
        resolve,
        reject,
        mayExecute: opts.onLate !== undefined ? 'order' : opts.mayExecute === true ? 'request' : false,
        timer: setTimeout(() => {
          if (opts.onLate) this.keepLate(id, p, opts.onLate);
          else this.pending.delete(id);
          const outcome = opts.onLate ? '; the broker may still carry it out: retry with the same Idempotency-Key, never as a new request' : '';
          reject(new AppError('BROKER_TIMEOUT', `broker did not answer ${endpoint} within ${timeoutMs} ms${outcome}`));
        }, timeoutMs),
      };
      this.pending.set(id, p);
      this.sendRaw(formatRequest(endpoint, id, opts.query ?? '', opts.body));
    });
  }

  /** Milliseconds since the broker's last frame of any kind (its heartbeats come every ~2.5 s). */
  quietMs(): number {
    return Date.now() - this.lastFrameAt;
  }

  /**
   * Keeps a timed-out request routed to `onLate` for `lateAnswerMs`: the broker may still
   * execute it (a slow broker answers late, it does not forget), and only its answer says so.
   * Ids are never reused on a socket, so nothing else can claim it; the socket's end drops it.
   */
  private keepLate(id: number, p: Pending, onLate: (answer: LateAnswer) => void): void {
    p.late = onLate;
    p.timer = setTimeout(() => this.pending.delete(id), this.opts.lateAnswerMs);
    p.timer.unref();
  }

  /**
   * Sends a request and resolves with `d` of its 200 answer. A p-ticket answer (the request
   * was not executed) is resent once after p-time with the ticket; a captcha one fails. A request
   * that changes something at the broker (an order, a cancel, a modify, a liquidation) waits out at
   * most ORDER_PENALTY_WAIT_S: resent after a longer wait, it would act long after its caller was
   * answered 504 (a market order filling 40 s late at another price, a close taking a position
   * opened since); it fails with 503 and the wait as Retry-After instead, nothing sent.
   */
  async request(endpoint: string, opts: RequestOptions = {}): Promise<unknown> {
    let data = await this.sendOnce(endpoint, opts);
    const penalty = penaltyOf(data);
    if (!penalty) return data;
    if (penalty.captcha || penalty.seconds > this.opts.maxPenaltySeconds) {
      throw new AppError('BROKER_UNAVAILABLE', `broker penalty in force (p-ticket, ${penalty.seconds} s)`, { penalty: true }, Math.max(1, penalty.seconds || 3600));
    }
    if ((opts.onLate !== undefined || opts.mayExecute === true) && penalty.seconds > ORDER_PENALTY_WAIT_S) {
      throw new AppError(
        'BROKER_UNAVAILABLE',
        `the broker asked to wait ${penalty.seconds} s before ${opts.onLate !== undefined ? 'this order' : `${endpoint}`} (p-ticket); nothing was sent: send it again after Retry-After if it still makes sense then`,
        {},
        Math.ceil(penalty.seconds),
      );
    }
    await new Promise((r) => setTimeout(r, penalty.seconds * 1000));
    const body = opts.body && typeof opts.body === 'object' ? { ...(opts.body as object), 'p-ticket': penalty.ticket } : opts.body;
    data = await this.sendOnce(endpoint, { ...opts, body });
    if (penaltyOf(data)) throw new AppError('BROKER_UNAVAILABLE', 'broker penalty in force (p-ticket not accepted)', { penalty: true }, 60);
    return data;
  }

  private shutdown(reason: CloseReason, detail: string): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    clearInterval(this.watchdog);
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      // A timed-out request was answered (504) already; what became of it is for the next sync to show.
      if (p.late) continue;
      // An order written to the socket may have been executed although its answer is lost with the
      // socket: its outcome is unknown (504, as after a timeout), never "nothing was sent" (503).
      p.reject(
        p.mayExecute
          ? new AppError('BROKER_TIMEOUT', `broker connection lost (${reason}) before it answered: the ${p.mayExecute} may have reached the broker`)
          : new AppError('BROKER_UNAVAILABLE', `broker connection lost (${reason})`),
      );
    }
    this.ws.removeAllListeners();
    this.ws.on('error', () => {});
    this.ws.terminate();
    this.handlers.onClose(reason, detail);
  }

  /** Closes the socket; `onClose` fires with reason `client`. */
  close(): void {
    this.shutdown('client', 'closed by client');
  }

  /** Closes the socket for what the broker said elsewhere (a 429 on a REST call): `onClose` fires with `reason`. */
  closeFor(reason: 'rate-limited', detail: string): void {
    this.shutdown(reason, detail);
  }
}
