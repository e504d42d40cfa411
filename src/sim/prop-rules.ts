/**
 * Prop-firm evaluation rules per paper account: a daily loss limit (the trade date's P&L,
 * realized plus open, may not reach −limit) and a trailing drawdown (equity may not fall
 * `trailingDrawdown` below its highest value). A breach cancels the account's orders,
 * liquidates its positions at the last price (admin orders) and then revokes the account:
 * it vanishes from the user's view exactly like `/control/accounts/{id}/deactivate`. A reset
 * re-creates the account under a new id with its starting balance, limits and rules.
 *
 * Cost: accounts are re-checked only when something moved their equity — a fill of theirs or a
 * price change in a contract they hold — so a price step touches only that contract's holders.
 */
import type { Engine } from './engine.js';
import { liquidate } from './order-requests.js';
import type { AccountRules, AccountState } from './state.js';

const cents = (n: number): number => Math.round(n * 100) / 100;

/** Rule bookkeeping and enforcement over the engine. */
export class PropRules {
  private readonly dirty = new Set<number>();
  private readonly ruled = new Set<number>();

  constructor(
    private readonly engine: Engine,
    /** Rules every new account created through the control API starts with. */
    readonly defaults: AccountRules = {},
  ) {}

  /** Equity: cash balance plus open P&L at the last prices. */
  equity(accountId: number): number {
    const s = this.engine.state;
    const account = s.accounts.get(accountId);
    const cash = account && s.get('cashBalance', account.cashBalanceId);
    return cents(((cash?.amount as number | undefined) ?? 0) + this.engine.positions.openPnL(accountId));
  }

  /** Replaces an account's rules; a new trailing drawdown starts trailing from the equity now. */
  setRules(account: AccountState, rules: AccountRules): void {
    const id = account.entity.id;
    if (rules.trailingDrawdown !== undefined && account.rules.trailingDrawdown === undefined) account.highWater = this.equity(id);
    account.rules = { ...rules };
    if (rules.dailyLossLimit !== undefined || rules.trailingDrawdown !== undefined) {
      this.ruled.add(id);
      this.dirty.add(id);
    } else this.ruled.delete(id);
  }

  /** Marks the holders of a contract whose price moved for a re-check. */
  priceMoved(contractId: number): void {
    const holders = this.engine.positions.holdersOf(contractId);
    if (!holders) return;
    for (const id of holders) if (this.ruled.has(id)) this.dirty.add(id);
  }

  /** A new trade date: every account's day starts at its equity now. Once a day, over all accounts. */
  newTradeDate(): void {
    for (const [id, account] of this.engine.state.accounts) account.dayStartEquity = this.equity(id);
  }

  /** Checks every account whose equity may have moved; breaches liquidate and revoke. */
  enforce(): void {
    const filled = this.engine.takeFilledAccounts();
    if (filled) for (const id of filled) if (this.ruled.has(id)) this.dirty.add(id);
    if (this.dirty.size === 0) return;
    const ids = [...this.dirty];
    this.dirty.clear();
    for (const id of ids) this.check(id);
  }

  private check(id: number): void {
    const account = this.engine.state.accounts.get(id);
    if (!account || !account.active) return;
    const { dailyLossLimit, trailingDrawdown } = account.rules;
    const equity = this.equity(id);
    if (trailingDrawdown !== undefined) account.highWater = Math.max(account.highWater, equity);
    if (dailyLossLimit !== undefined && equity - account.dayStartEquity <= -dailyLossLimit) {
      return this.breach(account, 'DailyLossLimit', equity, cents(account.dayStartEquity - dailyLossLimit));
    }
    if (trailingDrawdown !== undefined && equity <= account.highWater - trailingDrawdown) {
      return this.breach(account, 'TrailingDrawdown', equity, cents(account.highWater - trailingDrawdown));
    }
  }

  private breach(account: AccountState, rule: 'DailyLossLimit' | 'TrailingDrawdown', equity: number, limit: number): void {
    this.flatten(account);
    account.breach = { rule, at: this.engine.state.timestamp(), equity, limit };
    this.engine.state.setActive(account.entity.id, false);
  }

  /** Cancels every live order of an account and closes every position at market (admin orders). */
  flatten(account: AccountState): void {
    const id = account.entity.id;
    for (const rec of this.engine.liveOrders(id)) if (this.engine.isLive(rec)) this.engine.cancel(rec, { isAutomated: true });
    for (const contractId of this.engine.positions.openContracts(id)) liquidate(this.engine, id, contractId, true, true);
  }

  /**
   * Re-creates an account under a new id: same user, name (unless given), starting balance
   * (unless given), limits and rules. The old one is flattened and revoked if it was still active.
   */
  reset(account: AccountState, opts: { name?: string; balance?: number } = {}): AccountState {
    const s = this.engine.state;
    if (account.active) {
      this.flatten(account);
      s.setActive(account.entity.id, false);
    }
    const fresh = s.addAccount(account.userId, opts.name ?? (account.entity.name as string), opts.balance ?? account.initialBalance);
    fresh.maxOrderQty = account.maxOrderQty;
    fresh.maxPosition = account.maxPosition;
    this.setRules(fresh, account.rules);
    return fresh;
  }
}
