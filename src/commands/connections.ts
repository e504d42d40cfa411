/**
 * `tradegate connections add|list|remove|disable|enable`. Broker passwords come from stdin only
 * (never argv, which other local users can read in the process list) and are stored sealed. A
 * server running on the same data dir picks the changes up within about a second
 * (actors/connection-sync.ts).
 */
import { randomUUID } from 'node:crypto';
import { TRADOVATE_APP_DEFAULTS, TRADOVATE_URLS, type BrokerCredentials, type BrokerKind, type Environment } from '../domain/connections.js';
import { checkQuota } from '../http/quotas.js';
import { accountsLeaving, connectionWithLogin, loginTaken } from '../store/connections.js';
import { requestAccessToken } from '../broker/tradovate/rest-auth.js';
import { AppError } from '../domain/problems.js';
import { note, parseCommand, print, readStdinLines, resolveUser, runCommand, table, UsageError, withStore, type StoreFlags } from './store-command.js';

const USAGE = [
  'tradegate connections add --user U [--name N] [--json] [--data-dir D | --cluster nats://…]',
  '    --paper --paper-url http://HOST:PORT --paper-user NAME [--password-stdin]',
  '  | --tradovate-demo|--tradovate-live --broker-user NAME [--app-id A] [--app-version V] [--device-id D] [--cid N]',
  '    (password on the first line of stdin; with --cid, the API secret on the second)',
  'tradegate connections list --user U [--json] [--data-dir D | --cluster nats://…]',
  'tradegate connections remove|disable|enable <id> [--data-dir D | --cluster nats://…]',
].join('\n');

export { TRADOVATE_URLS };

/** REST and WebSocket URLs of a paper broker at `base` (e.g. http://127.0.0.1:8091). */
export function paperUrls(base: string): { restUrl: string; wsUrl: string } {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new UsageError(`--paper-url '${base}' is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--paper-url must be http:// or https://');
  if (url.search || url.hash) throw new UsageError('--paper-url must not carry a query or fragment');
  const root = `${url.host}${url.pathname.replace(/\/+$/, '')}`;
  return {
    restUrl: `${url.protocol}//${root}/v1`,
    wsUrl: `${url.protocol === 'https:' ? 'wss' : 'ws'}://${root}/v1/websocket`,
  };
}

interface AddPlan {
  broker: BrokerKind;
  environment: Environment;
  restUrl: string;
  wsUrl: string;
  brokerUser: string;
}

function planFrom(values: Record<string, string | boolean | undefined>): AddPlan {
  const kinds = (['paper', 'tradovate-demo', 'tradovate-live'] as const).filter((k) => values[k]);
  if (kinds.length !== 1) throw new UsageError('choose exactly one of --paper, --tradovate-demo, --tradovate-live');
  if (kinds[0] === 'paper') {
    const base = values['paper-url'];
    const brokerUser = values['paper-user'];
    if (typeof base !== 'string') throw new UsageError('--paper needs --paper-url (e.g. http://127.0.0.1:8091)');
    if (typeof brokerUser !== 'string' || !brokerUser) throw new UsageError('--paper needs --paper-user NAME');
    return { broker: 'paper', environment: 'paper', ...paperUrls(base), brokerUser };
  }
  const environment = kinds[0] === 'tradovate-demo' ? 'demo' : 'live';
  const brokerUser = values['broker-user'];
  if (typeof brokerUser !== 'string' || !brokerUser) throw new UsageError(`--${kinds[0]} needs --broker-user NAME`);
  return { broker: 'tradovate', environment, ...TRADOVATE_URLS[environment], brokerUser };
}

