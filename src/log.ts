/**
 * pino with redaction. Secrets must never reach a log line: API keys, passwords, webhook
 * tokens, broker access tokens. Redaction works on paths, so code logs structured objects
 * and never interpolates secrets into messages; `redactUrl` strips tokens from URLs.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

const SECRET_KEYS = [
  'x-api-key',
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'apiKey',
  'key',
  'secret',
  'token',
  'webhookToken',
  'accessToken',
  'mdAccessToken',
  'sec',
  'p-ticket',
  'dataKey',
];

/** Redaction paths: each secret name at the top level and one or two levels deep. */
export const REDACT_PATHS = SECRET_KEYS.flatMap((k) => {
  const plain = /^[A-Za-z_$][\w$]*$/.test(k);
  const top = plain ? k : `["${k}"]`;
  const nested = plain ? `.${k}` : `["${k}"]`;
  return [top, `*${nested}`, `*.*${nested}`];
});

/** Creates the process logger. `destination` exists for tests that capture output. */
export function createLogger(
  level: LevelWithSilent = 'info',
  destination?: NodeJS.WritableStream,
  bindings: Record<string, unknown> = {},
): Logger {
  const options = {
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination as pino.DestinationStream) : pino(options);
}

/** Replaces webhook tokens and API keys inside a URL or path with a marker. */
export function redactUrl(url: string): string {
  // Most paths hold neither: skip the two regex passes.
  if (!url.includes('whk_') && !url.includes('tgk_')) return url;
  return url.replace(/whk_[A-Za-z0-9]+_[A-Za-z0-9]+/g, 'whk_[redacted]').replace(/tgk_[A-Za-z0-9]+_[A-Za-z0-9]+/g, 'tgk_[redacted]');
}
