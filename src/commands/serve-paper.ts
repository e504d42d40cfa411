/**
 * The embedded paper broker of `serve --paper`: runs it on a worker thread, re-creates the
 * stored paper logins at every start, restarts it on the same port when its thread dies, opens
 * logins for POST /connections and removes them for DELETE /connections/{id} (and when a create is
 * refused after its login was opened), so `paper-logins.json` names live connections only.
 *
 * The paper broker keeps its state in memory, so every start re-creates the logins the store
 * knows, in creation order, with the same credentials, account names and account ids (each
 * remembered when its login was opened): webhook tokens, guards and locks are bound to account
 * ids, and an account that came back under another's id would take that one's alerts and lose its
 * own lock. An id some other account holds already (logins created at the broker by hand) is
 * given a new one; tokens bound to the old id then report `Account is inactive` until rebound. A restart after a crash loses the paper orders and
 * positions (as a service restart does); the actors reconnect to the same address by themselves.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LevelWithSilent } from 'pino';
import type { PaperBroker } from '../http/routes/common.js';
import type { Logger } from '../log.js';
import { AppError } from '../domain/problems.js';
import { createPaperLogin, PaperRefusedError, removePaperLogin, type OpenedLogin, type PaperEndpoints, type PaperLogin } from '../sim/control-client.js';
import { startSimInWorker, type SimWorkerHandle } from '../sim/worker.js';
import { makePrivate, PRIVATE_FILE_MODE } from '../store/file-modes.js';
import type { Store } from '../store/index.js';
import { SERVE } from '../tuning.js';

const LOGINS_FILE = 'paper-logins.json';
/** Where the paper broker keeps the ids it handed out (SimOptions.idFile). */
const PAPER_IDS_FILE = 'paper-ids';

/** A login's account names and the ids the broker gave them; no secrets (passwords stay sealed in the store). */
interface RememberedLogin {
  accounts: string[];
  ids: Record<string, number>;
}

/** login name → its accounts. */
type PaperLogins = Record<string, RememberedLogin>;

/**
 * The remembered logins; none when the file is missing. A file that is there but unreadable is
 * refused: read as none, it was silently replaced, and the paper accounts came back with new ids
 * (operator probe: one account of two, and the tokens bound to the other inactive).
 */
function readLogins(dataDir: string): PaperLogins {
  const path = join(dataDir, LOGINS_FILE);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new Error(
      `${path} cannot be read (${err instanceof Error ? err.message : String(err)}): fix it, or remove it to have the paper accounts re-created with new ids (webhook tokens bound to the old ones then answer 403 Account is inactive)`,
    );
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error(`${path} does not hold an object of paper logins: fix it, or remove it to have the paper accounts re-created with new ids`);
  }
  const out: PaperLogins = {};
  // Files written before ids were kept hold the names alone.
  for (const [login, v] of Object.entries(raw)) out[login] = Array.isArray(v) ? { accounts: v as string[], ids: {} } : (v as RememberedLogin);
  return out;
}

function writeLogins(dataDir: string, all: PaperLogins): void {
  const tmp = join(dataDir, `${LOGINS_FILE}.tmp`);
  writeFileSync(tmp, JSON.stringify(all, null, 2), { mode: PRIVATE_FILE_MODE });
  makePrivate(tmp); // a leftover temp file keeps its old mode through writeFileSync
  renameSync(tmp, join(dataDir, LOGINS_FILE));
}

/** Remembers a paper login's account names and ids so the next start can re-create them as they were. */
export function rememberPaperLogin(dataDir: string, login: string, accounts: string[], opened?: OpenedLogin): void {
  const ids: Record<string, number> = {};
  for (const a of opened?.accounts ?? []) if (accounts.includes(a.name)) ids[a.name] = a.id;
  writeLogins(dataDir, { ...readLogins(dataDir), [login]: { accounts, ids } });
}

/** Forgets a paper login: the next start does not re-create it. */
export function forgetPaperLogin(dataDir: string, login: string): void {
  const all = readLogins(dataDir);
  if (!(login in all)) return;
  delete all[login];
  writeLogins(dataDir, all);
}

