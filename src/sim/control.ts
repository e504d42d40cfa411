/**
 * The paper broker's control API (`/control/*`, loopback only): create users and accounts,
 * dump state, revoke and restore accounts, set prices, force fills, drop connections, expire
 * tokens, inject faults. JSON in, JSON out; ids are numbers.
 */
import { isOnTick } from './contracts.js';
import { NO_FAULTS, type Faults, type SimCore } from './core.js';
import type { AccountRules, AccountState, Entity, SimUser } from './state.js';
import type { WsSession } from './ws-session.js';

/** A control answer: HTTP status and JSON body. */
export interface ControlResult {
  status: number;
  body: unknown;
}

/** What the control API acts on. */
export interface ControlDeps {
  core: SimCore;
  sessions: () => Iterable<WsSession>;
}

type Body = Record<string, unknown>;

/** Largest injectable latency: ten minutes is far beyond any client timeout worth testing. */
const MAX_LATENCY_MS = 600_000;

/** True when a peer address is on the loopback interface (the only peers the control API serves). */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  // 127.0.0.0/8 is loopback as a whole, also when an IPv6 socket reports it IPv4-mapped.
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/**
 * Why a loopback request must not reach the control API, or undefined: a web page the local user
 * opened may send simple requests to a loopback port (fault injection, fills, account resets),
 * and a DNS-rebound name may reach it as the page's own origin. Browsers name the page in
 * `Origin` (every cross-origin POST) and `Sec-Fetch-Site`; a rebound name shows in `Host`.
 * The control API's clients (curl, scripts, tradegate itself) send none of those.
 */
export function browserRefusal(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  if (headers['origin'] !== undefined) return 'control API refuses requests from web pages (Origin)';
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'none') return 'control API refuses requests from web pages (Sec-Fetch-Site)';
  const host = typeof headers['host'] === 'string' ? headers['host'].toLowerCase() : '';
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '');
  if (name !== '' && name !== 'localhost' && name !== '[::1]' && !/^127(\.\d{1,3}){3}$/.test(name)) return 'control API answers loopback host names only (Host)';
  return undefined;
}

class ControlError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const done = (body: unknown, status = 200): ControlResult => ({ status, body });

function bad(message: string, status = 400): never {
  throw new ControlError(status, message);
}

function positive(v: unknown, field: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) bad(`${field} must be a non-negative number`);
  return v;
}

/** Handles one control request; `path` is below `/control`, lower-cased. */
export function control(deps: ControlDeps, method: string, path: string, query: URLSearchParams, body: Body): ControlResult {
  try {
    deps.core.advance();
    const r = route(deps, method, path, query, body);
    deps.core.flushEvents();
    return r;
  } catch (err) {
    if (err instanceof ControlError) return done({ error: err.message }, err.status);
    throw err;
  }
}

