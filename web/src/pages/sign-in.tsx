/** Sign-in: user name and password (users come from `tradegate users add`; npm start prints the demo login). */
import { useEffect, useState } from 'preact/hooks';
import { ErrorBox, Field } from '../components/ui';
import { useAction } from '../hooks';
import { HOME, navigate, path } from '../router';
import { signIn, signedOutReason } from '../session';

const APP_PAGES = ['/accounts', '/signals', '/strategies', '/connections', '/keys', '/settings'];

export function SignInPage() {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
  const reason = signedOutReason.value;
  // The tab names this page, not the one signed out of (WCAG 2.4.2).
  useEffect(() => {
    document.title = 'Sign in · tradegate';
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    const target = APP_PAGES.includes(path.value) ? path.value : HOME;
    const ok = await action.run(async () => {
      await signIn(name.trim(), password);
      return true;
    });
    if (ok) navigate(target, { replace: true });
  };

  return (
    <main id="main" class="sign-in">
      <div class="sign-in-card">
        <div class="sign-in-brand">
          <span class="brand-mark large" aria-hidden="true" />
          <span>tradegate</span>
        </div>
        <h1>Sign in</h1>
        {reason && (
          <p class="callout info" role="status">
            {reason}
          </p>
        )}
        <form onSubmit={submit} noValidate>
          <Field label="User name" id="sign-in-name" error={action.error?.field('name')}>
            <input id="sign-in-name" name="username" autoComplete="username" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <Field label="Password" id="sign-in-password" error={action.error?.field('password')}>
            <input
              id="sign-in-password"
              name="password"
              type="password"
              autoComplete="current-password"
              required
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          </Field>
          <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Not signed in" />
          <button type="submit" class="btn primary block" disabled={action.busy || !name || !password}>
            {action.busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
        <p class="muted small">
          First start? <code>npm start</code> prints the demo login (user <code>demo</code>) in the terminal. More users:{' '}
          <code>tradegate users add NAME --password-stdin</code>.
        </p>
      </div>
    </main>
  );
}
