/**
 * The one place that reads process.env. Flags and environment are merged (flags win),
 * parsed once by zod and frozen; the result is passed down explicitly and into workers
 * through `workerData`.
 */
import { resolve } from 'node:path';
import { z } from 'zod';
import { MAX_ORDER_QTY, ORDER_QTY_CEILING, PRICE_BAND_FACTOR } from './domain/orders.js';
import { isIP } from 'node:net';

/**
 * A whole number as a setting is written: decimal digits only. `z.coerce.number()` took `0x10`
 * as 16 and `1e3` as 1000 (operator probe), which no operator means by a port or a limit.
 */
const wholeNumber = z.preprocess(
  (v) => (typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : v),
  z.number({ error: 'must be a whole number in decimal digits' }).int().max(Number.MAX_SAFE_INTEGER),
);
const port = wholeNumber.pipe(z.number().min(0).max(65535));
/** A decimal number as a setting is written (`1.5`, `20`): `0x10`, `1e1` and `0b11` were taken as 16, 10 and 3 (docs probe). */
const decimal = z.preprocess(
  (v) => (typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v) ? Number(v) : v),
  z.number({ error: 'must be a number in decimal digits (such as 1.5)' }),
);
/** A whole number from `min` (1) to `max`. */
const positiveInt = (max = Number.MAX_SAFE_INTEGER, min = 1) => wholeNumber.pipe(z.number().min(min).max(max));
/** Longest timer Node can set (2^31 − 1 ms); a longer one fires at once, every time (TimeoutOverflowWarning). */
const TIMER_MAX_MS = 2_147_483_647;
/** Node ids and the cluster prefix become KV keys and subject tokens. */
const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/;
const natsUrls = z
  .string()
  .transform((raw) => raw.split(',').map((u) => u.trim()).filter(Boolean))
  .pipe(
    z
      .array(z.string().regex(/^(nats|tls):\/\/[^\s,/]+\/?$/, 'each server must be nats://host:port (or tls://host:port)'))
      .min(1, 'name at least one NATS server'),
  );
/** Names a TRUST_PROXY setting may use for a set of ranges (src/http/client-address.ts holds them). */
export const TRUST_PROXY_GROUPS = ['loopback', 'private'] as const;
export type TrustProxyGroup = (typeof TRUST_PROXY_GROUPS)[number];

/** Why an entry of a TRUST_PROXY list is not one; undefined when it is. */
function trustProxyEntryError(entry: string): string | undefined {
  if ((TRUST_PROXY_GROUPS as readonly string[]).includes(entry)) return undefined;
  const [address, bits, ...rest] = entry.split('/');
  const family = isIP(address ?? '');
  if (family === 0 || rest.length > 0) return `'${entry}' is not an IP address, a CIDR range, 'loopback' or 'private'`;
  const max = family === 4 ? 32 : 128;
  if (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > max)) return `'${entry}': the prefix length must be 0-${max}`;
  return undefined;
}

/** 'loopback, 10.0.0.0/8, 192.0.2.7': the reverse proxies whose X-Forwarded-For is believed. */
const trustProxy = z
  .string()
  .transform((raw) =>
    raw
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean),
  )
  .superRefine((entries, ctx) => {
    for (const entry of entries) {
      const error = trustProxyEntryError(entry);
      if (error) ctx.addIssue({ code: 'custom', message: error });
    }
  });
const bool = z.union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no', ''])], { error: 'must be true, false, 1, 0, yes or no' }).transform((v) =>
  typeof v === 'boolean' ? v : v === 'true' || v === '1' || v === 'yes' || v === '',
);

