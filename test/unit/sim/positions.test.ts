/** Position keeping: average price, FIFO fill pairs, realized P&L into cashBalance, flips. */
import { beforeEach, expect, it } from 'vitest';
import { Positions } from '../../../src/sim/positions.js';
import { SimState, type Entity } from '../../../src/sim/state.js';

let state: SimState;
let positions: Positions;
let accountId: number;
let contractId: number;

beforeEach(() => {
  state = new SimState(() => 0, () => 0.5);
  const user = state.addUser('ann', 'pw');
  accountId = state.addAccount(user.id, 'A', 1000).entity.id;
  contractId = state.contracts.find('MESZ6')!.id; // $5 per point
  positions = new Positions(state);
});

const fill = (action: 'Buy' | 'Sell', qty: number, price: number): Entity => {
  const f = { id: state.id(), action, qty, price };
  positions.apply(accountId, contractId, f);
  return f;
};
const position = () => state.list('position', new Set([accountId]))[0]!;
const cash = () => state.list('cashBalance', new Set([accountId]))[0]!;

it('averages the entry price across fills and reports bought/sold totals', () => {
  fill('Buy', 1, 100);
  fill('Buy', 3, 104);
  expect(position()).toMatchObject({ netPos: 4, netPrice: 103, bought: 4, boughtValue: 412, sold: 0 });
});

it('pairs closing fills FIFO and books realized P&L in dollars', () => {
  const b1 = fill('Buy', 1, 100);
  const b2 = fill('Buy', 2, 110);
  const s1 = fill('Sell', 2, 120);
  const pairs = state.list('fillPair', new Set([accountId]));
  expect(pairs.map((p) => [p.buyFillId, p.sellFillId, p.qty, p.buyPrice, p.sellPrice])).toEqual([
    [b1.id, s1.id, 1, 100, 120],
    [b2.id, s1.id, 1, 110, 120],
  ]);
  expect(cash()).toMatchObject({ realizedPnL: (20 + 10) * 5, amount: 1000 + 150 });
  expect(position()).toMatchObject({ netPos: 1, netPrice: 110 });
});

it('flips through zero: the excess opens a new short lot at the fill price', () => {
  fill('Buy', 1, 100);
  fill('Sell', 3, 98);
  expect(position()).toMatchObject({ netPos: -2, netPrice: 98 });
  expect(cash().realizedPnL).toBe(-10);
  fill('Buy', 2, 99);
  expect(position().netPos).toBe(0);
  expect(position().netPrice).toBeUndefined();
  expect(cash().realizedPnL).toBe(-10 - 10);
});

it('emits position Created once, then Updated; fillPair and cashBalance only when closing', () => {
  state.takeEvents();
  fill('Buy', 1, 100);
  fill('Buy', 1, 101);
  expect(state.takeEvents().map((e) => `${e.entityType}:${e.eventType}`)).toEqual(['position:Created', 'position:Updated']);
  fill('Sell', 1, 102);
  expect(state.takeEvents().map((e) => `${e.entityType}:${e.eventType}`)).toEqual(['position:Updated', 'fillPair:Created', 'cashBalance:Updated']);
});
