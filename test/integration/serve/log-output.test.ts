/**
 * serve's log lines are gathered and written in batches (log.ts LOG_OUTPUT), yet an operator
 * watching the log sees a request's line within the flush interval, every line reaches the output
 * by the time the process has stopped, and "stopped" stays the last thing it prints. Needs dist/.
 */
import { afterEach, expect, it } from 'vitest';
import { LOG_OUTPUT } from '../../../src/log.js';
import { awaitOutput, startServe, type Served } from '../../support/processes.js';

let served: Served | undefined;
afterEach(async () => {
  await served?.stop();
  served = undefined;
});

async function get(s: Served, requestId: string): Promise<number> {
  const res = await fetch(`${s.url}/api/v1/accounts`, { headers: { 'x-api-key': s.apiKey, 'x-request-id': requestId } });
  await res.arrayBuffer();
  return res.status;
}

it('a request’s access line shows within the flush interval, not when the buffer fills; every line is out by "stopped", which comes last', async () => {
  served = await startServe({}, { logLevel: 'info' });
  expect(await get(served, 'probe-first')).toBe(200);
  const seenWithin = Date.now();
  await awaitOutput(served, /"reqId":"probe-first"[^\n]*"msg":"request"/, LOG_OUTPUT.flushMs * 10);
  expect(Date.now() - seenWithin).toBeLessThan(LOG_OUTPUT.flushMs * 10);

  // A few lines, far less than the buffer holds, then the stop at once.
  for (let i = 0; i < 5; i++) expect(await get(served, `probe-last-${i}`)).toBe(200);
  served.proc.kill('SIGTERM');
  expect(await served.exited).toBe(0);
  const out = served.output();
  for (let i = 0; i < 5; i++) expect(out).toMatch(new RegExp(`"reqId":"probe-last-${i}"`));
  expect(out).toMatch(/"msg":"shutting down"/);
  expect(out.trimEnd().endsWith('stopped')).toBe(true);
});

it('a log pipe nobody reads does not keep the stopping process alive (load probe: after SIGTERM it stopped listening and never exited, and a second SIGTERM hung too)', async () => {
  served = await startServe({}, { logLevel: 'info' });
  const s = served;
  // The reader stalls: the pipe (and this side's buffer) fills, and the service's writes of its log lines get EAGAIN.
  s.proc.stdout!.pause();
  const paths = Array.from({ length: 3000 }, (_, i) => `${s.url}/nope/${i}-${'x'.repeat(200)}`);
  for (let i = 0; i < paths.length; i += 100) await Promise.all(paths.slice(i, i + 100).map(async (u) => (await fetch(u)).arrayBuffer()));
  expect((await fetch(`${s.url}/healthz`)).status, 'still serving while its log is stalled').toBe(200);
  const sentAt = Date.now();
  s.proc.kill('SIGTERM');
  const exited = await Promise.race([s.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
  s.proc.stdout!.resume();
  expect(exited, 'exited within 15 s of SIGTERM with its log pipe unread').toBe(true);
  expect(Date.now() - sentAt).toBeLessThan(15_000);
}, 60_000);
