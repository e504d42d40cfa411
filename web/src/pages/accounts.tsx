/**
 * Accounts: per account its positions, working orders (cancel, with the bracket rules
 * spelled out), risk guards and kill switch, closed trades with P&L, and flatten. An account the broker no longer
 * reports is shown as inactive, never silently dropped.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, apiList } from '../api';
import { accountLabel } from '../accounts-label';
import { ConfirmDialog } from '../components/dialog';
import { toast } from '../components/toast';
import { Badge, ErrorBox, Freshness, ListStates, Loading, Page } from '../components/ui';
import { brokerLabel } from '../format';
import { health } from '../health';
import { usePolling, useResource } from '../hooks';
import type { Account, CancelResult, ClosedTrade, FlattenResult, Order, Position } from '../types';
import { GuardsCard } from './account-guards';
import { cancelExplanation, cancelRefused, PositionsTable, TradesTable, WorkingOrdersTable } from './account-tables';

const LIVE_POLL_MS = 5_000;
const TRADES_POLL_MS = 30_000;

function selectedFromUrl(): string | null {
  return new URLSearchParams(location.search).get('account');
}

function cancelSummary(r: CancelResult): string {
  const parts = [`Order ${r.order.orderId} cancelled`];
  if (r.remainderCancelled) parts.push('unfilled remainder cancelled, filled part stays');
  if (r.removedLegIds.length) parts.push(`legs ${r.removedLegIds.join(', ')} removed`);
  if (r.replaced) parts.push(`surviving leg re-placed as ${r.replaced.newOrderId}`);
  return parts.join('; ');
}

function flattenSummary(r: FlattenResult): string {
  const closed = r.positions.filter((p) => p.status === 'liquidated');
  const failed = r.positions.filter((p) => p.status === 'failed');
  const parts = [`${r.cancelledOrderIds.length} order${r.cancelledOrderIds.length === 1 ? '' : 's'} cancelled`, `${closed.length} position${closed.length === 1 ? '' : 's'} closed`];
  if (failed.length) parts.push(`NOT closed: ${failed.map((p) => `${p.symbol}${p.detail ? ` (${p.detail})` : ''}`).join(', ')}`);
  return parts.join(', ') + outstandingNote(r.outstandingOrders);
}

/**
 * Orders the broker had not answered when the flatten ran may still fill after it: said, never
 * "flattened" alone (web probe: the page said 0 positions closed and "Flat", then the order filled).
 */
export function outstandingNote(n: number | undefined): string {
  if (!n) return '';
  return `. ${n === 1 ? '1 order' : `${n} orders`} sent just before had no answer from the broker yet and may still fill: watch the positions and flatten again if one opens`;
}