function route(deps: ControlDeps, method: string, path: string, query: URLSearchParams, body: Body): ControlResult {
  const { core } = deps;
  const state = core.engine.state;
  const key = `${method} ${path.replace(/\/\d+(?=\/|$)/, '/:id')}`;
  const id = Number(/\/(\d+)(?=\/|$)/.exec(path)?.[1]);
  switch (key) {
    case 'POST /users':
      return createUser(core, body);
    case 'DELETE /users':
      return removeUser(deps, userOf(core, query.get('name') ?? undefined) ?? bad('unknown user', 404));
    case 'POST /accounts': {
      const user = userOf(core, body.user ?? body.userId) ?? bad('unknown user', 404);
      return done(addAccount(core, user.id, body), 201);
    }
    case 'GET /state':
      return done(dump(core, query.get('user') ?? undefined));
    case 'POST /accounts/:id/deactivate':
    case 'POST /accounts/:id/reactivate': {
      const account = state.accounts.get(id) ?? bad('unknown account', 404);
      const active = path.endsWith('reactivate');
      if (active) ofLiveUser(core, account);
      if (active && !account.active && activeNamed(core, account.userId, account.entity.name as string)) bad(`an active account is named ${String(account.entity.name)}`, 409);
      state.setActive(id, active);
      return done({ id, name: account.entity.name, active });
    }
    case 'POST /accounts/:id/limits': {
      const account = state.accounts.get(id) ?? bad('unknown account', 404);
      // Every value is checked before any is set, so a 400 leaves the limits as they were.
      const field = (name: 'maxOrderQty' | 'maxPosition' | 'dailyLossLimit' | 'trailingDrawdown', current: number | undefined) =>
        name in body ? (body[name] === null ? undefined : positive(body[name], name)) : current;
      const maxOrderQty = field('maxOrderQty', account.maxOrderQty);
      const maxPosition = field('maxPosition', account.maxPosition);
      const rules = { dailyLossLimit: field('dailyLossLimit', account.rules.dailyLossLimit), trailingDrawdown: field('trailingDrawdown', account.rules.trailingDrawdown) };
      account.maxOrderQty = maxOrderQty;
      account.maxPosition = maxPosition;
      core.rules.setRules(account, rules);
      return done(limitsOf(account));
    }
    case 'POST /accounts/:id/reset': {
      const account = ofLiveUser(core, state.accounts.get(id) ?? bad('unknown account', 404));
      const name = body.name === undefined ? (account.entity.name as string) : typeof body.name === 'string' && body.name ? body.name : bad('name must be a non-empty string');
      const balance = positive(body.balance, 'balance');
      if (activeNamed(core, account.userId, name, id)) bad(`account ${name} exists`, 409);
      const fresh = core.rules.reset(account, { name, balance });
      return done({ ...limitsOf(fresh), name, previousId: id, balance: fresh.initialBalance }, 201);
    }
    case 'GET /prices':
      return done(state.prices.snapshot());
    case 'POST /prices': {
      const contract = typeof body.symbol === 'string' ? state.contracts.find(body.symbol) : undefined;
      if (!contract) bad('unknown symbol', 404);
      if (body.walk === true) {
        state.prices.unpin(contract.id);
        return done({ symbol: contract.name, contractId: contract.id, price: state.prices.last(contract.id), walk: true });
      }
      const price = body.price;
      const tick = state.contracts.productOf(contract.id).tickSize;
      if (typeof price !== 'number' || price <= 0 || !isOnTick(price, tick)) bad(`price must be a positive multiple of ${tick}`);
      state.prices.set(contract.id, price);
      core.priceChanged(contract.id);
      return done({ symbol: contract.name, contractId: contract.id, price, walk: false });
    }
    case 'POST /orders/:id/fill':
      return forceFill(core, id, body);
    case 'POST /connections/drop': {
      let dropped = 0;
      for (const s of selectSessions(deps, body)) {
        s.terminate();
        dropped++;
      }
      return done({ dropped });
    }
    case 'POST /connections/shutdown': {
      let closed = 0;
      const reasonCode = typeof body.reasonCode === 'string' ? body.reasonCode : 'Maintenance';
      for (const s of selectSessions(deps, body)) {
        s.shutdown(reasonCode, typeof body.reason === 'string' ? body.reason : 'Scheduled maintenance');
        closed++;
      }
      return done({ closed });
    }
    case 'POST /auth/expire': {
      const user = body.user === undefined ? undefined : (userOf(core, body.user) ?? bad('unknown user', 404));
      return done({ expired: core.auth.expire(user?.id) });
    }
    case 'GET /faults':
      return done(core.faults);
    case 'DELETE /faults':
      core.faults = { ...NO_FAULTS };
      return done(core.faults);
    case 'POST /faults':
      core.faults = mergeFaults(core.faults, body);
      return done(core.faults);
    default:
      return bad(`no control route ${method} /control${path}`, 404);
  }
}

function mergeFaults(current: Faults, body: Body): Faults {
  const next: Faults = { ...current };
  if (body.latencyMs !== undefined) {
    // Unbounded, a typo like 1e12 would overflow Node's timer range and fire at once instead.
    const ms = positive(body.latencyMs, 'latencyMs')!;
    if (ms > MAX_LATENCY_MS) bad(`latencyMs must be at most ${MAX_LATENCY_MS}`);
    next.latencyMs = ms;
  }
  if (body.silent !== undefined) next.silent = body.silent === true;
  if (body.rejectAuth !== undefined) next.rejectAuth = typeof body.rejectAuth === 'string' ? body.rejectAuth : body.rejectAuth === true;
  if (body.rateLimit429 !== undefined) next.rateLimit429 = body.rateLimit429 === true;
  if (body.pTicketCaptcha !== undefined) next.pTicketCaptcha = body.pTicketCaptcha === true;
  if (body.pTicketTarget !== undefined) {
    if (body.pTicketTarget !== 'auth' && body.pTicketTarget !== 'orders' && body.pTicketTarget !== 'any') bad('pTicketTarget must be auth, orders or any');
    next.pTicketTarget = body.pTicketTarget;
  }
  if (body.pTicketSeconds !== undefined) next.pTicketSeconds = body.pTicketSeconds === null ? undefined : positive(body.pTicketSeconds, 'pTicketSeconds');
  return next;
}

