/** Entry point: styles, the app, and the first question to the server (am I signed in?). */
import './styles.css';
import { render } from 'preact';
import { App } from './app';
import { loadPage } from './pages/index';
import { loadSession, session } from './session';

// A signed-in reload fetches the page's code while the session is being checked.
void loadPage(location.pathname)?.catch(() => undefined);

render(<App />, document.getElementById('app')!);
loadSession().catch(() => {
  // Server unreachable: show the sign-in page, whose request will say so in the API's words.
  session.value = null;
});
