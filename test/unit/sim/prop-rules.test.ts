/** Evaluation rules over the engine without sockets: equity, breach, liquidation order, reset, trade-date baseline. */
import { beforeEach, expect, it } from 'vitest';
import { Engine } from '../../../src/sim/engine.js';
import { PropRules } from '../../../src/sim/prop-rules.js';
import type { AccountState } from '../../../src/sim/state.js';

let engine: Engine;
let rules: PropRules;
let account: AccountState;
let contractId: number;

beforeEach(() => {
  engine = new Engine({ clock: () => Date.parse('2026-11-20T15:00:00Z'), seed: 3 });
  rules = new PropRules(engine);
  account = engine.state.addAccount(engine.state.addUser('ann', 'pw').id, 'A', 50_000);
  contractId = engine.state.contracts.find('ESZ6')!.id;
  move(5000);
});

function move(price: number): void {
  engine.state.prices.set(contractId, price);
  engine.matchContract(contractId);
  rules.priceMoved(contractId);
  rules.enforce();
}
function buy(qty: number, action: 'Buy' | 'Sell' = 'Buy'): void {
  engine.submit(engine.create({ accountId: account.entity.id, contractId, action, orderQty: qty, orderType: 'Market' }), { riskCheck: true });
  rules.enforce();
}

it('equity is cash plus open P&L at the last price', () => {
  buy(2);
  move(4990);
  expect(rules.equity(account.entity.id)).toBe(49_000);
});

it('a daily loss breach cancels, liquidates with admin orders, then revokes: the Deleted event comes last', () => {
  rules.setRules(account, { dailyLossLimit: 600 });
  buy(2);
  const resting = engine.create({ accountId: account.entity.id, contractId, action: 'Buy', orderQty: 1, orderType: 'Limit', price: 4000 });
  engine.submit(resting, { riskCheck: true });
  engine.state.takeEvents();
  move(4994); // −600
  expect(account.active).toBe(false);
  expect(account.breach).toMatchObject({ rule: 'DailyLossLimit', equity: 49_400, limit: 49_400 });
  expect(resting.order.ordStatus).toBe('Canceled');
  expect(engine.positions.netPos(account.entity.id, contractId)).toBe(0);
  const events = engine.state.takeEvents();
  const last = events[events.length - 1]!;
  expect(last).toMatchObject({ entityType: 'account', eventType: 'Deleted', visible: false });
  expect(events.slice(0, -1).every((e) => e.visible)).toBe(true);
  expect(events.some((e) => e.entityType === 'order' && (JSON.parse(e.json) as { admin?: boolean }).admin === true)).toBe(true);
});

it('marks only holders of the moved contract, and only accounts with rules, for a check', () => {
  rules.setRules(account, { trailingDrawdown: 100 });
  rules.enforce();
  const nq = engine.state.contracts.find('NQZ6')!.id;
  engine.state.prices.set(nq, 18000);
  rules.priceMoved(nq); // ann holds nothing in NQ: nothing to check
  buy(1);
  move(5001);
  expect(account.highWater).toBe(50_050);
  move(4999); // 100 below the high
  expect(account.active).toBe(false);
  expect(account.breach?.rule).toBe('TrailingDrawdown');
});

it('a new trade date takes the equity then as the day’s start', () => {
  rules.setRules(account, { dailyLossLimit: 500 });
  buy(1);
  move(4993);
  rules.newTradeDate();
  expect(account.dayStartEquity).toBe(49_650);
  move(4987); // −650 overall, −300 today
  expect(account.active).toBe(true);
});

it('reset makes a new account with the same name, balance, limits and rules; the old one is revoked', () => {
  rules.setRules(account, { dailyLossLimit: 500 });
  account.maxOrderQty = 4;
  buy(1);
  const fresh = rules.reset(account);
  expect(account.active).toBe(false);
  expect(engine.positions.netPos(account.entity.id, contractId)).toBe(0);
  expect(fresh.entity.id).not.toBe(account.entity.id);
  expect(fresh).toMatchObject({ active: true, initialBalance: 50_000, maxOrderQty: 4, rules: { dailyLossLimit: 500 }, userId: account.userId });
  expect(fresh.entity.name).toBe('A');
  expect(engine.state.visibleAccounts(account.userId)).toEqual(new Set([fresh.entity.id]));
});
