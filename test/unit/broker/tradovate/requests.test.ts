import { expect, test } from 'vitest';
import {
  brokerText,
  cancelOrderBody,
  checkAnswer,
  liquidatePositionBody,
  placeOrderBody,
  placeOsoBody,
  replaceLegBody,
  startStrategyBody,
  syncRequestBody,
} from '../../../../src/broker/tradovate/requests.js';
import type { NewOrder, OrderRecord } from '../../../../src/domain/orders.js';
import { AppError } from '../../../../src/domain/problems.js';

const base: NewOrder = {
  accountId: '7', symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'buy', qty: 2, orderType: 'limit', price: 5000,
  stopPrice: 4999, timeInForce: 'gtc', clOrdId: 'abc', clientOrderId: 'me',
};
const acct = { id: 7, name: 'DEMO7' };

test('placeorder carries isAutomated, the clOrdId, account id and spec, and only the prices its type uses', () => {
  expect(placeOrderBody(base, acct)).toEqual({
    accountSpec: 'DEMO7', accountId: 7, clOrdId: 'abc', action: 'Buy', symbol: 'ESZ6', orderQty: 2, orderType: 'Limit', price: 5000,
    timeInForce: 'GTC', text: 'me', isAutomated: true,
  });
  expect(placeOrderBody({ ...base, orderType: 'market', clientOrderId: null }, acct)).not.toHaveProperty('price');
  expect(placeOrderBody({ ...base, orderType: 'stop' }, acct)).toMatchObject({ orderType: 'Stop', stopPrice: 4999 });
});

test('placeoso: bracket1 is the take-profit Limit, bracket2 the stop-loss Stop, both on the exit side', () => {
  const body = placeOsoBody({ ...base, side: 'sell' }, acct, 4990, 5010);
  expect(body.bracket1).toEqual({ action: 'Buy', orderType: 'Limit', price: 4990, timeInForce: 'GTC' });
  expect(body.bracket2).toEqual({ action: 'Buy', orderType: 'Stop', stopPrice: 5010, timeInForce: 'GTC' });
  expect(body.isAutomated).toBe(true);
  const slOnly = placeOsoBody(base, acct, null, 4980);
  expect(slOnly.bracket1).toMatchObject({ orderType: 'Stop', stopPrice: 4980 });
  // A day entry's legs are still good till cancelled: a day leg would expire at the close and leave the position without a stop.
  const day = placeOsoBody({ ...base, timeInForce: 'day' }, acct, 5010, 4990);
  expect(day.timeInForce).toBe('Day');
  expect([day.bracket1, day.bracket2]).toEqual([expect.objectContaining({ timeInForce: 'GTC' }), expect.objectContaining({ timeInForce: 'GTC' })]);
  expect(slOnly).not.toHaveProperty('bracket2');
});

test('startorderstrategy: params is a JSON string with signed offsets, direction-aware', () => {
  const buy = startStrategyBody(base, acct, 10, 4);
  expect(typeof buy.params).toBe('string');
  expect(JSON.parse(buy.params as string).brackets[0]).toEqual({ qty: 2, trailingStop: false, profitTarget: 10, stopLoss: -4 });
  const sell = startStrategyBody({ ...base, side: 'sell' }, acct, 10, 4);
  expect(JSON.parse(sell.params as string).brackets[0]).toMatchObject({ profitTarget: -10, stopLoss: 4 });
  expect(buy).toMatchObject({ orderStrategyTypeId: 2, uuid: 'abc', isAutomated: true, action: 'Buy' });
});

test('syncrequest names its entity types explicitly', () => {
  expect(syncRequestBody(5, ['order', 'fill'])).toEqual({ users: [5], entityTypes: ['order', 'fill'] });
});

test('cancelorder is automated; a tracing clOrdId is cut to the broker limit of 64', () => {
  expect(cancelOrderBody(42)).toEqual({ orderId: 42, isAutomated: true });
  const tagged = cancelOrderBody(42, `tg-f-${'x'.repeat(80)}`);
  expect(tagged.clOrdId).toHaveLength(64);
});

test('liquidateposition names the account and contract, never as admin', () => {
  expect(liquidatePositionBody(7, 3001)).toEqual({ accountId: 7, contractId: 3001, admin: false, isAutomated: true });
});

test('a re-placed leg keeps side, type, prices and the open quantity, under clOrdId rp-<old id>', () => {
  const leg: OrderRecord = {
    orderId: '900', accountId: '7', symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'sell', type: 'stop', qty: 3, filledQty: 1,
    avgFillPrice: null, price: null, stopPrice: 4990, timeInForce: 'gtc', status: 'cancelled', role: 'stop_loss', bracketId: '899',
    legs: { takeProfit: null, stopLoss: null }, clientOrderId: null, createdAt: '', updatedAt: '',
  };
  expect(replaceLegBody(leg, acct)).toEqual({
    accountSpec: 'DEMO7', accountId: 7, clOrdId: 'rp-900', action: 'Sell', symbol: 'ESZ6', orderQty: 2, orderType: 'Stop',
    timeInForce: 'GTC', stopPrice: 4990, isAutomated: true,
  });
  expect(replaceLegBody({ ...leg, type: 'limit', price: 5010, stopPrice: null }, acct)).toMatchObject({ orderType: 'Limit', price: 5010 });
});

test('a 200 answer carrying failureReason or errorText is BROKER_REJECTED with the broker reason', () => {
  expect(checkAnswer('placeorder', { orderId: 5, failureReason: 'Success' })).toEqual({ orderId: 5, failureReason: 'Success' });
  expect(checkAnswer('placeorder', null)).toEqual({});
  const err = (() => {
    try {
      checkAnswer('placeorder', { failureReason: 'RiskRejected', failureText: 'max position' });
    } catch (e) {
      return e as AppError;
    }
    throw new Error('expected a rejection');
  })();
  expect(err).toBeInstanceOf(AppError);
  expect(err.code).toBe('BROKER_REJECTED');
  expect(err.extensions.brokerReason).toBe('RiskRejected: max position');
  expect(() => checkAnswer('cancelorder', { errorText: 'Order not found' })).toThrow(/cancelorder: Order not found/);
});

test('the broker text is never cut inside a surrogate pair', () => {
  expect(brokerText(`a${'😀'.repeat(40)}`)).toBe(`a${'😀'.repeat(31)}`);
  expect(brokerText('x'.repeat(70))).toBe('x'.repeat(64));
  expect(brokerText('me')).toBe('me');
});
