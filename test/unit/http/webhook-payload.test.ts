import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/domain/problems.js';
import { webhookPayloadSchema } from '../../../src/http/schemas.js';
import { completeOrder, parseWebhookPayload, toNumber, WEBHOOK_FIELD_ALIASES, type WebhookIntent } from '../../../src/http/webhook-payload.js';
import { filledTemplate } from '../../support/tradingview.js';
import { thrown } from '../../support/errors.js';

const NOW = new Date('2026-11-21T15:00:00Z');

function orderOf(intent: WebhookIntent) {
  if (intent.kind !== 'order') throw new Error(`expected an order, got ${intent.kind}`);
  return intent.order;
}

describe('parseWebhookPayload actions and aliases', () => {
  it.each([
    ['buy', 'buy'],
    ['long', 'buy'],
    ['SELL', 'sell'],
    ['short', 'sell'],
  ])('action %s places a %s', (action, side) => {
    expect(orderOf(parseWebhookPayload({ action, symbol: 'ES1!', qty: 1 }, NOW)).side).toBe(side);
  });

  it('accepts ticker for symbol and quantity/contracts for qty, numeric strings included', () => {
    expect(orderOf(parseWebhookPayload({ action: 'buy', ticker: 'MNQ1!', quantity: '2' }, NOW))).toMatchObject({ symbol: 'MNQ1!', qty: 2 });
    expect(orderOf(parseWebhookPayload({ action: 'buy', ticker: 'MNQ1!', contracts: '3' }, NOW))).toMatchObject({ qty: 3 });
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: '1', price: '5001.25', orderType: 'LIMIT' }, NOW))).toMatchObject({
      qty: 1,
      price: 5001.25,
      type: 'limit',
    });
  });

  it('refuses quantities that are not plain whole numbers of contracts (the per-order cap is the plan’s)', () => {
    for (const qty of [0, -1, 1.5, 1e308, '1e308', '1e3', '0x10', '+2', '2.5', 'two', true, [2], { n: 2 }, '1.0', '2.', ' 1', '3 ', '\t3', '0', '9007199254740993']) {
      expect(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty }, NOW), JSON.stringify(qty)).toThrow(/qty: must be a whole number of contracts, at least 1 \(digits only in a string\)/);
    }
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 10_000 }, NOW)).qty).toBe(10_000);
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: '3' }, NOW)).qty).toBe(3);
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 2.0 }, NOW)).qty).toBe(2);
    // Strings of digits are exactly the positive safe integers they spell.
    fc.assert(fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: String(n) }, NOW)).qty === n));
  });

  it('warns when an alias repeats a field already given with the same value', () => {
    const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', ticker: ' ES ', qty: 1, contracts: '1' }, NOW);
    expect(orderOf(intent)).toMatchObject({ symbol: 'ES', qty: 1 });
    expect(intent.warnings).toEqual(["'ticker' ignored: symbol already given", "'contracts' ignored: qty already given"]);
    // A leg agrees with another spelling of the same leg.
    const legs = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, takeProfit: { ticks: 4 }, tp: { ticks: '4' }, stopLoss: 4990, sl: { stopPrice: '4990' } }, NOW);
    expect(orderOf(legs)).toMatchObject({ takeProfit: { ticks: 4 }, stopLoss: { price: 4990 } });
    expect(legs.warnings).toEqual(["'tp' ignored: takeProfit already given", "'sl' ignored: stopLoss already given"]);
  });

  it('refuses two names of one field with different values, naming both: neither is dropped', () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ takeProfit: { ticks: 4 }, tp: { ticks: 5 } }, 'takeProfit', 'tp'],
      [{ sl: { price: 4990 }, stopLoss: { ticks: 8 } }, 'sl', 'stopLoss'],
      [{ tp: '', takeProfit: { ticks: 4 } }, 'tp', 'takeProfit'],
      [{ ticker: 'NQ1!' }, 'symbol', 'ticker'],
      [{ quantity: 2 }, 'qty', 'quantity'],
      [{ side: 'sell' }, 'action', 'side'],
      [{ order_type: 'limit', price: 5000 }, 'orderType', 'order_type'],
    ];
    for (const [extra, first, second] of cases) {
      const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'market', ...extra }, NOW));
      expect(err.code, JSON.stringify(extra)).toBe('VALIDATION_FAILED');
      expect(err.message).toContain(`'${first}' and '${second}'`);
      expect((err.extensions as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual([first, second]);
    }
  });

  it.each(['close', 'flat', 'flatten', 'EXIT'])('action %s flattens, symbol optional', (action) => {
    expect(parseWebhookPayload({ action }, NOW)).toMatchObject({ kind: 'flatten' });
    expect(parseWebhookPayload({ action, ticker: 'ES1!' }, NOW)).toMatchObject({ kind: 'flatten', symbol: 'ES1!' });
  });

  it('flatten ignores order fields with a warning', () => {
    const intent = parseWebhookPayload({ action: 'close', symbol: 'ES', qty: 2 }, NOW);
    expect(intent.warnings).toEqual(["'qty' ignored for action close"]);
  });

  it('refuses a missing or unknown action', () => {
    expect(thrown(() => parseWebhookPayload({ symbol: 'ES', qty: 1 }, NOW)).code).toBe('VALIDATION_FAILED');
    const err = thrown(() => parseWebhookPayload({ action: 'hold', symbol: 'ES', qty: 1 }, NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toContain('hold');
  });

  it('refuses a body that is not a JSON object', () => {
    for (const body of [null, 'buy ES', 42, [{ action: 'buy' }]]) {
      expect(thrown(() => parseWebhookPayload(body, NOW)).code).toBe('VALIDATION_FAILED');
    }
  });

  it.each([['0'], [0], ['-1'], ['1.5'], ['two'], [true]])('refuses qty %j', (qty) => {
    const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty }, NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.extensions.errors).toEqual([expect.objectContaining({ path: 'qty' })]);
  });

  it('echoes unknown fields in warnings and otherwise ignores them', () => {
    const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, comment: 'x', strategyName: 'y' }, NOW);
    expect(intent.warnings).toEqual(["unknown field 'comment' ignored", "unknown field 'strategyName' ignored"]);
  });

  it("refuses a take-profit or stop-loss in another product's spelling instead of ignoring it: an entry placed without the stop it asked for (trader probe); switched off, it is ignored", () => {
    for (const [key, leg] of [
      ['stop_loss', 'stopLoss'], ['take_profit', 'takeProfit'], ['dollar_sl', 'stopLoss'], ['percentage_tp', 'takeProfit'],
      ['stopLossTicks', 'stopLoss'], ['takeProfitTicks', 'takeProfit'], ['sl_ticks', 'stopLoss'], ['tp_price', 'takeProfit'],
    ] as const) {
      let err: unknown;
      try {
        parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, [key]: 10 }, NOW);
      } catch (e) {
        err = e;
      }
      expect(err, key).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining(`${key}: not a field webhooks read; a ${leg === 'stopLoss' ? 'stop-loss' : 'take-profit'} is '${leg}'`) });
    }
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, stop_loss: 0, http: 'x' }, NOW).warnings).toEqual(["unknown field 'stop_loss' ignored", "unknown field 'http' ignored"]);
  });

  it('refuses the spellings re-probe 3 found still ignored (Pine strategy.exit names, ticks/offset forms, legs nested in objects): entries placed with no legs', () => {
    const refused = (body: Record<string, unknown>): unknown => {
      try {
        parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, ...body }, NOW);
      } catch (e) {
        return e;
      }
      return undefined;
    };
    for (const [key, leg] of [
      ['profit', 'take-profit'], ['loss', 'stop-loss'], ['stop', 'stop-loss'], ['stop_ticks', 'stop-loss'], ['stopTicks', 'stop-loss'], ['loss_ticks', 'stop-loss'],
      ['profit_ticks', 'take-profit'], ['profitTicks', 'take-profit'], ['target_price', 'take-profit'], ['targetPrice', 'take-profit'], ['target_ticks', 'take-profit'],
      ['targets', 'take-profit'], ['stopOffset', 'stop-loss'], ['stopDistance', 'stop-loss'], ['protectiveStop', 'stop-loss'], ['hard_stop', 'stop-loss'],
      ['exit_stop', 'stop-loss'], ['catastrophic_stop', 'stop-loss'], ['stop_market_price', 'stop-loss'], ['stop_limit', 'stop-loss'], ['stop_price_loss', 'stop-loss'],
      ['pt', 'take-profit'], ['tgt', 'take-profit'], ['take', 'take-profit'], ['limit_target', 'take-profit'], ['limit_price_tp', 'take-profit'], ['tp1', 'take-profit'],
      // The stop's distance as risk (fuzz probe, re-probe: ignored, the entry went out with no stop).
      ['risk_ticks', 'stop-loss'], ['riskTicks', 'stop-loss'], ['risk_points', 'stop-loss'], ['risk_in_ticks', 'stop-loss'],
      ['riskDistance', 'stop-loss'], ['risk_offset', 'stop-loss'], ['max_risk_ticks', 'stop-loss'],
    ] as const) {
      expect(refused({ [key]: 20 }), key).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining(`${key}: not a field webhooks read; a ${leg} is`) });
    }
    expect(refused({ bracket: { sl: 20, tp: 40 } })).toMatchObject({ message: expect.stringContaining("bracket.sl: not a field webhooks read; a stop-loss is 'stopLoss'") });
    expect(refused({ extras: { stopLoss: { ticks: 20 } } })).toMatchObject({ message: expect.stringContaining('extras.stopLoss: not a field webhooks read') });
    expect(refused({ stop_loss: '20 ticks' })).toMatchObject({ code: 'VALIDATION_FAILED' });
    // Risk in percent or dollars sizes the position (PickMyTrade's risk_percentage): not a leg.
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, risk_percentage: 2, risk: 100 }, NOW).warnings).toEqual(["unknown field 'risk_percentage' ignored", "unknown field 'risk' ignored"]);
    // Words with no number, or zero in any spelling, ask for nothing: ignored with a warning as before.
    for (const value of ['0.0', 'N/A', 'disabled', {}, 'tradovate']) {
      const key = value === 'tradovate' ? 'target' : 'stop_loss';
      expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, [key]: value }, NOW).warnings, String(value)).toEqual([`unknown field '${key}' ignored`]);
    }
    // An entry's limit price under another name is not taken for a take-profit.
    expect(refused({ limit: 4990, limit_price: 4990 })).toBeUndefined();
  });

  it('does not take informational fields for a stop or target (re-probe 4: stop_reason "Long Entry 1", session_stop "15:55", target_account, targetTimeframe refused entries)', () => {
    for (const extra of [
      { stop_reason: 'Long Entry 1' }, { stopReason: 'Exit 2' }, { nonstop: 1 }, { session_stop: '15:55' }, { stop_time: '1600' },
      { last_stop_out: 1795800000000 }, { stop_trading_after: 15 }, { target_account: 'DEMO12345' }, { target_url: 'https://example.com/h/1' },
      { target: 'account 12345' }, { ftp: 'host1' }, { smtp: 'host1' }, { meta: { targetTimeframe: '15' } }, { stop_loss: '{{plot_0}}' },
    ]) {
      const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, ...extra }, NOW);
      expect(intent.kind, JSON.stringify(extra)).toBe('order');
    }
  });

  it("PickMyTrade's tp/sl set to 0 or off mean no such leg (a warning), not a 400; empty stays refused, and takeProfit: 0 in our own spelling too", () => {
    for (const value of [0, '0', '0.0', false, 'off']) {
      const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, tp: value, sl: value }, NOW);
      expect(intent, JSON.stringify(value)).toMatchObject({ kind: 'order' });
      expect((intent as { order: { takeProfit?: unknown; stopLoss?: unknown } }).order.takeProfit).toBeUndefined();
      expect(intent.warnings).toEqual([`'tp' is off (${JSON.stringify(value)}): no take-profit from it`, `'sl' is off (${JSON.stringify(value)}): no stop-loss from it`]);
    }
    expect(() => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: 0 }, NOW)).toThrow(/takeProfit: must be a positive number/);
    expect(() => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, tp: '' }, NOW)).toThrow(/is empty/);
  });

  it('a field named for the leg itself asks for one with any value that has a digit in it (re-probe 5: "20 pips", "17,950.00", sl_pips placed entries with no stop, 201)', () => {
    const entry = (body: Record<string, unknown>) => () => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, ...body }, NOW);
    for (const body of [
      { stop_loss: '20 pips', take_profit: '40 pips' }, { stop_loss: '17,950.00' }, { stop_loss: 'USD 50' }, { stop_loss: '1e1' }, { sl_ticks: '20t' },
      { sl_pips: 20 }, { tp_pips: 40 }, { sl_atr: 2 }, { stop_loss_ticks_count: 20 }, { update_stop: 4990 }, { target_breakout: 5050 }, { exit_stop: '4,990.25' },
    ]) {
      expect(entry(body), JSON.stringify(body)).toThrow(/not a field webhooks read/);
    }
    // Under a name that only mentions a stop or target, text must still read as a level.
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, exit_stop: 'Long Entry 1' }, NOW).warnings).toEqual(["unknown field 'exit_stop' ignored"]);
  });

  it('counts and sizes named after stops or targets are not legs, and an entry giving both its own legs is not refused for another product\'s (re-probe 5: target_position, stops_hit refused 400)', () => {
    for (const key of ['target_position', 'stops_hit', 'target_qty', 'targetSize', 'target_contracts', 'max_stops', 'targets_hit', 'stopped', 'max_loss']) {
      expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, [key]: 2 }, NOW).warnings, key).toEqual([`unknown field '${key}' ignored`]);
    }
    const legs = { takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } };
    const both = parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, ...legs, stop_loss: 20 }, NOW);
    expect(both).toMatchObject({ kind: 'order', order: legs });
    expect(both.warnings).toEqual(["'stop_loss' ignored: the alert's own 'stopLoss' is used"]);
    // Only the leg it gives: another product's stop-loss with the alert's own take-profit stays refused.
    expect(() => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 40 }, stop_loss: 20 }, NOW)).toThrow(/stop_loss: not a field webhooks read/);
  });

  it('trailing stops and breakeven moves under any top-level name are refused on an entry and ignored by an exit (re-probe 6: trail_points, trail_price went out with no stop, 201); a second leg under another spelling is more than one (re-probe 6: take_profit_2 dropped)', () => {
    const entry = (body: Record<string, unknown>) => () => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', ...body }, NOW);
    for (const key of ['trail_points', 'trail_price', 'trail_ticks', 'trail_amount', 'trail_percent', 'trailDistance', 'trailing', 'break_even', 'breakeven_ticks', 'trail']) {
      expect(entry({ [key]: 20 }), key).toThrow(expect.objectContaining({ code: 'WEBHOOK_UNSUPPORTED' }));
      expect(parseWebhookPayload({ action: 'sell', symbol: 'ES1!', marketPosition: 'flat', [key]: 20 }, NOW).warnings, key).toContain(`'${key}' ignored when marketPosition is flat: the exit closes the whole position`);
      expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, [key]: 0 }, NOW).warnings[0], key).toMatch(/ignored: .* are off in this alert/);
    }
    // Asked for by a value rather than a name (new-user probe: a fixed stop went out).
    for (const [key, value] of [['stopLossType', 'trailing'], ['sl_type', 'trail'], ['stop_type', 'Trailing Stop']]) {
      expect(entry({ stopLoss: { ticks: 20 }, [key!]: value }), key).toThrow(expect.objectContaining({ code: 'WEBHOOK_UNSUPPORTED' }));
    }
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, comment: 'Trailing Stop' }, NOW).warnings).toEqual(["unknown field 'comment' ignored"]);
    // A leg's price under two names: the same once is fine, two different is a 400 naming both (new-user probe: one dropped).
    expect(entry({ stopLoss: { price: 3990, stopPrice: 3900 } })).toThrow(/stopLoss\.stopPrice: differs from stopLoss\.price \(3990\)/);
    expect(entry({ takeProfit: { price: 5100, limitPrice: 5200 } })).toThrow(/takeProfit\.limitPrice: differs from takeProfit\.price/);
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, stopLoss: { price: 3990, stopPrice: '3990' } }, NOW)).toMatchObject({ order: { stopLoss: { price: 3990 } } });
    const legs = { takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } };
    for (const key of ['take_profit_2', 'tp3', 'stop_loss_2']) {
      expect(entry({ ...legs, [key]: 5030 }), key).toThrow(expect.objectContaining({ code: 'WEBHOOK_UNSUPPORTED', message: expect.stringMatching(/more than one (take-profit|stop-loss)/) }));
      // Without a first one too, as tp2 is (new-user probe: tp3 alone was VALIDATION_FAILED, "not a field webhooks read").
      expect(entry({ [key]: 5030 }), key).toThrow(expect.objectContaining({ code: 'WEBHOOK_UNSUPPORTED', message: expect.stringMatching(/more than one (take-profit|stop-loss)/) }));
    }
  });

  it('an exit of the whole position ignores a marketPositionSize that came out wrong, as it ignores its qty (fuzz probe: 400, the position stayed open)', () => {
    for (const size of ['', '-1', '1.5', 'abc', -1, 1.5]) {
      const exit = parseWebhookPayload({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'flat', marketPositionSize: size }, NOW);
      expect(exit, JSON.stringify(size)).toMatchObject({ kind: 'flatten', exit: true });
      expect(exit.warnings).toContain(`marketPositionSize ${JSON.stringify(size)} ignored: marketPosition flat closes the whole position`);
      expect(parseWebhookPayload({ action: 'close', symbol: 'ES1!', marketPositionSize: size }, NOW)).toMatchObject({ kind: 'flatten' });
    }
    expect(parseWebhookPayload({ action: 'sell', symbol: 'ES1!', marketPosition: 'flat', marketPositionSize: 0 }, NOW).warnings).toEqual([]);
    // An entry still needs a whole number.
    expect(() => parseWebhookPayload({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: '1.5' }, NOW)).toThrow(/marketPositionSize/);
  });

  it('an exit, close or partial exit ignores a foreign stop-loss or take-profit as it ignores its own (re-probe 3: the position stayed open, 400)', () => {
    const close = parseWebhookPayload({ action: 'close', symbol: 'ESZ6', stop_loss: 20 }, NOW);
    expect(close).toMatchObject({ kind: 'flatten' });
    expect(close.warnings).toEqual(["'stop_loss' ignored for action close"]);
    const exit = parseWebhookPayload({ action: 'sell', symbol: 'ESZ6', qty: 1, marketPosition: 'flat', take_profit: 40 }, NOW);
    expect(exit).toMatchObject({ kind: 'flatten', exit: true });
    expect(exit.warnings).toContain("'take_profit' ignored when marketPosition is flat: the exit closes the whole position");
    const partial = parseWebhookPayload({ action: 'sell', symbol: 'ESZ6', qty: 1, marketPosition: 'long', marketPositionSize: 1, bracket: { sl: 20 } }, NOW);
    expect(partial).toMatchObject({ kind: 'order', reduce: true });
    expect(partial.warnings).toEqual(["'bracket.sl' ignored: a partial exit (marketPosition long) only reduces the position"]);
    // A reversal opens a position: refused like any entry.
    expect(() => parseWebhookPayload({ action: 'sell', symbol: 'ESZ6', qty: 2, marketPosition: 'short', marketPositionSize: 1, stop_loss: 20 }, NOW)).toThrow(/stop_loss: not a field webhooks read/);
  });

  it('quotes an alert’s values at most 64 characters long, and refuses a symbol longer than the API’s 64 (attack probe: 65 KB echoed twice and journaled)', () => {
    const long = 'E'.repeat(65_000);
    const message = (body: Record<string, unknown>): string => {
      try {
        parseWebhookPayload(body, NOW);
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    };
    expect(message({ action: 'buy', symbol: long, qty: 1 })).toBe('symbol: at most 64 characters');
    expect(message({ action: 'buy', ticker: long, qty: 1 })).toBe('ticker: at most 64 characters');
    for (const body of [{ action: long }, { action: 'buy', symbol: 'ES', orderType: long }, { action: 'buy', symbol: 'ES', marketPosition: long }, { action: 'buy', symbol: 'ES', marketPositionSize: long }, { action: 'buy', symbol: 'ES', [`stop_loss${long}`]: 1 }]) {
      const m = message(body);
      expect(m.length, m.slice(0, 80)).toBeGreaterThan(0);
      expect(m.length).toBeLessThan(400);
    }
    const warned = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, time: long, timeInForce: long }, NOW).warnings;
    for (const w of warned) expect(w.length).toBeLessThan(200);
  });

  it("treats names of Object's own members (constructor, toString, __proto__) as unknown fields like any other", () => {
    const body = JSON.parse('{"action":"buy","symbol":"ES","qty":1,"constructor":1,"toString":2,"hasOwnProperty":3,"__proto__":4}') as unknown;
    const intent = parseWebhookPayload(body, NOW);
    expect(intent.kind).toBe('order');
    expect(intent.warnings).toEqual(['constructor', 'toString', 'hasOwnProperty', '__proto__'].map((k) => `unknown field '${k}' ignored`));
    // Inside a leg, an unknown key stays a refusal, with its name, never a function's source text.
    const leg = JSON.parse('{"action":"buy","symbol":"ES","qty":1,"takeProfit":{"ticks":10,"toString":1}}') as unknown;
    const err = (() => {
      try {
        parseWebhookPayload(leg, NOW);
      } catch (e) {
        return e as AppError;
      }
      throw new Error('expected a refusal');
    })();
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).not.toMatch(/function|native code/);
  });
});

