/**
 * `tradegate users add <name> [--password-stdin]` and `tradegate users list [--json]`.
 * Works while the server runs: LMDB is multi-process.
 */
import { parseCommand, print, readPassword, runCommand, table, UsageError, withStore } from './store-command.js';
import { MIN_PASSWORD_LENGTH } from '../store/users.js';

const USAGE = 'tradegate users add <name> [--password-stdin] [--json] | users list [--json]   [--data-dir D | --cluster nats://…]';

/** Entry point of `tradegate users`. */
export function run(argv: string[]): Promise<number> {
  return runCommand('users', USAGE, async () => {
    const { values, positionals } = parseCommand(argv, {
      'password-stdin': { type: 'boolean' },
      json: { type: 'boolean' },
    });
    const [sub, ...args] = positionals;

    if (sub === 'add') {
      const [name, ...extra] = args;
      if (!name || extra.length > 0) throw new UsageError('users add takes exactly one <name>');
      // Read the secret before opening the store, so a missing password leaves no half-made user.
      const password = values['password-stdin'] ? await readPassword() : undefined;
      if (password !== undefined && password.length < MIN_PASSWORD_LENGTH) {
        throw new UsageError(`the password must be at least ${MIN_PASSWORD_LENGTH} characters (as in the web app)`);
      }
      const user = await withStore(values, (store) => store.users.create(password === undefined ? { name } : { name, password }), { creates: true });
      if (values.json) print(JSON.stringify(user));
      else print(`created user ${user.name} (${user.id})${password === undefined ? ', no password (web sign-in disabled)' : ''}`);
      return 0;
    }

    if (sub === 'list') {
      if (args.length > 0) throw new UsageError('users list takes no arguments');
      const users = await withStore(values, async (store) => store.users.list());
      if (values.json) print(JSON.stringify(users));
      else print(table(['NAME', 'ID', 'CREATED'], users.map((u) => [u.name, u.id, u.createdAt])));
      return 0;
    }

    throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'missing subcommand');
  });
}
