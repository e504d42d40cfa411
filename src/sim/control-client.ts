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

/** A login to open: broker user name, password and the names of its accounts (with the ids they had, to keep them). */
export interface PaperLogin {
  name: string;
  password: string;
  accounts: string[];
  ids?: Record<string, number>;
}

/** What the broker answers for an opened login. */
export interface OpenedLogin {
  accounts: { id: number; name: string }[];
}

/** The paper broker answered a control request with an error status (`reason` is its own message). */
export class PaperRefusedError extends Error {
  override name = 'PaperRefusedError';
  constructor(
    readonly status: number,
    readonly reason: string,
    what: string,
  ) {
    super(`paper broker refused ${what}: HTTP ${status} ${reason}`);
  }
}

/** The broker's `error` text of a refusal body, else the body itself (shortened). */
function refusalReason(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    if (typeof body.error === 'string') return body.error;
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 200);
}

/** Creates a login with accounts at the paper broker; throws PaperRefusedError with the broker's answer when refused. */
export async function createPaperLogin(controlUrl: string, login: PaperLogin): Promise<OpenedLogin> {
  const accounts = login.accounts.map((name) => {
    const id = login.ids?.[name];
    return id === undefined ? { name } : { name, id };
  });
  const res = await fetch(`${controlUrl.replace(/\/+$/, '')}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: login.name, password: login.password, accounts }),
  });
  const text = await res.text();
  if (!res.ok) throw new PaperRefusedError(res.status, refusalReason(text), `login '${login.name}'`);
  const body = (text ? JSON.parse(text) : {}) as Partial<OpenedLogin>;
  return { accounts: Array.isArray(body.accounts) ? body.accounts : [] };
}

/** Removes a login (and with it its accounts) at the paper broker; a login it does not have is no error. */
export async function removePaperLogin(controlUrl: string, name: string): Promise<void> {
  const res = await fetch(`${controlUrl.replace(/\/+$/, '')}/users?name=${encodeURIComponent(name)}`, { method: 'DELETE' });
  const text = await res.text();
  if (!res.ok && res.status !== 404) throw new PaperRefusedError(res.status, refusalReason(text), `removing login '${name}'`);
}
