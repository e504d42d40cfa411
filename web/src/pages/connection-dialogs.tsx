/** Dialogs of the Connections page: add a paper connection, add a Tradovate demo/live connection. */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog } from '../components/dialog';
import { ErrorBox, Field } from '../components/ui';
import { useAction } from '../hooks';
import type { Connection } from '../types';

function Actions(props: { busy: boolean; disabled: boolean; label: string; onCancel: () => void }) {
  return (
    <div class="dialog-actions">
      <button type="button" class="btn secondary" onClick={props.onCancel}>
        Cancel
      </button>
      <button type="submit" class="btn primary" disabled={props.busy || props.disabled}>
        {props.busy ? 'Adding…' : props.label}
      </button>
    </div>
  );
}

/** A connection to the embedded paper broker with the named accounts. */
export function AddPaperDialog(props: { onClose: () => void; onAdded: (c: Connection) => void }) {
  const [name, setName] = useState('Paper');
  const [accounts, setAccounts] = useState('PAPER1');
  const action = useAction();
  const names = accounts
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return (
    <Dialog title="Add paper connection" onClose={props.onClose}>
      <p class="muted">Simulated accounts on the embedded paper broker: real order handling, no money.</p>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const c = await action.run(() => api<Connection>('POST', '/connections', { name: name.trim(), accounts: names.map((n) => ({ name: n })) }));
          if (c) props.onAdded(c);
        }}
      >
        <Field label="Name" id="paper-name" error={action.error?.field('name')}>
          <input id="paper-name" autoFocus value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Accounts" id="paper-accounts" hint="Comma-separated account names, e.g. PAPER1, PAPER2." error={action.error?.errors.find((f) => f.path.startsWith('accounts'))?.message}>
          <input id="paper-accounts" value={accounts} onInput={(e) => setAccounts(e.currentTarget.value)} />
        </Field>
        <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Connection not added" />
        <Actions busy={action.busy} disabled={!name.trim() || names.length === 0} label="Add paper connection" onCancel={props.onClose} />
      </form>
    </Dialog>
  );
}

/** A Tradovate login (demo or live); the password is stored sealed and never shown again. */
export function AddTradovateDialog(props: { onClose: () => void; onAdded: (c: Connection) => void }) {
  const [environment, setEnvironment] = useState<'demo' | 'live'>('demo');
  const [name, setName] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [cid, setCid] = useState('');
  const [sec, setSec] = useState('');
  const action = useAction();
  return (
    <Dialog title="Add Tradovate connection" onClose={props.onClose}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const body: Record<string, unknown> = { environment, username: username.trim(), password };
          if (name.trim()) body['name'] = name.trim();
          if (cid.trim() || sec) Object.assign(body, { cid: cid.trim(), sec });
          const c = await action.run(() => api<Connection>('POST', '/connections/tradovate', body));
          if (c) props.onAdded(c);
        }}
      >
        <fieldset class="field">
          <legend>Environment</legend>
          <div class="segmented">
            {(['demo', 'live'] as const).map((env) => (
              <label key={env} class={`seg${environment === env ? ' on' : ''}`}>
                <input type="radio" name="environment" value={env} checked={environment === env} onChange={() => setEnvironment(env)} />
                {env === 'demo' ? 'Demo' : 'Live'}
              </label>
            ))}
          </div>
        </fieldset>
        {environment === 'live' && (
          <p class="callout warn">
            <strong>Live:</strong> orders through this connection trade real money.
          </p>
        )}
        <Field label="Name" id="tv-name" hint="Optional, e.g. “Apex eval 1”." error={action.error?.field('name')}>
          <input id="tv-name" autoFocus value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Tradovate user name" id="tv-user" error={action.error?.field('username')}>
          <input id="tv-user" autoComplete="off" value={username} required onInput={(e) => setUsername(e.currentTarget.value)} />
        </Field>
        <Field label="Tradovate password" id="tv-password" hint="Stored encrypted on this server; never shown again." error={action.error?.field('password')}>
          <input id="tv-password" type="password" autoComplete="new-password" value={password} required onInput={(e) => setPassword(e.currentTarget.value)} />
        </Field>
        <details class="advanced">
          <summary>API client id and secret (optional)</summary>
          <Field label="cid" id="tv-cid" error={action.error?.field('cid')}>
            <input id="tv-cid" inputMode="numeric" value={cid} onInput={(e) => setCid(e.currentTarget.value)} />
          </Field>
          <Field label="sec" id="tv-sec" error={action.error?.field('sec')}>
            <input id="tv-sec" type="password" autoComplete="off" value={sec} onInput={(e) => setSec(e.currentTarget.value)} />
          </Field>
        </details>
        <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Connection not added" />
        <Actions busy={action.busy} disabled={!username.trim() || !password} label={`Add ${environment} connection`} onCancel={props.onClose} />
      </form>
    </Dialog>
  );
}
