/** Settings: the session and the password (changing it signs out every other browser). */
import { useState } from 'preact/hooks';
import { toast } from '../components/toast';
import { ErrorBox, Field, Page } from '../components/ui';
import { fullTime } from '../format';
import { useAction } from '../hooks';
import { changePassword, session } from '../session';

const MIN_LENGTH = 12;

export function SettingsPage() {
  const s = session.value;
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const action = useAction();
  const mismatch = repeat !== '' && repeat !== next;
  return (
    <Page title="Settings" intro={`Signed in as ${s?.user.name ?? ''}.`}>
      <section class="card narrow" aria-labelledby="session-title">
        <h2 id="session-title">This session</h2>
        <p>
          Ends after {Math.round((s?.idleTimeoutSeconds ?? 0) / 60)} minutes without activity, and at the latest on <strong>{fullTime(s?.expiresAt)}</strong>.
        </p>
      </section>
      <section class="card narrow" aria-labelledby="password-title">
        <h2 id="password-title">Change password</h2>
        <p class="muted">Every other signed-in browser is signed out; this one stays signed in.</p>
        <form
          noValidate
          onSubmit={async (e) => {
            e.preventDefault();
            const ok = await action.run(async () => {
              await changePassword(current, next);
              return true;
            });
            if (ok) {
              setCurrent('');
              setNext('');
              setRepeat('');
              toast('Password changed; other sessions signed out');
            }
          }}
        >
          {/* Lets password managers tie the new password to this user. */}
          <input type="text" name="username" autoComplete="username" value={s?.user.name ?? ''} readOnly hidden />
          <Field label="Current password" id="pw-current" error={action.error?.field('currentPassword')}>
            <input id="pw-current" type="password" autoComplete="current-password" value={current} onInput={(e) => setCurrent(e.currentTarget.value)} />
          </Field>
          <Field label="New password" id="pw-new" hint={`At least ${MIN_LENGTH} characters.`} error={action.error?.field('newPassword')}>
            <input id="pw-new" type="password" autoComplete="new-password" value={next} onInput={(e) => setNext(e.currentTarget.value)} />
          </Field>
          <Field label="Repeat new password" id="pw-repeat" error={mismatch ? 'Does not match the new password' : undefined}>
            <input id="pw-repeat" type="password" autoComplete="new-password" value={repeat} onInput={(e) => setRepeat(e.currentTarget.value)} />
          </Field>
          <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Password not changed" />
          <button type="submit" class="btn primary" disabled={action.busy || !current || next.length < MIN_LENGTH || next !== repeat}>
            {action.busy ? 'Changing…' : 'Change password'}
          </button>
        </form>
      </section>
    </Page>
  );
}
