/** Entry point: styles, the app, and the first question to the server (am I signed in?). */
import './styles.css';
import { render } from 'preact';
import { App } from './app';
import { loadPage } from './pages/index';
import { path } from './router';
import { loadSession, session } from './session';

/** How long the first render waits for the session check before showing the loading screen. */
const BOOT_SCREEN_AFTER_MS = 150;

// A signed-in reload fetches the page's code while the session is being checked.
void loadPage(path.value)?.catch(() => undefined);

// The session check's answer is usually in already (index.html preloads it), so the first
// render waits for it and puts the sign-in page or the app on screen at once, instead of
// rendering and painting a loading screen that is replaced a few tasks later. A slow check
// still gets the loading screen, after a moment.
let rendered = false;
const start = () => {
  if (rendered) return;
  rendered = true;
  render(<App />, document.getElementById('app')!);
};
const slow = setTimeout(start, BOOT_SCREEN_AFTER_MS);
loadSession()
  .catch(() => {
    // Server unreachable: show the sign-in page, whose request will say so in the API's words.
    session.value = null;
  })
  .finally(() => {
    clearTimeout(slow);
    start();
  });