describe('the payload schema', () => {
  it('documents exactly the names the parser accepts, aliases saying what they stand for', () => {
    expect(Object.keys(webhookPayloadSchema.shape).sort()).toEqual(Object.keys(WEBHOOK_FIELD_ALIASES).sort());
    expect(webhookPayloadSchema.shape.ticker!.description).toBe('alias of symbol');
    expect(webhookPayloadSchema.shape.qty!.description).toMatch(/^aliases quantity, contracts;/);
  });

  it('stays lenient: numeric strings and unknown fields pass to the parser', () => {
    expect(webhookPayloadSchema.safeParse({ action: 'buy', contracts: '2', comment: { any: 1 } }).success).toBe(true);
  });
});

describe('parseWebhookPayload brackets', () => {
  it('takes a bare number or numeric string as a price, and {ticks} as an offset', () => {
    const o = orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, takeProfit: '5010.5', stopLoss: { ticks: '20' } }, NOW));
    expect(o.takeProfit).toEqual({ price: 5010.5 });
    expect(o.stopLoss).toEqual({ ticks: 20 });
    const p = orderOf(parseWebhookPayload({ action: 'sell', symbol: 'ES', qty: 1, tp: 4990, sl: { price: 5010 } }, NOW));
    expect(p).toMatchObject({ takeProfit: { price: 4990 }, stopLoss: { price: 5010 } });
  });

  it('accepts a one-element array as a single leg', () => {
    const o = orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, takeProfit: [{ ticks: 8 }] }, NOW));
    expect(o.takeProfit).toEqual({ ticks: 8 });
  });

  it.each([
    ['two take-profits', { takeProfit: [{ price: 5010 }, { price: 5020 }] }, 'take-profit'],
    ['two stop-losses', { stopLoss: [4990, 4980] }, 'stop-loss'],
    ['takeProfit2', { takeProfit2: 5020 }, 'take-profit'],
    ['a trailing stop field', { trailAmount: 5 }, 'trailing'],
    ['a trailing stop-loss type', { stopLoss: { type: 'trailing_stop', ticks: 4 } }, 'trailing'],
    ['a trailing order type', { orderType: 'trailing_stop' }, 'trailing'],
    ['breakeven', { breakeven: 10 }, 'breakeven'],
    ['a scale-out', { scaleOut: [{ qty: 1, price: 5010 }] }, 'scale-out'],
  ])('refuses %s with WEBHOOK_UNSUPPORTED and a clear message', (_name, extra, word) => {
    const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 2, ...extra }, NOW));
    expect(err.code).toBe('WEBHOOK_UNSUPPORTED');
    expect(err.message).toContain(word);
    expect(err.message).toContain('one take-profit and one stop-loss');
  });

  it('refuses action breakeven as unsupported', () => {
    expect(thrown(() => parseWebhookPayload({ action: 'breakeven', symbol: 'ES' }, NOW)).code).toBe('WEBHOOK_UNSUPPORTED');
  });

  it.each([
    [{ takeProfit: { price: 5010, ticks: 4 } }, 'takeProfit'],
    [{ takeProfit: { percent: 1 } }, 'takeProfit.percent'],
    [{ stopLoss: { ticks: 2.5 } }, 'stopLoss.ticks'],
    [{ stopLoss: 'abc' }, 'stopLoss'],
    [{ price: '-5' }, 'price'],
  ])('refuses the malformed leg %j naming %s', (extra, path) => {
    const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, ...extra }, NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.extensions.errors).toEqual([expect.objectContaining({ path })]);
  });
});

