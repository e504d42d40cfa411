import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies the documented defaults when nothing is set', () => {
    const c = loadConfig({}, {});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.rateLimitPerMin).toBe(120);
    expect(c.sseHeartbeatMs).toBe(15_000);
    expect(c.sseMaxStreamsPerKey).toBe(5);
    expect(c.paper).toBe(false);
    expect(c.dataDir.endsWith('/data')).toBe(true);
  });

  it('reads the environment and lets flags win over it', () => {
    const c = loadConfig({ port: '9001', paper: true }, { PORT: '7000', HOST: '0.0.0.0', RATE_LIMIT_PER_MIN: '60' });
    expect(c.port).toBe(9001);
    expect(c.host).toBe('0.0.0.0');
    expect(c.rateLimitPerMin).toBe(60);
    expect(c.paper).toBe(true);
  });

  it('returns a frozen object', () => {
    const c = loadConfig({}, {});
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('stops start-up with a message naming the bad setting', () => {
    expect(() => loadConfig({}, { PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { PORT: 'eighty' })).toThrow(/--port \/ PORT/);
    expect(() => loadConfig({}, { SSE_HEARTBEAT_MS: '-5' })).toThrow(/SSE_HEARTBEAT_MS/);
    expect(() => loadConfig({}, { TRADEGATE_DATA_KEY: 'abc' })).toThrow(/TRADEGATE_DATA_KEY: must be 64 hex/);
    expect(() => loadConfig({}, { LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL/);
  });

  it('takes whole numbers in decimal digits only, and refuses a heartbeat or body limit no operator means (operator probe: 0x10 read as 16, 1e3 as 1000, a 99999999999 ms heartbeat fired every millisecond)', () => {
    for (const [name, value] of [['RATE_LIMIT_PER_MIN', '0x10'], ['PORT', '1e3'], ['PORT', '80.0'], ['RATE_LIMIT_PER_MIN', '+5'], ['SSE_HEARTBEAT_MS', '99999999999'], ['SSE_HEARTBEAT_MS', '1'], ['BODY_LIMIT_BYTES', '99999999999']] as const) {
      expect(() => loadConfig({}, { [name]: value }), `${name}=${value}`).toThrow(new RegExp(name));
    }
    expect(() => loadConfig({ port: '1e3' }, {})).toThrow(/--port \/ PORT: must be a whole number in decimal digits/);
    const c = loadConfig({}, { PORT: ' 8081 ', RATE_LIMIT_PER_MIN: '16', SSE_HEARTBEAT_MS: '100', BODY_LIMIT_BYTES: String(16 * 1024 * 1024) });
    expect([c.port, c.rateLimitPerMin, c.sseHeartbeatMs, c.bodyLimitBytes]).toEqual([8081, 16, 100, 16 * 1024 * 1024]);
  });

  it('takes PRICE_BAND_FACTOR as a decimal and the cluster replicas as a whole number, in digits only; a boolean names its values (docs probe: 0x10 made the band ×16)', () => {
    for (const [name, value] of [['PRICE_BAND_FACTOR', '0x10'], ['PRICE_BAND_FACTOR', '1e1'], ['PRICE_BAND_FACTOR', '0b11'], ['TRADEGATE_CLUSTER_REPLICAS', '0x3']] as const) {
      expect(() => loadConfig({}, { [name]: value }), `${name}=${value}`).toThrow(new RegExp(name));
    }
    expect(loadConfig({}, { PRICE_BAND_FACTOR: '2.5' }).priceBandFactor).toBe(2.5);
    expect(loadConfig({}, { PRICE_BAND_FACTOR: '20' }).priceBandFactor).toBe(20);
    expect(() => loadConfig({}, { TRADEGATE_PAPER: 'maybe' })).toThrow(/TRADEGATE_PAPER: must be true, false, 1, 0, yes or no/);
  });

  it('takes an http(s) base URL with no query or fragment: webhook URLs are built on it (ops probe: "#x" and ftp:// started, and every token URL was broken)', () => {
    for (const url of ['https://tg.example.com/#x', 'https://x/sub?q=1', 'ftp://tg.example.com', 'javascript:alert(1)']) {
      expect(() => loadConfig({}, { TRADEGATE_BASE_URL: url }), url).toThrow(/TRADEGATE_BASE_URL: must (be an http|have no query)/);
    }
    expect(loadConfig({}, { TRADEGATE_BASE_URL: 'https://tg.example.com/base/' }).baseUrl).toBe('https://tg.example.com/base/');
  });

  it('refuses a base URL with a user name or password, and normalises its path (fuzz probe: the banner printed both raw, webhook URLs carried them)', () => {
    for (const url of ['https://u:p@tg.example.com/', 'https://u@tg.example.com/', 'https://:secret@tg.example.com/']) {
      expect(() => loadConfig({}, { TRADEGATE_BASE_URL: url }), url).toThrow(/TRADEGATE_BASE_URL: must have no user name or password/);
    }
    expect(loadConfig({}, { TRADEGATE_BASE_URL: 'https://tg.example.com/a/../../b/' }).baseUrl).toBe('https://tg.example.com/b/');
    expect(loadConfig({ 'base-url': 'HTTPS://TG.example.com' }, {}).baseUrl).toBe('https://tg.example.com/');
  });

  it('reads the cluster settings: NATS servers as a list, node id, replicas, prefix', () => {
    expect(loadConfig({}, {}).cluster).toBeUndefined();
    const c = loadConfig({ cluster: 'nats://a:4222, nats://b:4222', 'node-id': 'n1' }, { TRADEGATE_CLUSTER_REPLICAS: '3' });
    expect(c.cluster).toEqual(['nats://a:4222', 'nats://b:4222']);
    expect(c.nodeId).toBe('n1');
    expect(c.clusterReplicas).toBe(3);
    expect(c.clusterPrefix).toBe('tradegate');
    expect(loadConfig({}, { TRADEGATE_CLUSTER: 'nats://127.0.0.1:4222' }).cluster).toEqual(['nats://127.0.0.1:4222']);
    expect(() => loadConfig({ cluster: 'http://a:4222' }, {})).toThrow(/--cluster \/ TRADEGATE_CLUSTER: each server must be nats:\/\//);
    expect(() => loadConfig({ cluster: ' , ' }, {})).toThrow(/at least one NATS server/);
    expect(() => loadConfig({ 'node-id': 'a b' }, {})).toThrow(/--node-id \/ TRADEGATE_NODE_ID/);
    expect(() => loadConfig({}, { TRADEGATE_CLUSTER_REPLICAS: '2' })).toThrow(/must be 1 or 3/);
  });

  it('reads TRUST_PROXY as a list of addresses, CIDR ranges and named groups, and names a bad entry', () => {
    expect(loadConfig({}, {}).trustProxy).toEqual([]);
    expect(loadConfig({}, { TRUST_PROXY: 'loopback, 10.0.0.0/8,192.0.2.7 , 2001:db8::/32' }).trustProxy).toEqual(['loopback', '10.0.0.0/8', '192.0.2.7', '2001:db8::/32']);
    expect(loadConfig({ 'trust-proxy': 'private' }, { TRUST_PROXY: 'loopback' }).trustProxy).toEqual(['private']);
    expect(() => loadConfig({}, { TRUST_PROXY: 'nginx' })).toThrow(/--trust-proxy \/ TRUST_PROXY: 'nginx' is not an IP address/);
    expect(() => loadConfig({}, { TRUST_PROXY: '10.0.0.0/33' })).toThrow(/prefix length must be 0-32/);
    expect(() => loadConfig({}, { TRUST_PROXY: '10.0.0.0/8/1' })).toThrow(/TRUST_PROXY/);
    expect(() => loadConfig({}, { TRUST_PROXY: '::1/129' })).toThrow(/0-128/);
  });

  it('rejects unknown flags', () => {
    expect(() => loadConfig({ prot: '1' }, {})).toThrow(/unknown option --prot/);
  });
});

describe('limits and quotas settings', () => {
  it('defaults and environment names', () => {
    expect(loadConfig({}, {})).toMatchObject({ orderQtyMax: 10_000, priceBandFactor: 5, quotaConnections: 10, quotaWebhookTokens: 100, quotaStrategies: 100, quotaApiKeys: 50, actorsMax: 200, reconnectMinIntervalS: 30 });
    const c = loadConfig({}, { ORDER_QTY_MAX: '50', PRICE_BAND_FACTOR: '2.5', QUOTA_CONNECTIONS: '3', QUOTA_WEBHOOK_TOKENS: '4', QUOTA_STRATEGIES: '5', QUOTA_API_KEYS: '6', ACTORS_MAX: '7', RECONNECT_MIN_INTERVAL_S: '8' });
    expect(c).toMatchObject({ orderQtyMax: 50, priceBandFactor: 2.5, quotaConnections: 3, quotaWebhookTokens: 4, quotaStrategies: 5, quotaApiKeys: 6, actorsMax: 7, reconnectMinIntervalS: 8 });
  });

  it('refuses values that would disable a limit, naming the setting', () => {
    expect(() => loadConfig({}, { QUOTA_CONNECTIONS: '0' })).toThrow(/QUOTA_CONNECTIONS/);
    expect(() => loadConfig({}, { PRICE_BAND_FACTOR: '1' })).toThrow(/PRICE_BAND_FACTOR/);
    expect(() => loadConfig({}, { ORDER_QTY_MAX: '2000000' })).toThrow(/ORDER_QTY_MAX/);
    expect(() => loadConfig({}, { ACTORS_MAX: '-1' })).toThrow(/ACTORS_MAX/);
  });
});
