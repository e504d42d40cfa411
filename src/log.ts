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

const WEBHOOK_TOKEN = /whk_[A-Za-z0-9]+_[A-Za-z0-9]+/g;
const API_KEY = /tgk_[A-Za-z0-9]+_[A-Za-z0-9]+/g;
/** What a path must contain for redactUrl to look closer (an escape may spell any of them). */
const SUSPECT = /%|whk_|tgk_|webhooks/i;

function decodeSegment(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Replaces webhook tokens and API keys inside a URL or path with a marker, however the path
 * spells them: the router decodes every segment (`/webhooks/%77hk_…` and `whk%5F…` authenticate),
 * so segments are decoded here too, and everything after a `webhooks` segment is redacted
 * whatever it looks like. A path with nothing to redact is returned as it came.
 */
export function redactUrl(url: string): string {
  // Most paths hold none of it: one regex test.
  if (!SUSPECT.test(url)) return url;
  let redacted = false;
  let afterWebhooks = false;
  const parts = url.split('/').map((raw) => {
    const segment = decodeSegment(raw);
    if (afterWebhooks && segment !== '') {
      redacted = true;
      return segment.startsWith('whk_') ? 'whk_[redacted]' : '[redacted]';
    }
    if (segment.toLowerCase() === 'webhooks') afterWebhooks = true;
    const out = segment.replace(WEBHOOK_TOKEN, 'whk_[redacted]').replace(API_KEY, 'tgk_[redacted]');
    if (out === segment) return raw;
    redacted = true;
    return out;
  });
  return redacted ? parts.join('/') : url;
}