/**
 * Opens one stored paper connection's login at the paper broker, with the account names
 * remembered for it (or `<NAME>-1`): at every start for every paper connection, and
 * for a paper connection another process (the CLI) added while the service runs.
 * True when the broker has the login now (opened here, or it had it already).
 */
export async function restorePaperLogin(store: Pick<Store, 'connections'>, dataDir: string, controlUrl: string, connectionId: string, log?: Logger): Promise<boolean> {
  const creds = store.connections.credentials(connectionId);
  const remembered = readLogins(dataDir)[creds.name];
  const accounts = remembered?.accounts ?? [`${creds.name.toUpperCase()}-1`];
  try {
    const opened = await createPaperLogin(controlUrl, { name: creds.name, password: creds.password, accounts, ids: remembered?.ids ?? {} });
    const moved = opened.accounts.filter((a) => remembered?.ids[a.name] !== undefined && remembered.ids[a.name] !== a.id);
    if (moved.length) log?.warn({ connectionId, moved }, 'paper accounts re-created under new ids (their old ids were taken)');
    // Logins remembered without ids (or a CLI connection opened here first) keep the ids they get now.
    if (!remembered || moved.length || Object.keys(remembered.ids).length < accounts.length) rememberPaperLogin(dataDir, creds.name, accounts, opened);
    return true;
  } catch (err) {
    if (err instanceof PaperRefusedError && err.reason === `user ${creds.name} exists`) return true;
    log?.warn({ connectionId, err: err instanceof Error ? err.message : String(err) }, 'paper login not restored');
    return false;
  }
}

/** Login names the stored paper connections log in as. */
function paperLoginsInUse(store: Pick<Store, 'connections'>): Set<string> {
  return new Set(store.connections.all().filter((c) => c.broker === 'paper').map((c) => store.connections.credentials(c.id).name));
}

/** True while a stored paper connection logs in as `login`. */
function paperLoginInUse(store: Pick<Store, 'connections'>, login: string): boolean {
  return paperLoginsInUse(store).has(login);
}

/**
 * Forgets the logins remembered for connections that are gone (left by creates refused before
 * they were rolled back, or connections deleted while the service was down), so they are not
 * re-created; run at start, before any connection is added. Returns their names.
 */
export function prunePaperLogins(store: Pick<Store, 'connections'>, dataDir: string): string[] {
  const used = paperLoginsInUse(store);
  const stale = Object.keys(readLogins(dataDir)).filter((name) => !used.has(name));
  for (const name of stale) forgetPaperLogin(dataDir, name);
  return stale;
}

/**
 * Re-creates every paper connection's login at a fresh paper broker, oldest first. Disabled ones
 * too: nothing logs in as them, but their accounts keep their ids, which other logins would
 * otherwise take, and with them the guards, kill switch and webhook tokens bound to those ids
 * (attack probe: a kill switch armed on a disabled connection's account was lost across a restart).
 */
export async function restorePaperLogins(store: Store, dataDir: string, controlUrl: string, log?: Logger): Promise<void> {
  const records = store.connections
    .all()
    .filter((c) => c.broker === 'paper')
    .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  for (const record of records) await restorePaperLogin(store, dataDir, controlUrl, record.id, log);
}

/**
 * A coded error for a login the paper broker did not open: a name it already has is 409
 * CONFLICT, any other refusal 422 BROKER_REJECTED with its reason, and no answer at all (the
 * broker thread restarting) 503 BROKER_UNAVAILABLE. Never a 500 for a condition we can name.
 */
export function loginRefusal(err: unknown): AppError {
  if (err instanceof PaperRefusedError && err.status === 409) return new AppError('CONFLICT', `Paper broker: ${err.reason}`, { brokerReason: err.reason });
  if (err instanceof PaperRefusedError && err.status < 500) return new AppError('BROKER_REJECTED', `Paper broker: ${err.reason}`, { brokerReason: err.reason });
  return new AppError('BROKER_UNAVAILABLE', 'The embedded paper broker did not answer; retry shortly', {}, 1);
}

