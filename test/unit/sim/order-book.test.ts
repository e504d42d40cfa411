/** The order indexes: live per account, working per contract, archival of final orders with their entities. */
import { expect, it } from 'vitest';
import { Engine } from '../../../src/sim/engine.js';

it('tracks live orders per account and working orders per contract through their lifecycle', () => {
  const engine = new Engine({ clock: () => Date.parse('2026-11-20T15:00:00Z'), seed: 1, retainFinalOrders: 2 });
  const user = engine.state.addUser('ann', 'pw').id;
  const a = engine.state.addAccount(user, 'A', 1000).entity.id;
  const b = engine.state.addAccount(user, 'B', 1000).entity.id;
  const es = engine.state.contracts.find('ESZ6')!.id;
  const nq = engine.state.contracts.find('NQZ6')!.id;
  engine.state.prices.set(es, 5000);
  engine.state.prices.set(nq, 18000);
  const place = (accountId: number, contractId: number, price: number) => {
    const rec = engine.create({ accountId, contractId, action: 'Buy', orderQty: 1, orderType: 'Limit', price });
    engine.submit(rec, { riskCheck: true });
    return rec;
  };
  const r1 = place(a, es, 4990);
  const r2 = place(a, nq, 17990);
  const r3 = place(b, es, 4980);
  expect(engine.liveOrders(a).map((r) => r.id)).toEqual([r1.id, r2.id]);
  expect(engine.liveOrders(a, es).map((r) => r.id)).toEqual([r1.id]);
  expect(engine.book.workingOf(es).map((r) => r.id)).toEqual([r1.id, r3.id]);
  engine.cancel(r1);
  expect(engine.liveOrders(a).map((r) => r.id)).toEqual([r2.id]);
  expect(engine.book.workingOf(es).map((r) => r.id)).toEqual([r3.id]);
  engine.cancel(r2);
  engine.cancel(r3);
  // Three final orders, two retained: the oldest is archived with its entities.
  expect(engine.orders.has(r1.id)).toBe(false);
  expect(engine.state.get('order', r1.id)).toBeUndefined();
  expect(engine.orders.has(r3.id)).toBe(true);
  expect(engine.book.allLive()).toEqual([]);
});
