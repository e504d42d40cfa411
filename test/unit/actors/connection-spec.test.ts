import { expect, test } from 'vitest';
import { connectionSpecFor, marketDataUrl, type ConnectionSource } from '../../../src/actors/connection-spec.js';
import { BROKER_BUDGETS } from '../../../src/tuning.js';

const paperRecord: ConnectionSource = {
  id: 'con_1', userId: 'usr_1', broker: 'paper', environment: 'paper',
  restUrl: 'http://127.0.0.1:1111/v1', wsUrl: 'ws://127.0.0.1:1111/v1/websocket',
};
const embedded = { restUrl: 'http://127.0.0.1:2222/v1', wsUrl: 'ws://127.0.0.1:2222/v1/websocket' };
const creds = { name: 'trader', password: 'pw' };

test('a paper connection follows the embedded paper broker’s current address', () => {
  expect(connectionSpecFor(paperRecord, creds, embedded)).toEqual({
    connectionId: 'con_1', userId: 'usr_1', broker: 'paper', environment: 'paper',
    restUrl: embedded.restUrl, wsUrl: embedded.wsUrl, credentials: creds, budget: BROKER_BUDGETS.paper,
  });
  // Without an embedded broker (an external `tradegate sim`), the stored address is used.
  expect(connectionSpecFor(paperRecord, creds)).toMatchObject({ restUrl: paperRecord.restUrl, wsUrl: paperRecord.wsUrl });
});

test('a Tradovate connection keeps its own address and gets the Tradovate budget', () => {
  const live: ConnectionSource = { ...paperRecord, broker: 'tradovate', environment: 'live', restUrl: 'https://live.tradovateapi.com/v1', wsUrl: 'wss://live.tradovateapi.com/v1/websocket' };
  const spec = connectionSpecFor(live, creds, embedded);
  expect(spec).toMatchObject({ restUrl: live.restUrl, wsUrl: live.wsUrl, budget: { perMinute: 80, perHour: 5_000 } });
  // Each spec owns its budget object (the defaults are frozen and shared).
  expect(spec.budget).not.toBe(BROKER_BUDGETS.tradovate);
});

test('Tradovate connections get their market-data host; other addresses serve quotes on the trading socket', () => {
  expect(marketDataUrl('wss://demo.tradovateapi.com/v1/websocket')).toBe('wss://md-demo.tradovateapi.com/v1/websocket');
  expect(marketDataUrl('wss://live.tradovateapi.com/v1/websocket')).toBe('wss://md.tradovateapi.com/v1/websocket');
  expect(marketDataUrl('ws://127.0.0.1:8091/v1/websocket')).toBeUndefined();
  const demo: ConnectionSource = { ...paperRecord, broker: 'tradovate', environment: 'demo', wsUrl: 'wss://demo.tradovateapi.com/v1/websocket' };
  expect(connectionSpecFor(demo, creds).mdWsUrl).toBe('wss://md-demo.tradovateapi.com/v1/websocket');
  expect(connectionSpecFor(paperRecord, creds)).not.toHaveProperty('mdWsUrl');
});
