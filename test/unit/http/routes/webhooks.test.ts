import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ActorGateway, FlattenRequest, PlaceOrderRequest } from '../../../../src/actors/protocol.js';
import { AppError } from '../../../../src/domain/problems.js';
import { clOrdIdFor } from '../../../../src/domain/order-plan.js';
import { WEBHOOK_BROKER_TIMEOUT_MS } from '../../../../src/tuning.js';
import { webhookResponseSchema } from '../../../../src/http/schemas.js';
import { GoesOnError, type WebhookPrincipal } from '../../../../src/http/route-types.js';
import { account, call, orderRecord, world, type World } from '../../../support/routes.js';
import { rejected } from '../../../support/errors.js';

let w: World;
let tokenId: string;
let rawToken: string;
beforeEach(async () => {
  w = await world();
  const { record, token } = await w.store.webhookTokens.create({ userId: w.a.userId, name: 'tv', accountId: '101' });
  tokenId = record.id;
  rawToken = token;
  w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => ({
    order: orderRecord({ accountId: req.accountId, symbol: req.symbol, requestedSymbol: req.requestedSymbol, side: req.side, qty: req.qty }),
    reconciled: false,
    brokerMs: 4,
  });
  w.gateway.responder.flatten = (req: FlattenRequest) => {
    if (req.symbol === 'NQZ6') throw new AppError('SYMBOL_MISMATCH', 'Account holds ESZ6, not NQZ6');
    return { cancelledOrderIds: ['1'], positions: [{ symbol: 'ESZ6', closedQty: 2, status: 'liquidated' }], brokerMs: 5 };
  };
});
afterEach(() => w.close());

/** The principal the auth stage derives from the token (verified against the store, as it is now). */
function verified(): WebhookPrincipal | undefined {
  const view = w.store.webhookTokens.verify(rawToken);
  return view ? { tokenId: view.id, accountId: view.accountId, strategyId: view.strategyId ?? null, inactiveReason: view.inactiveReason ?? null } : undefined;
}

const alert = (body: unknown, idempotencyKey?: string, webhook = verified()) =>
  call(w, 'POST', '/webhooks/:token', {
    userId: w.a.userId,
    params: { token: 'whk_x' },
    body,
    kind: 'webhook',
    principalId: `webhook:${tokenId}`,
    scopes: ['trade'],
    ...(webhook ? { webhook } : {}),
    ...(idempotencyKey ? { idempotencyKey } : {}),
  });
