import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventRing, formatRetry, formatSseEvent, formatSseMessage, parseLastEventId, statusMessage } from '../../../src/http/sse.js';

/** Parses frames the way the WHATWG EventSource algorithm does (enough for id + data). */
function parse(stream: string): { id?: string; data: string }[] {
  return stream
    .split('\n\n')
    .filter((b) => b.length > 0)
    .map((block) => {
      const out: { id?: string; data: string[] } = { data: [] };
      for (const line of block.split('\n')) {
        const i = line.indexOf(':');
        const field = line.slice(0, i);
        const value = line.slice(i + 1).replace(/^ /, '');
        if (field === 'id') out.id = value;
        if (field === 'data') out.data.push(value);
      }
      return { ...(out.id !== undefined ? { id: out.id } : {}), data: out.data.join('\n') };
    });
}

describe('SSE serializer', () => {
  it('frames id and data lines ending in a blank line', () => {
    expect(formatSseEvent(7, { type: 'heartbeat', ts: 1 })).toBe('id: 7\ndata: {"type":"heartbeat","ts":1}\n\n');
    expect(formatRetry()).toBe('retry: 3000\n\n');
  });

  it('splits multi-line data into data lines and refuses ids that would break framing', () => {
    expect(formatSseMessage(undefined, 'a\nb\r\nc')).toBe('data: a\ndata: b\ndata: c\n\n');
    expect(() => formatSseMessage('1\n2', 'x')).toThrow();
  });

  it('property: a client parsing the stream gets back every payload and id', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.string({ maxLength: 40 }).map((s) => s.replace(/\r/g, ''))), { minLength: 1, maxLength: 20 }), (msgs) => {
        const stream = msgs.map(([id, data]) => formatSseMessage(id, data)).join('');
        const parsed = parse(stream);
        expect(parsed).toEqual(msgs.map(([id, data]) => ({ id: String(id), data })));
      }),
    );
  });

  it('statusMessage keeps reason and detail only when present', () => {
    expect(statusMessage({ connectionId: 'c', status: 'CONNECTED', ts: 5 }, 'snapshot')).toEqual({ type: 'snapshot', connectionId: 'c', status: 'CONNECTED', ts: 5 });
    expect(statusMessage({ connectionId: 'c', status: 'FAILED', ts: 5, reason: 'fatal-error', detail: 'bad password' })).toEqual({
      type: 'status', connectionId: 'c', status: 'FAILED', ts: 5, reason: 'fatal-error', detail: 'bad password',
    });
  });

  it('parseLastEventId accepts plain integers only', () => {
    expect(parseLastEventId('42')).toBe(42);
    expect(parseLastEventId(' 42 ')).toBe(42);
    for (const bad of [undefined, '', 'x', '-1', '1.5', '99999999999999999']) expect(parseLastEventId(bad)).toBeUndefined();
  });
});

describe('EventRing', () => {
  it('resumes exactly after the last seen id while covered, and refuses ids it no longer covers', () => {
    const ring = new EventRing(3, 100);
    for (let s = 101; s <= 105; s++) ring.push(s, `f${s}`);
    expect(ring.size).toBe(3);
    expect(ring.floor).toBe(102);
    expect(ring.since(102, 105)).toEqual(['f103', 'f104', 'f105']);
    expect(ring.since(104, 105)).toEqual(['f105']);
    expect(ring.since(105, 105)).toEqual([]);
    expect(ring.since(101, 105)).toBeUndefined();
    expect(ring.since(106, 105)).toBeUndefined();
    expect(ring.since(99, 105)).toBeUndefined();
  });

  it('property: since(x) is exactly the pushed frames after x whenever x is covered', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 0, max: 30 }), fc.nat(40), (cap, count, probe) => {
        const ring = new EventRing(cap, 0);
        for (let s = 1; s <= count; s++) ring.push(s, `f${s}`);
        const got = ring.since(probe, count);
        const oldestKept = Math.max(1, count - cap + 1);
        if (probe > count || probe < oldestKept - 1) expect(got).toBeUndefined();
        else expect(got).toEqual(Array.from({ length: count - probe }, (_, i) => `f${probe + 1 + i}`));
      }),
    );
  });
});
