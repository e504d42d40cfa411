import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { accessLineWriter, createLogger, redactUrl, type AccessFields } from '../../src/log.js';

function capture(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  return { stream, text: () => chunks.join('') };
}

describe('logger redaction', () => {
  it('never writes API keys, passwords, webhook or broker tokens', () => {
    const out = capture();
    const log = createLogger('info', out.stream);
    log.info(
      {
        headers: { 'x-api-key': 'tgk_AAAAAAAAAAAA_secretsecretsecretsecretsecretsecr', authorization: 'Bearer brokertok' },
        password: 'hunter2',
        auth: { accessToken: 'acc-123', mdAccessToken: 'md-456' },
        credentials: { password: 'pw-789' },
        token: 'whk_x_y',
      },
      'request',
    );
    const text = out.text();
    for (const secret of ['secretsecret', 'brokertok', 'hunter2', 'acc-123', 'md-456', 'pw-789', 'whk_x_y']) {
      expect(text).not.toContain(secret);
    }
    expect(text).toContain('[redacted]');
  });

  it('redacts tokens embedded in URLs', () => {
    expect(redactUrl('/api/v1/webhooks/whk_abc123_DEF456')).toBe('/api/v1/webhooks/whk_[redacted]');
    expect(redactUrl('key tgk_abc_def here')).toBe('key tgk_[redacted] here');
    expect(redactUrl('/api/v1/accounts/7/orders')).toBe('/api/v1/accounts/7/orders');
    expect(redactUrl('/api/v1/accounts/%37/orders')).toBe('/api/v1/accounts/%37/orders');
  });

  it('redacts tokens however the path encodes them, and anything after a webhooks segment', () => {
    expect(redactUrl('/api/v1/webhooks/%77hk_abc_DEF')).toBe('/api/v1/webhooks/whk_[redacted]');
    expect(redactUrl('/api/v1/webhooks/whk%5Fabc_DEF')).toBe('/api/v1/webhooks/whk_[redacted]');
    expect(redactUrl('/api/v1/%77ebhooks/%2577hk_abc_DEF')).toBe('/api/v1/%77ebhooks/[redacted]');
    expect(redactUrl('/v1//WEBHOOKS/anything-at-all/')).toBe('/v1//WEBHOOKS/[redacted]/');
    expect(redactUrl('/api/v1/webhooks%2Fwhk_abc_DEF')).toBe('/api/v1/webhooks/whk_[redacted]');
    expect(redactUrl('/api/v1/things/%74gk_abc_DEF/x%ZZ')).toBe('/api/v1/things/tgk_[redacted]/x%ZZ');
  });
});

describe('access lines', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** The same fields through pino's own serialiser and through the access writer, at one instant. */
  function bothWays(fields: AccessFields, bindings: Record<string, unknown> = {}): { pino: string; ours: string } {
    vi.useFakeTimers({ now: Date.UTC(2026, 10, 28, 21, 30, 5, 123), toFake: ['Date'] });
    const viaPino = capture();
    const viaWriter = capture();
    const base = createLogger('info', viaPino.stream).child(bindings);
    base.info(fields, 'request');
    accessLineWriter(createLogger('info', viaWriter.stream).child(bindings))(fields);
    return { pino: viaPino.text(), ours: viaWriter.text() };
  }

  it('are byte for byte what pino writes for the same fields, bindings and clock', () => {
    const plain = bothWays({ reqId: 'abc-1', method: 'GET', path: '/api/v1/accounts', status: 200, ms: 3, principal: 'key_1' });
    expect(plain.ours).toBe(plain.pino);
    expect(JSON.parse(plain.ours)).toMatchObject({ level: 30, time: '2026-11-28T21:30:05.123Z', pid: process.pid, reqId: 'abc-1', status: 200, msg: 'request' });
    const cluster = bothWays({ reqId: 'r', method: 'POST', path: '/v1/x', status: 201, ms: 0, principal: 'p' }, { node: 'n1' });
    expect(cluster.ours).toBe(cluster.pino);
    expect(JSON.parse(cluster.ours).node).toBe('n1');
  });

  it('escape what a client can put in a request id or a path, and leave out a missing principal', () => {
    const odd = bothWays({ reqId: 'a"b\\c}{', method: 'GET', path: '/x/"\u0001\u2028é/\ud800', status: 404, ms: 12, principal: undefined });
    expect(odd.ours).toBe(odd.pino);
    const parsed = JSON.parse(odd.ours);
    expect(parsed.reqId).toBe('a"b\\c}{');
    expect(parsed.path).toBe('/x/"\u0001\u2028é/\ud800');
    expect('principal' in parsed).toBe(false);
    expect(odd.ours.endsWith('}\n')).toBe(true);
    expect(odd.ours.split('\n')).toHaveLength(2);
  });

  it('are not written below info', () => {
    const out = capture();
    accessLineWriter(createLogger('warn', out.stream))({ reqId: 'r', method: 'GET', path: '/', status: 200, ms: 0 });
    expect(out.text()).toBe('');
  });
});
