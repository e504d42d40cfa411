/**
 * Webhook acceptance over real HTTP against `serve --paper`: TradingView-style alerts
 * (text/plain, aliases), flatten with and without a symbol (409 SYMBOL_MISMATCH), the
 * inactive-account 403 and the rebind that makes the next alert go through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSymbol } from '../../../src/domain/symbols.js';
import { filledTemplate } from '../../support/tradingview.js';
import { control, simState } from '../../support/sim.js';
import { eventually, http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
let acc: string;
let other: string;
let token: { id: string; url: string };
const front = (root: string) => {
  const r = resolveSymbol(root, new Date());
  if (!r.ok) throw new Error(r.reason);
  return r.contract;
};
const ES = front('ES');
const NQ = front('NQ');
const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });
const alert = (body: unknown, contentType = 'application/json') =>
  http(token.url, 'POST', '', { raw: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': contentType } });
/** The README's template as TradingView fills it for an ES1! strategy order. */
const fire = (action: 'buy' | 'sell', contracts: string, marketPosition: 'long' | 'short' | 'flat', orderId: string, positionSize = marketPosition === 'flat' ? 0 : (marketPosition === 'long' ? 1 : -1) * Number(contracts), time = new Date().toISOString()) =>
  filledTemplate({ orderId, action, ticker: 'ES1!', contracts, marketPosition, positionSize, time });
const positions = async (id = acc) => (await api('GET', `/api/v1/accounts/${id}/positions`)).json.data as any[];
const working = async (id = acc) => (await api('GET', `/api/v1/accounts/${id}/working-orders`)).json.data as any[];

/**
 * At a broker answering every request after 8 s: `first` (a strategy alert) is answered 504, then
 * `gapMs` later an exit of the ES position, also 504. The broker's ES position must reach `net`
 * (what `first` did), then 0 (the exit, after it), and stay 0; the service's too.
 */