function userOf(core: SimCore, ref: unknown) {
  const state = core.engine.state;
  if (typeof ref === 'number') return state.users.get(ref);
  if (typeof ref === 'string') return state.usersByName.get(ref);
  return undefined;
}

/**
 * True when another active account of the user (other than `except`) has this name. Names
 * identify a user's accounts (`accountSpec`, `account/find`, both looked up among the user's own
 * accounts), so they are unique per user: two logins may each have an account named X.
 */
function activeNamed(core: SimCore, userId: number, name: string, except?: number): boolean {
  for (const a of core.engine.state.accounts.values()) if (a.active && a.userId === userId && a.entity.name === name && a.entity.id !== except) return true;
  return false;
}

/** Rules of an account spec, on top of the broker's defaults (`null` clears a default). */
function rulesOf(core: SimCore, spec: Body): AccountRules {
  const rules: AccountRules = { ...core.rules.defaults };
  for (const k of ['dailyLossLimit', 'trailingDrawdown'] as const) {
    if (spec[k] === null) delete rules[k];
    else if (spec[k] !== undefined) rules[k] = positive(spec[k], k);
  }
  return rules;
}

function limitsOf(a: AccountState) {
  return {
    id: a.entity.id, maxOrderQty: a.maxOrderQty ?? null, maxPosition: a.maxPosition ?? null,
    dailyLossLimit: a.rules.dailyLossLimit ?? null, trailingDrawdown: a.rules.trailingDrawdown ?? null,
  };
}

function addAccount(core: SimCore, userId: number, spec: Body): { id: number; name: string } {
  const state = core.engine.state;
  const name = typeof spec.name === 'string' && spec.name ? spec.name : bad('account name is required');
  if (activeNamed(core, userId, name)) bad(`account ${name} exists`, 409);
  const balance = positive(spec.balance, 'balance') ?? 50_000;
  const rules = rulesOf(core, spec);
  const account = state.addAccount(userId, name, balance, typeof spec.id === 'number' ? spec.id : undefined);
  core.rules.setRules(account, rules);
  return { id: account.entity.id, name };
}

function createUser(core: SimCore, body: Body): ControlResult {
  const state = core.engine.state;
  const name = typeof body.name === 'string' && body.name ? body.name : bad('name is required');
  const password = typeof body.password === 'string' && body.password ? body.password : bad('password is required');
  if (state.usersByName.has(name)) bad(`user ${name} exists`, 409);
  if (body.accounts !== undefined && !Array.isArray(body.accounts)) bad('accounts must be an array');
  const specs = (body.accounts ?? []) as Body[];
  const names = specs.map((s) => s?.name);
  if (names.some((n) => typeof n !== 'string' || !n) || new Set(names).size !== names.length) bad('each account needs a unique name');
  // Every spec is checked before anything is created: a refused request leaves no half-made user.
  for (const s of specs) {
    if (s.id !== undefined && !(Number.isSafeInteger(s.id) && (s.id as number) > 0)) bad('an account id must be a positive integer');
    positive(s.balance, 'balance');
    rulesOf(core, s);
  }
  const user = state.addUser(name, password);
  const accounts = specs.map((s) => addAccount(core, user.id, s));
  return done({ userId: user.id, name, accounts }, 201);
}

/** The account, unless its login was removed (DELETE /users): nothing of it can come back (fuzz probe: a reset answered 500). */
function ofLiveUser(core: SimCore, account: AccountState): AccountState {
  if (!core.engine.state.users.has(account.userId)) bad(`account ${account.entity.id} belonged to a login that was removed`, 409);
  return account;
}

/**
 * Removes a login: its accounts leave its view (subscribers get `account` `Deleted`), its tokens
 * stop working, its sockets close, and its name (and its account names) can be used again.
 */
