/**
 * Quotas are exact under concurrency: N concurrent creates under a quota Q create exactly
 * min(N, Q), for every quota — never fewer because records already written but still being
 * flushed were counted twice. Real HTTP against `serve --paper`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, type Reply } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  http(s.url, method, path, { ...(headers ? { headers } : { key: s.apiKey }), ...(body !== undefined ? { body } : {}) });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000', QUOTA_STRATEGIES: '100', QUOTA_WEBHOOK_TOKENS: '40', QUOTA_API_KEYS: '20', QUOTA_CONNECTIONS: '4' });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

/** Status counts of concurrent replies, e.g. {201: 100, 409: 10}. */
function tally(replies: Reply[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of replies) out[r.status] = (out[r.status] ?? 0) + 1;
  return out;
}

function expectQuotaRefusals(replies: Reply[], quota: string): void {
  for (const r of replies.filter((x) => x.status !== 201)) expect(r.json, r.text).toMatchObject({ code: 'QUOTA_EXCEEDED', quota });
}

describe('concurrent creates under a quota', () => {
  it('110 concurrent POST /strategies from none create exactly 100 (QUOTA_STRATEGIES) and refuse 10', async () => {
    const replies = await Promise.all(Array.from({ length: 110 }, () => api('POST', '/api/v1/strategies', { name: 's' })));
    expect(tally(replies)).toEqual({ 201: 100, 409: 10 });
    expectQuotaRefusals(replies, 'strategies');
    expect((await api('GET', '/api/v1/strategies?limit=500')).json.data).toHaveLength(100);
  });

  it('50 concurrent POST /webhook-tokens create exactly 40 (QUOTA_WEBHOOK_TOKENS)', async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => api('POST', '/api/v1/webhook-tokens', { accountId: s.accounts[0], name: `t${i}` })));
    expect(tally(replies)).toEqual({ 201: 40, 409: 10 });
    expectQuotaRefusals(replies, 'webhookTokens');
    expect((await api('GET', '/api/v1/webhook-tokens?limit=500')).json.data).toHaveLength(40);
  });

  it('30 concurrent API key creates from the web app fill QUOTA_API_KEYS exactly (the demo key is one of the 20)', async () => {
    const signed = await http(s.url, 'POST', '/api/v1/session', { body: { name: 'demo', password: s.login.password } });
    expect(signed.status, signed.text).toBe(200);
    const cookie = /^(tg_session=[^;]+);/.exec(signed.headers.get('set-cookie') ?? '')![1]!;
    const session = { cookie, 'x-csrf-token': signed.json.csrfToken as string };
    const replies = await Promise.all(Array.from({ length: 30 }, (_, i) => api('POST', '/api/v1/api-keys', { name: `k${i}`, scopes: ['read'] }, session)));
    expect(tally(replies)).toEqual({ 201: 19, 409: 11 });
    expectQuotaRefusals(replies, 'apiKeys');
  });

  it('6 concurrent POST /connections fill QUOTA_CONNECTIONS exactly (the demo connection is one of the 4)', async () => {
    const replies = await Promise.all(Array.from({ length: 6 }, () => api('POST', '/api/v1/connections', {})));
    expect(tally(replies)).toEqual({ 201: 3, 409: 3 });
    expectQuotaRefusals(replies, 'connections');
    expect((await api('GET', '/api/v1/connections')).json.data).toHaveLength(4);
  });
});