export const configSchema = z
  .object({
    port: port.default(8080),
    host: z.string().min(1).default('127.0.0.1'),
    dataDir: z.string().min(1).default('./data'),
    paper: bool.default(false),
    /** 0 = pick a free port. */
    paperPort: port.default(0),
    // The webhook URLs are built on it: http(s) only, no query or fragment (a '#x' made every
    // token URL end in the fragment, which a client never sends: the alerts reached '/').
    baseUrl: z
      .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
      .refine((u) => !/[?#]/.test(u), 'must have no query (?) or fragment (#): webhook URLs are built on it')
      // A password in it would be printed at start and sent in every webhook URL (fuzz probe).
      .refine((u) => URL.canParse(u) && new URL(u).username === '' && new URL(u).password === '', 'must have no user name or password (user:pass@): it is printed at start and sent in webhook URLs')
      // As the web app and webhook URLs use it: `/a/../b/` is `/b/` (the banner printed it raw).
      .transform((u) => new URL(u).href)
      .optional(),
    /** Reverse proxies whose X-Forwarded-For names the client (src/http/client-address.ts); none by default. */
    trustProxy: trustProxy.default([]),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    // At least 100 ms: 1 ms was taken, and sent a health stream 1,548 heartbeats in 2 s; at most 10 minutes
    // (proxies drop a stream silent for a minute or so; past Node's longest timer it fired every millisecond).
    sseHeartbeatMs: positiveInt(Math.min(600_000, TIMER_MAX_MS), 100).default(15_000),
    rateLimitPerMin: positiveInt().default(120),
    webhookRateLimitPerMin: positiveInt().default(120),
    actorThreadsMax: positiveInt().default(64),
    sseMaxStreamsPerKey: positiveInt().default(5),
    /** 64 hex chars (32 bytes); when absent a 0600 key file is created in the data dir. */
    dataKey: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex characters (32 bytes)')
      .optional(),
    bodyLimitBytes: positiveInt(16 * 1024 * 1024).default(64 * 1024),
    /** Web-app session: ends after this long without a request. */
    sessionIdleMinutes: positiveInt(7 * 24 * 60).default(60),
    /** Web-app session: ends this long after sign-in, however active. */
    sessionMaxHours: positiveInt(30 * 24).default(12),
    /** Largest quantity of one order (API, webhooks, strategies). */
    orderQtyMax: positiveInt(ORDER_QTY_CEILING).default(MAX_ORDER_QTY),
    /** Per-user quotas: broker connections, webhook tokens, strategies, API keys not revoked. */
    quotaConnections: positiveInt().default(10),
    quotaWebhookTokens: positiveInt().default(100),
    quotaStrategies: positiveInt().default(100),
    quotaApiKeys: positiveInt().default(50),
    /** Connection actors the whole service runs (each ~17 MB and a share of a thread). */
    actorsMax: positiveInt().default(200),
    /**
     * Shortest time between two manual reconnects of one connection. Each is a broker login; on
     * Tradovate repeated failed logins end in a captcha lock for an hour that no program can lift.
     */
    reconnectMinIntervalS: positiveInt(3600).default(30),
    /** A price must lie within the product's reference price ÷ this … × this. */
    priceBandFactor: decimal.pipe(z.number().finite().min(1.5).max(1000)).default(PRICE_BAND_FACTOR),
    /** /metrics listener; loopback by default so it is never public by accident. */
    metricsHost: z.string().min(1).default('127.0.0.1'),
    /** Unset: 9464, or a free port when 9464 is taken; set: exactly this port (0 = a free port). */
    metricsPort: port.optional(),
    /** Cluster mode: the NATS servers (`nats://host:4222`, comma-separated); absent = single node on LMDB. */
    cluster: natsUrls.optional(),
    /** This node's name in the cluster (leases, logs); default `<hostname>-<pid>`. */
    nodeId: z.string().regex(NODE_ID, 'must be 1..64 characters of A-Z a-z 0-9 _ -').optional(),
    /** JetStream replicas of the buckets and streams a cluster creates: 1 or 3 (default 3 with three or more servers listed, else 1). */
    clusterReplicas: wholeNumber.refine((n) => n === 1 || n === 3, 'must be 1 or 3').optional(),
    /** Names the cluster's buckets and streams, so several clusters can share one NATS. */
    clusterPrefix: z.string().regex(NODE_ID, 'must be 1..64 characters of A-Z a-z 0-9 _ -').max(32).default('tradegate'),
  })
  .strict();

export type Config = Readonly<z.output<typeof configSchema>>;
export type ConfigInput = z.input<typeof configSchema>;

/** Environment variable → config field. */
const ENV: Record<string, keyof ConfigInput> = {
  PORT: 'port',
  HOST: 'host',
  TRADEGATE_DATA_DIR: 'dataDir',
  TRADEGATE_PAPER: 'paper',
  TRADEGATE_PAPER_PORT: 'paperPort',
  TRADEGATE_BASE_URL: 'baseUrl',
  TRUST_PROXY: 'trustProxy',
  LOG_LEVEL: 'logLevel',
  SSE_HEARTBEAT_MS: 'sseHeartbeatMs',
  RATE_LIMIT_PER_MIN: 'rateLimitPerMin',
  WEBHOOK_RATE_LIMIT_PER_MIN: 'webhookRateLimitPerMin',
  ACTOR_THREADS_MAX: 'actorThreadsMax',
  SSE_MAX_STREAMS_PER_KEY: 'sseMaxStreamsPerKey',
  TRADEGATE_DATA_KEY: 'dataKey',
  BODY_LIMIT_BYTES: 'bodyLimitBytes',
  SESSION_IDLE_MINUTES: 'sessionIdleMinutes',
  SESSION_MAX_HOURS: 'sessionMaxHours',
  ORDER_QTY_MAX: 'orderQtyMax',
  QUOTA_CONNECTIONS: 'quotaConnections',
  QUOTA_WEBHOOK_TOKENS: 'quotaWebhookTokens',
  QUOTA_STRATEGIES: 'quotaStrategies',
  QUOTA_API_KEYS: 'quotaApiKeys',
  ACTORS_MAX: 'actorsMax',
  RECONNECT_MIN_INTERVAL_S: 'reconnectMinIntervalS',
  PRICE_BAND_FACTOR: 'priceBandFactor',
  METRICS_HOST: 'metricsHost',
  METRICS_PORT: 'metricsPort',
  TRADEGATE_CLUSTER: 'cluster',
  TRADEGATE_NODE_ID: 'nodeId',
  TRADEGATE_CLUSTER_REPLICAS: 'clusterReplicas',
  TRADEGATE_CLUSTER_PREFIX: 'clusterPrefix',
};

/** Flag name (kebab-case) → config field. */
const FLAGS: Record<string, keyof ConfigInput> = {
  port: 'port',
  host: 'host',
  'data-dir': 'dataDir',
  paper: 'paper',
  'paper-port': 'paperPort',
  'base-url': 'baseUrl',
  'trust-proxy': 'trustProxy',
  'log-level': 'logLevel',
  'metrics-port': 'metricsPort',
  cluster: 'cluster',
  'node-id': 'nodeId',
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function settingName(field: string): string {
  const env = Object.entries(ENV).find(([, f]) => f === field)?.[0];
  const flag = Object.entries(FLAGS).find(([, f]) => f === field)?.[0];
  return [flag && `--${flag}`, env].filter(Boolean).join(' / ') || field;
}

/**
 * Builds the frozen Config from flags (already parsed, kebab-case keys) and an environment.
 * Throws ConfigError naming the offending setting.
 */
export function loadConfig(
  flags: Record<string, string | boolean | undefined> = {},
  env: NodeJS.ProcessEnv = process.env,
): Config {
  const input: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(ENV)) {
    const value = env[name];
    if (value !== undefined && value !== '') input[field] = value;
  }
  for (const [name, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    const field = FLAGS[name];
    if (!field) throw new ConfigError(`unknown option --${name}`);
    input[field] = value;
  }
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${settingName(String(i.path[0] ?? ''))}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return Object.freeze({ ...parsed.data, dataDir: resolve(parsed.data.dataDir) });
}

/** Names of the flags `serve` accepts (for parseArgs). */
/**
 * The path of TRADEGATE_BASE_URL without its trailing slash (`https://host/tg/` → `/tg`), '' when
 * it has none: the prefix a reverse proxy serves tradegate under and strips before passing a request
 * on. The web app's links and the OpenAPI document's servers carry it.
 */
export function basePathOf(config: Pick<Config, 'baseUrl'>): string {
  if (config.baseUrl === undefined) return '';
  return new URL(config.baseUrl).pathname.replace(/\/+$/, '');
}

export const CONFIG_FLAGS = Object.keys(FLAGS);

/** Environment variable names, for docs and `--help`. */
export const CONFIG_ENV = Object.keys(ENV);
