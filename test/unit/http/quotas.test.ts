import { describe, expect, it } from 'vitest';
import { checkQuota, QuotaGate, quotaUsed, type QuotaStore } from '../../../src/http/quotas.js';

const config = { quotaConnections: 2, quotaWebhookTokens: 3, quotaStrategies: 4, quotaApiKeys: 1 };
function store(): QuotaStore & { conns: string[] } {
  const conns: string[] = [];
  return {
    conns,
    connections: { listByUser: () => conns },
    webhookTokens: { listByUser: () => [] },
    strategies: { listByUser: () => [] },
    apiKeys: { listByUser: () => [{ revokedAt: '2026-01-01' }, { revokedAt: null }] },
  };
}

describe('quotas', () => {
  it('counts API keys that are not revoked only', () => {
    const s = store();
    expect(quotaUsed(s, 'u', 'apiKeys')).toBe(1);
    expect(() => checkQuota(s, config, 'u', 'apiKeys')).toThrow(expect.objectContaining({ code: 'QUOTA_EXCEEDED', extensions: { quota: 'apiKeys', limit: 1 } }));
    expect(() => checkQuota(s, config, 'u', 'strategies')).not.toThrow();
  });

  it('reserves the slot before the create runs, so concurrent creates cannot pass the last slot', async () => {
    const s = store();
    const gate = new QuotaGate(s, config);
    let release!: () => void;
    const slow = gate.create('u', 'connections', () => new Promise<string>((r) => (release = () => r('a'))));
    const second = gate.create('u', 'connections', async () => 'b');
    await expect(second).resolves.toBe('b');
    s.conns.push('b');
    await expect(gate.create('u', 'connections', async () => 'c')).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED', status: 409 });
    await expect(gate.create('other', 'connections', async () => 'd')).resolves.toBe('d');
    release();
    await expect(slow).resolves.toBe('a');
  });

  it('frees the reservation when the create fails', async () => {
    const gate = new QuotaGate(store(), { ...config, quotaConnections: 1 });
    await expect(gate.create('u', 'connections', async () => Promise.reject(new Error('broker down')))).rejects.toThrow('broker down');
    await expect(gate.create('u', 'connections', async () => 'ok')).resolves.toBe('ok');
  });
});
