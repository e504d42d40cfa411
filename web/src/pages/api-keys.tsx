/** API Keys: list, create (the key is shown once), revoke (effective on the key's next request). */
import { useState } from 'preact/hooks';
import { api, apiList } from '../api';
import { BASE } from '../base';
import { CopyField } from '../components/copy';
import { ConfirmDialog, Dialog } from '../components/dialog';
import { toast } from '../components/toast';
import { Badge, ErrorBox, Field, ListStates, Page, TableHead } from '../components/ui';
import { ago, fullTime, when } from '../format';
import { useAction, useResource } from '../hooks';
import type { ApiKey, Scope } from '../types';

type Created = ApiKey & { key: string };

function CreateKeyDialog(props: { onClose: () => void; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Record<Scope, boolean>>({ read: true, trade: true });
  const [created, setCreated] = useState<Created | null>(null);
  const action = useAction();
  const chosen = (Object.keys(scopes) as Scope[]).filter((s) => scopes[s]);

  if (created) {
    return (
      <Dialog title="Copy your new key" onClose={props.onClose} wide explicitClose>
        <p class="callout warn">
          <strong>This key will not be shown again.</strong> Copy it now and keep it somewhere safe. If you lose it, revoke it and create another.
        </p>
        <CopyField label="API key" value={created.key} />
        <CopyField
          label="Try it"
          multiline
          value={`curl -s ${location.origin}${BASE}/api/v1/me \\\n  -H 'X-API-Key: ${created.key}'`}
          hint="Prints the user and key this request was made with."
        />
        <div class="dialog-actions">
          <button type="button" class="btn primary" onClick={props.onClose}>
            I have copied it
          </button>
        </div>
      </Dialog>
    );
  }

  return (
    <Dialog title="Create API key" onClose={props.onClose}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const res = await action.run(() => api<Created>('POST', '/api-keys', { name: name.trim(), scopes: chosen }));
          if (res) {
            setCreated(res);
            props.onCreated();
          }
        }}
      >
        <Field label="Name" id="key-name" hint="What uses it, e.g. “backtest runner”." error={action.error?.field('name')}>
          <input id="key-name" autoFocus value={name} maxLength={100} required onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <fieldset class="field">
          <legend>Scopes</legend>
          <label class="check">
            <input type="checkbox" checked={scopes.read} onChange={(e) => setScopes({ ...scopes, read: e.currentTarget.checked })} />
            <span>
              <strong>read</strong> — accounts, positions, orders, history, strategies, signals, the health stream
            </span>
          </label>
          <label class="check">
            <input type="checkbox" checked={scopes.trade} onChange={(e) => setScopes({ ...scopes, trade: e.currentTarget.checked })} />
            <span>
              <strong>trade</strong> — place and cancel orders, flatten, change strategies and signals
            </span>
          </label>
          {action.error?.field('scopes') && <p class="field-error">{action.error.field('scopes')}</p>}
        </fieldset>
        <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Key not created" />
        <div class="dialog-actions">
          <button type="button" class="btn secondary" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="btn primary" disabled={action.busy || !name.trim() || chosen.length === 0}>
            {action.busy ? 'Creating…' : 'Create key'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

export function ApiKeysPage() {
  const keys = useResource(() => apiList<ApiKey>('/api-keys'), []);
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const list = keys.data ?? [];

  return (
    <Page
      title="API Keys"
      intro={
        <>
          Scripts and tools call the API with <code>X-API-Key</code>. A key is shown once, when it is created; revoking it stops it on its next request.
        </>
      }
      actions={
        <button type="button" class="btn primary" onClick={() => setCreating(true)}>
          Create key
        </button>
      }
    >
      <ListStates res={keys} what="keys" empty="No API keys yet">
        Create one to call the API from a script, a bot or the command line.
      </ListStates>
      {list.length > 0 && (
        <div class="card">
          <table class="table">
            <TableHead caption="Your API keys" cols={['Name', 'Scopes', 'Key', 'Created', 'Last used', 'Status', { label: 'Actions', srOnly: true }]} />
            <tbody>
              {list.map((k) => (
                <tr key={k.id} class={k.revokedAt ? 'dim' : ''}>
                  <td data-label="Name">
                    <strong>{k.name}</strong>
                  </td>
                  <td data-label="Scopes">
                    <span class="chips">
                      {k.scopes.map((s) => (
                        <Badge key={s} tone={s === 'trade' ? 'warn' : 'info'}>
                          {s}
                        </Badge>
                      ))}
                    </span>
                  </td>
                  <td data-label="Key">
                    <code>{k.prefix}_…</code>
                  </td>
                  <td data-label="Created" title={fullTime(k.createdAt)}>
                    {when(k.createdAt)}
                  </td>
                  <td data-label="Last used" title={fullTime(k.lastUsedAt)}>
                    {k.lastUsedAt ? ago(k.lastUsedAt) : 'Never'}
                  </td>
                  <td data-label="Status">
                    {k.revokedAt ? (
                      <Badge tone="neutral" title={fullTime(k.revokedAt)}>
                        Revoked {when(k.revokedAt)}
                      </Badge>
                    ) : (
                      <Badge tone="ok">Active</Badge>
                    )}
                  </td>
                  <td class="actions">
                    {!k.revokedAt && (
                      <button type="button" class="btn small danger-outline" onClick={() => setRevoking(k)} aria-label={`Revoke key ${k.name}`}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {creating && <CreateKeyDialog onClose={() => setCreating(false)} onCreated={() => void keys.reload()} />}
      {revoking && (
        <ConfirmDialog
          title={`Revoke “${revoking.name}”?`}
          confirmLabel="Revoke key"
          danger
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api('DELETE', `/api-keys/${encodeURIComponent(revoking.id)}`);
            toast(`Key “${revoking.name}” revoked`);
            await keys.reload();
          }}
        >
          <p>
            From its next request on, <code>{revoking.prefix}_…</code> gets <strong>401 Unauthenticated</strong>. Anything still using it stops working.
            This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </Page>
  );
}
