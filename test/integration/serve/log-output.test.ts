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
