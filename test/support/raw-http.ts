/**
 * HTTP/1.1 as bytes on a socket, for what fetch cannot send or show: pipelined and
 * keep-alive exchanges, HEAD, repeated headers, unknown methods, malformed request heads.
 */
import { connect } from 'node:net';

/** What came back on one connection, and whether and when the server closed it. */
export interface RawResult {
  text: string;
  /** ms from the first write until the server closed the connection; null if it stayed open. */
  closedAfterMs: number | null;
}

/**
 * Opens a connection to `url`'s host and port, writes each request in turn (`gapMs` apart),
 * and collects everything until the server closes the connection or `waitMs` pass.
 */
export function rawExchange(url: string, requests: string[], opts: { waitMs?: number; gapMs?: number } = {}): Promise<RawResult> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const started = Date.now();
    let text = '';
    let settled = false;
    const finish = (closedAfterMs: number | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closedAfterMs });
    };
    const timer = setTimeout(() => finish(null), opts.waitMs ?? 1500);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => finish(Date.now() - started));
    socket.on('error', (err) => (settled ? undefined : reject(err)));
    socket.once('connect', () => {
      requests.forEach((r, i) => setTimeout(() => socket.write(r), i * (opts.gapMs ?? 100)));
    });
  });
}

/** One parsed response of a raw exchange. */
export interface RawResponse {
  status: number;
  headers: [string, string][];
  body: string;
}

/**
 * Splits a raw exchange into responses by Content-Length; `methods[i]` is the method of the
 * i-th request (answers to HEAD, and 204/304, have no body whatever their length says).
 */
export function parseResponses(text: string, methods: string[]): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers = lines.map((l) => {
      const i = l.indexOf(':');
      return [l.slice(0, i).toLowerCase(), l.slice(i + 1).trim()] as [string, string];
    });
    const status = Number(statusLine!.split(' ')[1]);
    const bodiless = methods[out.length] === 'HEAD' || status === 204 || status === 304;
    const length = bodiless ? 0 : Number(headers.find(([k]) => k === 'content-length')?.[1] ?? 0);
    rest = rest.slice(end + 4);
    out.push({ status, headers, body: rest.slice(0, length) });
    rest = rest.slice(length);
  }
  return out;
}

/** The value of a header of a parsed response (first occurrence). */
export function header(r: RawResponse, name: string): string | undefined {
  return r.headers.find(([k]) => k === name)?.[1];
}

/** A request head (and optional body) with CRLF line ends. */
export function rawRequest(method: string, path: string, headers: [string, string][] = [], body = ''): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: localhost', ...headers.map(([k, v]) => `${k}: ${v}`)];
  if (body) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}
