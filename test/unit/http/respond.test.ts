/** Problem answers from thrown AppErrors (src/http/respond.ts). */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { appErrorReply, DEFAULT_UNAVAILABLE_RETRY_AFTER_S } from '../../../src/http/respond.js';

describe('appErrorReply', () => {
  it('carries the thrower’s Retry-After', () => {
    const r = appErrorReply(new AppError('RATE_LIMITED', 'slow down', {}, 7));
    expect(r.status).toBe(429);
    expect(r.headers['Retry-After']).toBe('7');
  });

  it('always tells a 503 client when to come back, even when the thrower did not say (DESIGN §3)', () => {
    const r = appErrorReply(new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING'));
    expect(r.status).toBe(503);
    expect(r.headers['Content-Type']).toBe('application/problem+json');
    expect(r.headers['Retry-After']).toBe(String(DEFAULT_UNAVAILABLE_RETRY_AFTER_S));
    expect(JSON.parse(String(r.body))).toMatchObject({ status: 503, code: 'BROKER_UNAVAILABLE' });
  });

  it('adds no Retry-After to other errors', () => {
    expect(appErrorReply(new AppError('NOT_FOUND', 'Not found')).headers['Retry-After']).toBeUndefined();
  });
});
