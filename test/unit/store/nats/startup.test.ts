/**
 * Start-up retries of JetStream calls (whileStarting): what counts as "NATS cannot answer yet",
 * and that anything else, or the end of the wait, still fails the start.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import { connect, NoRespondersError, PermissionViolationError, RequestError, TimeoutError } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { StartupAbortedError } from '../../../../src/store/nats/startup-abort.js';
import { isTransientNatsError, isUnreachableNats, serializesRevisionChecks, whileStarting } from '../../../../src/store/nats/startup.js';
import { freePorts } from '../../../support/nats.js';

const apiError = (code: number, errCode: number, description: string) => new JetStreamApiError({ code, err_code: errCode, description });

describe('isTransientNatsError', () => {
  it('a timeout, no responders, a 5xx of the JetStream API and "no suitable peers" are worth waiting for', () => {
    expect(isTransientNatsError(new TimeoutError())).toBe(true);
    expect(isTransientNatsError(new NoRespondersError('$JS.API.INFO'))).toBe(true);
    expect(isTransientNatsError(new RequestError('no responders', { cause: new NoRespondersError('$JS.API.INFO') }))).toBe(true);
    expect(isTransientNatsError(apiError(503, 10008, 'JetStream system temporarily unavailable'))).toBe(true);
    expect(isTransientNatsError(apiError(500, 10005, 'no suitable peers for placement, peer offline'))).toBe(true);
    expect(isTransientNatsError(apiError(400, 10005, 'no suitable peers for placement'))).toBe(true);
  });

  it('a refused setting, a missing stream, a permission or a plain error are final', () => {
    expect(isTransientNatsError(apiError(400, 10058, 'stream name already in use with a different configuration'))).toBe(false);
    expect(isTransientNatsError(apiError(404, 10059, 'stream not found'))).toBe(false);
    expect(isTransientNatsError(new PermissionViolationError('denied', 'publish', '$JS.API.>'))).toBe(false);
    expect(isTransientNatsError(new Error('KV bucket x has ttl 0 ms, expected 60000 ms'))).toBe(false);
    expect(isTransientNatsError('timeout')).toBe(false);
  });
});

describe('whileStarting', () => {
  it('calls again after transient failures and returns the first success', async () => {
    let calls = 0;
    const value = await whileStarting('test', async () => {
      if (++calls < 3) throw new TimeoutError();
      return 'open';
    }, { waitMs: 10_000 });
    expect(value).toBe('open');
    expect(calls).toBe(3);
  });

  it('waits out a stream not found, which a stream another node has just created can be for a moment on a cluster (CI: a node exited at start); elsewhere it stays final', async () => {
    let calls = 0;
    const value = await whileStarting('test', async () => {
      if (++calls < 2) throw apiError(404, 10059, 'stream not found');
      return 'open';
    }, { waitMs: 10_000 });
    expect(value).toBe('open');
    expect(calls).toBe(2);
  });

  it('a final error fails at once, without a second call', async () => {
    let calls = 0;
    const err = await whileStarting('test', async () => {
      calls++;
      throw new Error('KV bucket x has ttl 0 ms, expected 60000 ms');
    }, { waitMs: 10_000 }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/ttl/);
    expect(calls).toBe(1);
  });

  it('gives up when the wait is over, with the last error', async () => {
    let calls = 0;
    const started = performance.now();
    const err = await whileStarting('test', async () => {
      calls++;
      throw new TimeoutError();
    }, { waitMs: 600 }).catch((e: unknown) => e);
    expect((err as Error).name).toBe('TimeoutError');
    expect(calls).toBeGreaterThan(1);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('an aborted signal ends the wait during its pause, with StartupAbortedError and no further call', async () => {
    const stop = new AbortController();
    let calls = 0;
    const started = performance.now();
    const waiting = whileStarting('opening KV bucket x', async () => {
      calls++;
      // The third attempt's pause is 750 ms: abort inside it.
      if (calls === 3) setTimeout(() => stop.abort(), 50);
      throw new TimeoutError();
    }, { waitMs: 60_000, signal: stop.signal }).catch((e: unknown) => e);
    const err = await waiting;
    expect(err).toBeInstanceOf(StartupAbortedError);
    expect((err as Error).message).toBe('opening KV bucket x: stopped while waiting for NATS');
    expect(calls).toBe(3);
    // 250 + 500 ms of pauses, then 50 ms into the third: far from the 750 ms that pause would take.
    expect(performance.now() - started).toBeLessThan(1_200);
  });

  it('a signal aborted before the first call makes none', async () => {
    let calls = 0;
    const err = await whileStarting('x', async () => {
      calls++;
      return 1;
    }, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupAbortedError);
    expect(calls).toBe(0);
  });
});

describe('isUnreachableNats (connecting at start-up)', () => {
  it('a refused connection is worth waiting for when connecting, not for a JetStream call', async () => {
    const refused = await connect({ servers: [`nats://127.0.0.1:${(await freePorts(1))[0]!}`] }).catch((e: unknown) => e);
    expect((refused as Error).name).toBe('ConnectionError');
    expect(isUnreachableNats(refused)).toBe(true);
    expect(isTransientNatsError(refused)).toBe(false);
    expect(isUnreachableNats(new TimeoutError())).toBe(true);
    expect(isUnreachableNats(new Error('TRADEGATE_DATA_KEY differs'))).toBe(false);
  });
});

describe('serializesRevisionChecks (nats-io/nats-server#4320, fixed in 2.9.21)', () => {
  it.each([
    ['2.9.10', false], ['2.9.20', false], ['2.9.21', true], ['2.10.0', true], ['v2.11.3', true], ['3.0.0', true], ['2.8.4', false], ['', false], [undefined, false],
  ])('%s → %s', (version, expected) => {
    expect(serializesRevisionChecks(version)).toBe(expected);
  });
});
