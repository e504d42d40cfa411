/** The one dispatch path of REST and WS: auth, 429, p-tickets on orders, 404, 400, event routing. */
import fc from 'fast-check';
import { beforeEach, expect, it } from 'vitest';
import { SimCore, type EventSink } from '../../../src/sim/core.js';
import { HANDLERS } from '../../../src/sim/handlers.js';
import type { AuthSession } from '../../../src/sim/auth.js';

let core: SimCore;
let session: AuthSession;
let accountId: number;

beforeEach(() => {
  core = new SimCore({ seed: 1, clock: () => 0, tokenLifetimeMs: 60_000, maxSessionsPerUser: 2, requestsPerSecond: 1_000_000, requestsPerHour: 1_000_000_000 });
  const user = core.engine.state.addUser('ann', 'pw');
  accountId = core.engine.state.addAccount(user.id, 'A', 1000).entity.id;
  const login = core.dispatch('auth/accesstokenrequest', undefined, new URLSearchParams(), { name: 'ann', password: 'pw' });
  const check = core.auth.check((login.d as { accessToken: string }).accessToken);
  if (!check.ok) throw new Error('login failed');
  session = check.session;
});

const call = (endpoint: string, body?: unknown, query = '') => core.dispatch(endpoint, session, new URLSearchParams(query), body);
const market = () => ({ accountId, action: 'Buy', symbol: 'ESZ6', orderQty: 1, orderType: 'Market' });

it('refuses every endpoint but accesstokenrequest without a valid session', () => {
  expect(core.dispatch('account/list', undefined, new URLSearchParams(), undefined)).toEqual({ s: 401, d: 'Access is denied' });
  expect(core.dispatch('auth/accesstokenrequest', undefined, new URLSearchParams(), { name: 'ann', password: 'x' }).d).toHaveProperty('errorText');
});

it('answers unknown endpoints 404 and missing required fields 400 naming the field', () => {
  expect(call('quote/subscribe')).toEqual({ s: 404, d: '"Not found: quote/subscribe"' });
  expect(call('order/placeorder', { accountId, symbol: 'ESZ6', orderQty: 1, orderType: 'Market' })).toMatchObject({ s: 400, d: expect.stringMatching(/^No usable value for action/) });
  expect(call('order/placeorder', { ...market(), orderQty: 0 }).s).toBe(400);
});

it('answers 429 under the rateLimit429 fault and resumes when it is cleared', () => {
  core.faults = { ...core.faults, rateLimit429: true };
  expect(call('account/list')).toEqual({ s: 429 });
  core.faults = { ...core.faults, rateLimit429: false };
  expect(call('account/list').s).toBe(200);
});

it('arms one p-ticket for the next order request only', () => {
  core.faults = { ...core.faults, pTicketSeconds: 2, pTicketTarget: 'orders' };
  expect(call('account/list').s).toBe(200);
  const penalty = call('order/placeorder', market());
  expect(penalty.d).toMatchObject({ 'p-time': 2, 'p-captcha': false });
  expect(core.engine.orders.size).toBe(0);
  expect(call('order/placeorder', market()).d).toHaveProperty('orderId');
});

it('routes props events only to subscribers of that user, entity type and account', () => {
  const got: string[] = [];
  const sink = (types: string[], accounts?: number[]): EventSink => ({
    userId: session.userId, types: new Set(types) as EventSink['types'], accounts: accounts && new Set(accounts),
    push: (m) => got.push(`${types.join()}|${JSON.parse(m).d.entityType}`),
  });
  core.subscribe(sink(['order']));
  core.subscribe(sink(['fill'], [accountId + 999]));
  call('order/placeorder', market());
  core.flushEvents();
  expect(got.length).toBeGreaterThan(0);
  expect(got.every((g) => g === 'order|order')).toBe(true);
});

