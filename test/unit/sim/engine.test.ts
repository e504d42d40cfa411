/**
 * The paper broker's order engine without sockets: id rules, matching, splitting of fills,
 * time-in-force, risk rejects, OSO/OCO rules and the frozen event snapshots.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { Engine, type OrderRec, type OrderSpec } from '../../../src/sim/engine.js';
import type { Entity } from '../../../src/sim/state.js';

let engine: Engine;
let accountId: number;
let contractId: number;

beforeEach(() => {
  engine = new Engine({ clock: () => Date.parse('2026-11-20T15:00:00Z'), seed: 3 });
  const user = engine.state.addUser('ann', 'pw');
  accountId = engine.state.addAccount(user.id, 'A', 50_000).entity.id;
  contractId = engine.state.contracts.find('ESZ6')!.id;
  engine.state.prices.set(contractId, 5000);
  engine.state.takeEvents();
});

const spec = (extra: Partial<OrderSpec> = {}): OrderSpec => ({ accountId, contractId, action: 'Buy', orderQty: 1, orderType: 'Market', ...extra });
const place = (extra: Partial<OrderSpec> = {}, risk = true): OrderRec => {
  const rec = engine.create(spec(extra));
  engine.submit(rec, { riskCheck: risk });
  return rec;
};
const setPrice = (p: number) => {
  engine.state.prices.set(contractId, p);
  engine.matchContract(contractId);
};
const fills = (rec: OrderRec) => engine.state.list('fill', new Set([accountId])).filter((f) => f.orderId === rec.id);
const status = (rec: OrderRec) => rec.order.ordStatus;

describe('ids and events', () => {
  it('gives a new order, its first command and its first orderVersion the same id; a modify version takes its command id', () => {
    const rec = place({ orderType: 'Limit', price: 4900 });
    expect(engine.state.get('command', rec.id)).toMatchObject({ orderId: rec.id, commandType: 'New' });
    expect(engine.state.get('orderVersion', rec.id)).toMatchObject({ orderId: rec.id, price: 4900 });
    const commandId = engine.modify(rec, { orderQty: 2, orderType: 'Limit', price: 4901 });
    expect(commandId).toBeGreaterThan(rec.id);
    expect(engine.state.get('orderVersion', commandId)).toMatchObject({ orderId: rec.id, orderQty: 2, price: 4901 });
  });

  it('records each state of an entity as it was (PendingNew, then Working), not the final object', () => {
    const rec = place({ orderType: 'Limit', price: 4900 });
    const orderEvents = engine.state.takeEvents().map((e) => ({ ...e, entity: JSON.parse(e.json) as Entity })).filter((e) => e.entityType === 'order' && e.entity.id === rec.id);
    expect(orderEvents.map((e) => [e.eventType, e.entity.ordStatus])).toEqual([['Created', 'PendingNew'], ['Updated', 'Working']]);
  });
});

describe('matching', () => {
  it('fills a market order at the last price', () => {
    const rec = place();
    expect(status(rec)).toBe('Filled');
    expect(fills(rec).map((f) => f.price)).toEqual([5000]);
  });

  it('fills a marketable limit at the last price and a resting limit at its limit when price crosses', () => {
    const marketable = place({ orderType: 'Limit', price: 5010 });
    expect(fills(marketable)[0]!.price).toBe(5000);
    const resting = place({ orderType: 'Limit', price: 4990 });
    setPrice(4990.25);
    expect(status(resting)).toBe('Working');
    setPrice(4985);
    expect(status(resting)).toBe('Filled');
    expect(fills(resting)[0]!.price).toBe(4990);
  });

  it('triggers a buy stop when price reaches it and fills at the then last price; a stop-limit becomes a limit', () => {
    const stop = place({ orderType: 'Stop', stopPrice: 5005 });
    const stopLimit = place({ orderType: 'StopLimit', stopPrice: 5005, price: 5004 });
    setPrice(5006);
    expect(fills(stop)[0]!.price).toBe(5006);
    expect(status(stopLimit)).toBe('Working');
    setPrice(5004);
    expect(fills(stopLimit)[0]!.price).toBe(5004);
  });

  it('cancels IOC and FOK orders that cannot fill on arrival', () => {
    expect(status(place({ orderType: 'Limit', price: 4000, timeInForce: 'IOC' }))).toBe('Canceled');
    expect(status(place({ orderType: 'Limit', price: 4000, timeInForce: 'FOK' }))).toBe('Canceled');
    expect(status(place({ orderType: 'Limit', price: 4000, timeInForce: 'GTC' }))).toBe('Working');
  });

  it('splits a large fill into several fill events that add up, with cumulative executionReports', () => {
    const rec = place({ orderQty: 25 });
    const parts = fills(rec);
    expect(parts.length).toBeGreaterThan(5);
    expect(parts.every((f) => (f.qty as number) >= 1 && (f.qty as number) <= 4)).toBe(true);
    expect(parts.reduce((n, f) => n + (f.qty as number), 0)).toBe(25);
    const trades = engine.state.list('executionReport', new Set([accountId])).filter((e) => e.orderId === rec.id && e.execType === 'Trade');
    expect(trades.at(-1)).toMatchObject({ cumQty: 25, ordStatus: 'Filled', avgPx: 5000 });
  });

  it('does not match orders of a revoked account', () => {
    const rec = place({ orderType: 'Limit', price: 4990 });
    engine.state.accounts.get(accountId)!.active = false;
    setPrice(4980);
    expect(status(rec)).toBe('Working');
  });
});

describe('pre-trade checks', () => {
  it('rejects prices off the tick grid with InvalidPrice', () => {
    const rec = place({ orderType: 'Limit', price: 4990.1 });
    expect(status(rec)).toBe('Rejected');
    expect(engine.state.list('commandReport', new Set([accountId])).at(-1)).toMatchObject({ rejectReason: 'InvalidPrice' });
  });

  it('rejects above max order qty, and position increases above max position while allowing reductions', () => {
    const account = engine.state.accounts.get(accountId)!;
    account.maxOrderQty = 3;
    account.maxPosition = 4;
    expect(status(place({ orderQty: 4 }))).toBe('Rejected');
    expect(status(place({ orderQty: 3 }))).toBe('Filled');
    const over = place({ orderQty: 2 });
    expect(engine.state.list('commandReport', new Set([accountId])).find((r) => r.commandId === over.id && r.commandStatus === 'RiskRejected'))
      .toMatchObject({ rejectReason: 'MaxPosLimitReached', text: 'Your maximum position has been met.' });
    expect(status(place({ orderQty: 3, action: 'Sell' }))).toBe('Filled');
  });
});

describe('OSO and OCO', () => {
  function oso(entry: Partial<OrderSpec> = {}): { entry: OrderRec; tp: OrderRec; sl: OrderRec } {
    const e = engine.create(spec({ orderType: 'Limit', price: 4990, orderQty: 3, ...entry }));
    const tp = engine.create(spec({ action: 'Sell', orderType: 'Limit', price: 5010, orderQty: 3 }), { parentId: e.id });
    const sl = engine.create(spec({ action: 'Sell', orderType: 'Stop', stopPrice: 4980, orderQty: 3 }), { parentId: e.id });
    e.legIds = [tp.id, sl.id];
    engine.pair(tp, sl);
    engine.submit(tp, { riskCheck: false, suspended: true });
    engine.submit(sl, { riskCheck: false, suspended: true });
    engine.submit(e, { riskCheck: true });
    return { entry: e, tp, sl };
  }

  it('activates suspended legs for the quantity filled so far and grows them with later fills', () => {
    const { entry, tp, sl } = oso();
    expect([status(tp), status(sl)]).toEqual(['Suspended', 'Suspended']);
    engine.fill(entry, 1, 4990);
    expect([status(tp), status(sl)]).toEqual(['Working', 'Working']);
    expect([tp.version.orderQty, sl.version.orderQty]).toEqual([1, 1]);
    engine.fill(entry, 2, 4990);
    expect([tp.version.orderQty, sl.version.orderQty]).toEqual([3, 3]);
  });

  it('shrinks the sibling on a partial leg fill and cancels it when the leg completes', () => {
    const { entry, tp, sl } = oso();
    engine.fill(entry, 3, 4990);
    engine.fill(tp, 1, 5010);
    expect(sl.version.orderQty).toBe(2);
    engine.fill(tp, 2, 5010);
    expect(status(sl)).toBe('Canceled');
    expect(engine.positions.netPos(accountId, contractId)).toBe(0);
  });

  it('keeps legs of a partly filled entry when the entry is cancelled, and removes them when it had no fill', () => {
    const partly = oso();
    engine.fill(partly.entry, 1, 4990);
    engine.cancel(partly.entry);
    expect([status(partly.tp), status(partly.sl)]).toEqual(['Working', 'Working']);
    const unfilled = oso();
    engine.cancel(unfilled.entry);
    expect([status(unfilled.tp), status(unfilled.sl)]).toEqual(['Canceled', 'Canceled']);
  });

  it('rejects the legs with ParentRejected when the entry is rejected', () => {
    engine.state.accounts.get(accountId)!.maxOrderQty = 1;
    const { entry, tp } = oso();
    expect(status(entry)).toBe('Rejected');
    expect(status(tp)).toBe('Rejected');
    expect(engine.state.list('commandReport', new Set([accountId])).find((r) => r.commandId === tp.id && r.rejectReason === 'ParentRejected')).toBeDefined();
  });

  it('does not submit an OCO sibling cancelled by its partner’s immediate fill', () => {
    const a = engine.create(spec({ action: 'Sell', orderType: 'Limit', price: 4990 }));
    const b = engine.create(spec({ action: 'Sell', orderType: 'Stop', stopPrice: 4900 }));
    engine.pair(a, b);
    engine.submit(a, { riskCheck: true });
    engine.submit(b, { riskCheck: true });
    expect([status(a), status(b)]).toEqual(['Filled', 'Canceled']);
  });
});

describe('archival', () => {
  it('keeps the newest final orders only, with their commands, versions, reports and fills', () => {
    const small = new Engine({ clock: () => 0, seed: 1, retainFinalOrders: 2 });
    const user = small.state.addUser('bob', 'pw');
    const acct = small.state.addAccount(user.id, 'B', 1000).entity.id;
    const k = small.state.contracts.find('ESZ6')!.id;
    small.state.prices.set(k, 5000);
    const recs = [1, 2, 3].map(() => {
      const r = small.create({ accountId: acct, contractId: k, action: 'Buy', orderQty: 1, orderType: 'Market' });
      small.submit(r, { riskCheck: true });
      return r;
    });
    const working = small.create({ accountId: acct, contractId: k, action: 'Buy', orderQty: 1, orderType: 'Limit', price: 4000 });
    small.submit(working, { riskCheck: true });
    const all = new Set([acct]);
    expect([...small.orders.keys()]).toEqual([recs[1]!.id, recs[2]!.id, working.id]);
    expect(small.state.get('order', recs[0]!.id)).toBeUndefined();
    expect(small.state.list('fill', all).map((f) => f.orderId)).toEqual([recs[1]!.id, recs[2]!.id]);
    expect(small.state.list('command', all).some((c) => c.orderId === recs[0]!.id)).toBe(false);
    expect(small.state.list('executionReport', all).some((e) => e.orderId === recs[0]!.id)).toBe(false);
    expect(small.positions.netPos(acct, k)).toBe(3);
  });
});
