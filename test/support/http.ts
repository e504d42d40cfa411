/**
 * HTTP from a client's side: one request with JSON in and out, the same from a chosen
 * loopback source address, and polling until something holds.
 */
import { request as httpRequest } from 'node:http';

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** One HTTP request; JSON bodies are serialized unless `raw` is given. */
export async function http(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers['x-api-key'] = opts.key;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(opts.timeoutMs !== undefined ? { signal: AbortSignal.timeout(opts.timeoutMs) } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Like `http`, from a chosen loopback source address (127.0.0.0/8 all reaches the server):
 * tests that send many bad credentials on purpose spread them over addresses so the
 * per-IP failed-auth limiter (30/min) does not block the cells that follow.
 */
export function httpFrom(
  localAddress: string,
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers['x-api-key'] = opts.key;
  const body = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (opts.raw === undefined && body !== undefined) headers['content-type'] ??= 'application/json';
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, headers, localAddress, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          if (typeof v === 'string') h.set(k, v);
          else if (Array.isArray(v)) for (const one of v) h.append(k, one);
        }
        resolve({ status: res.statusCode ?? 0, headers: h, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Polls `probe` until it returns a truthy value (events arrive asynchronously over the broker link). */
export async function eventually<T>(probe: () => Promise<T | undefined | false>, what: string, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