describe('parseWebhookPayload id, time, timeInForce', () => {
  it('keeps a string or numeric id as the dedupe key', () => {
    expect(parseWebhookPayload({ action: 'close', id: 'alert-7' }, NOW).id).toBe('alert-7');
    expect(parseWebhookPayload({ action: 'close', id: 7 }, NOW).id).toBe('7');
    expect(parseWebhookPayload({ action: 'close', id: 9007199254740991 }, NOW).id).toBe('9007199254740991');
    expect(parseWebhookPayload({ action: 'close' }, NOW).id).toBeUndefined();
  });

  it('refuses a numeric id JSON cannot carry exactly: distinct 64-bit ids would read as one alert and the rest as repeats (fuzz probe)', () => {
    // 1795836704356090881 and …882 both parse to the same double.
    const [a, b] = [JSON.parse('{"id": 1795836704356090881}').id, JSON.parse('{"id": 1795836704356090882}').id];
    expect(a).toBe(b);
    for (const id of [a, 9007199254740992, 1e21]) {
      const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, id }, NOW));
      expect(err.code).toBe('VALIDATION_FAILED');
      expect(err.message).toMatch(/^id: a whole number too large for JSON to carry exactly .*send the id as a string, in quotes/);
    }
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, id: 12.5 }, NOW)).message).toMatch(/^id: not a whole number: send the id as a string/);
    expect(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, id: '1795836704356090881' }, NOW).id).toBe('1795836704356090881');
  });

  it('reports the alert-to-order delay from time and warns on an unparseable time', () => {
    expect(parseWebhookPayload({ action: 'close', time: '2026-11-21T14:59:58Z' }, NOW).alertDelayMs).toBe(2000);
    // A minute is fine; older is traded with a warning saying how old (a delayed or replayed alert).
    expect(parseWebhookPayload({ action: 'close', time: '2026-11-21T14:59:00Z' }, NOW).warnings).toEqual([]);
    expect(parseWebhookPayload({ action: 'close', time: '2020-01-01T00:00:00Z' }, NOW).warnings).toEqual([
      expect.stringMatching(/^time 2020-01-01T00:00:00Z is \d+ s before this alert arrived: a delayed or replayed alert/),
    ]);
    // A time more than a minute ahead says the sender's clock or zone is off (fuzz probe: silent, delay 0).
    expect(parseWebhookPayload({ action: 'close', time: '2026-11-21T15:00:50Z' }, NOW).warnings).toEqual([]);
    const ahead = parseWebhookPayload({ action: 'close', time: '2026-11-21T16:00:00Z' }, NOW);
    expect(ahead.alertDelayMs).toBe(0);
    expect(ahead.warnings).toEqual([expect.stringMatching(/^time 2026-11-21T16:00:00Z is \d+ s after this alert arrived: the sender's clock or time zone is off/)]);
    // A day the calendar does not have is not read as another one (fuzz probe: Feb 30 was March 2).
    for (const time of ['2026-02-30T00:00:00Z', '2026-13-01T00:00:00Z', '2026-04-31T10:00:00Z']) {
      const wrong = parseWebhookPayload({ action: 'close', time }, NOW);
      expect(wrong.alertDelayMs, time).toBeNull();
      expect(wrong.warnings[0], time).toContain('not an ISO-8601 time');
    }
    expect(parseWebhookPayload({ action: 'close', time: '2024-02-29T12:00:00Z' }, NOW).warnings[0]).toMatch(/before this alert arrived/);
    const bad = parseWebhookPayload({ action: 'close', time: '{{timenow}}' }, NOW);
    expect(bad.alertDelayMs).toBeNull();
    expect(bad.warnings[0]).toContain('not an ISO-8601 time');
  });

  it('accepts a known timeInForce and warns on others', () => {
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, timeInForce: 'GTC' }, NOW)).timeInForce).toBe('gtc');
    const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, timeInForce: 'opg' }, NOW);
    expect(orderOf(intent).timeInForce).toBeUndefined();
    expect(intent.warnings[0]).toContain('opg');
  });
});