const alertError = async (body: unknown) => {
  try {
    await alert(body);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
};

describe('POST /webhooks/:token orders', () => {
  it('places a TradingView-style alert (aliases, numeric strings) on the bound account within the webhook deadline', async () => {
    const res = await alert({ action: 'long', ticker: 'ES1!', contracts: '2', price: '5001.37', takeProfit: { ticks: '40' }, stopLoss: { ticks: '20' }, comment: 'x' });
    expect(res.status).toBe(201);
    const body = webhookResponseSchema.parse(res.body);
    expect(body).toMatchObject({ accepted: true, action: 'buy', accountId: '101', order: { symbol: 'ESZ6', requestedSymbol: 'ES1!' } });
    expect(body.warnings).toEqual(["unknown field 'comment' ignored", 'price ignored for market orders']);
    const sent = w.gateway.calls[0]!;
    expect(sent.timeoutMs).toBe(WEBHOOK_BROKER_TIMEOUT_MS);
    expect(sent.req).toMatchObject({ side: 'buy', qty: 2, orderType: 'market', price: null, takeProfit: { offsetPoints: 10 }, stopLoss: { offsetPoints: 5 } });
  });

  it('a market entry with one leg at a price and the other in ticks is refused before anything is sent, naming the fixed leg (new-user probe: the dry run accepted it, the broker call refused it)', async () => {
    const err = await alertError({ action: 'buy', ticker: 'ES1!', contracts: 1, takeProfit: 5011.25, stopLoss: { ticks: 20 } });
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', extensions: { errors: [{ path: 'takeProfit', message: expect.stringContaining('both legs as prices or both in ticks') }] } });
    expect(w.gateway.calls).toEqual([]);
  });

  it('dedupes by the payload id: the clOrdId comes from (user, id)', async () => {
    await alert({ action: 'buy', symbol: 'ES', qty: 1, id: 'a-1' }, 'a-1');
    expect((w.gateway.calls[0]!.req as PlaceOrderRequest).clOrdId).toBe(clOrdIdFor(w.a.userId, 'a-1'));
    const r = w.routes.find((x) => x.path === '/webhooks/:token')!;
    expect(r.idempotencyKeyFrom!({ body: { id: 'a-1' } } as never)).toBe('a-1');
    expect(r.idempotencyKeyFrom!({ body: { id: 12 } } as never)).toBe('12');
    expect(r.idempotencyKeyFrom!({ body: {} } as never)).toBeUndefined();
    expect(r.lenientContentType).toBe(true);
    // The pipeline files the key under the token that received it, not the user alone.
    expect(r.idempotencyScope!({ userId: w.a.userId, principalId: `webhook:${tokenId}`, scopes: ['trade'], kind: 'webhook' })).toBe(`webhook:${tokenId}`);
  });

  it('fills missing fields from the token’s strategy', async () => {
    const strategy = await w.store.strategies.create(w.a.userId, { name: 's', description: '', symbol: 'MNQ1!', qty: 3, stopLoss: { ticks: 40 } });
    await w.store.webhookTokens.update(w.a.userId, tokenId, { strategyId: strategy.id });
    await alert({ action: 'sell' });
    expect(w.gateway.calls[0]!.req).toMatchObject({ symbol: 'MNQZ6', qty: 3, side: 'sell', stopLoss: { offsetPoints: 10 } });
  });

  it('a token whose strategy is gone refuses entries that rely on its legs (409, nothing sent); exits, and entries naming both legs, still go (API probe: 201 with no legs after the strategy was deleted)', async () => {
    const strategy = await w.store.strategies.create(w.a.userId, { name: 's', description: '', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    await w.store.webhookTokens.update(w.a.userId, tokenId, { strategyId: strategy.id });
    // Deleted behind the token's back (another node, or a store from before deletes were refused).
    await w.store.strategies.remove(w.a.userId, strategy.id);
    const err = await alertError({ action: 'buy', symbol: 'ES1!', qty: 1 });
    expect(err).toMatchObject({ code: 'CONFLICT', extensions: { strategyId: strategy.id } });
    expect(err.message).toContain('no longer exists');
    expect((await alertError({ action: 'buy', symbol: 'ES1!', qty: 1, stopLoss: { ticks: 8 } })).code).toBe('CONFLICT');
    expect(w.gateway.calls).toHaveLength(0);
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 8 }, stopLoss: { ticks: 8 } })).status).toBe(201);
    expect((await alert({ action: 'close', symbol: 'ES1!' })).status).toBe(200);
  });

  it('refuses two take-profits with WEBHOOK_UNSUPPORTED and sends nothing', async () => {
    const err = await alertError({ action: 'buy', symbol: 'ES', qty: 2, takeProfit: [{ price: 5010 }, { price: 5020 }] });
    expect(err.code).toBe('WEBHOOK_UNSUPPORTED');
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('refuses an unknown symbol before any broker traffic', async () => {
    expect((await alertError({ action: 'buy', symbol: 'XYZ1!', qty: 1 })).code).toBe('UNKNOWN_SYMBOL');
    expect(w.gateway.calls).toHaveLength(0);
  });
});

