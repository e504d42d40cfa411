/**
 * Signals: webhook tokens (one secret URL per account), their recent alerts live from the
 * journal, and a flag naming the account when the broker stops reporting it.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, apiList, type ApiError } from '../api';
import { accountLabel } from '../accounts-label';
import { CopyField } from '../components/copy';
import { ConfirmDialog } from '../components/dialog';
import { toast } from '../components/toast';
import { Badge, ErrorBox, ListStates, Loading, Page, TableHead } from '../components/ui';
import { ago, fullTime, when } from '../format';
import { asApiError, useNow, usePolling, useResource } from '../hooks';
import { health } from '../health';
import type { Account, Alert, Strategy, WebhookToken } from '../types';
import { ALERT_MESSAGE_HINT, TokenDialog, TokenUrlDialog } from './signal-dialogs';

const ALERTS_POLL_MS = 4_000;

/** The answer's warnings (a reversal's close, a size cap, fields ignored): what the trader should read. */
function Warnings(props: { alert: Alert }) {
  const list = props.alert.warnings ?? [];
  if (list.length === 0) return null;
  return (
    <ul class="small alert-warnings">
      {list.map((w, i) => (
        <li key={i}>{w}</li>
      ))}
    </ul>
  );
}

const positionsText = (n: number) => `${n} position${n === 1 ? '' : 's'}`;

function Outcome(props: { alert: Alert }) {
  const a = props.alert;
  const late = a.lateOutcomeOf && a.detail ? <span class="small"> {a.detail}</span> : null;
  if (a.status === 201) {
    // A reversal closed first, or the size capped it: say what the order was for.
    const opened = a.orderQty !== null && a.orderQty !== undefined && String(a.orderQty) !== a.qty ? ` for ${a.orderQty}` : '';
    return (
      <span class="outcome">
        {a.flattened && <Badge tone="ok">Closed {positionsText(a.flattened.positions)}, then</Badge>}
        <Badge tone={a.lateOutcomeOf ? 'warn' : 'ok'}>
          Order{opened} {a.orderStatus ?? 'placed'}
        </Badge>
        {late}
        <Warnings alert={a} />
      </span>
    );
  }
  if (a.status === 200) {
    return (
      <span class="outcome">
        <Badge tone="ok">{a.flattened ? `Flattened (${positionsText(a.flattened.positions)})` : 'Nothing to do'}</Badge>
        <Warnings alert={a} />
      </span>
    );
  }
  return (
    <span class="outcome">
      <Badge tone="danger">
        {a.status} {a.code}
      </Badge>
      {a.detail && <span class="small">{a.detail}</span>}
    </span>
  );
}

interface AlertsPage {
  data: Alert[];
  nextCursor: string | null;
}

/** Alerts shown: the newest page as last polled, then every alert seen or paged in since, and where older ones continue. */
interface Shown {
  list: Alert[];
  older: string | null;
}

const alertKey = (a: Alert) => a.id;

/**
 * Folds a poll's newest page into what is shown. Alerts that fell off the newest page stay (they
 * are older than all of it); when the page shares no alert with what is shown and more lie
 * below it, alerts were missed between polls (a hidden tab stops polling): the view starts over.
 */
function foldNewest(shown: Shown | null, page: AlertsPage): Shown {
  if (!shown || shown.list.length === 0) return { list: page.data, older: page.nextCursor };
  const onPage = new Set(page.data.map(alertKey));
  const overlaps = shown.list.some((a) => onPage.has(alertKey(a)));
  if (!overlaps && page.nextCursor !== null) return { list: page.data, older: page.nextCursor };
  return { list: [...page.data, ...shown.list.filter((a) => !onPage.has(alertKey(a)))], older: shown.older };
}

