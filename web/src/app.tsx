/** The shell: sign-in gate, header with navigation and live health, and the current page. */
import { useEffect } from 'preact/hooks';
import { Toasts } from './components/toast';
import { Loading } from './components/ui';
import { resetHealth, startHealthStream } from './health';
import { AccountsPage } from './pages/accounts';
import { ApiKeysPage } from './pages/api-keys';
import { ConnectionsPage } from './pages/connections';
import { SettingsPage } from './pages/settings';
import { SignInPage } from './pages/sign-in';
import { SignalsPage } from './pages/signals';
import { StrategiesPage } from './pages/strategies';
import { HOME, navigate, path } from './router';
import { session } from './session';
import { Header } from './header';

const PAGES: Record<string, () => preact.JSX.Element> = {
  '/accounts': AccountsPage,
  '/signals': SignalsPage,
  '/strategies': StrategiesPage,
  '/connections': ConnectionsPage,
  '/keys': ApiKeysPage,
  '/settings': SettingsPage,
};

export function App() {
  const s = session.value;
  const p = path.value;
  const signedIn = !!s;

  useEffect(() => {
    if (signedIn) startHealthStream();
    else resetHealth();
  }, [signedIn]);

  useEffect(() => {
    if (s && !PAGES[p]) navigate(HOME, { replace: true });
  }, [s, p]);

  if (s === undefined) {
    return (
      <main id="main" class="boot">
        <Loading what="tradegate" />
      </main>
    );
  }
  if (s === null) {
    return (
      <>
        <SignInPage />
        <Toasts />
      </>
    );
  }
  const Current = PAGES[p];
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header />
      <main id="main" tabIndex={-1}>
        {Current ? <Current /> : <Loading what="page" />}
      </main>
      <Toasts />
    </>
  );
}