describe('POST /webhooks/:token partial exits', () => {
  it("a sell that leaves the strategy long goes to the actor as reduce-only, with no bracket, not even the strategy's", async () => {
    const strategy = await w.store.strategies.create(w.a.userId, { name: 's', description: '', symbol: 'ES1!', qty: 3, takeProfit: { ticks: 40 }, stopLoss: { ticks: 20 } });
    await w.store.webhookTokens.update(w.a.userId, tokenId, { strategyId: strategy.id });
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 3, avgPrice: 5000, openedAt: null }];
    const res = await alert({ action: 'sell', qty: 1, stopLoss: { ticks: 8 }, marketPosition: 'long' });
    expect(res.status).toBe(201);
    expect(webhookResponseSchema.parse(res.body).warnings).toEqual(["'stopLoss' ignored: a partial exit (marketPosition long) only reduces the position"]);
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'place-order']);
    const sent = w.gateway.calls[1]!.req as PlaceOrderRequest;
    expect(sent).toMatchObject({ type: 'place-order', side: 'sell', qty: 1, symbol: 'ESZ6', reduceOnly: true, takeProfit: null, stopLoss: null });
  });

  it('a partial exit naming the product reduces the month the account holds when the front month is another (the roll; TV probe: 409 "holds no ESH7" while long ESZ6)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESH7', netQty: 2, avgPrice: 5000, openedAt: null }];
    const res = await alert({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'long' });
    expect(res.status).toBe(201);
    expect(w.gateway.calls[1]!.req).toMatchObject({ type: 'place-order', symbol: 'ESH7', side: 'sell', qty: 1, reduceOnly: true });
    expect(webhookResponseSchema.parse(res.body).warnings).toEqual(["ES1! names ESZ6 now; the account's ESH7 position is the one reduced"]);
    // A month named (ESZ6) is that month only.
    w.gateway.calls.length = 0;
    await alert({ action: 'sell', symbol: 'ESZ6', qty: 1, marketPosition: 'long' });
    expect(w.gateway.calls.map((c) => [c.req.type, (c.req as { symbol?: string }).symbol])).toEqual([['place-order', 'ESZ6']]);
  });

  it('a strategy alert whose positions read times out (the account still settling) is 503 "nothing was sent", not a 504 that promises a follow-up (re-probe 3: the re-entry was dropped)', async () => {
    w.gateway.responder.positions = () => {
      throw new AppError('BROKER_TIMEOUT', 'actor request positions did not complete within 2500 ms');
    };
    const err = await alertError({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    expect(err).toMatchObject({ code: 'BROKER_UNAVAILABLE', message: expect.stringMatching(/could not be read in time \(actor request positions did not complete within 2500 ms\): nothing was sent$/) });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions']);
  });

  it('a strategy alert reads the settled positions with a long deadline: behind a flatten that waits out a reconnect it is answered 504 at TradingView\'s deadline and acts once the read comes back (re-probe 4: the re-entry was dropped at 2.5 s)', async () => {
    w.gateway.responder.positions = () => [];
    await alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    const read = w.gateway.calls.find((c) => c.req.type === 'positions')!;
    expect(read.req).toMatchObject({ settled: true });
    expect(read.timeoutMs).toBeGreaterThanOrEqual(30_000);
    // Its order is waited for with its turn held (re-probe: given up at 2.5 s, the turn passed on
    // while the order was on its way, and an exit behind it acted first); a plain alert's call
    // keeps the webhook deadline.
    expect(w.gateway.calls.find((c) => c.req.type === 'place-order')!.timeoutMs).toBe(30_000);
    w.gateway.calls.length = 0;
    await alert({ action: 'buy', symbol: 'ES1!', qty: 1 });
    expect(w.gateway.calls.find((c) => c.req.type === 'place-order')!.timeoutMs).toBe(WEBHOOK_BROKER_TIMEOUT_MS);
  });

  it('an entry answered 504 while its order is still on its way keeps its id until that ends, and 30 s more where it went to a cluster node that stopped answering (cluster re-probe: a repeat placed it again on the new owner, and the hung node’s copy filled too)', async () => {
    const pending: { resolve(v: unknown): void; reject(e: unknown): void }[] = [];
    w.gateway.responder['place-order'] = () => new Promise((resolve, reject) => pending.push({ resolve, reject }));
    const answeredLate = async (id: string) => {
      const err = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, id }, id).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(GoesOnError);
      expect(err).toMatchObject({ code: 'BROKER_TIMEOUT' });
      return { outcome: (err as GoesOnError).outcome };
    };
    const stillHeld = (outcome: Promise<unknown>) => Promise.race([outcome.then(() => 'freed'), new Promise((r) => setTimeout(() => r('held'), 100))]);

    const { outcome: placed } = await answeredLate('a-1');
    expect(await stillHeld(placed)).toBe('held');
    pending.shift()!.resolve({ order: orderRecord({ accountId: '101', symbol: 'ESZ6', side: 'buy', qty: 1 }), reconciled: false, brokerMs: 4 });
    // Done: the id is free again, and a repeat reconciles with that order by its clOrdId.
    expect(await placed).toBeUndefined();

    const { outcome: hung } = await answeredLate('a-2');
    pending.shift()!.reject(
      new AppError('BROKER_TIMEOUT', 'the node running con_1 stopped before it answered (another node took the connection over): place-order may have reached the broker; retry with the same Idempotency-Key', { ownerChanged: true }),
    );
    expect(await stillHeld(hung)).toBe('held');

    // A plain timeout too: the order may still be placed (a slow broker; a hung node noticed only
    // later), so a repeat waits the hold before it reconciles (cluster re-probe 2: freed at 3 s, filled twice).
    const { outcome: slow } = await answeredLate('a-4');
    pending.shift()!.reject(new AppError('BROKER_TIMEOUT', 'actor request place-order did not complete within 2500 ms'));
    expect(await stillHeld(slow)).toBe('held');

    const { outcome: refused } = await answeredLate('a-3');
    pending.shift()!.reject(new AppError('BROKER_REJECTED', 'MaxPosLimitReached'));
    expect(await refused).toBeUndefined();
  }, 20_000);

  it('a partial exit the actor sent smaller (a leg fill took part of it as the legs made room) says so in a warning (re-probe 3)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 3, avgPrice: 5000, openedAt: null }];
    w.gateway.responder['place-order'] = () => ({ order: orderRecord({ side: 'sell', qty: 1, status: 'filled' }), reconciled: false, brokerMs: 1 });
    const done = await alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'long', marketPositionSize: 1 });
    expect(done.status).toBe(201);
    expect(webhookResponseSchema.parse(done.body).warnings).toContain('sell 1 sent, not 2: a stop-loss or take-profit filled 1 while the legs made room for this exit, and the strategy keeps 1');
  });

  it("a partial exit with marketPositionSize never takes the account below the strategy's position (TV probe: a stop had taken 1 of long 2 already; the exit sold the last one)", async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    const done = await alert({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    expect(done.status).toBe(200);
    expect(webhookResponseSchema.parse(done.body)).toMatchObject({ action: 'sell', order: null, flatten: null, warnings: [expect.stringMatching(/^marketPositionSize 1: 0 taken off, not 1/)] });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions']);
    // Long 3 and the strategy long 1 after selling 1: only what it holds beyond 1 comes off, and never more than the alert's qty.
    w.gateway.calls.length = 0;
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 3, avgPrice: 5000, openedAt: null }];
    await alert({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    expect(w.gateway.calls[1]!.req).toMatchObject({ type: 'place-order', side: 'sell', qty: 1, reduceOnly: true, keepQty: 1 });
    // Holding less than the strategy keeps (long 1, the strategy long 2 after selling 1): refused, nothing sent.
    w.gateway.calls.length = 0;
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    const less = await alertError({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 2 });
    expect(less).toMatchObject({ code: 'SYMBOL_MISMATCH', message: "the account holds 1 ESZ6 long, less than the strategy's 2 after this alert: nothing taken off" });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions']);
  });

  it('an entry is sent without reduceOnly', async () => {
    w.gateway.responder.positions = () => [];
    await alert({ action: 'buy', symbol: 'ES', qty: 1, marketPosition: 'long' });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'place-order']);
    expect(w.gateway.calls[1]!.req).not.toHaveProperty('reduceOnly');
  });

  it('a strategy entry against the position is a reversal: the position closed first, only the rest opened', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    const res = await alert({ action: 'sell', symbol: 'ES1!', qty: 3, marketPosition: 'short', stopLoss: { ticks: 8 } });
    expect(res.status).toBe(201);
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'flatten', 'place-order']);
    // Read once the account's orders on their way reached the broker (an entry just before is held).
    expect(w.gateway.calls[0]!.req).toMatchObject({ type: 'positions', settled: true });
    expect(w.gateway.calls[1]!.req).toMatchObject({ symbol: 'ESZ6', symbolOnly: true, productOnly: true });
    expect(w.gateway.calls[2]!.req).toMatchObject({ side: 'sell', qty: 2, stopLoss: { offsetPoints: 2 } });
    // The open refused after the close: the answer says the close happened.
    w.gateway.calls.length = 0;
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_REJECTED', 'margin');
    };
    const refused = await rejected(alert({ action: 'sell', symbol: 'ES1!', qty: 3, marketPosition: 'short' }));
    expect(refused.code).toBe('BROKER_REJECTED');
    expect(refused.message).toBe('The position the other way was closed first; the new one was not opened: margin');
    expect(refused.extensions).toMatchObject({ flatten: { symbol: 'ESZ6' } });
    // On a flat account the reversal's close closes nothing: the answer does not say it did (trader probe).
    w.gateway.responder.positions = () => [];
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: [], positions: [], brokerMs: 1 });
    const flat = await rejected(alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', marketPositionSize: 1 }));
    expect(flat.message).toBe('The new position was not opened: margin');
  });

  it('an exit or a reversal whose close could not close the position says so and opens nothing (faults probe: 200 "flatten" and "closed first" while the account stayed long with its legs cancelled)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    let code = 'BROKER_UNAVAILABLE';
    w.gateway.responder.flatten = () => ({
      cancelledOrderIds: ['71', '72'],
      positions: [{ symbol: 'ESZ6', closedQty: 0, status: 'failed' as const, detail: 'rate limited by the broker', code: code as never }],
      brokerMs: 5,
    });
    const exit = await alertError({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'flat' });
    expect(exit).toMatchObject({ code: 'BROKER_UNAVAILABLE', extensions: { cancelledOrderIds: ['71', '72'], positions: [{ status: 'failed' }] } });
    expect(exit!.message).toMatch(/^The resting orders were cancelled, but ESZ6 \(rate limited by the broker\) could not be closed: the position is still open without its protective orders/);
    w.gateway.calls.length = 0;
    code = 'BROKER_TIMEOUT';
    const reversal = await alertError({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short' });
    expect(reversal!.code).toBe('BROKER_TIMEOUT');
    expect(reversal!.message).toMatch(/^Reversal: the new position is not opened\. The resting orders were cancelled, but the broker did not confirm the liquidation of ESZ6 .*\. Do not resend the alert: whether the positions closed is added to this token's alerts once known$/);
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'flatten']);
  });

  it('an alert tried again through a reconnect keeps its turn: an alert behind it on the account does not act in between (faults probe: the exit behind a retried reversal ran first; short while the strategy was flat)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    let refusals = 1;
    const flatten = w.gateway.responder.flatten!;
    w.gateway.responder.flatten = (req: FlattenRequest) => {
      if (refusals-- > 0) throw new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING', { connectionStatus: 'RECONNECTING' });
      w.gateway.responder.positions = () => [];
      return flatten(req);
    };
    // The exit first; the re-entry 50 ms later, while the exit waits to try again.
    const exit = alert({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'flat' });
    await new Promise((r) => setTimeout(r, 50));
    const entry = alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 1 });
    expect((await exit).status).toBe(200);
    expect((await entry).status).toBe(201);
    const types = w.gateway.calls.map((c) => c.req.type);
    expect(types.lastIndexOf('flatten')).toBeLessThan(types.indexOf('place-order'));
    expect(types.filter((t) => t === 'flatten')).toHaveLength(2);
  });

  it('an alert arriving while its connection reconnects is tried again for up to 2.3 s after it arrived, not refused 503 at once (faults probe: TradingView never resends it); other refusals are not', async () => {
    w.gateway.responder.positions = () => [];
    const reconnecting = () => new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING', { connectionStatus: 'RECONNECTING' });
    let refusals = 2;
    const place = w.gateway.responder['place-order']!;
    w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => {
      if (refusals-- > 0) throw reconnecting();
      return place(req);
    };
    const res = await alert({ action: 'buy', symbol: 'ES1!', qty: 1 });
    expect(res.status).toBe(201);
    const placed = w.gateway.calls.filter((c) => c.req.type === 'place-order');
    expect(placed).toHaveLength(3);
    // Down for longer: 503 once the wait is over.
    w.gateway.calls.length = 0;
    w.gateway.responder['place-order'] = () => {
      throw reconnecting();
    };
    const t0 = Date.now();
    expect((await alertError({ action: 'buy', symbol: 'ES1!', qty: 1 }))!.code).toBe('BROKER_UNAVAILABLE');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_100);
    // A reversal on a flat account (its close closed nothing) is tried again too (re-probe 3: the
    // empty close's result rode on the error, which the retry takes for a close done).
    w.gateway.calls.length = 0;
    w.gateway.responder.flatten = () => ({ cancelledOrderIds: [], positions: [], brokerMs: 1 });
    refusals = 1;
    w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => {
      if (refusals-- > 0) throw reconnecting();
      return place(req);
    };
    const flat = await alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', marketPositionSize: 1 });
    expect(flat.status).toBe(201);
    expect(w.gateway.calls.filter((c) => c.req.type === 'place-order')).toHaveLength(2);
    // A refusal that is not a reconnect (the broker's penalty hold) is answered at once.
    w.gateway.calls.length = 0;
    w.gateway.responder['place-order'] = () => {
      throw new AppError('BROKER_UNAVAILABLE', 'penalty', {}, 30);
    };
    expect((await alertError({ action: 'buy', symbol: 'ES1!', qty: 1 }))!.code).toBe('BROKER_UNAVAILABLE');
    expect(w.gateway.calls.filter((c) => c.req.type === 'place-order')).toHaveLength(1);
  });

  it('a reversal whose close was done tries its open again while the connection reconnects, the close not repeated; not while it changes cluster node, its turn gone with the old node (cluster probes: flat where the strategy was long; then long 2 when an exit acted in between)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: -1, avgPrice: 5000, openedAt: null }];
    const changing = () => new AppError('BROKER_UNAVAILABLE', 'broker connection is RECONNECTING', { connectionStatus: 'RECONNECTING' }, 1);
    const place = w.gateway.responder['place-order']!;
    let refusals = 8;
    w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => {
      if (refusals-- > 0) throw changing();
      return place(req);
    };
    // Refused for ~1.2 s after the close: past the alert's answer it goes on (504), or just inside it, 201.
    const answer = await alert({ action: 'buy', symbol: 'ES1!', qty: 2, marketPosition: 'long', marketPositionSize: 1 }).then((r) => r.status, (e: AppError) => e.code);
    expect([201, 'BROKER_TIMEOUT']).toContain(answer);
    await expect.poll(() => w.gateway.calls.filter((c) => c.req.type === 'place-order').length, { timeout: 5_000 }).toBe(9);
    expect(w.gateway.calls.filter((c) => c.req.type === 'flatten')).toHaveLength(1);
    // A refusal that is not a reconnect is not tried again, nor one of a connection changing node.
    for (const refusal of [new AppError('BROKER_REJECTED', 'margin'), new AppError('BROKER_UNAVAILABLE', 'connection c1 has no running actor right now (its node is changing); retry', { connectionStatus: 'RECONNECTING', nodeChanging: true }, 1)]) {
      w.gateway.calls.length = 0;
      w.gateway.responder['place-order'] = () => {
        throw refusal;
      };
      const err = await alertError({ action: 'buy', symbol: 'ES1!', qty: 2, marketPosition: 'long', marketPositionSize: 1 });
      expect(err).toMatchObject({ code: refusal.code, message: expect.stringMatching(/^The position the other way was closed first; the new one was not opened/) });
      expect(w.gateway.calls.filter((c) => c.req.type === 'place-order')).toHaveLength(1);
    }
  });

  it('in a cluster: a turn refused while the connection changes node is tried again, and an alert whose turn comes late (queued behind a dead owner) gets the reconnect retry counted from its turn (cluster probe: 503, and "not lost" alerts never placed)', async () => {
    w.gateway.responder.positions = () => [];
    const reconnecting = () => new AppError('BROKER_UNAVAILABLE', 'connection c1 has no running actor right now (its node is changing); retry', { connectionStatus: 'RECONNECTING' }, 1);
    const place = w.gateway.responder['place-order']!;
    let turns = 0;
    const clustered = w.gateway as unknown as Pick<ActorGateway, 'takeTurn'>;
    clustered.takeTurn = async () => {
      if (++turns === 1) throw reconnecting();
      return { end: () => undefined };
    };
    expect((await alert({ action: 'buy', symbol: 'ES1!', qty: 1 })).status).toBe(201);
    expect(turns).toBe(2);
    // The turn comes 2.4 s after the alert (the old owner's death), as the new owner connects.
    turns = 0;
    clustered.takeTurn = async () => {
      if (++turns === 1) await new Promise((r) => setTimeout(r, 2_400));
      return { end: () => undefined };
    };
    let refusals = 1;
    w.gateway.responder['place-order'] = (req: PlaceOrderRequest) => {
      if (refusals-- > 0) throw reconnecting();
      return place(req);
    };
    w.gateway.calls.length = 0;
    // Placed once the connection is back: 201 just inside the deadline, or 504 (it goes on in its turn) just past it.
    const answer = await alert({ action: 'buy', symbol: 'ES1!', qty: 1 }).then((r) => r.status, (e: AppError) => e.code);
    expect([201, 'BROKER_TIMEOUT']).toContain(answer);
    await new Promise((r) => setTimeout(r, 600));
    expect(w.gateway.calls.filter((c) => c.req.type === 'place-order')).toHaveLength(2);
    delete clustered.takeTurn;
  });

  it("a reversal reaching an account already flat opens the strategy's marketPositionSize, not the alert's qty", async () => {
    // TradingView's reversal from long 1: sell 2, short 1 after it. The stop closed the long at the broker first.
    w.gateway.responder.positions = () => [];
    const res = await alert({ action: 'sell', symbol: 'ES1!', qty: 2, marketPosition: 'short', marketPositionSize: '1', stopLoss: { ticks: 8 } });
    expect(res.status).toBe(201);
    // A reversal all the same: the old side's resting orders go first (TV probe: a resting buy limit of the old long filled after it).
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'flatten', 'place-order']);
    expect(w.gateway.calls[2]!.req).toMatchObject({ side: 'sell', qty: 1, stopLoss: { offsetPoints: 2 } });
    expect(webhookResponseSchema.parse(res.body).warnings[0]).toMatch(/^marketPositionSize 1: 1 opened, not 2: the strategy is short 1 after this alert/);
  });

  it('marketPositionSize counts what the account already holds on its side: an entry never takes it past the strategy (re-probe: short 1 and a sell for short 1 made it short 2)', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    // Pyramiding from long 1 to long 2: 1 opened.
    await alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 2 });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'place-order']);
    expect(w.gateway.calls[1]!.req).toMatchObject({ side: 'buy', qty: 1 });
    // The account long 2 already (the strategy's earlier alert traded twice?): nothing more.
    w.gateway.calls.length = 0;
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 2, avgPrice: 5000, openedAt: null }];
    const res = await alert({ action: 'buy', symbol: 'ES1!', qty: 1, marketPosition: 'long', marketPositionSize: 2 });
    expect(res.status).toBe(200);
    expect(webhookResponseSchema.parse(res.body)).toMatchObject({ action: 'buy', order: null, flatten: null });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions']);
  });

  it('marketPositionSize caps the rest of a reversal; a pyramid entry within it opens its qty', async () => {
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: 1, avgPrice: 5000, openedAt: null }];
    await alert({ action: 'sell', symbol: 'ES1!', qty: 3, marketPosition: 'short', marketPositionSize: 1 });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'flatten', 'place-order']);
    expect(w.gateway.calls[2]!.req).toMatchObject({ side: 'sell', qty: 1 });
    w.gateway.calls.length = 0;
    w.gateway.responder.positions = () => [{ accountId: '101', symbol: 'ESZ6', netQty: -1, avgPrice: 5000, openedAt: null }];
    const res = await alert({ action: 'sell', symbol: 'ES1!', qty: 1, marketPosition: 'short', marketPositionSize: 2 });
    expect(w.gateway.calls.map((c) => c.req.type)).toEqual(['positions', 'place-order']);
    expect(w.gateway.calls[1]!.req).toMatchObject({ side: 'sell', qty: 1 });
    expect(webhookResponseSchema.parse(res.body).warnings).toEqual([]);
  });
});

