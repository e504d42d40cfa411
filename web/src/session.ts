/** The signed-in user: loaded on start, set by sign-in, cleared by sign-out or a 401. */
import { effect, signal } from '@preact/signals';
import { api, ApiError, csrfToken, sessionLost, sessionLostReason, tabUser } from './api';
import type { Session } from './types';

/** undefined while loading; null when signed out. */
export const session = signal<Session | null | undefined>(undefined);
/** Why the sign-in page is showing, when it was not the user's choice. */
export const signedOutReason = signal<string | null>(null);

function set(s: Session | null): void {
  csrfToken.value = s?.csrfToken ?? null;
  tabUser.value = s?.user.id ?? null;
  session.value = s;
}

/** Asks the server whether this browser has a session. */
export async function loadSession(): Promise<void> {
  try {
    set(await api<Session>('GET', '/session'));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) set(null);
    else throw err;
  }
}

/** Signs in; throws ApiError with the server's detail. */
export async function signIn(name: string, password: string): Promise<void> {
  set(await api<Session>('POST', '/session', { name, password }));
  signedOutReason.value = null;
}

/** Signs out on the server, then forgets the session here whatever the answer. */
export async function signOut(): Promise<void> {
  try {
    await api('DELETE', '/session');
  } finally {
    set(null);
  }
}

/** Changes the password: the server ends every session and hands this browser a new one. */
export async function changePassword(currentPassword: string, newPassword: string): Promise<void> {
  set(await api<Session>('POST', '/me/password', { currentPassword, newPassword }));
}

let lost = sessionLost.peek();
effect(() => {
  if (sessionLost.value !== lost) {
    lost = sessionLost.value;
    if (session.peek()) signedOutReason.value = sessionLostReason.peek() ?? 'Your session ended. Sign in again.';
    set(null);
  }
});
