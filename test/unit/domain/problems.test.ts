import { describe, expect, it } from 'vitest';
import { AppError, PROBLEMS, fromErrorData, problem, toErrorData } from '../../../src/domain/problems.js';

describe('problem catalogue', () => {
  it('has the statuses DESIGN §3 requires', () => {
    const required: Record<string, number> = {
      VALIDATION_FAILED: 400, UNKNOWN_SYMBOL: 400, INVALID_IDEMPOTENCY_KEY: 400, UNAUTHENTICATED: 401,
      INSUFFICIENT_SCOPE: 403, ACCOUNT_INACTIVE: 403, NOT_FOUND: 404, SYMBOL_MISMATCH: 409,
      IDEMPOTENCY_KEY_IN_USE: 409, ORDER_NOT_WORKING: 409, PAYLOAD_TOO_LARGE: 413, UNSUPPORTED_MEDIA_TYPE: 415,
      IDEMPOTENCY_KEY_REUSED: 422, BROKER_REJECTED: 422, RATE_LIMITED: 429, BROKER_UNAVAILABLE: 503, BROKER_TIMEOUT: 504,
    };
    for (const [code, status] of Object.entries(required)) {
      expect(PROBLEMS[code as keyof typeof PROBLEMS]?.status, code).toBe(status);
    }
  });

  it('builds RFC 9457 bodies with the code and extensions', () => {
    const body = problem('UNKNOWN_SYMBOL', 'Unknown symbol: XYZ', { symbol: 'XYZ' });
    expect(body).toEqual({
      type: '/api-docs#problem-unknown-symbol',
      title: 'Unknown symbol',
      status: 400,
      detail: 'Unknown symbol: XYZ',
      code: 'UNKNOWN_SYMBOL',
      symbol: 'XYZ',
    });
  });

  it('carries errors across a thread boundary as data and rebuilds them by code', () => {
    const err = new AppError('BROKER_REJECTED', 'max position', { brokerReason: 'MaxPosLimitReached' });
    const data = structuredClone(toErrorData(err));
    expect(data).toEqual({ code: 'BROKER_REJECTED', message: 'max position', retryable: false, extensions: { brokerReason: 'MaxPosLimitReached' } });
    const back = fromErrorData(data);
    expect(back).toBeInstanceOf(AppError);
    expect(back.status).toBe(422);
    expect(back.toProblem().brokerReason).toBe('MaxPosLimitReached');
  });

  it('marks broker unavailability retryable and unknown errors INTERNAL', () => {
    expect(toErrorData(new AppError('BROKER_UNAVAILABLE')).retryable).toBe(true);
    expect(toErrorData(new Error('boom'))).toEqual({ code: 'INTERNAL', message: 'boom', retryable: false });
    expect(fromErrorData({ code: 'NOPE' as never, message: 'x', retryable: false }).code).toBe('INTERNAL');
  });
});
