import { describe, expect, it } from 'vitest';
import { createSseParser } from '../../../bench/sse-subscribers.js';

describe('SSE parser of the fan-out subscribers', () => {
  it('yields each message once, whatever the chunk boundaries, joining multi-line data and ignoring ids and retry', () => {
    const got: string[] = [];
    const feed = createSseParser((d) => got.push(d));
    const stream = 'retry: 3000\n\nid: 1\ndata: {"a":1}\n\nid: 2\r\ndata: {"b":\r\ndata: 2}\r\n\r\n: comment\n\n';
    for (const ch of stream) feed(ch);
    expect(got).toEqual(['{"a":1}', '{"b":\n2}']);
  });
});
