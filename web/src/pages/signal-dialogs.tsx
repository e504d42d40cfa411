/** Dialogs of the Signals page: create or edit (rebind) a token, and its URL to paste. */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { accountLabel } from '../accounts-label';
import { CopyField } from '../components/copy';
import { Dialog } from '../components/dialog';
import { ErrorBox, Field } from '../components/ui';
import { useAction } from '../hooks';
import type { Account, Strategy, WebhookToken } from '../types';

/**
 * What the ready alert message does with a bound strategy: it leaves out the fields the strategy
 * sets, except the quantity, which Pine gives every order (exits too) and which then wins.
 */
export const ALERT_MESSAGE_HINT =
  'Paste as the alert’s message. A bound strategy fills the fields you leave out; the message’s own fields win. Its "qty" ({{strategy.order.contracts}}, the size your Pine strategy gives each order, exits included) therefore wins over a strategy’s quantity: delete that line to trade the strategy’s quantity on every alert.';

/** The URL and alert message to paste into TradingView. */
export function TokenUrlDialog(props: { title: string; token: WebhookToken; onClose: () => void; note?: string }) {
  return (
    <Dialog title={props.title} onClose={props.onClose} wide>
      {props.note && <p class="callout info">{props.note}</p>}
      {props.token.url && <CopyField label="Webhook URL" value={props.token.url} hint="In TradingView: alert → Notifications → Webhook URL." />}
      {props.token.alertMessage && (
        <CopyField label="Alert message" multiline value={props.token.alertMessage} hint={ALERT_MESSAGE_HINT} />
      )}
      <div class="dialog-actions">
        <button type="button" class="btn primary" onClick={props.onClose}>
          Done
        </button>
      </div>
    </Dialog>
  );
}

function AccountSelect(props: { id: string; accounts: Account[]; value: string; onChange: (v: string) => void }) {
  const live = props.accounts.filter((a) => a.active);
  return (
    <select id={props.id} value={props.value} required onChange={(e) => props.onChange(e.currentTarget.value)}>
      <option value="" disabled>
        Choose a live account
      </option>
      {live.map((a) => (
        <option key={a.id} value={a.id}>
          {accountLabel(props.accounts, a.id)}
        </option>
      ))}
    </select>
  );
}

function StrategySelect(props: { id: string; strategies: Strategy[]; value: string; onChange: (v: string) => void }) {
  return (
    <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
      <option value="">None — alerts carry every field</option>
      {props.strategies.map((s) => (
        <option key={s.id} value={s.id}>
          {s.name}
        </option>
      ))}
    </select>
  );
}

/**
 * Create a token, or edit one: rename, rebind to another live account (the way out of
 * "Account is inactive"), change the strategy. An edit keeps the URL.
 */
export function TokenDialog(props: { token?: WebhookToken; accounts: Account[]; strategies: Strategy[]; onClose: () => void; onSaved: (t: WebhookToken) => void }) {
  const t = props.token;
  const currentLive = t ? props.accounts.some((a) => a.id === t.accountId && a.active) : false;
  const [name, setName] = useState(t?.name ?? '');
  const [accountId, setAccountId] = useState(t ? (currentLive ? t.accountId : '') : (props.accounts.find((a) => a.active)?.id ?? ''));
  const [strategyId, setStrategyId] = useState(t?.strategyId ?? '');
  const action = useAction();
  const save = () => {
    if (!t) return api<WebhookToken>('POST', '/webhook-tokens', { name: name.trim(), accountId, ...(strategyId ? { strategyId } : {}) });
    const body: Record<string, unknown> = { name: name.trim(), strategyId: strategyId || null };
    if (accountId !== t.accountId) body['accountId'] = accountId;
    return api<WebhookToken>('PATCH', `/webhook-tokens/${encodeURIComponent(t.id)}`, body);
  };
  return (
    <Dialog title={t ? `Edit “${t.name}”` : 'New signal token'} onClose={props.onClose}>
      {t && t.accountActive === false && (
        <p class="callout warn">
          Bound to <strong>{accountLabel(props.accounts, t.accountId)}</strong>, which the broker no longer reports. Choose a live account: the next alert
          trades there. The URL does not change.
        </p>
      )}
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const saved = await action.run(save);
          if (saved) props.onSaved(saved);
        }}
      >
        <Field label="Name" id="token-name" hint={t ? undefined : 'e.g. “ES opening range”.'} error={action.error?.field('name')}>
          <input id="token-name" autoFocus value={name} maxLength={100} required onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Account" id="token-account" hint="Alerts to this URL trade this account only." error={action.error?.field('accountId')}>
          <AccountSelect id="token-account" accounts={props.accounts} value={accountId} onChange={setAccountId} />
        </Field>
        <Field label="Strategy" id="token-strategy" hint="Optional order defaults for alerts that leave fields out." error={action.error?.field('strategyId')}>
          <StrategySelect id="token-strategy" strategies={props.strategies} value={strategyId} onChange={setStrategyId} />
        </Field>
        <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title={t ? 'Not saved' : 'Token not created'} />
        <div class="dialog-actions">
          <button type="button" class="btn secondary" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="btn primary" disabled={action.busy || !name.trim() || !accountId}>
            {action.busy ? 'Saving…' : t ? 'Save' : 'Create token'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