function removeUser(deps: ControlDeps, user: SimUser): ControlResult {
  const state = deps.core.engine.state;
  for (const id of user.accountIds) state.setActive(id, false);
  deps.core.auth.revoke(user.id);
  for (const s of deps.sessions()) if (s.userId === user.id) s.terminate();
  state.usersByName.delete(user.name);
  state.users.delete(user.id);
  return done({ userId: user.id, name: user.name, accounts: user.accountIds });
}

function selectSessions(deps: ControlDeps, body: Body): WsSession[] {
  const user = body.user === undefined ? undefined : (userOf(deps.core, body.user) ?? bad('unknown user', 404));
  return [...deps.sessions()].filter((s) => !user || s.userId === user.id);
}

function forceFill(core: SimCore, id: number, body: Body): ControlResult {
  const engine = core.engine;
  const rec = engine.orders.get(id) ?? bad('unknown order', 404);
  if (rec.order.ordStatus !== 'Working') bad(`order is ${String(rec.order.ordStatus)}, not Working`, 409);
  const remaining = (rec.version.orderQty as number) - rec.filled;
  const qty = body.qty === undefined ? remaining : body.qty;
  if (typeof qty !== 'number' || !Number.isInteger(qty) || qty <= 0 || qty > remaining) bad(`qty must be an integer in 1..${remaining}`);
  const tick = engine.state.contracts.productOf(rec.contractId).tickSize;
  const limit = rec.version.price as number | undefined;
  const price = body.price ?? limit ?? engine.state.prices.last(rec.contractId);
  if (typeof price !== 'number' || !isOnTick(price, tick)) bad(`price must be a multiple of ${tick}`);
  rec.triggered = true;
  engine.fill(rec, qty, price);
  return done({ orderId: id, filledQty: rec.filled, ordStatus: rec.order.ordStatus });
}

function dump(core: SimCore, userName?: string): unknown {
  const state = core.engine.state;
  const users = [...state.users.values()].filter((u) => !userName || u.name === userName);
  const accountIds = new Set(users.flatMap((u) => u.accountIds));
  const accounts = [...accountIds].map((id) => {
    const a = state.accounts.get(id)!;
    const cash = state.get('cashBalance', a.cashBalanceId)!;
    return {
      ...limitsOf(a), name: a.entity.name, userId: a.userId, active: a.active, balance: cash.amount, realizedPnL: cash.realizedPnL,
      equity: core.rules.equity(id), dayStartEquity: a.dayStartEquity, highWater: a.highWater, breach: a.breach ?? null,
    };
  });
  const symbol = (contractId: number) => state.contracts.item(contractId)?.name;
  const orders = [...core.engine.orders.values()].filter((o) => accountIds.has(o.accountId)).map((o) => ({
    id: o.id, accountId: o.accountId, contractId: o.contractId, symbol: symbol(o.contractId), action: o.order.action,
    ordStatus: o.order.ordStatus, orderType: o.version.orderType, orderQty: o.version.orderQty, price: o.version.price ?? null,
    stopPrice: o.version.stopPrice ?? null, timeInForce: o.version.timeInForce, filledQty: o.filled,
    avgPx: o.filled ? o.filledValue / o.filled : null, parentId: o.parentId ?? null, ocoId: o.siblingId ?? null,
    strategyId: o.strategyId ?? null, clOrdId: state.get('command', o.id)?.clOrdId ?? null, timestamp: o.order.timestamp,
  }));
  const positions = state.list('position', accountIds).map((p: Entity) => ({
    id: p.id, accountId: p.accountId, contractId: p.contractId, symbol: symbol(p.contractId as number), netPos: p.netPos,
    netPrice: p.netPrice ?? null, bought: p.bought, sold: p.sold,
  }));
  const fills = state.list('fill', accountIds).map((f: Entity) => ({
    id: f.id, orderId: f.orderId, accountId: state.accountOf('fill', f.id), symbol: symbol(f.contractId as number),
    action: f.action, qty: f.qty, price: f.price, timestamp: f.timestamp,
  }));
  return {
    users: users.map((u) => ({ userId: u.id, name: u.name, accounts: accounts.filter((a) => a.userId === u.id).map((a) => ({ id: a.id, name: a.name, active: a.active })) })),
    accounts, orders, positions, fills, prices: state.prices.snapshot(), faults: core.faults, requests: Object.fromEntries(core.requests),
    session: { mode: state.calendar.mode, ...state.session() },
  };
}
