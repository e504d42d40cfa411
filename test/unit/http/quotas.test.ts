import { describe, expect, it } from 'vitest';
import { checkQuota, QuotaGate, quotaUsed, type QuotaStore } from '../../../src/http/quotas.js';

const config = { quotaConnections: 2, quotaWebhookTokens: 3, quotaStrategies: 4, quotaApiKeys: 1, actorsMax: 5 };
function store(): QuotaStore & { conns: { disabled: boolean }[]; strategies_: string[] } {
  const conns: { disabled: boolean }[] = [];
  const strategies_: string[] = [];
  return {
    conns,
    strategies_,
    connections: { listByUser: () => conns, all: () => conns },
    webhookTokens: { listByUser: () => [] },
    strategies: { listByUser: () => strategies_ },
    apiKeys: { listByUser: () => [{ revokedAt: '2026-01-01' }, { revokedAt: null }] },
  };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const outcomes = async (all: Promise<unknown>[]) => {
  const settled = await Promise.allSettled(all);
  return {
    created: settled.filter((r) => r.status === 'fulfilled').length,
    refused: settled.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code as string),
  };
};

describe('quotas', () => {
  it('counts API keys that are not revoked only', () => {
    const s = store();
    expect(quotaUsed(s, 'u', 'apiKeys')).toBe(1);
    expect(() => checkQuota(s, config, 'u', 'apiKeys')).toThrow(expect.objectContaining({ code: 'QUOTA_EXCEEDED', extensions: { quota: 'apiKeys', limit: 1 } }));
    expect(() => checkQuota(s, config, 'u', 'strategies')).not.toThrow();
  });

  it('creates exactly min(N, Q) when records become visible before their creates finish (committed, not yet flushed)', async () => {
    const s = store();
    const gate = new QuotaGate(s, { ...config, quotaStrategies: 10 });
    const flush = deferred();
    // As the LMDB store does: the record is readable at commit, the create resolves after the flush.
    const create = (id: string) =>
      gate.create('u', 'strategies', async () => {
        s.strategies_.push(id);
        await flush.promise;
        return id;
      });
    const first = Array.from({ length: 5 }, (_, i) => create(`a${i}`));
    await Promise.resolve();
    // 5 stored + 5 running reaches the quota, yet only 5 exist: these must wait, not be refused.
    const second = Array.from({ length: 10 }, (_, i) => create(`b${i}`));
    flush.resolve();
    expect(await outcomes([...first, ...second])).toEqual({ created: 10, refused: Array(5).fill('QUOTA_EXCEEDED') });
    expect(s.strategies_).toHaveLength(10);
  });

  it('takes the slot before the create runs: concurrent creates cannot pass the last slot, and a waiter is refused once the running one stored its record', async () => {
    const s = store();
    const gate = new QuotaGate(s, config);
    const slowDone = deferred();
    const slow = gate.create('u', 'connections', async () => {
      await slowDone.promise;
      s.conns.push({ disabled: false });
      return 'a';
    });
    await expect(gate.create('u', 'connections', async () => (s.conns.push({ disabled: false }), 'b'))).resolves.toBe('b');
    let third: string | undefined;
    const waiting = gate.create('u', 'connections', async () => 'c').catch((err: { code: string }) => (third = err.code));
    await expect(gate.create('other', 'connections', async () => 'd')).resolves.toBe('d');
    expect(third).toBeUndefined();
    slowDone.resolve();
    await expect(slow).resolves.toBe('a');
    await waiting;
    expect(third).toBe('QUOTA_EXCEEDED');
  });

  it('a waiter gets the slot when the running create fails', async () => {
    const s = store();
    const gate = new QuotaGate(s, { ...config, quotaConnections: 1 });
    const fail = deferred();
    const failing = gate.create('u', 'connections', async () => {
      await fail.promise;
      throw new Error('broker down');
    });
    const waiter = gate.create('u', 'connections', async () => 'ok');
    fail.resolve();
    await expect(failing).rejects.toThrow('broker down');
    await expect(waiter).resolves.toBe('ok');
  });

  it('frees the reservation when the create fails', async () => {
    const gate = new QuotaGate(store(), { ...config, quotaConnections: 1 });
    await expect(gate.create('u', 'connections', async () => Promise.reject(new Error('broker down')))).rejects.toThrow('broker down');
    await expect(gate.create('u', 'connections', async () => 'ok')).resolves.toBe('ok');
  });

  it('admits actors under ACTORS_MAX exactly, counting enabled connections of every user', async () => {
    const s = store();
    s.conns.push({ disabled: true }, { disabled: false });
    const gate = new QuotaGate(s, { ...config, actorsMax: 3 });
    const flush = deferred();
    const start = () =>
      gate.actor(async () => {
        s.conns.push({ disabled: false });
        await flush.promise;
      });
    const first = start();
    await Promise.resolve();
    const rest = Array.from({ length: 4 }, start);
    flush.resolve();
    const result = await outcomes([first, ...rest]);
    expect(result).toEqual({ created: 2, refused: ['ACTOR_LIMIT_REACHED', 'ACTOR_LIMIT_REACHED', 'ACTOR_LIMIT_REACHED'] });
    await expect(gate.actor(async () => undefined)).rejects.toMatchObject({ status: 503, retryAfterSeconds: 60, extensions: { limit: 3 } });
  });
});
