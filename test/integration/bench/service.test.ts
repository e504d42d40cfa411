import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accountAtBroker,
  brokerOrders,
  createApiKeys,
  demoAccounts,
  pinBenchContract,
  restingBracket,
  waitForKey,
  type BenchAccount,
} from '../../../bench/fixtures.js';
import { sendUntilFinal } from '../../../bench/retry.js';
import { Service } from '../../../bench/service.js';

// The bench drives a real `tradegate serve --paper` (compiled dist/); this checks the harness
// around it: start, demo credentials, bulk keys seen by the running service, broker view.
describe('bench service harness', () => {
  let service: Service;
  let demoKey: string;
  let account: BenchAccount;

  beforeAll(async () => {
    service = await Service.start();
    demoKey = (await service.demo()).apiKey;
    [account] = (await demoAccounts(service, demoKey)) as [BenchAccount];
  }, 60_000);

  afterAll(async () => {
    await service?.stop();
  });

  it('creates API keys in the store that the running service accepts at once', async () => {
    const keys = await createApiKeys(service, 3, ['read'], 'harness');
    expect(new Set(keys).size).toBe(3);
    await waitForKey(service, keys[2]!);
    const me = await service.api<{ key?: { scopes?: string[] } }>('GET', '/api/v1/me', keys[2]);
    expect(me.status).toBe(200);
  });

  it('places a resting bracket at the pinned price and finds it, once, at the broker', async () => {
    const contract = await pinBenchContract(service, demoKey, account.id);
    expect(contract).toMatch(/^ES[FGHJKMNQUVXZ]\d$/);
    const res = await sendUntilFinal(service, {
      method: 'POST', path: `/api/v1/accounts/${account.id}/orders`, key: demoKey, body: restingBracket('harness-1'),
      headers: { 'idempotency-key': 'harness-1' },
    });
    expect(res.status).toBe(201);
    const orderId = String((res.body as { orderId: string }).orderId);
    const orders = await brokerOrders(service, [account.id]);
    const result = accountAtBroker(orders, [orderId]);
    expect(result).toEqual({ entries: 1, missing: [], duplicates: 0, unacknowledged: 0 });
    expect(orders.find((o) => String(o.id) === orderId)?.ordStatus).toBe('Working');
  });

  it('reports the service RSS and removes its data dir on stop', async () => {
    expect(await service.rssKB()).toBeGreaterThan(10_000);
    const other = await Service.start();
    const dir = other.dataDir;
    expect(existsSync(dir)).toBe(true);
    await other.stop();
    expect(existsSync(dir)).toBe(false);
  }, 60_000);
});
