/** Connections: each broker login's status live from the health stream, with its recent changes. */
import { useState } from 'preact/hooks';
import { api, apiList } from '../api';
import { ConfirmDialog } from '../components/dialog';
import { toast } from '../components/toast';
import { Badge, ErrorBox, ListStates, Page, StatusBadge } from '../components/ui';
import { ago, brokerLabel, fullTime, when } from '../format';
import { health, streamLost, streamState, type ConnectionHealth } from '../health';
import { useAction, useNow, usePolling, useResource } from '../hooks';
import type { Account, Connection } from '../types';
import { AddPaperDialog, AddTradovateDialog } from './connection-dialogs';

const REASONS: Record<string, string> = {
  connect: 'connected',
  disconnect: 'connection lost',
  reconnect: 'reconnected',
  'auth-expired': 'broker login expired',
  'fatal-error': 'stopped after an error',
  disabled: 'disabled',
};

/** What happened, in words; CONNECTING means the first connection has not succeeded yet. */
function reasonText(status: string, reason: string | null): string {
  if (status === 'CONNECTING') return 'not connected yet';
  return reason ? (REASONS[reason] ?? reason) : '';
}

function live(c: Connection, h: ConnectionHealth | undefined) {
  if (h) return { status: h.status, since: h.ts as number | string | null, reason: h.reason, detail: h.detail };
  return { status: c.status, since: c.since, reason: c.reason, detail: c.detail };
}

function ConnectionCard(props: { connection: Connection; accounts: Account[]; onDelete: () => void }) {
  const c = props.connection;
  const h = health.value.get(c.id);
  const now = useNow(5_000);
  const s = live(c, h);
  const accounts = props.accounts.filter((a) => a.connectionId === c.id);
  const headingId = `conn-${c.id}`;
  // A FAILED connection stopped retrying (its broker refused the login): one new login, on request.
  const reconnect = useAction();
  return (
    <article class="card connection" aria-labelledby={headingId} data-status={s.status}>
      <div class="card-head">
        <h2 id={headingId}>{c.name ?? c.id}</h2>
        <Badge tone={c.environment === 'live' ? 'danger' : c.environment === 'demo' ? 'info' : 'neutral'}>{brokerLabel(c.broker, c.environment)}</Badge>
      </div>
      <div class="status-line" aria-live="polite">
        <StatusBadge status={s.status} />
        <span>
          {reasonText(s.status, s.reason) ? `${reasonText(s.status, s.reason)} · ` : ''}
          <span title={fullTime(s.since)}>since {when(s.since)}</span> <span class="muted">({ago(s.since, now)})</span>
        </span>
      </div>
      {s.detail && <p class="muted small">{s.detail}</p>}
      <dl class="meta">
        <div>
          <dt>Accounts</dt>
          <dd>{accounts.length ? accounts.map((a) => `${a.name} (${a.id})${a.active ? '' : ' — inactive'}`).join(', ') : s.status === 'CONNECTED' ? 'None reported' : 'Not reported yet'}</dd>
        </div>
        <div>
          <dt>Id</dt>
          <dd>
            <code>{c.id}</code>
          </dd>
        </div>
      </dl>
      {h && h.history.length > 0 && (
        <details class="history" open>
          <summary>Recent changes</summary>
          <ol class="timeline" aria-label={`Status changes of ${c.name ?? c.id}, newest first`}>
            {h.history.map((x) => (
              <li key={`${x.ts}-${x.status}`}>
                <span class="muted" title={fullTime(x.ts)}>
                  {when(x.ts)}
                </span>{' '}
                <StatusBadge status={x.status} /> {reasonText(x.status, x.reason)}
              </li>
            ))}
          </ol>
        </details>
      )}
      <ErrorBox error={reconnect.error} title="Reconnect refused" />
      <div class="card-foot">
        {s.status === 'FAILED' && (
          <button
            type="button"
            class="btn small secondary"
            disabled={reconnect.busy}
            aria-label={`Reconnect ${c.name ?? c.id}`}
            onClick={() =>
              void reconnect.run(async () => {
                await api('POST', `/connections/${encodeURIComponent(c.id)}/reconnect`);
                toast(`“${c.name ?? c.id}” is logging in again`);
              })
            }
          >
            Reconnect
          </button>
        )}
        <button type="button" class="btn small danger-outline" onClick={props.onDelete} aria-label={`Delete connection ${c.name ?? c.id}`}>
          Delete
        </button>
      </div>
    </article>
  );
}

export function ConnectionsPage() {
  const connections = useResource(() => apiList<Connection>('/connections'), []);
  const accounts = useResource(() => apiList<Account>('/accounts'), []);
  // Statuses come live from the stream; accounts appear once a connection syncs.
  usePolling(() => Promise.all([connections.reload(), accounts.reload()]), 15_000);
  const [dialog, setDialog] = useState<'paper' | 'tradovate' | { remove: Connection } | null>(null);
  const list = connections.data ?? [];
  const stream = streamState.value;
  const added = (c: Connection) => {
    setDialog(null);
    toast(`“${c.name ?? c.id}” added: ${c.status}`);
    void connections.reload();
    setTimeout(() => void accounts.reload(), 1_500);
  };

  return (
    <Page
      title="Connections"
      intro="Broker logins. Each status updates live; a dropped connection reconnects by itself and resynchronises orders and positions."
      actions={
        <>
          <button type="button" class="btn secondary" onClick={() => setDialog('paper')}>
            Add paper
          </button>
          <button type="button" class="btn primary" onClick={() => setDialog('tradovate')}>
            Add Tradovate
          </button>
        </>
      }
    >
      {streamLost.value ? (
        <p class="callout danger" role="status">
          Lost contact with tradegate — retrying. The statuses below are the last known, not the current ones.
        </p>
      ) : (
        <p class={`stream-state ${stream}`} role="status">
          <span class="dot" aria-hidden="true" />
          {stream === 'open' ? 'Live updates on' : stream === 'connecting' ? 'Connecting to live updates…' : 'Live updates unavailable — retrying. Statuses below may be stale.'}
        </p>
      )}
      <ListStates res={connections} what="connections" empty="No connections yet">
        Add a paper connection to try things safely, or a Tradovate demo or live login.
      </ListStates>
      <div class="grid">
        {list.map((c) => (
          <ConnectionCard key={c.id} connection={c} accounts={accounts.data ?? []} onDelete={() => setDialog({ remove: c })} />
        ))}
      </div>
      {dialog === 'paper' && <AddPaperDialog onClose={() => setDialog(null)} onAdded={added} />}
      {dialog === 'tradovate' && <AddTradovateDialog onClose={() => setDialog(null)} onAdded={added} />}
      {dialog && typeof dialog === 'object' && (
        <ConfirmDialog
          title={`Delete “${dialog.remove.name ?? dialog.remove.id}”?`}
          confirmLabel="Delete connection"
          danger
          onClose={() => setDialog(null)}
          onConfirm={async () => {
            await api('DELETE', `/connections/${encodeURIComponent(dialog.remove.id)}`);
            toast('Connection deleted');
            await Promise.all([connections.reload(), accounts.reload()]);
          }}
        >
          <p>
            The connection stops and its accounts disappear from tradegate. <strong>Working orders and positions at the broker are not touched</strong> — flatten the
            accounts first if you want them closed. Signal tokens bound to its accounts start answering 403 Account is inactive.
          </p>
        </ConfirmDialog>
      )}
    </Page>
  );
}
