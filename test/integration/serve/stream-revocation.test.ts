/**
 * Revoking a key ends its open health streams: a final `revoked` message, then the server
 * ends the stream; reconnecting gets 401. The revocation comes from the CLI in another process
 * (`tradegate keys revoke` on the served data dir), as an operator does it. Real SSE clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createKey, startServe, type Served } from '../../support/processes.js';
import { openHealthStream, streamStatus } from '../../support/sse.js';

let s: Served;

beforeAll(async () => {
  s = await startServe({ SSE_HEARTBEAT_MS: '200' });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('revocation reaches open streams (item 2)', () => {
  it('a key revoked by the CLI ends its streams within the re-check bound, after a revoked message; other keys stream on', async () => {
    const doomed = await createKey(s, 'demo', 'read', 'doomed');
    const first = await openHealthStream(s.url, doomed.key);
    const second = await openHealthStream(s.url, doomed.key);
    const bystander = await openHealthStream(s.url, s.apiKey);
    try {
      await first.waitFor((e) => e.type === 'heartbeat', 0, 5_000);
      const revokedAt = Date.now();
      await cli(s, ['keys', 'revoke', doomed.id]);
      for (const stream of [first, second]) {
        const { event } = await stream.waitFor((e) => e.type === 'revoked', 0, 5_000);
        expect(event).toMatchObject({ type: 'revoked', reason: 'key-revoked' });
        await stream.ended;
        expect(stream.events[stream.events.length - 1]!.type).toBe('revoked');
      }
      // CLI start-up is most of this; the re-check itself runs every second.
      expect(Date.now() - revokedAt).toBeLessThan(5_000);
      expect(await streamStatus(s.url, doomed.key)).toBe(401);
      const seen = bystander.events.length;
      await bystander.waitFor((e) => e.type === 'heartbeat', seen, 5_000);
      expect(bystander.events.some((e) => e.type === 'revoked')).toBe(false);
    } finally {
      for (const stream of [first, second, bystander]) stream.close();
    }
  });
});