function AccountView(props: { account: Account; accounts: Account[] }) {
  const a = props.account;
  const q = encodeURIComponent(a.id);
  const positions = useResource(() => apiList<Position>(`/accounts/${q}/positions`), [a.id]);
  const working = useResource(() => apiList<Order>(`/accounts/${q}/working-orders`), [a.id]);
  const trades = useResource(() => apiList<ClosedTrade>(`/accounts/${q}/orders`).then((t) => t.reverse()), [a.id]);
  const refreshLive = () => Promise.all([positions.reload(), working.reload()]);
  usePolling(refreshLive, LIVE_POLL_MS);
  usePolling(trades.reload, TRADES_POLL_MS);
  const [cancelling, setCancelling] = useState<Order | null>(null);
  /** Set by a cancel that went through: once its dialog is gone, focus moves to the working orders. */
  const focusWorking = useRef(false);
  // The order's row goes: keyboard focus moves to its section rather than back to a button about
  // to vanish (web probe: it fell to the page, and the next Tab began at "Skip to content").
  useEffect(() => {
    if (cancelling || !focusWorking.current) return;
    focusWorking.current = false;
    focusHeading('working-title');
  }, [cancelling]);
  /** The working orders as they were when the cancel dialog opened: what it explains must not change under it when they unload (web probe). */
  const [cancelContext, setCancelContext] = useState<typeof orders>([]);
  const [flattening, setFlattening] = useState(false);
  /**
   * The flatten's Idempotency-Key, one per confirmation dialog: confirmed again after a timeout (504,
   * "it goes on"), the same flatten is asked about, never a second one that would close a
   * position opened since.
   */
  const [flattenKey, setFlattenKey] = useState('');
  const [lastResult, setLastResult] = useState<string | null>(null);
  const conn = health.value.get(a.connectionId);
  const connected = !conn || conn.status === 'CONNECTED';
  // Never stale: once a reload fails or the connection is down, the last positions and orders are
  // not shown (nor "Flat"), and nothing can be cancelled from them.
  const livePositions = connected && !positions.error ? positions.data : undefined;
  const liveOrders = connected && !working.error ? working.data : undefined;
  const pos = livePositions ?? [];
  const orders = liveOrders ?? [];
  const refreshAll = () => Promise.all([refreshLive(), trades.reload()]);
  // Back to CONNECTED: everything is read again at once, so an error from the outage (trade
  // history unavailable) does not stand next to the live data until the next poll.
  const wasConnected = useRef(connected);
  useEffect(() => {
    if (connected && !wasConnected.current) void refreshAll();
    wasConnected.current = connected;
  }, [connected]);

  return (
    <div class="account" aria-labelledby="account-title">
      <div class="card account-head">
        <div>
          <h2 id="account-title">
            {a.name} <span class="muted">({a.id})</span>
          </h2>
          <p class="chips">
            <Badge tone={a.environment === 'live' ? 'danger' : a.environment === 'demo' ? 'info' : 'neutral'}>{brokerLabel(a.broker, a.environment)}</Badge>
            {a.active ? <Badge tone="ok">Active</Badge> : <Badge tone="danger">Inactive</Badge>}
            {conn && conn.status !== 'CONNECTED' && <Badge tone="warn">Connection {conn.status}</Badge>}
          </p>
        </div>
        <div class="page-actions">
          <Freshness at={livePositions ? positions.loadedAt : null} onRefresh={() => void refreshAll()} label={`Refresh ${a.name}`} />
          <button type="button" class="btn danger" disabled={!a.active} onClick={() => {
              setFlattenKey(crypto.randomUUID());
              setFlattening(true);
            }}>
            Flatten…
          </button>
        </div>
      </div>
      {!a.active && (
        <div class="callout danger" role="alert">
          <p>
            <strong>{accountLabel(props.accounts, a.id)} is no longer reported by the broker</strong> (evaluation reset, breached or replaced). Orders, flatten
            and alerts for it are refused with 403 Account is inactive. Rebind its signal tokens on the Signals page.
          </p>
        </div>
      )}
      {!connected && (
        <p class="callout warn" role="status">
          The connection is {conn?.status}: positions and working orders are unavailable until it is CONNECTED again (never stale data).
        </p>
      )}
      {lastResult && (
        <p class="callout info" role="status">
          {lastResult}
        </p>
      )}

      <section class="card" aria-labelledby="positions-title">
        <h3 id="positions-title">Positions</h3>
        {positions.loading && <Loading what="positions" />}
        <ErrorBox error={positions.error} retry={positions.reload} title="Positions unavailable" />
        {livePositions && pos.length === 0 && <p class="muted">Flat — no open positions.</p>}
        {pos.length > 0 && <PositionsTable positions={pos} />}
      </section>

      <section class="card" aria-labelledby="working-title">
        <h3 id="working-title">Working orders</h3>
        {working.loading && <Loading what="working orders" />}
        <ErrorBox error={working.error} retry={working.reload} title="Working orders unavailable" />
        {liveOrders && orders.length === 0 && <p class="muted">No working orders.</p>}
        {orders.length > 0 && (
          <WorkingOrdersTable
            orders={orders}
            disabled={!a.active || !connected}
            onCancel={(o) => {
              setCancelContext(orders);
              setCancelling(o);
            }}
          />
        )}
      </section>

      <GuardsCard accountId={a.id} accountName={a.name} active={a.active} connected={connected} onFlattened={refreshAll} />

      <section class="card" aria-labelledby="trades-title">
        <h3 id="trades-title">Closed trades</h3>
        {trades.loading && <Loading what="trade history" />}
        <ErrorBox error={trades.error} retry={trades.reload} title="Trade history unavailable" />
        {/* After a failed reload the list shown would be the last one, perhaps without the latest trades: the error alone then. */}
        {!trades.error && trades.data && trades.data.length === 0 && <p class="muted">No closed trades yet.</p>}
        {!trades.error && trades.data && trades.data.length > 0 && <TradesTable trades={trades.data} />}
      </section>

      {cancelling && (
        <ConfirmDialog
          title={`Cancel order ${cancelling.orderId}?`}
          confirmLabel="Cancel order"
          dismissLabel="Keep order"
          refused={!connected || cancelRefused(cancelling, cancelContext)}
          danger
          onClose={() => setCancelling(null)}
          onConfirm={async () => {
            const r = await api<CancelResult>('DELETE', `/accounts/${q}/orders/${encodeURIComponent(cancelling.orderId)}`);
            const summary = cancelSummary(r);
            setLastResult(summary);
            toast(summary);
            await refreshLive();
            focusWorking.current = true;
          }}
        >
          <p>
            {cancelling.side === 'buy' ? 'Buy' : 'Sell'} {cancelling.qty} {cancelling.symbol} ({cancelling.type.replace('_', ' ')})
          </p>
          <p>{cancelExplanation(cancelling, cancelContext)}</p>
          {!connected && <p class="callout warn">The connection is {conn?.status}: nothing can be cancelled until it is CONNECTED again.</p>}
        </ConfirmDialog>
      )}
      {flattening && (
        <ConfirmDialog
          title={`Flatten ${a.name}?`}
          confirmLabel="Flatten account"
          danger
          onClose={() => setFlattening(false)}
          onConfirm={async () => {
            const r = await api<FlattenResult>('POST', `/accounts/${q}/flatten`, undefined, { 'Idempotency-Key': flattenKey });
            const summary = `${a.name} flattened: ${flattenSummary(r)}`;
            setLastResult(summary);
            toast(summary);
            await refreshAll();
          }}
        >
          {livePositions && liveOrders ? (
            <>
              <p>
                Cancels <strong>every working order</strong> ({orders.length}) and then closes <strong>every position at market</strong>:
              </p>
              <ul>
                {pos.length ? (
                  pos.map((p) => (
                    <li key={p.symbol}>
                      {p.symbol}: {p.netQty > 0 ? 'sell' : 'buy'} {Math.abs(p.netQty)}
                    </li>
                  ))
                ) : (
                  <li>no open positions right now</li>
                )}
              </ul>
            </>
          ) : (
            // Not known now (the connection is not CONNECTED, or a reload failed): never say "none".
            <p>
              Cancels <strong>every working order</strong> and then closes <strong>every position at market</strong>. What the account holds
              right now is not known here (its positions and orders could not be loaded): the broker flattens whatever it holds.
            </p>
          )}
          <p class="muted small">Market orders fill at the prevailing price, which may differ from the last one you saw.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

export function AccountsPage() {
  const accounts = useResource(() => apiList<Account>('/accounts'), []);
  usePolling(accounts.reload, 15_000);
  const [selected, setSelected] = useState<string | null>(selectedFromUrl());
  const list = accounts.data ?? [];
  // An account named (in the URL, or shown before) that the list no longer has is said to be
  // missing, never swapped for another: Flatten there would act on an account not asked for.
  const missing = selected !== null && accounts.data !== undefined && !list.some((a) => a.id === selected);
  const current = missing ? undefined : (list.find((a) => a.id === selected) ?? list.find((a) => a.active) ?? list[0]);
  // The account first shown stays the one shown: should it turn inactive, the page says so
  // rather than quietly showing (and offering Flatten on) another account.
  useEffect(() => {
    if (selected === null && current) setSelected(current.id);
  }, [selected, current?.id]);
  const choose = (id: string) => {
    setSelected(id);
    history.replaceState(null, '', `/accounts?account=${encodeURIComponent(id)}`);
  };
  const totalOpen = list.filter((a) => a.active).length;

  return (
    <Page title="Accounts" intro="Positions, working orders, risk guards and closed trades per account, straight from the broker connection.">
      <ListStates res={accounts} what="accounts" empty="No accounts yet">
        Accounts appear once a connection is CONNECTED. Add one on the Connections page.
      </ListStates>
      {list.length > 0 && (
        <div class="account-picker" role="group" aria-label={`Accounts (${totalOpen} active)`}>
          {list.map((a) => (
            <button key={a.id} type="button" class={`account-chip${current?.id === a.id ? ' on' : ''}${a.active ? '' : ' inactive'}`} aria-pressed={current?.id === a.id} onClick={() => choose(a.id)}>
              <span class="account-name">{a.name}</span>
              <span class="muted small">
                {a.id}
                {a.active ? '' : ' · inactive'}
              </span>
            </button>
          ))}
        </div>
      )}
      {missing && list.length > 0 && (
        <p class="callout warn" role="status">
          Account {selected} is not among your accounts (its connection may have been removed): pick one above.
        </p>
      )}
      {current && <AccountView key={current.id} account={current} accounts={list} />}
    </Page>
  );
}

/** Moves keyboard focus to a section heading (focusable by script only). */
function focusHeading(id: string): void {
  const heading = document.getElementById(id);
  if (!heading) return;
  if (!heading.hasAttribute('tabindex')) heading.tabIndex = -1;
  heading.focus();
}