async function exitBehindAtSlowBroker(account: string, first: object, { gapMs, net, what, latencyMs = 8_000 }: { gapMs: number; net: number; what: string; latencyMs?: number }): Promise<void> {
  const atBroker = async () => ((await simState(s)).positions as { accountId: number; netPos: number }[]).find((p) => String(p.accountId) === account)?.netPos ?? 0;
  await control(s, 'POST', '/faults', { latencyMs });
  try {
    const answer = await alert(first);
    expect(answer.status, answer.text).toBe(504);
    await new Promise((r) => setTimeout(r, gapMs));
    const exit = await alert({ action: net > 0 ? 'sell' : 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'flat' });
    expect(exit.status, exit.text).toBe(504);
    await eventually(async () => (await atBroker()) === net, what, 30_000);
    await eventually(async () => (await atBroker()) === 0, 'the exit flat at the broker', 30_000);
    await new Promise((r) => setTimeout(r, latencyMs + 1_000));
    expect(await atBroker()).toBe(0);
  } finally {
    await control(s, 'DELETE', '/faults');
  }
  await eventually(async () => (await positions(account)).every((p) => p.netQty === 0), 'flat here too');
}

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
  [acc, other] = s.accounts as [string, string];
  await control(s, 'POST', '/prices', { symbol: ES, price: 5000 });
  await control(s, 'POST', '/prices', { symbol: NQ, price: 20000 });
  const r = await api('POST', '/api/v1/webhook-tokens', { accountId: acc, name: 'TV' });
  expect(r.status, r.text).toBe(201);
  token = { id: r.json.id, url: r.json.url };
  expect(token.url).toBe(`${s.url}/api/v1/webhooks/${r.json.token}`);
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('webhook alerts', () => {
  it('places a TradingView text/plain alert with aliases and numeric strings, echoing unknown fields', async () => {
    const r = await alert(`{"action":"long","ticker":"ES1!","contracts":"2","price":"5000.00","comment":"orb"}`, 'text/plain; charset=utf-8');
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ accepted: true, action: 'buy', accountId: acc, order: { symbol: ES, requestedSymbol: 'ES1!', qty: 2 } });
    expect(r.json.warnings).toEqual(expect.arrayContaining(["unknown field 'comment' ignored", 'price ignored for market orders']));
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === 2, 'long 2');
  });

  it('refuses two take-profits with WEBHOOK_UNSUPPORTED and places nothing', async () => {
    const before = (await simState(s)).orders.length;
    const r = await alert({ action: 'buy', symbol: 'ES', qty: 1, takeProfit: [{ price: 5010 }, { price: 5020 }] });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('WEBHOOK_UNSUPPORTED');
    expect((await simState(s)).orders.length).toBe(before);
  });

  it("an alert whose action, order type or marketPosition names a member of Object's prototype is 400, nothing at the broker, and the service stays up (fuzz probe: 'constructor' stopped it for every user, '__proto__' sold, as marketPosition it closed the position)", async () => {
    const before = (await simState(s)).orders.length;
    for (const body of [
      { action: 'constructor', symbol: 'ES1!', qty: 1 },
      { action: '__proto__', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 4000 },
      { side: 'CONSTRUCTOR', symbol: 'ES1!', qty: 1 },
      { action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'constructor' },
      { action: 'buy', symbol: 'ES1!', qty: 1, type: '__proto__' },
      { action: 'sell', symbol: 'ES1!', qty: 1, orderType: 'market', marketPosition: 'constructor' },
      { action: 'sell', symbol: 'ES1!', qty: 1, sentiment: '__proto__' },
    ]) {
      const r = await alert(body);
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expect(r.json.code).toBe('VALIDATION_FAILED');
    }
    expect((await http(s.url, 'GET', '/healthz')).status).toBe(200);
    expect((await simState(s)).orders.length).toBe(before);
    expect((await positions()).find((p) => p.symbol === ES)?.netQty).toBe(2);
  });

  it('flatten with a symbol the account does not hold → 409 SYMBOL_MISMATCH, nothing closed', async () => {
    const r = await alert({ action: 'close', symbol: 'NQ1!' });
    expect(r.status, r.text).toBe(409);
    expect(r.json.code).toBe('SYMBOL_MISMATCH');
    expect((await positions()).find((p) => p.symbol === ES)?.netQty).toBe(2);
  });

  it('flatten with the held symbol closes it', async () => {
    await alert({ action: 'buy', symbol: 'ES', qty: 1, orderType: 'limit', price: 4900 });
    const r = await alert({ action: 'exit', symbol: 'ES1!' });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ action: 'flatten', flatten: { symbol: ES } });
    await eventually(async () => (await positions()).every((p) => p.netQty === 0) && (await working()).length === 0, 'flat');
  });

  it('flatten without a symbol cancels every resting order and closes every position, on all symbols', async () => {
    await alert({ action: 'sell', symbol: 'NQ', qty: 1 });
    await alert({ action: 'buy', symbol: 'ES', qty: 1 });
    await alert({ action: 'buy', symbol: 'ES', qty: 1, orderType: 'limit', price: 4800 });
    await eventually(async () => (await positions()).filter((p) => p.netQty !== 0).length === 2, 'two positions');
    const r = await alert({ action: 'flat' });
    expect(r.status, r.text).toBe(200);
    await eventually(async () => (await positions()).every((p) => p.netQty === 0) && (await working()).length === 0, 'flat on all symbols');
  });

  it("a strategy's exit with the TradingView template (sell, marketPosition flat) closes the symbol and its bracket legs, opening nothing", async () => {
    // Another symbol's resting order, which the exit of ES must leave alone.
    const nq = await alert({ action: 'sell', symbol: 'NQ', qty: 1, orderType: 'limit', price: 21000 });
    expect(nq.status).toBe(201);
    const entry = await alert(fire('buy', '1', 'long', 'Long'), 'text/plain');
    expect(entry.status, entry.text).toBe(201);
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === 1 && (await working()).filter((o) => o.symbol === ES).length === 2, 'long 1 with its two legs');
    const exit = await alert(fire('sell', '1', 'flat', 'Close entry(s) order Long'), 'text/plain');
    expect(exit.status, exit.text).toBe(200);
    expect(exit.json).toMatchObject({ action: 'flatten', order: null, flatten: { symbol: ES } });
    await eventually(async () => (await positions()).every((p) => p.netQty === 0) && (await working()).every((o) => o.symbol !== ES), 'ES flat, no ES orders');
    expect((await working()).filter((o) => o.symbol === NQ)).toHaveLength(1);
    // The strategy's stop hit at the broker first: the exit finds nothing to close and opens nothing.
    const again = await alert(fire('sell', '1', 'flat', 'Close entry(s) order Long 2'), 'text/plain');
    expect(again.status, again.text).toBe(200);
    expect((await positions()).every((p) => p.netQty === 0)).toBe(true);
    expect((await working()).map((o) => o.symbol)).toEqual([NQ]);
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
  });

  it('a partial exit with the template (sell 1 of long 2, marketPosition long) reduces the position, opens nothing, and the legs follow it', async () => {
    const entry = await alert(fire('buy', '2', 'long', 'Long'), 'text/plain');
    expect(entry.status, entry.text).toBe(201);
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === 2, 'long 2');
    const partial = await alert(fire('sell', '1', 'long', 'TP1'), 'text/plain');
    expect(partial.status, partial.text).toBe(201);
    expect(partial.json).toMatchObject({ action: 'sell', order: { side: 'sell', qty: 1, legs: { takeProfit: null, stopLoss: null } } });
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === 1, 'long 1');
    await eventually(async () => {
      const legs = (await working()).filter((o) => o.symbol === ES);
      return legs.length === 2 && legs.every((o) => o.qty === 1 && o.side === 'sell');
    }, "the entry's two legs cut to 1");
    // The strategy says long, the account is flat (say its stop hit at the broker): refused, nothing opened.
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
    const drifted = await alert(fire('sell', '1', 'long', 'TP2'), 'text/plain');
    expect(drifted.status, drifted.text).toBe(409);
    expect(drifted.json).toMatchObject({ code: 'SYMBOL_MISMATCH', detail: `a partial exit may only reduce the position: the account holds no ${ES}, the order would sell 1` });
    expect((await positions()).every((p) => p.netQty === 0)).toBe(true);
  });

  it('a reversal with the template (long 1, sell 2 short) closes the long and its legs first, then opens short 1 with legs for 1 — also under a max position of 1', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    expect((await api('PUT', `/api/v1/accounts/${account}/guards`, { maxPositionPerContract: 1 })).status).toBe(200);
    try {
      const long = await alert(fire('buy', '1', 'long', 'Long'), 'text/plain');
      expect(long.status, long.text).toBe(201);
      await eventually(async () => (await positions(account)).some((p) => p.netQty === 1) && (await working(account)).length === 2, 'long 1 with its legs');
      const reversal = await alert(fire('sell', '2', 'short', 'Short', -1), 'text/plain');
      expect(reversal.status, reversal.text).toBe(201);
      expect(reversal.json).toMatchObject({ action: 'sell', order: { side: 'sell', qty: 1 }, flatten: { symbol: ES } });
      expect(reversal.json.warnings).toContain('reversal: the 1 held the other way closed first, then 1 opened');
      await eventually(async () => (await positions(account)).some((p) => p.netQty === -1), 'short 1');
      const legs = await working(account);
      expect(legs.map((o) => [o.side, o.qty, o.role]).sort()).toEqual([['buy', 1, 'stop_loss'], ['buy', 1, 'take_profit']]);
      // The same size back (short 1, buy 1 long is no reversal of 2): closes the short, opens nothing.
      const back = await alert(fire('buy', '1', 'long', 'Long 2'), 'text/plain');
      expect(back.status, back.text).toBe(200);
      expect(back.json).toMatchObject({ action: 'flatten', order: null });
      await eventually(async () => (await positions(account)).every((p) => p.netQty === 0) && (await working(account)).length === 0, 'flat, nothing working');
      // The strategy reverses from long 1 again, but the account is flat (its stop closed the long
      // at the broker): the template's marketPositionSize opens short 1, not the alert's 2.
      const late = await alert(fire('sell', '2', 'short', 'Short 2', -1), 'text/plain');
      expect(late.status, late.text).toBe(201);
      // A reversal all the same: the symbol's resting orders of the old side went first (none here).
      expect(late.json).toMatchObject({ action: 'sell', order: { side: 'sell', qty: 1 }, flatten: { symbol: ES, cancelledOrderIds: [], positions: [] } });
      await eventually(async () => (await positions(account)).some((p) => p.netQty === -1) && (await working(account)).length === 2, 'short 1 with its legs');
      // The token's alerts say what was opened and why (TV probe: listed as "sell 2 — Order filled").
      const listed = await eventually(async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).find((a) => a.requestId === late.headers.get('x-request-id')), 'the alert listed');
      expect(listed).toMatchObject({ qty: '2', orderQty: 1, warnings: [expect.stringMatching(/^marketPositionSize 1: 1 opened, not 2/)] });
      expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    } finally {
      await api('PUT', `/api/v1/accounts/${account}/guards`, {});
    }
  });

  it('a reversal whose close takes the broker longer than the answer (1.3 s a request: the legs, then the liquidation) is answered 504 and opens its new position once the close is done (money probe: flat for good where the strategy was short)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const long = await alert(fire('buy', '1', 'long', 'Slow long'), 'text/plain');
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1) && (await working(account)).length === 2, 'long 1 with its legs');
    await control(s, 'POST', '/faults', { latencyMs: 1_300 });
    let reversal: Awaited<ReturnType<typeof alert>>;
    try {
      reversal = await alert(fire('sell', '2', 'short', 'Slow short', -1), 'text/plain');
      expect(reversal.status, reversal.text).toBe(504);
      await eventually(async () => ((await simState(s)).positions as { accountId: number; netPos: number }[]).some((p) => String(p.accountId) === account && p.netPos === -1), 'short 1 at the broker', 20_000);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions(account)).some((p) => p.netQty === -1) && (await working(account)).length === 2, 'short 1 with its legs');
    const listed = await eventually(
      async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=10`)).json.data as any[]).find((a) => a.lateOutcomeOf === reversal.headers.get('x-request-id')),
      'its late outcome listed',
    );
    expect(listed).toMatchObject({ status: 201, orderQty: 1 });
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 40_000);

  it('an exit queued behind a reversal at a very slow broker (8 s a request) acts after the reversal\'s open, never before it (re-probe: the open outlived its turn, the exit said flat, then the open filled: short where the strategy was flat)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const long = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1), 'long 1');
    // The close (8 s), the open (8 s), then the exit (8 s): short 1 on the way, flat at the end.
    await exitBehindAtSlowBroker(account, { action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', marketPositionSize: 1 }, { gapMs: 1_500, net: -1, what: 'the reversal short 1 at the broker' });
  }, 90_000);

  it('an exit queued behind a strategy entry at a very slow broker (8 s a request) acts after the entry fills, never before it (the entry given up at 2.5 s passed its turn on, and the exit found nothing to close)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    await exitBehindAtSlowBroker(account, { action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 }, { gapMs: 1_000, net: 1, what: 'the entry long 1 at the broker' });
  }, 90_000);

  it('an exit queued behind a strategy entry at a broker slower than its own request deadline (12 s a request, the deadline 10 s) acts after the entry fills (re-probe: at 10 s the entry passed its turn on with its outcome unknown; the exit found nothing, then the entry filled)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    await exitBehindAtSlowBroker(account, { action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 }, { gapMs: 1_000, net: 1, what: 'the entry long 1 at the broker', latencyMs: 12_000 });
  }, 120_000);

  it('an exit at a broker slower than its request deadline (12 s a request) sends its liquidation once the OCO took the legs, not after a second leg cancel\'s own timeout (re-probe: 8 s more with the position unprotected)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const atBroker = async () => ((await simState(s)).positions as { accountId: number; netPos: number }[]).find((p) => String(p.accountId) === account)?.netPos ?? 0;
    const long = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await working(account)).length === 2, 'long 1 with its two legs');
    await control(s, 'POST', '/faults', { latencyMs: 12_000 });
    try {
      const t0 = Date.now();
      const exit = await alert({ action: 'close', symbol: 'ES1!' });
      expect(exit.status, exit.text).toBe(504);
      await eventually(async () => (await atBroker()) === 0, 'flat at the broker', 45_000);
      // The leg cancel (12 s, its answer past the 10 s deadline, the OCO taking the other leg), then the
      // liquidation (12 s): about 24 s. Waiting out the second leg's own cancel made it about 32 s.
      expect(Date.now() - t0).toBeLessThan(29_000);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions(account)).every((p) => p.netQty === 0), 'flat here too');
  }, 90_000);

  it('a reversal at a broker slower than its request deadline (12 s a request) closes the position and opens the new one, its turn held throughout (re-probe: the close\'s liquidation timed out at 10 s, and the open was given up: flat where the strategy was short)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const atBroker = async () => ((await simState(s)).positions as { accountId: number; netPos: number }[]).find((p) => String(p.accountId) === account)?.netPos ?? 0;
    const long = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await working(account)).length === 2, 'long 1 with its two legs');
    await control(s, 'POST', '/faults', { latencyMs: 12_000 });
    try {
      const reversal = await alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', marketPositionSize: 1 });
      expect(reversal.status, reversal.text).toBe(504);
      await eventually(async () => (await atBroker()) === 0, 'the close at the broker', 40_000);
      await eventually(async () => (await atBroker()) === -1, 'the new position short 1 at the broker', 40_000);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions(account)).some((p) => p.netQty === -1), 'short 1 here too');
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 120_000);

  it("a reversal on a flat account cancels the old side's resting entry (TV probe: the strategy's buy limit filled after it, and the account ended flat against a short strategy)", async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const resting = await alert({ ...JSON.parse(fire('buy', '1', 'long', 'Long limit', 1)), orderType: 'limit', price: '4990' });
    expect(resting.status, resting.text).toBe(201);
    const reversal = await alert(fire('sell', '2', 'short', 'Short', -1), 'text/plain');
    expect(reversal.status, reversal.text).toBe(201);
    expect(reversal.json.flatten.cancelledOrderIds).toContain(resting.json.order.orderId);
    await eventually(async () => (await positions(account)).find((p) => p.symbol === ES)?.netQty === -1, 'short 1');
    expect((await working(account)).some((o) => o.orderId === resting.json.order.orderId)).toBe(false);
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  });

  it('a reversal sent while the entry before it is still on its way to the broker closes that entry (TV probe: with 150 ms to the broker it read flat and the account ended flat, the strategy short 1)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    await control(s, 'POST', '/faults', { latencyMs: 150 });
    try {
      const entry = alert(fire('buy', '1', 'long', 'Long', 1), 'text/plain');
      await new Promise((r) => setTimeout(r, 60));
      const reversal = await alert(fire('sell', '2', 'short', 'Short', -1), 'text/plain');
      expect((await entry).status).toBe(201);
      expect(reversal.status, reversal.text).toBe(201);
      expect(reversal.json).toMatchObject({ order: { side: 'sell', qty: 1 }, flatten: { symbol: ES } });
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions(account)).find((p) => p.symbol === ES)?.netQty === -1, 'short 1');
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  });

  it('alerts that follow each other on an account take turns: an exit then a re-entry, two reversals, a reversal then a partial exit, each 30–50 ms apart with 100 ms to the broker, end where the strategy is (trader probe: flat, flat and short 2, every answer a success)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    const held = async () => (await positions(account)).find((p) => p.symbol === ES)?.netQty ?? 0;
    const legsFor = async () => (await working(account)).map((o) => o.qty as number);
    const longOne = async (tag: string) => {
      expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
      const r = await alert(fire('buy', '1', 'long', `Long ${tag}`, 1), 'text/plain');
      expect(r.status, r.text).toBe(201);
      await eventually(async () => (await held()) === 1 && (await working(account)).length === 2, 'long 1 with its legs');
    };
    /** Sends the alerts `gapMs` apart with the broker 100 ms away; all their answers. */
    const inTurn = async (gapMs: number, ...bodies: string[]) => {
      await control(s, 'POST', '/faults', { latencyMs: 100 });
      try {
        const sent: Promise<Awaited<ReturnType<typeof alert>>>[] = [];
        for (const body of bodies) {
          sent.push(alert(body, 'text/plain'));
          await new Promise((r) => setTimeout(r, gapMs));
        }
        return await Promise.all(sent);
      } finally {
        await control(s, 'DELETE', '/faults');
      }
    };

    // strategy.close then strategy.entry long on the same bar: long 1 again.
    await longOne('a');
    const [exit, reentry] = await inTurn(30, fire('sell', '1', 'flat', 'Close entry(s) order Long a'), fire('buy', '1', 'long', 'Long b', 1));
    expect([exit!.status, reentry!.status], reentry!.text).toEqual([200, 201]);
    await eventually(async () => (await held()) === 1 && (await legsFor()).join() === '1,1', 'long 1 with legs for 1');

    // long 1 → short 1 → long 1: long 1.
    const [toShort, toLong] = await inTurn(50, fire('sell', '2', 'short', 'Short c', -1), fire('buy', '2', 'long', 'Long d', 1));
    expect([toShort!.status, toLong!.status], toLong!.text).toEqual([201, 201]);
    await eventually(async () => (await held()) === 1 && (await legsFor()).join() === '1,1', 'long 1 with legs for 1');

    // long 1 → short 2, then buy 1 of it back (short 1 left): short 1.
    const [short2, partial] = await inTurn(50, fire('sell', '3', 'short', 'Short e', -2), fire('buy', '1', 'short', 'Cover e', -1));
    expect([short2!.status, partial!.status], partial!.text).toEqual([201, 201]);
    await eventually(async () => (await held()) === -1 && (await legsFor()).join() === '1,1', 'short 1 with legs for 1');

    // long 1 → short 1, then the exit: flat, nothing working.
    await longOne('f');
    const [reversal, flat] = await inTurn(50, fire('sell', '2', 'short', 'Short f', -1), fire('buy', '1', 'flat', 'Close entry(s) order Short f'));
    expect([reversal!.status, flat!.status], flat!.text).toEqual([201, 200]);
    await eventually(async () => (await held()) === 0 && (await working(account)).length === 0, 'flat, nothing working');

    // The same without marketPositionSize (TradersPost-style sentiment), a plain alert of another
    // sender just before: the reversal keeps its place, the exit after it closes what it opened
    // (re-probe: it took its turn only once it found the long, and the exit went first: short 2).
    await longOne('g');
    const reverse = JSON.stringify({ action: 'sell', symbol: 'ES1!', qty: 2, sentiment: 'short', orderType: 'market', id: `g-rev-${Date.now()}` });
    const exitAll = JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, sentiment: 'flat', id: `g-exit-${Date.now()}` });
    const plain = JSON.stringify({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 4800, id: `g-plain-${Date.now()}` });
    const [p, r, x] = await inTurn(20, plain, reverse, exitAll);
    expect([p!.status, r!.status, x!.status], x!.text).toEqual([201, 201, 200]);
    await eventually(async () => (await held()) === 0 && (await working(account)).length === 0, 'flat, nothing working');
  }, 60_000);

  it('an alert not done within the webhook budget (waiting for its turn behind a slow one, or at the broker) is answered 504 at 2.6 s and acts in its turn, its outcome added to the alerts (re-probe: answered after 7.8 and 10 s)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const long = await alert(fire('buy', '1', 'long', 'Long q', 1), 'text/plain');
    expect(long.status, long.text).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1), 'long 1');
    await control(s, 'POST', '/faults', { latencyMs: 1_500 });
    let queued: Awaited<ReturnType<typeof alert>>;
    let waited: number;
    try {
      // A reversal ahead of the exit: its close and its open, 1.5 s or more each at the broker.
      const reversal = alert(fire('sell', '2', 'short', 'Short q', -1), 'text/plain');
      await new Promise((r) => setTimeout(r, 30));
      const sent = Date.now();
      queued = await alert(fire('buy', '1', 'flat', 'Close entry(s) order Short q'), 'text/plain');
      waited = Date.now() - sent;
      // The reversal's own answer may be 201 or a 504 of its own (it goes on at the broker).
      const r = await reversal;
      expect([201, 504], r.text).toContain(r.status);
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(queued.status, queued.text).toBe(504);
    // Answered within the budget whether it was still waiting for its turn or already at the broker then.
    expect(queued.json).toMatchObject({ code: 'BROKER_TIMEOUT', detail: expect.stringMatching(/^(Earlier alerts on this account .* this one acts once they have \(it is not lost\)|The broker had not answered this alert within 2600 ms; it goes on): do not resend/) });
    expect(waited).toBeLessThan(3_000);
    // It acted in its turn: the short closed, and its alerts say so under the 504's request id.
    await eventually(async () => (await positions(account)).every((p) => p.netQty === 0) && (await working(account)).length === 0, 'flat after the queued exit', 20_000);
    const requestId = queued.headers.get('x-request-id');
    const late = await eventually(async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=10`)).json.data as any[]).find((a) => a.lateOutcomeOf === requestId), 'the queued alert outcome', 20_000);
    // (Its own flatten may outlast the budget too: then its follow-up says so.)
    expect(late).toMatchObject({ status: 200, detail: expect.stringMatching(/^(acted on|flattened) after this alert was answered 504/) });
  }, 60_000);

  it('a strategy that reverses and comes back within one second: the template id repeats with another body, and that alert is traded, not refused (TV probe: 422, the account short while the strategy was long)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    // A second of its own (another test's alerts of this second would be the same alerts).
    const second = new Date(Date.now() - 7_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const long = await alert(fire('buy', '1', 'long', 'Long', 1, second), 'text/plain');
    const short = await alert(fire('sell', '2', 'short', 'Short', -1, second), 'text/plain');
    const back = await alert(fire('buy', '2', 'long', 'Long', 1, second), 'text/plain');
    expect([long.status, short.status, back.status], back.text).toEqual([201, 201, 201]);
    expect(back.headers.get('idempotent-replayed')).toBeNull();
    await eventually(async () => (await positions(account)).find((p) => p.symbol === ES)?.netQty === 1, 'long 1 again');
    // A repeat delivery of that alert, byte for byte, is still a replay.
    const again = await alert(fire('buy', '2', 'long', 'Long', 1, second), 'text/plain');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  });

  it("an alert refused before it could be traded (not JSON, an invalid field) is listed in the token's alerts (re-probe: a broken template left no trace)", async () => {
    const broken = await alert('{"action":"buy","symbol":"ES1!","qty":"{{strategy.order.contracts}}"', 'text/plain');
    expect(broken.status).toBe(400);
    const invalid = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, tp: null });
    expect(invalid.status).toBe(400);
    const listed = await eventually(async () => {
      const list = (await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[];
      const ids = [broken, invalid].map((r) => r.headers.get('x-request-id'));
      return ids.every((id) => list.some((a) => a.requestId === id)) ? list : undefined;
    }, 'both refusals listed');
    const entry = listed.find((a) => a.requestId === broken.headers.get('x-request-id'));
    expect(entry).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('pyramided entries of one strategy order in the same second both trade with the template (its id holds the position size); the same alert again is a replay', async () => {
    const second = new Date().toISOString().replace(/\.\d+Z$/, 'Z'); // {{timenow}} has whole seconds
    const first = await alert(fire('buy', '1', 'long', 'Long', 1, second), 'text/plain');
    const added = await alert(fire('buy', '1', 'long', 'Long', 2, second), 'text/plain');
    expect([first.status, added.status], added.text).toEqual([201, 201]);
    expect(added.json.order.orderId).not.toBe(first.json.order.orderId);
    const repeat = await alert(fire('buy', '1', 'long', 'Long', 2, second), 'text/plain');
    expect(repeat.status).toBe(201);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    await eventually(async () => (await positions()).find((p) => p.symbol === ES)?.netQty === 2, 'long 2');
    await api('POST', `/api/v1/accounts/${acc}/flatten`, {});
  });

  it('dedupes by payload id: a repeated alert replays and places no second order', async () => {
    const body = { action: 'buy', symbol: 'ES', qty: 1, id: 'alert-42' };
    const first = await alert(body);
    const second = await alert(body);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    const orders = (await simState(s)).orders.filter((o: any) => String(o.id) === first.json.order.orderId);
    expect(orders).toHaveLength(1);
  });

  it("an alert repeated to the token's rotated URL replays: the dedupe is the token's, not its secret's", async () => {
    const body = { action: 'buy', symbol: 'ES', qty: 1, orderType: 'limit', price: 4000, id: 'before-rotation' };
    const first = await alert(body);
    expect(first.status, first.text).toBe(201);
    const rotated = await api('POST', `/api/v1/webhook-tokens/${token.id}/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    token = { id: token.id, url: rotated.json.url };
    const again = await alert(body);
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json.order.orderId).toBe(first.json.order.orderId);
    expect((await api('DELETE', `/api/v1/accounts/${acc}/orders/${first.json.order.orderId}`)).status).toBe(200);
  });

  it('refuses an id that would not dedupe as meant, placing nothing: still a TradingView placeholder (the same in every alert), empty, or not text', async () => {
    const before = (await simState(s)).orders.length;
    // An indicator alert leaves {{strategy.order.id}} as it is: every alert would carry one id.
    const unfilled = await alert({ action: 'buy', symbol: 'ES', qty: 1, id: '{{strategy.order.id}}-2026-11-26T17:00:00Z' });
    expect(unfilled.status, unfilled.text).toBe(400);
    expect(unfilled.json).toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
    expect(unfilled.json.detail).toContain('still holds a TradingView placeholder');
    for (const [id, code] of [['', 'INVALID_IDEMPOTENCY_KEY'], ['   ', 'INVALID_IDEMPOTENCY_KEY'], [{ n: 1 }, 'VALIDATION_FAILED'], [true, 'VALIDATION_FAILED']] as const) {
      const r = await alert({ action: 'buy', symbol: 'ES', qty: 1, id });
      expect(r.status, `${JSON.stringify(id)}: ${r.text}`).toBe(400);
      expect(r.json.code).toBe(code);
    }
    // The same rule for an Idempotency-Key header sent to a webhook URL, and an unknown field's name is echoed escaped.
    const header = await http(s.url, 'POST', new URL(token.url).pathname, { body: { action: 'buy', symbol: 'ES', qty: 1, id: 'fine-1' }, headers: { 'idempotency-key': '{{strategy.order.id}}' } });
    expect(header.status, header.text).toBe(400);
    expect(header.json.code).toBe('INVALID_IDEMPOTENCY_KEY');
    expect((await simState(s)).orders.length).toBe(before);
    const odd = await alert({ action: 'buy', symbol: 'ES', qty: 1, ['x\u202Ey\u001b']: 1, id: 'odd-field-1' });
    expect(odd.json.warnings).toEqual(["unknown field 'x\\u202ey\\u001b' ignored"]);
  });

  it('dedupes per token: one alert id on three tokens (two accounts, and two tokens on one account) places three orders, each replayed on its own token', async () => {
    // One strategy copied to several accounts: a TradingView alert per token, the same message
    // (the template's id is `{{strategy.order.id}}-{{timenow}}`), so the same id on every token.
    const urls: string[] = [];
    for (const [name, accountId] of [['copy-a', acc], ['copy-b', other], ['copy-a2', acc]] as const) {
      const r = await api('POST', '/api/v1/webhook-tokens', { accountId, name });
      expect(r.status, r.text).toBe(201);
      urls.push(r.json.url as string);
    }
    const body = JSON.stringify({ action: 'buy', symbol: 'ES', qty: 1, orderType: 'limit', price: 4900, id: 'Long-2026-11-26T14:35:00Z' });
    const send = (url: string) => http(url, 'POST', '', { raw: body, headers: { 'content-type': 'text/plain' } });
    const firsts: Awaited<ReturnType<typeof send>>[] = [];
    for (const url of urls) firsts.push(await send(url));
    for (const r of firsts) expect(r.status, r.text).toBe(201);
    const ids = firsts.map((r) => r.json.order.orderId as string);
    expect(new Set(ids).size).toBe(3);
    expect(firsts.map((r) => r.json.accountId)).toEqual([acc, other, acc]);
    const replays: Awaited<ReturnType<typeof send>>[] = [];
    for (const url of urls) replays.push(await send(url));
    replays.forEach((r, i) => {
      expect(r.headers.get('idempotent-replayed')).toBe('true');
      expect(r.text).toBe(firsts[i]!.text);
    });
    const atBroker = (await simState(s)).orders.filter((o: any) => ids.includes(String(o.id)));
    expect(atBroker).toHaveLength(3);
  });

  it('inactive account: 403 Account is inactive, then PATCH rebinding makes the next alert go through', async () => {
    await control(s, 'POST', `/accounts/${acc}/deactivate`);
    const refused = await eventually(async () => {
      const r = await alert({ action: 'buy', symbol: 'ES', qty: 1 });
      return r.status === 403 ? r : undefined;
    }, '403 after deactivation');
    expect(refused.json).toMatchObject({ code: 'ACCOUNT_INACTIVE', detail: 'Account is inactive' });
    // The REST API refuses the same way, a dry run included (it must not promise an order that cannot be placed).
    for (const path of [`/api/v1/accounts/${acc}/orders`, `/api/v1/accounts/${acc}/orders?dryRun=true`]) {
      const r = await api('POST', path, { symbol: 'ES', side: 'buy', qty: 1 });
      expect(r.status, `${path}: ${r.text}`).toBe(403);
      expect(r.json).toMatchObject({ code: 'ACCOUNT_INACTIVE', detail: 'Account is inactive' });
    }
    const listed = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json;
    expect(listed.accountActive).toBe(false);

    const patched = await api('PATCH', `/api/v1/webhook-tokens/${token.id}`, { accountId: other });
    expect(patched.status, patched.text).toBe(200);
    const ok = await alert({ action: 'buy', symbol: 'ES', qty: 1 });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.accountId).toBe(other);
  });

  it('an unknown token is 404', async () => {
    const r = await http(s.url, 'POST', '/api/v1/webhooks/whk_AAAAAAAAAAAA_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', { body: { action: 'close' } });
    expect(r.status).toBe(404);
  });
  it('an alert answered 504 whose order the broker places later: its alerts say it was placed (and under which id), so nobody resends it', async () => {
    // Every broker call takes 4 s, past the webhook's 2.5 s deadline.
    await control(s, 'POST', '/faults', { latencyMs: 4000 });
    let r;
    try {
      r = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, orderType: 'limit', price: 4400 });
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(r.status, r.text).toBe(504);
    expect(r.json.code).toBe('BROKER_TIMEOUT');
    expect(r.json.detail).toMatch(/may still place it: do not resend the alert/);
    const placed = await eventually(
      async () => {
        const list = (await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[];
        return list.find((a) => a.lateOutcomeOf !== null);
      },
      'the follow-up of the 504',
      25_000,
    );
    expect(placed).toMatchObject({ status: 201, detail: 'placed after this alert was answered 504', action: 'buy', symbol: 'ES1!' });
    const first = ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).find((a) => a.requestId === placed.lateOutcomeOf && a.lateOutcomeOf === null);
    expect(first).toMatchObject({ status: 504, code: 'BROKER_TIMEOUT', orderId: null });
    // Listed once the broker's events for it have arrived.
    // (The account the token is bound to now: earlier tests rebind it.)
    const account = placed.accountId as string;
    await eventually(async () => ((await api('GET', `/api/v1/accounts/${account}/working-orders`)).json.data as any[] | undefined)?.some((o) => o.orderId === placed.orderId), 'the late order among the working orders', 15_000);
    expect((await api('DELETE', `/api/v1/accounts/${account}/orders/${placed.orderId}`)).status).toBe(200);
  }, 60_000);

  it('a close answered 504 goes on: its alerts say once the account is flat, so nobody resends it', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const entry = await alert({ action: 'buy', symbol: 'ES1!', qty: 2 });
    expect(entry.status, entry.text).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 2), 'long 2');
    await control(s, 'POST', '/faults', { latencyMs: 4000 });
    let r;
    try {
      r = await alert({ action: 'close' });
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(r.status, r.text).toBe(504);
    expect(r.json.detail).toMatch(/did not confirm the flatten .* it goes on: do not resend the alert/);
    const late = await eventually(
      async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).find((a) => a.lateOutcomeOf === r.headers.get('x-request-id')),
      'the follow-up of the close',
      25_000,
    );
    expect(late).toMatchObject({ status: 200, detail: 'flat after this alert was answered 504: the positions it was to close are closed (by it or another exit)', action: 'close' });
    expect((await positions(account)).every((p) => p.netQty === 0)).toBe(true);

    // A reversal whose close takes longer than the answer: 504 "it goes on", and its open goes out
    // once the close is done (money probe: it opened nothing, flat for good where the strategy was short).
    expect((await alert(fire('buy', '1', 'long', 'Long r', 1), 'text/plain')).status).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1), 'long 1');
    await control(s, 'POST', '/faults', { latencyMs: 4000 });
    let rev;
    try {
      rev = await alert(fire('sell', '2', 'short', 'Short r', -1), 'text/plain');
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(rev.status, rev.text).toBe(504);
    expect(rev.json.detail).toMatch(/had not answered this alert within 2600 ms; it goes on: do not resend the alert/);
    const revLate = await eventually(
      async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).find((a) => a.lateOutcomeOf === rev.headers.get('x-request-id')),
      'the late outcome of the reversal',
      25_000,
    );
    expect(revLate).toMatchObject({ status: 201, orderQty: 1 });
    expect(revLate.detail).toMatch(/^acted on after this alert was answered 504/);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === -1), 'short 1');
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 90_000);

  it('an exit answered 504, delivered again after the strategy re-entered, is refused 409 and closes nothing (money probe: the repeat closed the new long)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    expect((await alert(fire('buy', '1', 'long', 'Long x', 1), 'text/plain')).status).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1), 'long 1');
    const exit = fire('sell', '1', 'flat', 'Exit x');
    await control(s, 'POST', '/faults', { latencyMs: 4000 });
    let first;
    try {
      first = await alert(exit, 'text/plain');
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    expect(first.status, first.text).toBe(504);
    await eventually(
      async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).some((a) => a.lateOutcomeOf === first.headers.get('x-request-id')),
      'the follow-up of the exit',
      25_000,
    );
    expect((await positions(account)).every((p) => p.netQty === 0)).toBe(true);
    expect((await alert(fire('buy', '1', 'long', 'Long y', 1), 'text/plain')).status).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1) && (await working(account)).length === 2, 'long 1 again, with its legs');
    const ordersBefore = (await simState(s)).orders.length;
    const again = await alert(exit, 'text/plain');
    expect(again.status, again.text).toBe(409);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toMatchObject({ code: 'CONFLICT', firstRequestId: first.headers.get('x-request-id') });
    expect(again.json.detail).toMatch(/answered 504 and went on, and it was carried out: a repeat of it .* is not acted on again/);
    expect((await simState(s)).orders.length).toBe(ordersBefore);
    expect((await positions(account)).find((p) => p.symbol === ES)?.netQty).toBe(1);
    expect(await working(account)).toHaveLength(2);
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 90_000);

  it('a reversal answered 504 that completes, delivered again, trades nothing; a new reversal alert on an account already short closes nothing (money probe: the repeat closed the short the first had opened)', async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    expect((await alert(fire('buy', '1', 'long', 'Long z', 1), 'text/plain')).status).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === 1) && (await working(account)).length === 2, 'long 1 with its legs');
    const reversal = fire('sell', '2', 'short', 'Short z', -1);
    await control(s, 'POST', '/faults', { latencyMs: 1000 });
    let first: Awaited<ReturnType<typeof alert>> | undefined;
    try {
      first = await alert(reversal, 'text/plain');
      expect(first.status, first.text).toBe(504);
      await eventually(
        async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).some((a) => a.lateOutcomeOf === first!.headers.get('x-request-id')),
        'the follow-up of the reversal',
        30_000,
      );
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    const settled = await positions(account);
    const legsBefore = (await working(account)).map((o) => o.orderId).sort();
    const ordersBefore = (await simState(s)).orders.length;
    const again = await alert(reversal, 'text/plain');
    expect(again.status, again.text).toBe(409);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await simState(s)).orders.length).toBe(ordersBefore);
    expect(await positions(account)).toEqual(settled);
    // Short 1 now (the first delivery's open went out after its 504): the same reversal under a new
    // id finds the strategy's side held and nothing the other way, and keeps what is there.
    expect(settled.find((p) => p.symbol === ES)?.netQty).toBe(-1);
    expect(legsBefore).toHaveLength(2);
    const fresh = await alert(fire('sell', '2', 'short', 'Short z2', -1), 'text/plain');
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.json).toMatchObject({ order: null, flatten: null });
    expect(fresh.json.warnings).toEqual(expect.arrayContaining([expect.stringMatching(/^marketPositionSize 1: 0 opened, not 2: .* the account held 1 short and 0 the other way/)]));
    expect((await simState(s)).orders.length).toBe(ordersBefore);
    expect((await working(account)).map((o) => o.orderId).sort()).toEqual(legsBefore);
    // Holding more than the strategy's size on its side (short 2, the strategy short 1): closed, and the size opened (re-probe).
    expect((await alert(fire('sell', '1', 'short', 'Add z', -2), 'text/plain')).status).toBe(201);
    await eventually(async () => (await positions(account)).some((p) => p.netQty === -2), 'short 2');
    const over = await alert(fire('sell', '2', 'short', 'Short z3', -1), 'text/plain');
    expect(over.status, over.text).toBe(201);
    expect(over.json).toMatchObject({ order: { side: 'sell', qty: 1 }, flatten: { positions: [{ closedQty: 2 }] } });
    await eventually(async () => (await positions(account)).some((p) => p.netQty === -1), 'short 1');
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 90_000);

  it("a strategy's entry answered 504, delivered again once its order filled, is answered with that order (reconciled), not as a new alert that opened nothing (re-probe at 15 s a request: 200 \"0 opened\")", async () => {
    const account = (await api('GET', `/api/v1/webhook-tokens/${token.id}`)).json.accountId as string;
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
    const entry = fire('buy', '1', 'long', 'Long r', 1, new Date().toISOString());
    await control(s, 'POST', '/faults', { latencyMs: 4000 });
    let placed: { orderId: string };
    try {
      const first = await alert(entry, 'text/plain');
      expect(first.status, first.text).toBe(504);
      placed = await eventually(
        async () => ((await api('GET', `/api/v1/webhook-tokens/${token.id}/alerts?limit=5`)).json.data as any[]).find((a) => a.lateOutcomeOf === first.headers.get('x-request-id') && a.orderId !== null),
        'the follow-up of the entry',
        30_000,
      );
    } finally {
      await control(s, 'DELETE', '/faults');
    }
    await eventually(async () => (await positions(account)).some((p) => p.symbol === ES && p.netQty === 1), 'long 1');
    const ordersBefore = (await simState(s)).orders.length;
    const again = await alert(entry, 'text/plain');
    expect(again.status, again.text).toBe(201);
    expect(again.json).toMatchObject({ action: 'buy', order: { orderId: placed.orderId, side: 'buy', qty: 1, reconciled: true }, flatten: null });
    expect(again.json.warnings.filter((w: string) => w.startsWith('marketPositionSize'))).toEqual([]);
    // Its answer is kept now: a third delivery replays it.
    const third = await alert(entry, 'text/plain');
    expect(third.status).toBe(201);
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect((await simState(s)).orders.length).toBe(ordersBefore);
    expect((await positions(account)).find((p) => p.symbol === ES)?.netQty).toBe(1);
    // Another alert that leaves nothing to open (a new id) is still answered as one that opened nothing.
    const fresh = await alert(fire('buy', '1', 'long', 'Long r2', 1), 'text/plain');
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.json).toMatchObject({ order: null });
    expect((await api('POST', `/api/v1/accounts/${account}/flatten`, {})).status).toBe(200);
  }, 90_000);
});