describe('completeOrder', () => {
  it('fills what the alert leaves out from the strategy, the alert winning field by field', () => {
    const warnings: string[] = [];
    const input = completeOrder(
      { side: 'buy', qty: 3 },
      { symbol: 'MES1!', qty: 1, orderType: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } },
      warnings,
    );
    expect(input).toMatchObject({ symbol: 'MES1!', qty: 3, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(warnings).toEqual([]);
  });

  it('requires symbol and qty when no strategy gives them', () => {
    expect(thrown(() => completeOrder({ side: 'buy', qty: 1 }, null, [])).extensions.errors).toEqual([expect.objectContaining({ path: 'symbol' })]);
    expect(thrown(() => completeOrder({ side: 'buy', symbol: 'ES' }, null, [])).extensions.errors).toEqual([expect.objectContaining({ path: 'qty' })]);
  });

  it('drops the {{close}} price of a market alert with a warning instead of refusing it', () => {
    const warnings: string[] = [];
    const input = completeOrder({ side: 'sell', symbol: 'ES', qty: 1, price: 5001.37 }, null, warnings);
    expect(input.price).toBeNull();
    expect(warnings).toEqual(['price ignored for market orders']);
  });
});

describe('toNumber', () => {
  it('accepts exactly the finite numbers and numeric strings in plain decimal notation', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        expect(toNumber(n)).toBe(n);
        const text = String(n);
        expect(toNumber(text)).toBe(/e/.test(text) ? undefined : Number(text));
      }),
    );
    for (const bad of ['', ' ', 'abc', '1,5', '0x10', 'Infinity', '1e3', '5E-324', null, undefined, {}, [], true, Number.NaN]) expect(toNumber(bad)).toBeUndefined();
    expect([toNumber(' 5001.25 '), toNumber('-3'), toNumber('.5'), toNumber('7.')]).toEqual([5001.25, -3, 0.5, 7]);
  });
});