/** Orders and strategies the engine holds for the account: what a refused request must not add. */
const created = () => ({ orders: core.engine.orders.size, strategies: core.engine.state.list('orderStrategy', new Set([accountId])).length });

it('refuses a timeInForce outside Day, GTC, IOC and FOK with 400 and places nothing', () => {
  for (const tif of ['Bogus', 'GTD', 'day', 7]) {
    expect(call('order/placeorder', { ...market(), timeInForce: tif }), String(tif)).toMatchObject({ s: 400, d: expect.stringMatching(/timeInForce/) });
  }
  expect(core.engine.orders.size).toBe(0);
  for (const tif of ['Day', 'GTC', 'IOC', 'FOK']) expect(call('order/placeorder', { ...market(), timeInForce: tif }).d, tif).toHaveProperty('orderId');
});

it('leaves no orphan order or strategy behind a request refused half-way', () => {
  const strategy = (params: unknown) => ({ accountId, symbol: 'ESZ6', action: 'Buy', orderStrategyTypeId: 2, params: JSON.stringify(params) });
  const entryVersion = { orderQty: 1, orderType: 'Market' };
  expect(call('orderstrategy/startorderstrategy', strategy({ entryVersion, brackets: [null] }))).toEqual({ s: 200, d: { errorText: 'Invalid or missed parameters' } });
  expect(call('orderstrategy/startorderstrategy', strategy({ entryVersion, brackets: [{ qty: 'x' }] })).s).toBe(400);
  expect(call('orderstrategy/startorderstrategy', strategy({ entryVersion: { orderQty: 0, orderType: 'Market' }, brackets: [] })).s).toBe(400);
  expect(call('order/placeoco', { ...market(), orderType: 'Limit', price: 4000, other: { orderType: 'Stop', stopPrice: 6000 } }).s).toBe(400);
  expect(created()).toEqual({ orders: 0, strategies: 0 });
});

it('answers any body on any endpoint without throwing or a 5xx, and a refusal creates nothing (property)', () => {
  const endpoints = [...HANDLERS.keys()];
  const value = fc.oneof(fc.anything(), fc.constantFrom(null, 0, -1, 1.5, 1e308, '', 'x', '1', [], {}, accountId, 'ESZ6', 'Buy', 'Limit'));
  const field = fc.constantFrom('accountId', 'accountSpec', 'action', 'symbol', 'orderQty', 'orderType', 'price', 'stopPrice', 'timeInForce',
    'orderId', 'contractId', 'bracket1', 'bracket2', 'other', 'orderStrategyTypeId', 'params', 'entityTypes', 'accounts', 'positions', 'p-ticket');
  const patch = fc.dictionary(field, value, { maxKeys: 4 });
  const params = fc.record({ entryVersion: fc.oneof(value, fc.constant({ orderQty: 1, orderType: 'Market' })), brackets: fc.oneof(value, fc.array(value, { maxLength: 3 })) }).map((p) => JSON.stringify(p));
  const body = fc.oneof(
    fc.anything(),
    patch.map((p) => ({ ...market(), ...p })),
    fc.tuple(patch, params).map(([p, ps]) => ({ ...market(), orderStrategyTypeId: 2, params: ps, ...p })),
  );
  const query = fc.dictionary(fc.constantFrom('id', 'ids', 'masterid', 'masterids', 'name'), fc.string({ maxLength: 12 }), { maxKeys: 3 });
  fc.assert(
    fc.property(fc.constantFrom(...endpoints), body, query, (endpoint, b, q) => {
      const before = created();
      const r = core.dispatch(endpoint, session, new URLSearchParams(q), b);
      core.flushEvents();
      expect([200, 400, 404], `${endpoint} ${JSON.stringify(b)}`).toContain(r.s);
      if (r.s !== 200) expect(created(), `${endpoint} ${JSON.stringify(b)}`).toEqual(before);
    }),
    { numRuns: 3000, seed: 20261121 },
  );
});
