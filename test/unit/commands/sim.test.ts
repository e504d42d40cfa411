import { expect, test } from 'vitest';
import { parseSimArgs } from '../../../src/commands/sim.js';

test('defaults: port 8091 on loopback, info logs, no demo user', () => {
  expect(parseSimArgs([])).toEqual({ port: 8091, host: '127.0.0.1', demo: false, logLevel: 'info', sessions: 'none', accountRules: {} });
});

test('reads every flag, in both --flag value and --flag=value forms', () => {
  expect(
    parseSimArgs(['--port=0', '--host', '0.0.0.0', '--seed', '7', '--price-step-ms=0', '--demo', '--log-level', 'warn', '--sessions', 'cme', '--daily-loss-limit=500', '--trailing-drawdown', '2000']),
  ).toEqual({
    port: 0, host: '0.0.0.0', seed: 7, priceStepMs: 0, demo: true, logLevel: 'warn', sessions: 'cme', accountRules: { dailyLossLimit: 500, trailingDrawdown: 2000 },
  });
});

test('refuses bad values and unknown flags with a message naming the flag', () => {
  expect(() => parseSimArgs(['--port', '70000'])).toThrow('--port needs an integer in 0..65535');
  expect(() => parseSimArgs(['--log-level', 'loud'])).toThrow(/--log-level must be one of/);
  expect(() => parseSimArgs(['--host'])).toThrow('--host needs a value');
  expect(() => parseSimArgs(['--paper'])).toThrow('unknown option --paper');
});
