/** Multibracket strategies: legs only after the entry fills, signed offsets, finish states. */
import { beforeEach, expect, it } from 'vitest';
import { Engine, type OrderRec } from '../../../src/sim/engine.js';

let engine: Engine;
let accountId: number;
let contractId: number;

beforeEach(() => {
  engine = new Engine({ clock: () => 0, seed: 1 });
  const user = engine.state.addUser('ann', 'pw');
  accountId = engine.state.addAccount(user.id, 'A', 50_000).entity.id;
  contractId = engine.state.contracts.find('MESZ6')!.id;
  engine.state.prices.set(contractId, 5000);
});

function strategy(action: 'Buy' | 'Sell', orderType: string, brackets: OrderRec['strategyBrackets'], price?: number): { id: number; entry: OrderRec } {
  const s = engine.state;
  const entity = s.create('orderStrategy', { id: s.id(), accountId, contractId, orderStrategyTypeId: 2, action, status: 'ActiveStrategy' }, accountId);
  const entry = engine.create({ accountId, contractId, action, orderQty: 2, orderType, price }, { strategyId: entity.id });
  entry.strategyBrackets = brackets;
  engine.submit(entry, { riskCheck: true });
  return { id: entity.id, entry };
}
const legs = (strategyId: number) => (engine.strategyOrders.get(strategyId) ?? []).slice(1);
const status = (id: number) => engine.state.get('orderStrategy', id)!.status;

it('places a sell entry’s legs at signed point offsets: profitTarget -30 below, stopLoss +15 above the fill', () => {
  const { id } = strategy('Sell', 'Market', [{ qty: 2, profitTarget: -30, stopLoss: 15 }]);
  expect(legs(id).map((l) => [l.order.action, l.version.orderType, l.version.price ?? l.version.stopPrice, l.siblingId !== undefined])).toEqual([
    ['Buy', 'Limit', 4970, true],
    ['Buy', 'Stop', 5015, true],
  ]);
  const labels = engine.state.list('orderStrategyLink', new Set([accountId])).map((l) => l.label);
  expect(labels).toEqual(['tp1', 'sl1']);
});

it('creates no legs before the entry has filled completely', () => {
  const { id, entry } = strategy('Buy', 'Limit', [{ qty: 2, profitTarget: 5, stopLoss: -5 }], 4990);
  expect(legs(id)).toEqual([]);
  engine.fill(entry, 1, 4990);
  expect(legs(id)).toEqual([]);
  engine.fill(entry, 1, 4991);
  expect(legs(id).map((l) => l.version.price ?? l.version.stopPrice)).toEqual([4995.5, 4985.5]);
});

it('finishes when the legs are done, and is StoppedByUser when the entry is cancelled unfilled', () => {
  const done = strategy('Buy', 'Market', [{ qty: 2, profitTarget: 5, stopLoss: -5 }]);
  expect(status(done.id)).toBe('ActiveStrategy');
  engine.state.prices.set(contractId, 5005);
  engine.matchContract(contractId);
  expect(status(done.id)).toBe('ExecutionFinished');
  const stopped = strategy('Buy', 'Limit', [{ qty: 2, profitTarget: 5 }], 4000);
  engine.cancel(stopped.entry);
  expect(status(stopped.id)).toBe('StoppedByUser');
});
