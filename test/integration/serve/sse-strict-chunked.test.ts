/**
 * The health stream as a client whose chunked decoder hands a chunk over only once its closing
 * CRLF has arrived (Python's urllib3, so `requests`): each message must arrive when it is sent,
 * not with the next write (client probe: one message late, the opening snapshot up to a
 * heartbeat, 15 s, late).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;

beforeAll(async () => {
  s = await startServe({ SSE_HEARTBEAT_MS: '20000' });
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

/** Reads a chunked body strictly: a chunk's data is handed over only with its trailing CRLF. */
function strictChunks(buffer: { text: string }, onChunk: (data: string) => void): void {
  for (;;) {
    const head = buffer.text.indexOf('\r\n');
    if (head < 0) return;
    const size = parseInt(buffer.text.slice(0, head), 16);
    if (Number.isNaN(size)) throw new Error(`bad chunk size line: ${JSON.stringify(buffer.text.slice(0, head))}`);
    const end = head + 2 + size;
    if (buffer.text.length < end + 2) return;
    if (buffer.text.slice(end, end + 2) !== '\r\n') throw new Error('chunk not closed by CRLF');
    onChunk(buffer.text.slice(head + 2, end));
    buffer.text = buffer.text.slice(end + 2);
  }
}

test('a strict chunked decoder gets the opening snapshot at once, not with the next write', async () => {
  const url = new URL(s.url);
  const socket = connect(Number(url.port), url.hostname);
  const opened = Date.now();
  const body: string[] = [];
  const buffer = { text: '' };
  let headersDone = false;
  const snapshot = new Promise<number>((resolve, reject) => {
    socket.on('data', (d) => {
      buffer.text += d.toString('latin1');
      if (!headersDone) {
        const i = buffer.text.indexOf('\r\n\r\n');
        if (i < 0) return;
        expect(buffer.text.slice(0, i)).toMatch(/transfer-encoding: chunked/i);
        headersDone = true;
        buffer.text = buffer.text.slice(i + 4);
      }
      try {
        strictChunks(buffer, (data) => {
          body.push(data);
          if (body.join('').includes('"type":"snapshot"')) resolve(Date.now() - opened);
        });
      } catch (err) {
        reject(err);
      }
    });
  });
  socket.write(`GET /api/v1/connection-health/stream HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\nX-API-Key: ${s.apiKey}\r\n\r\n`);
  try {
    const ms = await Promise.race([snapshot, new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
    expect(ms, `snapshot seen by a strict decoder after ${ms} ms (-1: not within 5 s)`).toBeGreaterThanOrEqual(0);
    expect(ms).toBeLessThan(2000);
  } finally {
    socket.destroy();
  }
});
