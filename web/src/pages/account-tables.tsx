/** The tables of one account: positions, working orders (with cancel), closed trades. */
import type { Order, ClosedTrade, Position } from '../types';
import { Badge, TableHead } from '../components/ui';
import { averagePrice, fullTime, pnl, price, when } from '../format';

const ROLE: Record<Order['role'], string> = { single: 'Order', entry: 'Entry', take_profit: 'Take-profit', stop_loss: 'Stop-loss' };

/** What cancelling `o` does, in the words of the order semantics (DESIGN §6). */
/** A leg of a bracket whose entry still works: the server refuses to cancel it alone (409). */
export function cancelRefused(o: Order, working: readonly Order[]): boolean {
  return (o.role === 'take_profit' || o.role === 'stop_loss') && !!o.bracketId && working.some((w) => w.orderId === o.bracketId && w.role === 'entry');
}

export function cancelExplanation(o: Order, working: readonly Order[]): string {
  const legs = [o.legs.takeProfit && 'take-profit', o.legs.stopLoss && 'stop-loss'].filter((x): x is string => !!x);
  if (o.role === 'entry') {
    // An entry with no leg ids yet is a tick-offset bracket: its legs are placed once it has filled completely.
    if (o.filledQty > 0) {
      return `This entry is partly filled (${o.filledQty} of ${o.qty}). Only the unfilled ${o.qty - o.filledQty} is cancelled; the filled part stays a position${
        legs.length
          ? ` with its ${legs.join(' and ')}. Nothing is flattened.`
          : ' with no take-profit or stop-loss: this bracket’s legs are placed only once the entry has filled completely, so they never will be. Protect or close the position yourself. Nothing is flattened.'
      }`;
    }
    return legs.length
      ? `The entry is cancelled and its ${legs.join(' and ')} ${legs.length > 1 ? 'are' : 'is'} removed with it.`
      : 'The entry is cancelled, and with it its take-profit and stop-loss, which would have been placed once it filled.';
  }
  if (o.role === 'take_profit' || o.role === 'stop_loss') {
    const self = o.role === 'take_profit' ? 'take-profit' : 'stop-loss';
    const entry = o.bracketId ? working.find((w) => w.orderId === o.bracketId && w.role === 'entry') : undefined;
    if (entry) {
      return `Its entry ${entry.orderId} ${entry.filledQty > 0 ? `is still filling (${entry.filledQty} of ${entry.qty})` : 'has not filled yet'}, so the server refuses to cancel this ${self} alone: cancel the entry first${
        entry.filledQty > 0 ? ' (its filled part keeps its legs)' : ' (its legs go with it)'
      }.`;
    }
    const otherRole = o.role === 'take_profit' ? 'stop_loss' : 'take_profit';
    const other = o.bracketId ? working.find((w) => w.bracketId === o.bracketId && w.role === otherRole) : undefined;
    const rest = other
      ? ` and keeps its ${otherRole === 'stop_loss' ? 'stop-loss' : 'take-profit'}, which is re-placed under a new order id (the broker cancels both legs of the pair together).`
      : '.';
    const warning = o.role === 'stop_loss' ? ' The position will have no stop-loss.' : '';
    return `Only this ${self} is cancelled. The position stays open${rest}${warning}`;
  }
  return 'The order is cancelled.';
}

export function PositionsTable(props: { positions: Position[] }) {
  return (
    <table class="table">
      <TableHead caption="Open positions" cols={['Symbol', 'Side', { label: 'Qty', num: true }, { label: 'Avg price', num: true }, 'Opened']} />
      <tbody>
        {props.positions.map((p) => (
          <tr key={p.symbol}>
            <td data-label="Symbol">
              <strong>{p.symbol}</strong>
            </td>
            <td data-label="Side">{p.netQty > 0 ? <Badge tone="ok">Long</Badge> : <Badge tone="danger">Short</Badge>}</td>
            <td data-label="Qty" class="num">
              {Math.abs(p.netQty)}
            </td>
            <td data-label="Avg price" class="num">
              {averagePrice(p.avgPrice)}
            </td>
            <td data-label="Opened" title={fullTime(p.openedAt)}>
              {when(p.openedAt)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function WorkingOrdersTable(props: { orders: Order[]; onCancel: (o: Order) => void; disabled: boolean }) {
  return (
    <table class="table">
      <TableHead caption="Working orders" cols={['Order', 'Symbol', 'Side', 'Type', { label: 'Filled / qty', num: true }, { label: 'Price', num: true }, 'Role', { label: 'Actions', srOnly: true }]} />
      <tbody>
        {props.orders.map((o) => (
          <tr key={o.orderId}>
            <td data-label="Order">
              <code>{o.orderId}</code>
            </td>
            <td data-label="Symbol">{o.symbol}</td>
            <td data-label="Side">{o.side === 'buy' ? <Badge tone="ok">Buy</Badge> : <Badge tone="danger">Sell</Badge>}</td>
            <td data-label="Type">{o.type.replace('_', ' ')}</td>
            <td data-label="Filled / qty" class="num">
              {o.filledQty} / {o.qty}
            </td>
            <td data-label="Price" class="num">
              {o.type === 'stop' ? price(o.stopPrice) : o.type === 'stop_limit' ? `${price(o.stopPrice)} → ${price(o.price)}` : price(o.price)}
            </td>
            <td data-label="Role">
              {ROLE[o.role]}
              {o.bracketId && <span class="muted small"> · bracket</span>}
            </td>
            <td class="actions">
              <button type="button" class="btn small danger-outline" disabled={props.disabled} onClick={() => props.onCancel(o)} aria-label={`Cancel order ${o.orderId}`}>
                Cancel
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function TradesTable(props: { trades: ClosedTrade[] }) {
  const total = props.trades.reduce((s, t) => s + t.pnl, 0);
  return (
    <table class="table">
      <TableHead caption="Closed trades, newest first" cols={['Closed', 'Symbol', 'Direction', { label: 'Qty', num: true }, { label: 'Entry', num: true }, { label: 'Exit', num: true }, { label: 'P&L', num: true }]} />
      <tbody>
        {props.trades.map((t) => (
          <tr key={t.id}>
            <td data-label="Closed" title={fullTime(t.closedAt)}>
              {when(t.closedAt)}
            </td>
            <td data-label="Symbol">{t.symbol}</td>
            <td data-label="Direction">{t.direction === 'long' ? 'Long' : 'Short'}</td>
            <td data-label="Qty" class="num">
              {t.qty}
            </td>
            <td data-label="Entry" class="num">
              {averagePrice(t.entryPrice)}
            </td>
            <td data-label="Exit" class="num">
              {averagePrice(t.exitPrice)}
            </td>
            <td data-label="P&L" class={`num ${t.pnl > 0 ? 'gain' : t.pnl < 0 ? 'loss' : ''}`}>
              {pnl(t.pnl)} <span class="muted small">({t.pnlPoints > 0 ? '+' : ''}{t.pnlPoints} pt)</span>
            </td>
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th scope="row" colSpan={6}>
            Total ({props.trades.length} trade{props.trades.length === 1 ? '' : 's'})
          </th>
          <td data-label="Total P&L" class={`num ${total > 0 ? 'gain' : total < 0 ? 'loss' : ''}`}>
            <strong>{pnl(total)}</strong>
          </td>
        </tr>
      </tfoot>
    </table>
  );
}