describe('parseWebhookPayload never throws anything but a coded AppError', () => {
  it('holds for arbitrary JSON objects', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('action', 'symbol', 'qty', 'takeProfit', 'stopLoss', 'orderType', 'price', 'id', 'time', 'x'), fc.jsonValue()), (body) => {
        try {
          parseWebhookPayload(body, NOW);
        } catch (err) {
          expect(err).toBeInstanceOf(AppError);
          expect(['VALIDATION_FAILED', 'WEBHOOK_UNSUPPORTED']).toContain((err as AppError).code);
        }
      }),
    );
  });
});

describe('parseWebhookPayload rules that protect money', () => {
  it.each([
    ['market', 'market'],
    ['MKT', 'market'],
    ['stop', 'stop'],
    ['Stop Market', 'stop'],
    ['stop-limit', 'stop_limit'],
    ['StopLimit', 'stop_limit'],
    ['stp_lmt', 'stop_limit'],
    ['lmt', 'limit'],
  ])('parses orderType %s as %s', (orderType, type) => {
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, orderType }, NOW)).type).toBe(type);
  });

  it('refuses an unknown or trailing orderType', () => {
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, orderType: 'iceberg' }, NOW))).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, orderType: 'trailing stop' }, NOW))).toMatchObject({ code: 'WEBHOOK_UNSUPPORTED' });
  });

  it.each([
    [{ price: 0 }, 'price'],
    [{ price: '0' }, 'price'],
    [{ stopPrice: '-1' }, 'stopPrice'],
    [{ takeProfit: 0 }, 'takeProfit'],
    [{ takeProfit: { price: 0 } }, 'takeProfit.price'],
    [{ stopLoss: { price: '0.0' } }, 'stopLoss.price'],
    [{ stopLoss: { ticks: 0 } }, 'stopLoss.ticks'],
    [{ takeProfit: { ticks: '-4' } }, 'takeProfit.ticks'],
    [{ stopLoss: { ticks: '1e2' } }, 'stopLoss.ticks'],
  ])('refuses the zero or negative price or offset %j naming %s', (extra, path) => {
    const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, ...extra }, NOW));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect((err.extensions.errors as { path: string }[])[0]!.path).toBe(path);
  });

  it.each([
    [{ stopLoss: { ticks: 20, trailing: true } }, 'trailing stops'],
    [{ stopLoss: { ticks: 20, trailOffset: 4 } }, 'trailing stops'],
    [{ stopLoss: { ticks: 20, type: 'trailing' } }, 'trailing stops'],
    [{ stopLoss: { ticks: 20, moveToBreakEven: 10 } }, 'breakeven moves'],
    [{ takeProfit: { ticks: 20, scaleOutQty: 1 } }, 'scale-outs'],
  ])('refuses a leg %j that asks for %s instead of silently placing a fixed leg', (extra, feature) => {
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, ...extra }, NOW))).toMatchObject({ code: 'WEBHOOK_UNSUPPORTED', extensions: { feature } });
  });

  it('refuses any other unknown key inside a leg, naming it', () => {
    for (const [extra, path] of [
      [{ stopLoss: { ticks: 20, unit: 'percent' } }, 'stopLoss.unit'],
      [{ stopLoss: { limitPrice: 4990 } }, 'stopLoss.limitPrice'],
      [{ takeProfit: { stopPrice: 5010 } }, 'takeProfit.stopPrice'],
    ] as const) {
      const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, ...extra }, NOW));
      expect(err.code).toBe('VALIDATION_FAILED');
      expect((err.extensions.errors as { path: string }[])[0]!.path).toBe(path);
    }
    expect(orderOf(parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, takeProfit: { limitPrice: 5010 }, stopLoss: { stopPrice: '4990', type: 'stop' } }, NOW))).toMatchObject({
      takeProfit: { price: 5010 },
      stopLoss: { price: 4990 },
    });
  });
});

