/**
 * Request logging: one line per request with its id, errors with their stack, and no
 * secret (API key, webhook token) in any line.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEngine, type EngineHarness } from '../../support/engine.js';

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
    done();
  },
});
let h: EngineHarness;

beforeAll(async () => {
  h = await startEngine({}, { logTo: sink });
});
afterAll(async () => {
  await h.stop();
});

/** Waits until pino's asynchronous write reached the sink. */
async function lineFor(reqId: string): Promise<Record<string, unknown>[]> {
  for (let i = 0; i < 10_000 && !lines.some((l) => l['reqId'] === reqId); i++) await new Promise((r) => setImmediate(r));
  return lines.filter((l) => l['reqId'] === reqId);
}

it('writes exactly one line per request, with status, path and principal', async () => {
  await fetch(h.url('/v1/things/9'), { headers: { 'X-API-Key': h.keys.read, 'X-Request-Id': 'log-1' } });
  const mine = await lineFor('log-1');
  expect(mine).toHaveLength(1);
  expect(mine[0]).toMatchObject({ level: 30, method: 'GET', path: '/v1/things/9', status: 200, principal: expect.any(String) });
});

it('logs an unexpected error once, at error level, with its stack', async () => {
  await fetch(h.url('/v1/boom'), { headers: { 'X-API-Key': h.keys.read, 'X-Request-Id': 'log-2' } });
  const mine = await lineFor('log-2');
  expect(mine).toHaveLength(1);
  expect(mine[0]).toMatchObject({ level: 50, status: 500, err: { type: 'TypeError', message: 'kaboom', stack: expect.stringContaining('kaboom') } });
});

it('never writes an API key or a webhook token', async () => {
  await fetch(h.url(`/api/v1/webhooks/${h.webhookToken}`), { method: 'POST', headers: { 'X-Request-Id': 'log-3', 'Content-Type': 'application/json' }, body: '{"action":"buy"}' });
  await fetch(h.url('/v1/things/1'), { headers: { 'X-API-Key': h.keys.rw, 'X-Request-Id': 'log-4' } });
  await lineFor('log-3');
  await lineFor('log-4');
  const all = JSON.stringify(lines);
  expect(all).not.toContain(h.webhookToken);
  for (const key of Object.values(h.keys)) expect(all).not.toContain(key);
  expect(all).toContain('whk_[redacted]');
});

it('never writes a webhook token spelt with percent escapes, which the router decodes and accepts', async () => {
  const token = h.webhookToken;
  const secret = token.slice(token.lastIndexOf('_') + 1);
  const everyChar = [...token].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).join('');
  const paths = [
    `/api/v1/webhooks/%77hk_${token.slice(4)}`,
    `/api/v1/webhooks/whk%5F${token.slice(4)}`,
    `/api/v1/%77ebhooks/${token}`,
    `/v1//webhooks/${everyChar}/`,
    `/api/v1/webhooks/${token.slice(0, -3)}${encodeURIComponent(secret.slice(-3))}`,
  ];
  for (const [i, path] of paths.entries()) {
    const r = await fetch(h.url(path), { method: 'POST', headers: { 'X-Request-Id': `log-enc-${i}`, 'Content-Type': 'application/json' }, body: '{"action":"buy"}' });
    // Authenticated (the alert route answered, not the 404 of an unknown token).
    expect(r.status, path).toBe(200);
    const [line] = await lineFor(`log-enc-${i}`);
    expect(JSON.stringify(line), path).not.toContain(secret);
    expect(line!['path'], path).toMatch(/\/(whk_)?\[redacted\]\/?$/);
  }
  expect(JSON.stringify(lines)).not.toContain(secret);
});
