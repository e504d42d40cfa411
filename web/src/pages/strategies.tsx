/** Strategies: named order defaults (symbol, qty, type, take-profit, stop-loss) a signal token can use. */
import { useState } from 'preact/hooks';
import { api, apiList } from '../api';
import { ConfirmDialog } from '../components/dialog';
import { toast } from '../components/toast';
import { ListStates, Page, TableHead } from '../components/ui';
import { when } from '../format';
import { useResource } from '../hooks';
import type { BracketLeg, Strategy, WebhookToken } from '../types';
import { StrategyDialog } from './strategy-dialog';

function leg(l: BracketLeg | null): string {
  if (!l) return '—';
  return 'ticks' in l ? `${l.ticks} ticks` : `@ ${l.price}`;
}

/** The signal tokens bound to a strategy, named, and what deleting it means for their alerts. */
/**
 * Deleting a strategy: refused while signal tokens use it (the API answers 409), since their
 * alerts leave out what it sets (its take-profit and stop-loss would vanish from every entry).
 */
function DeleteStrategyDialog(props: { strategy: Strategy; onClose: () => void; onDeleted: () => Promise<void> }) {
  const tokens = useResource(() => apiList<WebhookToken>('/webhook-tokens'), []);
  const using = (tokens.data ?? []).filter((t) => t.strategyId === props.strategy.id);
  const fields = (['symbol', 'qty', 'orderType', 'takeProfit', 'stopLoss'] as const).filter((f) => props.strategy[f] != null);
  const refused = using.length > 0;
  return (
    <ConfirmDialog
      title={`Delete strategy “${props.strategy.name}”?`}
      confirmLabel="Delete strategy"
      danger
      refused={refused || tokens.loading}
      dismissLabel={refused ? 'Keep strategy' : 'Cancel'}
      onClose={props.onClose}
      onConfirm={async () => {
        await api('DELETE', `/strategies/${encodeURIComponent(props.strategy.id)}`);
        toast(`Strategy “${props.strategy.name}” deleted`);
        await props.onDeleted();
      }}
    >
      {tokens.loading && <p class="muted">Looking for signal tokens that use it…</p>}
      {tokens.error && <p>Signal tokens that use it keep it: the service refuses the delete while any does.</p>}
      {!tokens.loading && !tokens.error && !refused && <p>No signal token uses it.</p>}
      {refused && (
        <div class="callout warn">
          <p>
            Used by {using.length === 1 ? 'the signal token' : `${using.length} signal tokens`} {using.map((t) => `“${t.name}”`).join(', ')}, whose alerts rely on it
            {fields.length ? ` for ${fields.join(', ')}` : ''}. Rebind {using.length === 1 ? 'it' : 'them'} to another strategy or none on the Signals page first: deleted
            now, its take-profit and stop-loss would vanish from every later entry.
          </p>
        </div>
      )}
    </ConfirmDialog>
  );
}

export function StrategiesPage() {
  const strategies = useResource(() => apiList<Strategy>('/strategies'), []);
  const [editing, setEditing] = useState<Strategy | 'new' | null>(null);
  const [deleting, setDeleting] = useState<Strategy | null>(null);
  const list = strategies.data ?? [];
  return (
    <Page
      title="Strategies"
      intro="Order defaults for alerts. Bind a strategy to a signal token and its alerts may leave out the symbol, quantity, order type and brackets."
      actions={
        <button type="button" class="btn primary" onClick={() => setEditing('new')}>
          New strategy
        </button>
      }
    >
      <ListStates res={strategies} what="strategies" empty="No strategies yet">
        Create one to give alerts defaults, e.g. “MES, 1 contract, 40-tick take-profit, 20-tick stop”.
      </ListStates>
      {list.length > 0 && (
        <div class="card">
          <table class="table">
            <TableHead caption="Your strategies" cols={['Name', 'Symbol', { label: 'Qty', num: true }, 'Type', 'Take-profit', 'Stop-loss', 'Updated', { label: 'Actions', srOnly: true }]} />
            <tbody>
              {list.map((s) => (
                <tr key={s.id}>
                  <td data-label="Name">
                    <strong>{s.name}</strong>
                    {s.description && <div class="muted small">{s.description}</div>}
                  </td>
                  <td data-label="Symbol">{s.symbol ?? '—'}</td>
                  <td data-label="Qty" class="num">
                    {s.qty ?? '—'}
                  </td>
                  <td data-label="Type">{s.orderType?.replace('_', ' ') ?? '—'}</td>
                  <td data-label="Take-profit">{leg(s.takeProfit)}</td>
                  <td data-label="Stop-loss">{leg(s.stopLoss)}</td>
                  <td data-label="Updated">{when(s.updatedAt ?? s.createdAt)}</td>
                  <td class="actions">
                    <button type="button" class="btn small secondary" onClick={() => setEditing(s)} aria-label={`Edit strategy ${s.name}`}>
                      Edit
                    </button>
                    <button type="button" class="btn small danger-outline" onClick={() => setDeleting(s)} aria-label={`Delete strategy ${s.name}`}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {editing && (
        <StrategyDialog
          strategy={editing === 'new' ? null : editing}
          onClose={() => setEditing(null)}
          onSaved={(s) => {
            toast(`Strategy “${s.name}” saved`);
            setEditing(null);
            void strategies.reload();
          }}
        />
      )}
      {deleting && <DeleteStrategyDialog strategy={deleting} onClose={() => setDeleting(null)} onDeleted={() => strategies.reload()} />}
    </Page>
  );
}