describe('POST /webhooks/:token flatten', () => {
  it.each(['close', 'flat', 'flatten', 'exit'])('%s flattens the whole account without a symbol', async (action) => {
    const res = await alert({ action });
    expect(res.status).toBe(200);
    expect(webhookResponseSchema.parse(res.body)).toMatchObject({ action: 'flatten', flatten: { symbol: null, cancelledOrderIds: ['1'] } });
    expect(w.gateway.calls[0]!.req).toMatchObject({ type: 'flatten', accountId: '101', symbol: null });
  });

  it('resolves the symbol of a flatten and passes SYMBOL_MISMATCH (409) through', async () => {
    await alert({ action: 'close', symbol: 'ES1!' });
    expect(w.gateway.calls[0]!.req).toMatchObject({ symbol: 'ESZ6' });
    // A close is the spec's account flatten (the symbol is a check), never the exit's symbol-only one.
    expect(w.gateway.calls[0]!.req).not.toHaveProperty('symbolOnly');
    expect((await alertError({ action: 'exit', symbol: 'NQ' })).code).toBe('SYMBOL_MISMATCH');
  });

  it('a sell that leaves the strategy flat flattens its symbol and places no order', async () => {
    const res = await alert({ action: 'sell', symbol: 'ES1!', qty: 1, takeProfit: { ticks: 40 }, marketPosition: 'flat' });
    expect(res.status).toBe(200);
    expect(webhookResponseSchema.parse(res.body)).toMatchObject({ action: 'flatten', order: null });
    expect(w.gateway.calls.map((c) => c.req)).toEqual([expect.objectContaining({ type: 'flatten', accountId: '101', symbol: 'ESZ6', symbolOnly: true, productOnly: true })]);
    // A month named is that month only.
    await alert({ action: 'sell', symbol: 'ESZ6', qty: 1, marketPosition: 'flat' });
    expect(w.gateway.calls.at(-1)!.req).not.toHaveProperty('productOnly');
  });

  it("an exit without a symbol closes the token's strategy's symbol, never the whole account", async () => {
    const err = await alertError({ action: 'sell', marketPosition: 'flat' });
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringMatching(/^symbol: required for an exit/) });
    expect(w.gateway.calls).toHaveLength(0);
    const strategy = await w.store.strategies.create(w.a.userId, { name: 's', description: '', symbol: 'MNQ1!', qty: 3 });
    await w.store.webhookTokens.update(w.a.userId, tokenId, { strategyId: strategy.id });
    await alert({ action: 'sell', sentiment: 'flat' });
    expect(w.gateway.calls.map((c) => c.req)).toEqual([expect.objectContaining({ type: 'flatten', symbol: 'MNQZ6', symbolOnly: true })]);
  });
});