function RecentAlerts(props: { token: WebhookToken }) {
  const path = `/webhook-tokens/${encodeURIComponent(props.token.id)}/alerts?limit=20`;
  const newest = useResource(() => api<AlertsPage>('GET', path), [props.token.id]);
  usePolling(newest.reload, ALERTS_POLL_MS);
  const [shown, setShown] = useState<Shown | null>(null);
  const [older, setOlder] = useState<{ loading: boolean; error?: ApiError }>({ loading: false });
  useEffect(() => setShown(null), [props.token.id]);
  useEffect(() => {
    const page = newest.data;
    if (page) setShown((s) => foldNewest(s, page));
  }, [newest.data]);
  const loadOlder = async () => {
    const cursor = shown?.older;
    if (!cursor) return;
    setOlder({ loading: true });
    try {
      const page = await api<AlertsPage>('GET', `${path}&cursor=${encodeURIComponent(cursor)}`);
      setShown((s) => {
        if (!s || s.older !== cursor) return s;
        const have = new Set(s.list.map(alertKey));
        return { list: [...s.list, ...page.data.filter((a) => !have.has(alertKey(a)))], older: page.nextCursor };
      });
      setOlder({ loading: false });
    } catch (err) {
      setOlder({ loading: false, error: asApiError(err) });
    }
  };
  const list = shown?.list ?? [];
  return (
    <section class="alerts" aria-label={`Recent alerts of ${props.token.name}`}>
      <h3>
        Recent alerts <span class="live-dot" title="Updates every few seconds" aria-hidden="true" />
      </h3>
      {newest.loading && <Loading what="alerts" />}
      <ErrorBox error={newest.error} retry={newest.reload} title="Alerts could not be loaded" />
      {!newest.loading && !newest.error && list.length === 0 && <p class="muted">No alerts yet. They appear here within seconds of arriving.</p>}
      {list.length > 0 && (
        <table class="table compact">
          <TableHead caption="Recent alerts, newest first" cols={['Time', 'Action', 'Symbol', { label: 'Qty', num: true }, 'Outcome', 'Order']} />
          <tbody>
            {list.map((a) => (
              <tr key={a.id}>
                <td data-label="Time" class="nowrap" title={fullTime(a.at)}>
                  {when(a.at)}
                </td>
                <td data-label="Action">{a.action ?? '—'}</td>
                <td data-label="Symbol">{a.symbol ?? '—'}</td>
                <td data-label="Qty" class="num">
                  {a.qty ?? '—'}
                </td>
                <td data-label="Outcome">
                  <Outcome alert={a} />
                </td>
                <td data-label="Order" class="nowrap">
                  {a.orderId ? <code>{a.orderId}</code> : '—'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorBox error={older.error} retry={() => void loadOlder()} title="Older alerts could not be loaded" />
      {shown?.older && (
        <button type="button" class="btn" onClick={() => void loadOlder()} disabled={older.loading}>
          {older.loading ? 'Loading older alerts…' : 'Older alerts'}
        </button>
      )}
    </section>
  );
}

/**
 * `urlVersion` changes when this tab rotates the token's URL (a rotation keeps its id), and the
 * polled list's `rotatedAt` when anything else did (another tab, the API): the URL is read again
 * either way (web probe: a URL rotated elsewhere stayed on the card, and alerts sent to it got 404).
 */
function TokenDetails(props: { token: WebhookToken; urlVersion: number; ownRotatedAt: string | null }) {
  const rotatedAt = props.token.rotatedAt ?? null;
  // Read fresh: the URL changed since any read of it the tabs share.
  const full = useResource(() => api<WebhookToken>('GET', `/webhook-tokens/${encodeURIComponent(props.token.id)}`, undefined, undefined, { fresh: true }), [props.token.id, props.urlVersion, rotatedAt]);
  // Rotated since this card first read its URL, and not from here: say so where the URL is copied from.
  const [firstRotatedAt] = useState(rotatedAt);
  const rotatedElsewhere = rotatedAt !== null && rotatedAt !== firstRotatedAt && rotatedAt !== props.ownRotatedAt;
  return (
    <div class="token-details">
      {rotatedElsewhere && (
        <p class="callout warn" role="status">
          This URL was rotated {when(rotatedAt)} (in another tab or through the API): the one copied before no longer works. Paste the URL below into your TradingView alerts.
        </p>
      )}
      {full.loading && <Loading what="URL" />}
      <ErrorBox error={full.error} retry={full.reload} title="URL could not be loaded" />
      {full.data?.url && <CopyField label="Webhook URL" value={full.data.url} hint="Anyone with this URL can trade this account: keep it private, rotate it if it leaks." />}
      {full.data?.alertMessage && (
        <details class="template">
          <summary>TradingView alert message</summary>
          <CopyField label="Alert message" multiline value={full.data.alertMessage} hint={ALERT_MESSAGE_HINT} />
        </details>
      )}
      <RecentAlerts token={props.token} />
    </div>
  );
}

function TokenCard(props: {
  token: WebhookToken;
  accounts: Account[];
  strategies: Strategy[];
  open: boolean;
  urlVersion: number;
  /** When this tab last rotated the token's URL (its own rotation is no news to it). */
  ownRotatedAt: string | null;
  onToggle: () => void;
  onEdit: () => void;
  onRotate: () => void;
  onDelete: () => void;
}) {
  const t = props.token;
  const strategy = props.strategies.find((s) => s.id === t.strategyId);
  const headingId = `token-${t.id}`;
  const now = useNow();
  // Alerts are refused (503) while the account's connection is not CONNECTED: never "Receiving" then (web probe).
  const connectionId = props.accounts.find((a) => a.id === t.accountId)?.connectionId;
  const status = connectionId ? health.value.get(connectionId)?.status : undefined;
  const down = status !== undefined && status !== 'CONNECTED';
  return (
    <article class={`card token${t.accountActive === false ? ' flagged' : ''}`} aria-labelledby={headingId}>
      <div class="card-head">
        <h2 id={headingId}>{t.name}</h2>
        {t.accountActive === null ? (
          <Badge tone="warn">Waiting for the broker</Badge>
        ) : t.accountActive && down ? (
          <Badge tone="warn">Connection {status}: alerts refused</Badge>
        ) : t.accountActive ? (
          <Badge tone="ok">Receiving</Badge>
        ) : (
          <Badge tone="danger">Account inactive</Badge>
        )}
        <div class="card-actions">
          <button type="button" class="btn small secondary" onClick={props.onEdit} aria-label={`Edit ${t.name}`}>
            Edit
          </button>
          <button type="button" class="btn small secondary" onClick={props.onRotate} aria-label={`Rotate URL of ${t.name}`}>
            Rotate URL
          </button>
          <button type="button" class="btn small danger-outline" onClick={props.onDelete} aria-label={`Delete ${t.name}`}>
            Delete
          </button>
        </div>
      </div>
      {t.accountActive === true && down && (
        <p class="callout warn" role="status">
          The connection of <strong>{accountLabel(props.accounts, t.accountId)}</strong> is {status}: alerts are answered 503 until it is CONNECTED again, and
          TradingView does not resend them.
        </p>
      )}
      {t.accountActive === null && (
        <p class="callout warn" role="status">
          The connection of <strong>{accountLabel(props.accounts, t.accountId)}</strong> has not reported its accounts yet (starting or reconnecting):
          alerts are answered 503 until it has.
        </p>
      )}
      {t.accountActive === false && (
        <div class="callout danger" role="alert">
          <p>
            <strong>{accountLabel(props.accounts, t.accountId)}</strong> is no longer reported by the broker — alerts are rejected with{' '}
            <strong>403 Account is inactive</strong>.
          </p>
          <button type="button" class="btn small primary" onClick={props.onEdit}>
            Rebind to a live account
          </button>
        </div>
      )}
      <dl class="meta">
        <div>
          <dt>Account</dt>
          <dd>{accountLabel(props.accounts, t.accountId)}</dd>
        </div>
        <div>
          <dt>Strategy</dt>
          <dd>{strategy ? strategy.name : t.strategyId ? 'Unknown strategy' : 'None'}</dd>
        </div>
        <div>
          <dt>Last alert</dt>
          <dd title={fullTime(t.lastUsedAt)}>{t.lastUsedAt ? ago(t.lastUsedAt, now) : 'Never'}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd title={fullTime(t.createdAt)}>{when(t.createdAt)}</dd>
        </div>
      </dl>
      <button type="button" class="btn small ghost disclosure" aria-expanded={props.open} onClick={props.onToggle}>
        {props.open ? 'Hide URL and alerts' : 'Show URL and alerts'}
      </button>
      {props.open && <TokenDetails token={t} urlVersion={props.urlVersion} ownRotatedAt={props.ownRotatedAt} />}
    </article>
  );
}

export function SignalsPage() {
  const tokens = useResource(() => apiList<WebhookToken>('/webhook-tokens'), []);
  const accounts = useResource(() => apiList<Account>('/accounts'), []);
  const strategies = useResource(() => apiList<Strategy>('/strategies'), []);
  // The flag follows the broker: re-read tokens and accounts while the page is open.
  usePolling(() => Promise.all([tokens.reload(), accounts.reload()]), 5_000);
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const [rotations, setRotations] = useState<Record<string, number>>({});
  const [ownRotations, setOwnRotations] = useState<Record<string, string | null>>({});
  const [dialog, setDialog] = useState<
    { kind: 'create' } | { kind: 'edit' | 'rotate' | 'delete'; token: WebhookToken } | { kind: 'url'; token: WebhookToken; title: string; note?: string } | null
  >(null);
  const list = tokens.data ?? [];
  const accs = accounts.data ?? [];
  const strats = strategies.data ?? [];
  const close = () => setDialog(null);
  const isOpen = (id: string) => open[id] ?? list.length <= 2;

  return (
    <Page
      title="Signals"
      intro="Each signal token is a secret webhook URL bound to one account. Paste it into a TradingView alert; every alert and its outcome shows up here (a repeat delivery of one, same id and body, is answered as the first and not listed again)."
      actions={
        <button type="button" class="btn primary" onClick={() => setDialog({ kind: 'create' })} disabled={!accounts.data}>
          New token
        </button>
      }
    >
      <ListStates res={tokens} what="signal tokens" empty="No signal tokens yet">
        Create a token for an account, then paste its URL into a TradingView alert. {accs.length === 0 && 'First add a connection so there is an account to trade.'}
      </ListStates>
      <ErrorBox error={accounts.error} retry={accounts.reload} title="Accounts could not be loaded" />
      <div class="stack">
        {list.map((t) => (
          <TokenCard
            key={t.id}
            token={t}
            accounts={accs}
            strategies={strats}
            open={isOpen(t.id)}
            urlVersion={rotations[t.id] ?? 0}
            ownRotatedAt={ownRotations[t.id] ?? null}
            onToggle={() => setOpen({ ...open, [t.id]: !isOpen(t.id) })}
            onEdit={() => setDialog({ kind: 'edit', token: t })}
            onRotate={() => setDialog({ kind: 'rotate', token: t })}
            onDelete={() => setDialog({ kind: 'delete', token: t })}
          />
        ))}
      </div>

      {dialog?.kind === 'create' && (
        <TokenDialog
          accounts={accs}
          strategies={strats}
          onClose={close}
          onSaved={(t) => {
            void tokens.reload();
            setDialog({ kind: 'url', token: t, title: `“${t.name}” is ready` });
          }}
        />
      )}
      {dialog?.kind === 'url' && <TokenUrlDialog title={dialog.title} token={dialog.token} onClose={close} {...(dialog.note ? { note: dialog.note } : {})} />}
      {dialog?.kind === 'edit' && (
        <TokenDialog
          token={dialog.token}
          accounts={accs}
          strategies={strats}
          onClose={close}
          onSaved={() => {
            toast(`“${dialog.token.name}” saved`);
            close();
            void tokens.reload();
          }}
        />
      )}
      {dialog?.kind === 'rotate' && (
        <ConfirmDialog
          title={`Rotate the URL of “${dialog.token.name}”?`}
          confirmLabel="Rotate URL"
          danger
          onClose={close}
          onConfirm={async () => {
            const t = await api<WebhookToken>('POST', `/webhook-tokens/${encodeURIComponent(dialog.token.id)}/rotate`);
            setRotations((r) => ({ ...r, [t.id]: (r[t.id] ?? 0) + 1 }));
            setOwnRotations((r) => ({ ...r, [t.id]: t.rotatedAt ?? null }));
            void tokens.reload();
            setTimeout(() => setDialog({ kind: 'url', token: t, title: 'New webhook URL', note: 'The old URL no longer works. Update every alert that used it.' }), 0);
          }}
        >
          <p>The current URL stops working at once: alerts still sent to it get 404. You get a new URL to paste into your alerts; account and strategy stay.</p>
        </ConfirmDialog>
      )}
      {dialog?.kind === 'delete' && (
        <ConfirmDialog
          title={`Delete “${dialog.token.name}”?`}
          confirmLabel="Delete token"
          danger
          onClose={close}
          onConfirm={async () => {
            await api('DELETE', `/webhook-tokens/${encodeURIComponent(dialog.token.id)}`);
            toast(`“${dialog.token.name}” deleted`);
            await tokens.reload();
          }}
        >
          <p>Its URL stops working at once; alerts sent to it get 404. Its alert history is kept in the journal.</p>
        </ConfirmDialog>
      )}
    </Page>
  );
}
