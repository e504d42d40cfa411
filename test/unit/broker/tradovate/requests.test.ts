import { expect, test } from 'vitest';
import { placeOrderBody, placeOsoBody, startStrategyBody, syncRequestBody } from '../../../../src/broker/tradovate/requests.js';
import type { PlaceOrderRequest } from '../../../../src/actors/protocol.js';

const base: PlaceOrderRequest = {
  type: 'place-order', accountId: '7', symbol: 'ESZ6', requestedSymbol: 'ES1!', side: 'buy', qty: 2, orderType: 'limit', price: 5000,
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