describe('POST /webhooks/:token account state', () => {
  it('answers 403 Account is inactive when the broker no longer reports the account, and accepts after a rebind', async () => {
    w.gateway.accountsOf.set(w.a.connectionId, [account('101', w.a.connectionId, false), account('103', w.a.connectionId)]);
    const err = await alertError({ action: 'buy', symbol: 'ES', qty: 1 });
    expect(err.code).toBe('ACCOUNT_INACTIVE');
    expect(err.message).toBe('Account is inactive');
    expect(w.gateway.calls).toHaveLength(0);

    await call(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: tokenId }, body: { accountId: '103' } });
    const ok = await alert({ action: 'buy', symbol: 'ES', qty: 1 });
    expect(ok.status).toBe(201);
    expect(w.gateway.calls[0]!.req).toMatchObject({ accountId: '103' });
  });

  it('answers 403 naming the disabled connection when the account is its (ops probe: a bare "Account is inactive")', async () => {
    await w.store.connections.setDisabled(w.a.connectionId, true);
    const err = await alertError({ action: 'buy', symbol: 'ES', qty: 1 });
    expect(err).toMatchObject({ code: 'ACCOUNT_INACTIVE', message: `Account is inactive: its connection ${w.a.connectionId} is disabled`, extensions: { inactiveReason: `its connection ${w.a.connectionId} is disabled` } });
    expect(w.gateway.calls).toHaveLength(0);
  });

  it('answers 403 with the reason for a token made inactive (its connection deleted) until it is rebound', async () => {
    await w.store.webhookTokens.deactivateForAccounts(w.a.userId, ['101'], `its connection ${w.a.connectionId} was deleted`);
    const err = await alertError({ action: 'buy', symbol: 'ES', qty: 1 });
    expect(err.code).toBe('ACCOUNT_INACTIVE');
    expect(err.message).toBe(`Account is inactive: its connection ${w.a.connectionId} was deleted; rebind the token`);
    expect(w.gateway.calls).toHaveLength(0);
    await call(w, 'PATCH', '/webhook-tokens/:id', { userId: w.a.userId, params: { id: tokenId }, body: { accountId: '101' } });
    expect((await alert({ action: 'buy', symbol: 'ES', qty: 1 })).status).toBe(201);
  });

  it('answers 403 when the account vanished from a connected broker entirely', async () => {
    w.gateway.accountsOf.set(w.a.connectionId, [account('102', w.a.connectionId)]);
    expect((await alertError({ action: 'close' })).code).toBe('ACCOUNT_INACTIVE');
  });

  it('answers 503 (not 403) while the connection has not synced its accounts yet', async () => {
    w.gateway.accountsOf.set(w.a.connectionId, []);
    w.gateway.statusOf.set(w.a.connectionId, { type: 'status', connectionId: w.a.connectionId, status: 'CONNECTING', reason: 'connect', ts: 0 });
    expect((await alertError({ action: 'close' })).code).toBe('BROKER_UNAVAILABLE');
  });

  it('answers 404 without a verified webhook principal', async () => {
    await w.store.webhookTokens.remove(w.a.userId, tokenId);
    expect(verified()).toBeUndefined();
    expect((await alertError({ action: 'close' })).code).toBe('NOT_FOUND');
  });

  it('trades on the account the verified token names, not on anything in the path', async () => {
    const res = await alert({ action: 'buy', symbol: 'ES', qty: 1 }, undefined, { tokenId, accountId: '101', strategyId: null });
    expect(res.status).toBe(201);
    expect(w.gateway.calls[0]!.req).toMatchObject({ type: 'place-order', accountId: '101' });
  });
});

describe('webhook error for missing body', () => {
  it('rejects an empty body at validation', () => {
    const r = w.routes.find((x) => x.path === '/webhooks/:token')!;
    expect(r.body!.safeParse(undefined).success).toBe(false);
    expect(r.body!.safeParse({ action: 'buy', extra: 1 }).success).toBe(true);
  });
  it('documents a TradingView template in the route description', () => {
    const r = w.routes.find((x) => x.path === '/webhooks/:token')!;
    expect(r.description).toContain('{{strategy.order.action}}');
  });
});
