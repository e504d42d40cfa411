import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, redactUrl } from '../../src/log.js';

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