/** Entry point of `tradegate connections`. */
export function run(argv: string[]): Promise<number> {
  return runCommand('connections', USAGE, async () => {
    const { values, positionals } = parseCommand(argv, {
      user: { type: 'string' },
      name: { type: 'string' },
      paper: { type: 'boolean' },
      'paper-url': { type: 'string' },
      'paper-user': { type: 'string' },
      'tradovate-demo': { type: 'boolean' },
      'tradovate-live': { type: 'boolean' },
      'broker-user': { type: 'string' },
      'password-stdin': { type: 'boolean' },
      'app-id': { type: 'string' },
      'app-version': { type: 'string' },
      cid: { type: 'string' },
      'device-id': { type: 'string' },
      json: { type: 'boolean' },
    });
    const [sub, ...args] = positionals;
    if (sub === 'remove' || sub === 'disable' || sub === 'enable') return changeConnection(sub, args, values);
    if (args.length > 0) throw new UsageError(`unexpected argument '${args[0]}'`);

    if (sub === 'add') {
      const plan = planFrom(values);
      // Tradovate always needs the password; a paper broker may run without one.
      const needsStdin = plan.broker === 'tradovate' || values['password-stdin'];
      const lines = needsStdin ? await readStdinLines() : [];
      const password = lines[0] ?? '';
      if (needsStdin && !password) throw new UsageError('expected the broker password on the first line of stdin');
      const credentials: BrokerCredentials = { name: plan.brokerUser, password };
      if (plan.broker === 'tradovate') {
        credentials.appId = values['app-id'] ?? TRADOVATE_APP_DEFAULTS.appId;
        credentials.appVersion = values['app-version'] ?? TRADOVATE_APP_DEFAULTS.appVersion;
        credentials.deviceId = values['device-id'] ?? randomUUID();
        if (values.cid !== undefined) {
          const sec = lines[1];
          if (!sec) throw new UsageError('--cid needs the API secret on the second line of stdin');
          credentials.cid = values.cid;
          credentials.sec = sec;
        }
      }
      // A paper broker is asked at once (no login limits there), so refused credentials are said now
      // (ops probe: exit 0 and nothing said, then a connection FAILED at once). Stored anyway: a
      // `serve --paper` opens the login on its embedded broker itself. Tradovate is not asked: its
      // logins are limited per hour, and the server logs in anyway.
      let unchecked: string | undefined;
      let refused: string | undefined;
      if (plan.broker === 'paper') {
        const outcome = await requestAccessToken(plan.restUrl, credentials, { timeoutMs: 3_000 });
        if (outcome.kind === 'rejected') refused = outcome.reason;
        else if (outcome.kind !== 'token') unchecked = `the paper broker at ${plan.restUrl} could not be asked (${outcome.reason})`;
      }
      const name = values.name ?? `${plan.environment}-${plan.brokerUser}`;
      const { user, record } = await withStore(values, async (store, config) => {
        const owner = resolveUser(store, values.user);
        checkQuota(store, config, owner.id, 'connections');
        const taken = connectionWithLogin(store.connections, owner.id, { ...plan, name: plan.brokerUser });
        if (taken) throw loginTaken(taken);
        const rec = await store.connections.create({
          userId: owner.id,
          name,
          broker: plan.broker,
          environment: plan.environment,
          restUrl: plan.restUrl,
          wsUrl: plan.wsUrl,
          credentials,
        });
        return { user: owner, record: rec };
      });
      if (values.json) print(JSON.stringify({ ...record, user: user.name }));
      else {
        print(`created connection ${record.name} (${record.id}) for user ${user.name}: ${record.broker}/${record.environment} ${record.restUrl}`);
        if (!password) note('no broker password stored (none given on stdin)');
        if (refused) {
          note(
            `the paper broker at ${plan.restUrl} refuses these credentials now (${refused}): a server running it embedded (serve --paper) opens the login itself; ` +
              'any other server will show the connection FAILED until the password is fixed (PATCH /api/v1/connections/{id})',
          );
        }
        const check = plan.broker === 'tradovate' ? 'Tradovate checks the credentials' : unchecked ? `${unchecked}: it checks the credentials` : undefined;
        if (check) note(`${check} when a server starts the connection (within about a second if one runs): GET /api/v1/connections and the web app show CONNECTED or FAILED`);
      }
      return 0;
    }

    if (sub === 'list') {
      const connections = await withStore(values, async (store) => {
        const owner = resolveUser(store, values.user);
        return store.connections.listByUser(owner.id);
      });
      if (values.json) print(JSON.stringify(connections));
      else {
        const rows = connections.map((c) => [c.id, c.name, c.broker, c.environment, c.restUrl, c.disabled ? 'disabled' : 'enabled']);
        print(table(['ID', 'NAME', 'BROKER', 'ENV', 'REST URL', 'STATE'], rows));
      }
      return 0;
    }

    throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'missing subcommand');
  });
}

/** `remove|disable|enable <id>`: deletes a connection, or stops or restarts its actor without deleting it. */
async function changeConnection(sub: 'remove' | 'disable' | 'enable', args: string[], values: StoreFlags): Promise<number> {
  const [id, extra] = args;
  if (!id) throw new UsageError(`connections ${sub} needs the connection id`);
  if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
  await withStore(values, async (store) => {
    const record = store.connections.byId(id);
    if (!record) throw new AppError('NOT_FOUND', `unknown connection '${id}'`);
    if (sub === 'remove') {
      // Its webhook tokens become inactive here too, as a DELETE through the API makes them: with no
      // server running, nothing else would (the accounts it served are stored with it).
      const accountIds = accountsLeaving(record, store.connections.listByUser(record.userId));
      await store.connections.remove(record.userId, id);
      await store.webhookTokens.deactivateForAccounts(record.userId, accountIds, `its connection ${id} was deleted`);
    } else await store.connections.setDisabled(id, sub === 'disable');
  });
  print(`${sub === 'remove' ? 'removed' : `${sub}d`} connection ${id}`);
  return 0;
}
