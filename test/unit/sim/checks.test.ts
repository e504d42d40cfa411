/** Pre-trade checks: supported types, tick grid, max order qty, max position (reductions allowed). */
import { beforeEach, expect, it } from 'vitest';
import { riskCheck, SIM_MAX_ORDER_QTY, validateVersion } from '../../../src/sim/checks.js';
import { Positions } from '../../../src/sim/positions.js';
import { SimState } from '../../../src/sim/state.js';

let state: SimState;
let positions: Positions;
let accountId: number;
let contractId: number;

beforeEach(() => {
  state = new SimState(() => 0, () => 0.5);
  positions = new Positions(state);
  accountId = state.addAccount(state.addUser('ann', 'pw').id, 'A', 1000).entity.id;
  contractId = state.contracts.find('CLF7')!.id; // tick 0.01
});

it('accepts supported types with prices on the tick grid and names the reason otherwise', () => {
  expect(validateVersion(state, contractId, { id: 1, orderType: 'Limit', price: 75.12 })).toBeUndefined();
  expect(validateVersion(state, contractId, { id: 1, orderType: 'StopLimit', price: 75.12, stopPrice: 75.125 })?.reason).toBe('InvalidPrice');
  expect(validateVersion(state, contractId, { id: 1, orderType: 'Limit' })?.reason).toBe('InvalidPrice');
  expect(validateVersion(state, contractId, { id: 1, orderType: 'QTS', price: 75 })?.reason).toBe('Unsupported');
});

it('refuses a price or stop at or below zero as an exchange does, with its own text', () => {
  const check = (v: Record<string, unknown>) => validateVersion(state, contractId, { id: 1, ...v });
  for (const v of [{ orderType: 'Limit', price: 0 }, { orderType: 'Limit', price: -10 }, { orderType: 'Stop', stopPrice: -0.01 }, { orderType: 'StopLimit', price: 1, stopPrice: 0 }, { orderType: 'TrailingStop', stopPrice: -1 }]) {
    expect(check(v), JSON.stringify(v)).toMatchObject({ status: 'ExecutionRejected', reason: 'InvalidPrice', text: 'Price must be positive' });
  }
  expect(check({ orderType: 'Stop', stopPrice: 0.01 })).toBeUndefined();
  expect(check({ orderType: 'Limit', price: 75.125 })?.text).toBe('Invalid price increment');
});

it('checks MIT and trailing orders: a touch price, a stop or a non-zero trailing distance on the tick grid', () => {
  const check = (v: Record<string, unknown>) => validateVersion(state, contractId, { id: 1, ...v })?.reason;
  expect(check({ orderType: 'MIT', price: 75.12 })).toBeUndefined();
  expect(check({ orderType: 'MIT' })).toBe('InvalidPrice');
  expect(check({ orderType: 'TrailingStop', stopPrice: 75 })).toBeUndefined();
  expect(check({ orderType: 'TrailingStop', pegDifference: -0.5 })).toBeUndefined();
  expect(check({ orderType: 'TrailingStop', pegDifference: 0 })).toBe('InvalidPrice');
  expect(check({ orderType: 'TrailingStop', pegDifference: 0.005 })).toBe('InvalidPrice');
  expect(check({ orderType: 'TrailingStop' })).toBe('InvalidPrice');
  expect(check({ orderType: 'TrailingStopLimit', stopPrice: 75, price: 74.9 })).toBeUndefined();
  expect(check({ orderType: 'TrailingStopLimit', stopPrice: 75 })).toBe('InvalidPrice');
});

it('refuses absurd quantities even on an account without its own limit', () => {
  const buy = { accountId, contractId, buy: true };
  for (const qty of [SIM_MAX_ORDER_QTY + 1, 1e308, 1.5, 0, -1, Number.NaN]) {
    expect(riskCheck(state, positions, buy, qty, qty)?.reason, String(qty)).toBe('MaxOrderQtyLimitReached');
  }
  expect(riskCheck(state, positions, buy, SIM_MAX_ORDER_QTY, SIM_MAX_ORDER_QTY)).toBeUndefined();
});

it('refuses order qty above the limit and exposure growth past max position, never a reduction', () => {
  const account = state.accounts.get(accountId)!;
  const buy = { accountId, contractId, buy: true };
  const sell = { ...buy, buy: false };
  expect(riskCheck(state, positions, buy, 50, 50)).toBeUndefined();
  account.maxOrderQty = 5;
  account.maxPosition = 5;
  expect(riskCheck(state, positions, buy, 6, 6)).toMatchObject({ status: 'RiskRejected', reason: 'MaxOrderQtyLimitReached' });
  positions.apply(accountId, contractId, { id: state.id(), action: 'Buy', qty: 5, price: 75 });
  expect(riskCheck(state, positions, buy, 1, 1)?.reason).toBe('MaxPosLimitReached');
  expect(riskCheck(state, positions, sell, 5, 5)).toBeUndefined();
  account.maxPosition = 3; // already above the new limit: reducing is still allowed
  expect(riskCheck(state, positions, sell, 1, 1)).toBeUndefined();
});
