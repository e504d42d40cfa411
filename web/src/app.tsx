/** The shell: sign-in gate, header with navigation and live health, and the current page. */
import type { FunctionComponent } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { Toasts } from './components/toast';
import { BracketAlerts } from './components/bracket-alerts';
import { ErrorBox, Loading } from './components/ui';
import { ApiError, forgetReads } from './api';
import { resetHealth, startHealthStream } from './health';
import { loadPage, PAGES } from './pages/index';
import { SignInPage } from './pages/sign-in';
import { HOME, navigate, path } from './router';
import { session } from './session';
import { Header } from './header';

/** Performance mark set once the first page has rendered (sign-in or the signed-in app). */
const READY_MARK = 'tradegate:first-page';

/** The page at `p`, loading its chunk the first time. */
function PageAt(props: { p: string }) {
  const [page, setPage] = useState<{ p: string; C: FunctionComponent } | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    setFailed(null);
    loadPage(props.p)
      ?.then((C) => live && setPage({ p: props.p, C }))
      .catch(() => live && setFailed(props.p));
    return () => {
      live = false;
    };
  }, [props.p]);
  if (failed === props.p) {
    return <ErrorBox error={new ApiError(0, 'CHUNK_LOAD_FAILED', 'This page could not be loaded. The server may have been updated: reload the page.')} retry={() => location.reload()} />;
  }
  if (!page || page.p !== props.p) return <Loading what="page" />;
  return <page.C />;
}

export function App() {
  const s = session.value;
  const p = path.value;
  const signedIn = !!s;

  useEffect(() => {
    if (signedIn) startHealthStream();
    else {
      resetHealth();
      forgetReads();
    }
  }, [signedIn]);

  useEffect(() => {
    if (s && !PAGES[p]) navigate(HOME, { replace: true });
  }, [s, p]);

  // The first real page (sign-in or the app) is in the DOM: a mark tests and monitoring can read.
  const ready = s !== undefined;
  useLayoutEffect(() => {
    if (ready && performance.getEntriesByName(READY_MARK).length === 0) performance.mark(READY_MARK);
  }, [ready]);

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
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header />
      <main id="main" tabIndex={-1}>
        <BracketAlerts />
        <PageAt p={p} />
      </main>
      <Toasts />
    </>
  );
}