describe('every name the parser knows, pinned', () => {
  it.each([
    ['trailingStop', 'trailing stops'], ['trailing_stop', 'trailing stops'], ['trailAmount', 'trailing stops'], ['trailPercent', 'trailing stops'],
    ['trailOffset', 'trailing stops'], ['trail_offset', 'trailing stops'], ['trail', 'trailing stops'], ['trail_stop', 'trailing stops'],
    ['trail_trigger', 'trailing stops'], ['autoTrail', 'trailing stops'], ['breakeven', 'breakeven moves'], ['breakevenOffset', 'breakeven moves'],
    ['breakeven_offset', 'breakeven moves'], ['scaleOut', 'scale-outs'], ['scaleOuts', 'scale-outs'], ['scale_out', 'scale-outs'],
    ['partialExits', 'scale-outs'], ['takeProfits', 'more than one take-profit'], ['stopLosses', 'more than one stop-loss'],
    ['takeProfit2', 'more than one take-profit'], ['stopLoss2', 'more than one stop-loss'], ['tp2', 'more than one take-profit'],
    ['sl2', 'more than one stop-loss'], ['advance_tp_sl', 'more than one take-profit'], ['brackets', 'more than one take-profit'],
  ])('top-level %s is refused as %s, with the message saying why', (key, feature) => {
    const err = thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, [key]: 1 }, NOW));
    expect(err.code).toBe('WEBHOOK_UNSUPPORTED');
    expect(err.extensions.feature).toBe(feature);
    expect(err.message).toBe(`Webhooks do not support ${feature}: a payload carries one entry with at most one take-profit and one stop-loss ({price} or {ticks}).`);
  });

  it.each([[0], [false], [null], [''], ['0'], ['false'], ['off'], ['None'], [[]]])(
    'a feature switch that is off (%j, as templates written for other products carry them) is ignored with a warning, not refused',
    (off) => {
      const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, trail: off, breakeven: off }, NOW);
      expect(intent.kind).toBe('order');
      expect(intent.warnings).toEqual([
        "'trail' ignored: trailing stops are off in this alert, and not supported by webhooks",
        "'breakeven' ignored: breakeven moves are off in this alert, and not supported by webhooks",
      ]);
    },
  );

  it.each([[1], [true], ['1'], ['on'], [{ ticks: 8 }], [5.5]])('a feature switch that asks for it (%j) is refused', (on) => {
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, trail: on }, NOW)).code).toBe('WEBHOOK_UNSUPPORTED');
  });

  it.each([
    [{ side: 'buy', symbol: 'ES', qty: 1 }, { side: 'buy' }],
    [{ action: 'buy', ticker: 'ES', qty: 1 }, { symbol: 'ES' }],
    [{ action: 'buy', symbol: 'ES', quantity: 2 }, { qty: 2 }],
    [{ action: 'buy', symbol: 'ES', contracts: 3 }, { qty: 3 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, orderType: 'limit', price: 5000 }, { type: 'limit', price: 5000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, order_type: 'lmt', limitPrice: '5000.25' }, { type: 'limit', price: 5000.25 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, orderType: 'stop', stopPrice: 4999 }, { type: 'stop', stopPrice: 4999 }],
    // The REST order's `type` and FIX's `ordType` (fuzz probe: `type` was an unknown field, and the limit went out at market).
    [{ action: 'buy', symbol: 'ES', qty: 1, type: 'limit', price: 3000 }, { type: 'limit', price: 3000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, ordType: 'Limit', limit_price: 3000 }, { type: 'limit', price: 3000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, type: 'limit', limit: 3000 }, { type: 'limit', price: 3000 }],
    // Any case and separators (re-probe: OrderType, Type, order-type were unknown, and the limit filled at market).
    [{ Action: 'buy', Symbol: 'ES', Qty: 1, OrderType: 'limit', Price: 3000 }, { side: 'buy', type: 'limit', price: 3000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, Type: 'limit', 'limit-price': 3000 }, { type: 'limit', price: 3000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, 'order-type': 'LIMIT', LimitPrice: 3000 }, { type: 'limit', price: 3000 }],
    [{ action: 'buy', symbol: 'ES', qty: 1, tp: { ticks: 8 }, sl: 4990 }, { takeProfit: { ticks: 8 }, stopLoss: { price: 4990 } }],
    [{ action: 'buy', symbol: 'ES', qty: 1, takeProfit: 5010, stopLoss: { ticks: 4 } }, { takeProfit: { price: 5010 }, stopLoss: { ticks: 4 } }],
    [{ action: 'buy', symbol: 'ES', qty: 1, timeInForce: 'GTC' }, { timeInForce: 'gtc' }],
  ])('reads %j as %j without warnings', (payload, expected) => {
    const intent = parseWebhookPayload(payload, NOW);
    expect(orderOf(intent)).toMatchObject(expected);
    expect(intent.warnings).toEqual([]);
  });

  it('id and time are read under their own names', () => {
    const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, id: 'a-1', time: '2026-11-21T14:59:59Z' }, NOW);
    expect(intent).toMatchObject({ id: 'a-1', alertDelayMs: 1000, warnings: [] });
  });

  it('the TradingView template, filled in as TradingView would, is a valid bracket order', () => {
    const filled = filledTemplate({ orderId: 'L1', action: 'buy', ticker: 'MES1!', contracts: '2', marketPosition: 'long', positionSize: 2, time: '2026-11-21T14:59:58Z' });
    const intent = parseWebhookPayload(JSON.parse(filled), NOW);
    expect(intent).toMatchObject({ kind: 'order', id: 'L1-2-2026-11-21T14:59:58Z', alertDelayMs: 2000, warnings: [] });
    expect(orderOf(intent)).toEqual({ side: 'buy', symbol: 'MES1!', qty: 2, type: 'market', takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
  });

  it("the same template on the strategy's exit (a sell that leaves it flat) is an exit of the symbol, with no bracket of its own", () => {
    const filled = filledTemplate({ orderId: 'Close entry(s) order L1', action: 'sell', ticker: 'MES1!', contracts: '2', marketPosition: 'flat', positionSize: 0, time: '2026-11-21T14:59:58Z' });
    expect(parseWebhookPayload(JSON.parse(filled), NOW)).toEqual({
      kind: 'flatten', exit: true, symbol: 'MES1!', id: 'Close entry(s) order L1-0-2026-11-21T14:59:58Z', alertDelayMs: 2000,
      warnings: [
        "'qty' ignored when marketPosition is flat: the exit closes the whole position",
        "'orderType' ignored when marketPosition is flat: the exit closes the whole position",
        "'takeProfit' ignored when marketPosition is flat: the exit closes the whole position",
        "'stopLoss' ignored when marketPosition is flat: the exit closes the whole position",
      ],
    });
  });
});

