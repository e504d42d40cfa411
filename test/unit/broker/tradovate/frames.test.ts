import { describe, expect, test } from 'vitest';
import fc from 'fast-check';
import { CLIENT_HEARTBEAT, formatRequest, parseFrame, penaltyOf } from '../../../../src/broker/tradovate/frames.js';

describe('parseFrame', () => {
  test('open, heartbeat and close frames', () => {
    expect(parseFrame('o')).toEqual({ kind: 'open' });
    expect(parseFrame('h')).toEqual({ kind: 'heartbeat' });
    expect(parseFrame('c[1000,"bye"]')).toEqual({ kind: 'close', code: 1000, reason: 'bye' });
    expect(parseFrame('cgoing away')).toEqual({ kind: 'close', code: null, reason: 'going away' });
  });

  test('an a-frame mixing a response and a props event yields both, in order', () => {
    const f = parseFrame('a[{"s":200,"i":7,"d":{"orderId":5}},{"e":"props","d":{"entityType":"order","eventType":"Created","entity":{"id":5}}}]');
    expect(f).toEqual({
      kind: 'data',
      messages: [
        { kind: 'response', status: 200, requestId: 7, data: { orderId: 5 } },
        { kind: 'event', event: 'props', data: { entityType: 'order', eventType: 'Created', entity: { id: 5 } } },
      ],
    });
  });

  test('a bare JSON array (429 answers) is read like an a-frame', () => {
    expect(parseFrame('[{"s":429,"i":3}]')).toEqual({ kind: 'data', messages: [{ kind: 'response', status: 429, requestId: 3, data: undefined }] });
  });

  test('garbage never throws', () => {
    fc.assert(fc.property(fc.string(), (s) => {
      expect(() => parseFrame(s)).not.toThrow();
    }));
    expect(parseFrame('a[not json').kind).toBe('unknown');
  });
});

describe('formatRequest', () => {
  test('always four lines, the query line kept even when empty', () => {
    expect(formatRequest('order/placeorder', 4, '', { a: 1 })).toBe('order/placeorder\n4\n\n{"a":1}');
    expect(formatRequest('executionReport/list', 9)).toBe('executionReport/list\n9\n\n');
    expect(formatRequest('contract/item', 2, 'id=5')).toBe('contract/item\n2\nid=5\n');
  });

  test('a string body (the authorize token) is sent raw, not JSON-quoted', () => {
    expect(formatRequest('authorize', 0, '', 'tok')).toBe('authorize\n0\n\ntok');
  });

  test('the heartbeat frame is []', () => {
    expect(CLIENT_HEARTBEAT).toBe('[]');
  });
});

test('penaltyOf reads p-tickets and ignores ordinary answers', () => {
  expect(penaltyOf({ 'p-ticket': 't', 'p-time': 15, 'p-captcha': true })).toEqual({ ticket: 't', seconds: 15, captcha: true });
  expect(penaltyOf({ 'p-ticket': 't', 'p-time': 3 })).toEqual({ ticket: 't', seconds: 3, captcha: false });
  expect(penaltyOf({ orderId: 1 })).toBeNull();
  expect(penaltyOf('text')).toBeNull();
});

describe('parseFrame tolerance', () => {
  test('keeps answers with unknown keys, string ids and no d; skips messages it cannot classify', () => {
    const f = parseFrame('a[{"s":200,"i":"4","extra":1},{"weird":true},{"e":"chart","d":{"charts":[{"id":3,"eoh":true}]}},[]]');
    expect(f).toEqual({
      kind: 'data',
      messages: [
        { kind: 'response', status: 200, requestId: 4, data: undefined },
        { kind: 'event', event: 'chart', data: { charts: [{ id: 3, eoh: true }] } },
      ],
    });
    expect(parseFrame('a[]')).toEqual({ kind: 'data', messages: [] });
  });
});
