/** Top bar: brand, page links, the connections' overall health, the user and sign-out. */
import { Link } from './components/link';
import { health, streamLost, streamState } from './health';
import { path } from './router';
import { session, signOut } from './session';
import { toast } from './components/toast';

const NAV = [
  ['/accounts', 'Accounts'],
  ['/signals', 'Signals'],
  ['/strategies', 'Strategies'],
  ['/connections', 'Connections'],
  ['/keys', 'API Keys'],
] as const;

/** One word for all connections: the worst status wins. */
function overall(): { tone: string; text: string } {
  // Statuses from before the stream was lost are not the current ones: never "All connected" then.
  if (streamLost.value) return { tone: 'danger', text: 'tradegate unreachable — retrying' };
  if (streamState.value === 'down') return { tone: 'warn', text: 'Live status unavailable' };
  const all = [...health.value.values()];
  if (all.length === 0) return { tone: 'neutral', text: streamState.value === 'open' ? 'No connections' : 'Connecting…' };
  const bad = all.filter((h) => h.status === 'FAILED' || h.status === 'AUTH_EXPIRED').length;
  const reconnecting = all.filter((h) => h.status === 'RECONNECTING').length;
  const connecting = all.filter((h) => h.status === 'CONNECTING').length;
  if (bad) return { tone: 'danger', text: `${bad} connection${bad > 1 ? 's' : ''} down` };
  if (reconnecting) return { tone: 'warn', text: `${reconnecting} reconnecting` };
  if (connecting) return { tone: 'warn', text: `${connecting} connecting` };
  return { tone: 'ok', text: 'All connected' };
}

export function Header() {
  const current = path.value;
  const o = overall();
  return (
    <header class="topbar">
      <div class="topbar-row">
        <Link href="/accounts" class="brand">
          <span class="brand-mark" aria-hidden="true" />
          tradegate
        </Link>
        <nav class="nav" aria-label="Main">
          {NAV.map(([href, label]) => (
            <Link key={href} href={href} class="nav-link" aria-current={current === href ? 'page' : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <div class="topbar-end">
          <Link href="/connections" class={`health-pill ${o.tone}`} aria-label={`Connection health: ${o.text}`}>
            <span class="dot" aria-hidden="true" />
            <span class="health-text">{o.text}</span>
          </Link>
          <Link href="/settings" class="user" aria-current={current === '/settings' ? 'page' : undefined} aria-label={`Settings for ${session.value?.user.name ?? ''}`}>
            {session.value?.user.name}
          </Link>
          <button
            type="button"
            class="btn small secondary"
            onClick={async () => {
              try {
                await signOut();
                toast('Signed out');
              } catch {
                toast('Signed out here; the server could not be reached');
              }
            }}
          >
            Sign out
          </button>
        </div>
      </div>
    </header>
  );
}
