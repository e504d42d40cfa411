/**
 * A client of the paper broker's loopback control API, for the service that embeds it:
 * where the broker listens, and opening logins with accounts.
 */

/** Where a paper broker listens (`controlUrl` ends in `/control`). */
export interface PaperEndpoints {
  controlUrl: string;
  restUrl: string;
  wsUrl: string;
}

/** A login to open: broker user name, password and the names of its accounts. */
export interface PaperLogin {
  name: string;
  password: string;
  accounts: string[];
}

/** Creates a login with accounts at the paper broker; throws with the broker's answer when refused. */
export async function createPaperLogin(controlUrl: string, login: PaperLogin): Promise<unknown> {
  const res = await fetch(`${controlUrl.replace(/\/+$/, '')}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: login.name, password: login.password, accounts: login.accounts.map((name) => ({ name })) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`paper broker refused login '${login.name}': HTTP ${res.status} ${text.slice(0, 200)}`);
  return text ? (JSON.parse(text) as unknown) : null;
}
