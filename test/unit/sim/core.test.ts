/** The one dispatch path of REST and WS: auth, 429, p-tickets on orders, 404, 400, event routing. */
import { beforeEach, expect, it } from 'vitest';
import { SimCore, type EventSink } from '../../../src/sim/core.js';
import type { AuthSession } from '../../../src/sim/auth.js';

let core: SimCore;
let session: AuthSession;
let accountId: number;

beforeEach(() => {
  core = new SimCore({ seed: 1, clock: () => 0, tokenLifetimeMs: 60_000, maxSessionsPerUser: 2, requestsPerSecond: 100, requestsPerHour: 1000 });
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