/** The running embedded paper broker. */
export interface EmbeddedPaper {
  /** Base URL (for the banner). */
  readonly url: string;
  readonly endpoints: PaperEndpoints;
  /** The routes' handle on it (POST /connections opens logins, DELETE closes them). */
  readonly broker: PaperBroker & {
    /** Opens a stored paper connection's login if the broker lacks it (a connection the CLI added while the service runs). */
    ensureLogin(connectionId: string): Promise<boolean>;
  };
  /** The worker currently running it (tests end it to play a crash). */
  readonly current: SimWorkerHandle;
  /** Resolves after the next restart (tests). */
  restarted(): Promise<void>;
  close(): Promise<void>;
}

/** Options of startEmbeddedPaper. */
export interface EmbeddedPaperOptions {
  store: Store;
  dataDir: string;
  /** 0 = a free port, kept for restarts. */
  port: number;
  logLevel: LevelWithSilent;
  logger: Logger;
  /** Wait before a restart (default SERVE.paperRestartMs). */
  restartMs?: number;
}

/** Starts the paper broker on a worker, restores the stored logins, and keeps it running. */
export async function startEmbeddedPaper(opts: EmbeddedPaperOptions): Promise<EmbeddedPaper> {
  const { store, dataDir, logger } = opts;
  // Ids kept in the data dir: an order id given before a restart is never given again.
  const start = (port: number) => startSimInWorker({ port, host: '127.0.0.1', logLevel: opts.logLevel, idFile: join(dataDir, PAPER_IDS_FILE) });
  let current = await start(opts.port).catch((err: unknown) => {
    throw new Error(`cannot start the paper broker on 127.0.0.1:${opts.port} (--paper-port, TRADEGATE_PAPER_PORT): ${err instanceof Error ? err.message : String(err)}`);
  });
  prunePaperLogins(store, dataDir);
  await restorePaperLogins(store, dataDir, current.controlUrl, logger);
  const port = current.port;
  let closed = false;
  let restartWaiters: (() => void)[] = [];

  const keep = (sim: SimWorkerHandle): void =>
    sim.onCrash((reason) => {
      if (closed) return;
      logger.error({ reason }, 'paper broker died; restarting it on the same port');
      void restart(1);
    });
  const restart = async (attempt: number): Promise<void> => {
    await new Promise((r) => setTimeout(r, (opts.restartMs ?? SERVE.paperRestartMs) * attempt));
    if (closed) return;
    try {
      current = await start(port);
    } catch (err) {
      logger.error({ err, attempt }, 'paper broker restart failed');
      if (attempt < 5) return restart(attempt + 1);
      logger.error('paper broker stays down: paper connections remain RECONNECTING until the service restarts');
      return;
    }
    if (closed) return void current.close();
    keep(current);
    await restorePaperLogins(store, dataDir, current.controlUrl, logger);
    logger.info({ port }, 'paper broker restarted');
    for (const wake of restartWaiters.splice(0)) wake();
  };
  keep(current);

  const endpoints: PaperEndpoints = { controlUrl: current.controlUrl, restUrl: current.restUrl, wsUrl: current.wsUrl };
  return {
    url: current.url,
    endpoints,
    get current() {
      return current;
    },
    broker: {
      restUrl: endpoints.restUrl,
      wsUrl: endpoints.wsUrl,
      async openLogin(login: PaperLogin) {
        let opened: OpenedLogin;
        try {
          opened = await createPaperLogin(current.controlUrl, login);
        } catch (err) {
          throw loginRefusal(err);
        }
        rememberPaperLogin(dataDir, login.name, login.accounts, opened);
      },
      async closeLogin(name: string) {
        // Connections added by the CLI may share a login: it stays while one of them is stored.
        if (paperLoginInUse(store, name)) return;
        // Forgotten first: even if the broker cannot be reached now, the next start does not bring it back.
        forgetPaperLogin(dataDir, name);
        await removePaperLogin(current.controlUrl, name);
      },
      ensureLogin: (connectionId: string) => restorePaperLogin(store, dataDir, current.controlUrl, connectionId, logger),
    },
    restarted: () => new Promise((resolve) => restartWaiters.push(resolve)),
    async close() {
      closed = true;
      restartWaiters = [];
      await current.close();
    },
  };
}