describe('parseWebhookPayload marketPosition (the strategy after the alert)', () => {
  const parse = (body: Record<string, unknown>) => parseWebhookPayload({ symbol: 'ES', qty: 1, ...body }, NOW);

  it.each([
    [{ action: 'buy', marketPosition: 'long' }, 'buy'],
    [{ action: 'sell', marketPosition: 'short' }, 'sell'],
    [{ action: 'buy', market_position: 'Long' }, 'buy'],
    [{ action: 'buy', sentiment: 'bullish' }, 'buy'],
    [{ action: 'sell', sentiment: 'bearish' }, 'sell'],
  ])('%j on the side it leaves the strategy is an entry, as without it', (body, side) => {
    const intent = parse(body);
    expect(intent.kind).toBe('order');
    expect(orderOf(intent).side).toBe(side);
    expect(intent.warnings).toEqual([]);
  });

  it.each([
    [{ action: 'sell', marketPosition: 'flat' }],
    [{ action: 'buy', marketPosition: 'flat' }],
    [{ action: 'sell', sentiment: 'FLAT' }],
    [{ action: 'long', market_position: ' flat ' }],
  ])('%j is an exit: flatten the symbol, open nothing', (body) => {
    expect(parse(body)).toMatchObject({ kind: 'flatten', exit: true, symbol: 'ES' });
  });

  it('an exit without a symbol is left to the strategy (the route refuses it when the strategy has none)', () => {
    expect(parseWebhookPayload({ action: 'sell', marketPosition: 'flat' }, NOW)).toEqual({ kind: 'flatten', exit: true, warnings: [], alertDelayMs: null });
  });

  it.each([
    [{ action: 'sell', marketPosition: 'long' }, 'sell'],
    [{ action: 'buy', sentiment: 'bearish' }, 'buy'],
  ])('%j reduces without closing: a partial exit, an order marked reduce with no bracket of its own', (body, side) => {
    const intent = parse({ ...body, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(intent).toMatchObject({ kind: 'order', reduce: true });
    expect(orderOf(intent)).toEqual({ side, symbol: 'ES', qty: 1 });
    const position = 'marketPosition' in body ? body.marketPosition : 'short';
    expect(intent.warnings).toEqual([
      `'takeProfit' ignored: a partial exit (marketPosition ${position}) only reduces the position`,
      `'stopLoss' ignored: a partial exit (marketPosition ${position}) only reduces the position`,
    ]);
  });

  it('an entry is never marked reduce; one the strategy confirms (marketPosition on its side) is marked entry: it may reverse a position', () => {
    expect(parse({ action: 'buy', marketPosition: 'long' })).not.toHaveProperty('reduce');
    expect(parse({ action: 'buy' })).not.toHaveProperty('reduce');
    expect(parse({ action: 'sell', marketPosition: 'short' })).toMatchObject({ entry: true });
    expect(parse({ action: 'buy' })).not.toHaveProperty('entry');
    expect(parse({ action: 'sell', marketPosition: 'long' })).not.toHaveProperty('entry');
  });

  it.each([['sideways'], [1], [true], [{}]])('an unreadable marketPosition %j is refused, never guessed', (value) => {
    const err = thrown(() => parse({ action: 'buy', marketPosition: value }));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toBe(`marketPosition: '${String(value)}' is not one of long, short, flat (bullish, bearish accepted)`);
  });

  it.each([['constructor'], ['CONSTRUCTOR'], ['__proto__'], ['toString'], ['hasOwnProperty'], ['valueOf']])("a word that names a member of Object's prototype (%s) is no action, side, order type or marketPosition: 400 (fuzz probe: '__proto__' sold, 'constructor' took the service down)", (word) => {
    const shown = word.trim().toLowerCase();
    const message = (body: Record<string, unknown>) => thrown(() => parse(body)).message;
    expect(message({ action: word, symbol: 'ES', qty: 1 })).toBe(`action: '${shown}' is not one of buy, sell, long, short, close, flat, flatten, exit`);
    expect(thrown(() => parse({ side: word, symbol: 'ES', qty: 1 })).code).toBe('VALIDATION_FAILED');
    for (const name of ['orderType', 'type', 'ordType', 'order_type']) {
      expect(message({ action: 'buy', symbol: 'ES', qty: 1, [name]: word })).toMatch(/is not an order type: one of market, limit, stop, stop_limit$/);
    }
    for (const name of ['marketPosition', 'sentiment']) {
      const err = thrown(() => parse({ action: 'sell', symbol: 'ES', qty: 1, [name]: word }));
      expect(err.code).toBe('VALIDATION_FAILED');
      expect(err.message).toMatch(/is not one of long, short, flat \(bullish, bearish accepted\)$/);
    }
  });

  it.each([[2, 2], ['3', 3], ['0001', 1]])('marketPositionSize %j on an entry is the most it may open (%d)', (value, size) => {
    expect(parse({ action: 'sell', marketPosition: 'short', marketPositionSize: value })).toMatchObject({ kind: 'order', entry: true, positionSize: size, warnings: [] });
    expect(parse({ action: 'buy', marketPosition: 'long', market_position_size: value })).toMatchObject({ entry: true, positionSize: size });
  });

  it.each([['-1'], [-1], [1.5], ['1.0'], ['1e3'], ['two'], [true], [{}], [''], [' 1']])('an unreadable marketPositionSize %j is refused: it caps what is opened', (value) => {
    const err = thrown(() => parse({ action: 'buy', marketPosition: 'long', marketPositionSize: value }));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.extensions.errors).toEqual([{ path: 'marketPositionSize', message: expect.any(String) }]);
  });

  it('marketPositionSize 0 on an entry contradicts its marketPosition: refused, nothing guessed', () => {
    const err = thrown(() => parse({ action: 'buy', marketPosition: 'long', marketPositionSize: 0 }));
    expect(err.message).toBe("marketPositionSize: is 0 while marketPosition is long: the template's placeholders disagree");
  });

  it('marketPositionSize is not used by exits, is kept for partial exits (the least the account keeps), and is ignored with a warning without marketPosition', () => {
    const exit = (size: number) => parseWebhookPayload({ action: 'sell', symbol: 'ES', marketPosition: 'flat', marketPositionSize: size }, NOW);
    expect(exit(0)).toMatchObject({ kind: 'flatten', warnings: [] });
    expect(exit(2).warnings).toEqual(['marketPositionSize 2 ignored: marketPosition flat closes the whole position']);
    const partial = parse({ action: 'sell', marketPosition: 'long', marketPositionSize: 1 });
    expect(partial).toMatchObject({ reduce: true, positionSize: 1, warnings: [] });
    expect(thrown(() => parse({ action: 'sell', marketPosition: 'long', marketPositionSize: 0 })).code).toBe('VALIDATION_FAILED');
    const plain = parse({ action: 'buy', marketPositionSize: 1 });
    expect(plain).not.toHaveProperty('positionSize');
    expect(plain.warnings).toEqual(["'marketPositionSize' ignored without marketPosition"]);
  });

  it('close keeps flattening the whole account; a marketPosition other than flat is ignored with a warning', () => {
    expect(parseWebhookPayload({ action: 'close', marketPosition: 'long' }, NOW)).toEqual({
      kind: 'flatten', warnings: ["marketPosition 'long' ignored for action close"], alertDelayMs: null,
    });
    expect(parseWebhookPayload({ action: 'close', marketPosition: 'flat' }, NOW)).toEqual({ kind: 'flatten', warnings: [], alertDelayMs: null });
  });
});

describe('parseWebhookPayload: exact answers', () => {
  const parse = (body: unknown) => parseWebhookPayload(body, NOW);
  const message = (body: unknown) => thrown(() => parse(body)).message;

  it('says exactly what is wrong', () => {
    expect(message([])).toBe('(body): must be a JSON object');
    expect(message(null)).toBe('(body): must be a JSON object');
    expect(message({ symbol: 'ES' })).toBe('action: required: buy, sell, long, short, close, flat, flatten or exit');
    expect(message({ action: '  ' })).toBe('action: required: buy, sell, long, short, close, flat, flatten or exit');
    expect(message({ action: 'hold' })).toBe("action: 'hold' is not one of buy, sell, long, short, close, flat, flatten, exit");
    expect(thrown(() => parse({ action: 'breakeven' }))).toMatchObject({ code: 'WEBHOOK_UNSUPPORTED', extensions: { feature: 'breakeven moves' } });
    expect(message({ action: 'buy', qty: 'x' })).toBe('qty: must be a whole number of contracts, at least 1 (digits only in a string)');
    expect(message({ action: 'buy', price: 'x' })).toBe('price: must be a positive number (numeric strings accepted)');
    expect(message({ action: 'buy', orderType: 'twap' })).toBe("orderType: 'twap' is not an order type: one of market, limit, stop, stop_limit");
    expect(message({ action: 'buy', stopLoss: { ticks: 'x' } })).toBe('stopLoss.ticks: must be a positive integer');
    expect(message({ action: 'buy', stopLoss: { price: 1, ticks: 1 } })).toBe('stopLoss: give either price or ticks, not both');
    expect(message({ action: 'buy', stopLoss: {} })).toBe('stopLoss: must be {"price": n}, {"ticks": n} or a bare number (= price)');
    expect(message({ action: 'buy', takeProfit: { size: 1 } })).toBe('takeProfit.size: unknown field in a take-profit or stop-loss: give {"price": n} or {"ticks": n}');
  });

  it('two legs in an array are refused as more than one of that leg', () => {
    expect(thrown(() => parse({ action: 'buy', takeProfit: [1, 2] })).extensions.feature).toBe('more than one take-profit');
    expect(thrown(() => parse({ action: 'buy', stopLoss: [1, 2] })).extensions.feature).toBe('more than one stop-loss');
  });

  it('a leg type that is not a string, or names a trail, is a trailing stop', () => {
    for (const type of [5, 'TRAIL', 'trailing_stop']) expect(thrown(() => parse({ action: 'buy', stopLoss: { ticks: 4, type } })).extensions.feature).toBe('trailing stops');
  });

  it('an empty field that decides what is traded (a placeholder that came out empty) is refused, naming it; an empty price is absent, null parts of a leg are ignored', () => {
    for (const [field, value] of [
      ['stopLoss', ''],
      ['stopLoss', []],
      ['sl', ' '],
      ['takeProfit', ''],
      ['tp', []],
      ['orderType', ''],
      ['qty', ''],
      ['qty', ' '],
      ['marketPosition', ''],
      ['stopLoss', [null]],
      ['tp', [[]]],
      ['sl', ['']],
    ] as const) {
      const err = thrown(() => parse({ action: 'buy', orderType: 'limit', price: 4500, [field]: value }));
      expect(err.code, `${field}=${JSON.stringify(value)}`).toBe('VALIDATION_FAILED');
      expect(err.message).toMatch(/is empty \(a placeholder that came out empty\?\): give a value, or leave the field out/);
    }
    expect(parse({ action: 'buy', price: '', stopPrice: '', stopLoss: null })).toEqual({ kind: 'order', warnings: [], alertDelayMs: null, order: { side: 'buy' } });
    expect(orderOf(parse({ action: 'buy', takeProfit: { price: null, ticks: 4 }, stopLoss: { ticks: null, price: 4990 } }))).toMatchObject({ takeProfit: { ticks: 4 }, stopLoss: { price: 4990 } });
  });

  it('reads whole quantities (digits only in a string) and normalises order types', () => {
    expect(['12', '4', '007'].map((qty) => orderOf(parse({ action: 'buy', qty })).qty)).toEqual([12, 4, 7]);
    for (const qty of ['2x', '1.5', '.5', '0', '2.00', '3.', ' 4 ']) expect(() => parse({ action: 'buy', qty }), qty).toThrow(/qty/);
    expect(['Stop-Limit', ' LIMIT ', 'stop limit', 'StopMarket', 'stop  market'].map((orderType) => orderOf(parse({ action: 'buy', orderType })).type)).toEqual(['stop_limit', 'limit', 'stop_limit', 'stop', 'stop']);
  });

  it('trims symbols, takes numeric ones as text, and skips non-finite ones', () => {
    expect(orderOf(parse({ action: 'buy', symbol: ' ES1! ' })).symbol).toBe('ES1!');
    expect(orderOf(parse({ action: 'buy', symbol: 6 })).symbol).toBe('6');
    expect(orderOf(parse({ action: 'buy', symbol: Number.NaN }))).toEqual({ side: 'buy' });
    expect(parse({ action: 'buy', id: '  ' })).not.toHaveProperty('id');
    expect(parse({ action: 'buy', id: 7 })).toMatchObject({ id: '7' });
  });

  it('takes every listed timeInForce, warns about others (also non-strings)', () => {
    expect(['DAY', 'gtc', 'Ioc', 'fok'].map((timeInForce) => orderOf(parse({ action: 'buy', timeInForce })).timeInForce)).toEqual(['day', 'gtc', 'ioc', 'fok']);
    expect(parse({ action: 'buy', timeInForce: 5 }).warnings).toEqual(["timeInForce '5' not supported; day used"]);
  });

  it('a time that is not a string is not a time', () => {
    expect(parse({ action: 'buy', time: 1732201198000 })).toMatchObject({ alertDelayMs: null, warnings: ["time '1732201198000' is not an ISO-8601 time; ignored"] });
  });

  it('flatten names each order field it ignores, and carries a symbol only when given', () => {
    const all = { qty: 1, orderType: 'limit', price: 1, stopPrice: 1, takeProfit: 1, stopLoss: 1, timeInForce: 'gtc' };
    expect(parse({ action: 'close', ...all }).warnings).toEqual(Object.keys(all).map((k) => `'${k}' ignored for action close`));
    expect(parse({ action: 'flat' })).toEqual({ kind: 'flatten', warnings: [], alertDelayMs: null });
  });
});

describe('completeOrder: exact answers', () => {
  const strategy = { symbol: 'NQ', qty: 3, orderType: 'limit' as const, takeProfit: { ticks: 9 }, stopLoss: null };
  it('takes the strategy’s order type when the alert names none, and day by default', () => {
    const warnings: string[] = [];
    expect(completeOrder({ side: 'buy', price: 5000 }, strategy, warnings)).toMatchObject({ type: 'limit', price: 5000, timeInForce: 'day', takeProfit: { ticks: 9 }, stopLoss: null, qty: 3 });
    expect(completeOrder({ side: 'buy', type: 'market' }, strategy, [])).toMatchObject({ type: 'market' });
    expect(completeOrder({ side: 'buy', timeInForce: 'gtc' }, strategy, [])).toMatchObject({ timeInForce: 'gtc' });
    expect(warnings).toEqual([]);
  });

  it('drops a price a stop order cannot use with a warning, and refuses a stop price a market or limit order cannot use (re-probe 5: a market entry with stopPrice filled at once, no stop)', () => {
    const warnings: string[] = [];
    expect(completeOrder({ side: 'sell', symbol: 'ES', qty: 1, type: 'stop', price: 5000, stopPrice: 4990 }, null, warnings)).toMatchObject({ price: null, stopPrice: 4990 });
    expect(completeOrder({ side: 'sell', symbol: 'ES', qty: 1, type: 'stop_limit', price: 5000, stopPrice: 4990 }, null, warnings)).toMatchObject({ price: 5000, stopPrice: 4990 });
    expect(warnings).toEqual(['price ignored for stop orders']);
    for (const type of ['limit', 'market'] as const) {
      expect(thrown(() => completeOrder({ side: 'sell', symbol: 'ES', qty: 1, type, price: 5000, stopPrice: 4990 }, null, [])).message).toMatch(/^stopPrice: not used by (limit|market) orders: a stop order is orderType 'stop'/);
    }
    expect(thrown(() => completeOrder({ side: 'buy', symbol: 'ES', qty: 1, stopPrice: 17950 }, null, [])).message).toMatch(/^stopPrice: not used by market orders/);
  });

  it('refuses a price named as a limit price on a market or stop order; a plain price there ({{close}}) is dropped with a warning (fuzz probe)', () => {
    for (const name of ['limitPrice', 'limit_price', 'limit']) {
      const intent = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, [name]: 3000 }, NOW);
      if (intent.kind !== 'order') throw new Error('not an order');
      expect(intent.limitPriceAs).toBe(name);
      const err = thrown(() => completeOrder(intent.order, null, intent.warnings, intent.limitPriceAs));
      expect(err.code).toBe('VALIDATION_FAILED');
      expect(err.message).toMatch(new RegExp(`^price: given as '${name}', a limit price, on a market order: a limit order is orderType 'limit'`));
      // The strategy's order type decides as well: limit, it is a limit order at that price.
      const strategy = { symbol: null, qty: null, orderType: 'limit', takeProfit: null, stopLoss: null } as unknown as Parameters<typeof completeOrder>[1];
      expect(completeOrder(intent.order, strategy, [], intent.limitPriceAs)).toMatchObject({ type: 'limit', price: 3000 });
    }
    const plain = parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, price: 3000 }, NOW);
    if (plain.kind !== 'order') throw new Error('not an order');
    expect(plain.limitPriceAs).toBeUndefined();
    const warnings: string[] = [];
    expect(completeOrder(plain.order, null, warnings, plain.limitPriceAs)).toMatchObject({ type: 'market', price: null });
    expect(warnings).toEqual(['price ignored for market orders']);
    // FIX's OrdType code is not an order type here: refused, never read as market.
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, OrdType: '2', Price: 4990 }, NOW)).message).toBe("OrdType: '2' is not an order type: one of market, limit, stop, stop_limit");
    // An order type that is not one is refused under `type` too, never read as market.
    expect(thrown(() => parseWebhookPayload({ action: 'buy', symbol: 'ES', qty: 1, type: 'strategy' }, NOW)).message).toBe("type: 'strategy' is not an order type: one of market, limit, stop, stop_limit");
  });

  it('says which field is missing and where it could come from', () => {
    expect(thrown(() => completeOrder({ side: 'buy', qty: 1 }, null, [])).message).toBe('symbol: required (or set a symbol on the token’s strategy)');
    expect(thrown(() => completeOrder({ side: 'buy', symbol: 'ES' }, null, [])).message).toBe('qty: required (or set qty on the token’s strategy)');
  });
});
