import { describe, expect, it } from 'vitest';
import { readRequestHead, repeatedHeaderError } from '../../../src/http/request-head.js';

const req = (method: string, headers: [string, string][]) => ({
  getMethod: () => method,
  forEach: (cb: (k: string, v: string) => void) => headers.forEach(([k, v]) => cb(k, v)),
});

describe('readRequestHead', () => {
  it('serves HEAD as GET and remembers it was HEAD', () => {
    expect(readRequestHead(req('head', []))).toMatchObject({ method: 'GET', head: true });
    expect(readRequestHead(req('post', []))).toMatchObject({ method: 'POST', head: false });
  });

  it('notes credential and identity headers sent twice, once each', () => {
    const head = readRequestHead(req('get', [['x-api-key', 'a'], ['x-api-key', 'b'], ['x-api-key', 'c'], ['idempotency-key', 'k'], ['idempotency-key', 'k']]));
    expect(head.repeated).toEqual(['x-api-key', 'idempotency-key']);
    expect(head.headers['x-api-key']).toBe('a');
  });

  it('two Content-Length values that disagree put the framing in doubt; the same value twice does not', () => {
    expect(readRequestHead(req('post', [['content-length', '2'], ['content-length', '60']]))).toMatchObject({ framingInDoubt: true, repeated: ['content-length'] });
    expect(readRequestHead(req('post', [['content-length', '2'], ['content-length', ' 2']]))).not.toHaveProperty('framingInDoubt');
    expect(readRequestHead(req('post', [['content-length', '2']]))).not.toHaveProperty('framingInDoubt');
  });

  it('joins other repeated headers with ", "', () => {
    const head = readRequestHead(req('get', [['accept', 'a/b'], ['accept', 'c/d']]));
    expect(head.headers.accept).toBe('a/b, c/d');
    expect(head.repeated).toEqual([]);
  });
});

describe('repeatedHeaderError', () => {
  it('is a 400 naming each header, or nothing', () => {
    expect(repeatedHeaderError([])).toBeUndefined();
    expect(repeatedHeaderError(['x-api-key'])).toMatchObject({ code: 'VALIDATION_FAILED', status: 400, extensions: { errors: [{ path: 'header.x-api-key' }] } });
  });
});
