/**
 * `tradegate keys create|list|revoke`. The key is printed once, at creation, and never
 * again: `list` shows its prefix (`tgk_<id>`) only.
 */
import { AppError } from '../domain/problems.js';
import type { Scope } from '../domain/connections.js';
import { checkQuota } from '../http/quotas.js';
import { API_KEY_SCOPES } from '../store/api-keys.js';
import { note, parseCommand, print, resolveUser, runCommand, table, UsageError, withStore } from './store-command.js';

const USAGE = 'tradegate keys create --user U --name N --scopes read,trade [--json] | keys list --user U [--json] | keys revoke <id> [--json]   [--data-dir D | --cluster nats://…]';

function parseScopes(raw: string | undefined): Scope[] {
  if (!raw) throw new UsageError('--scopes is required (read, trade or read,trade)');
  const scopes = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = scopes.filter((s) => !(API_KEY_SCOPES as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new UsageError(`invalid scope(s) '${bad.join(',') || raw}': use read, trade or read,trade`);
  return [...new Set(scopes)] as Scope[];
}

/** Accepts a key id, its `tgk_<id>` prefix, or (pasted by mistake) the whole key. */
function keyIdFrom(ref: string): string {
  const m = /^(?:tgk_)?([A-Za-z0-9]{12})(?:_[A-Za-z0-9]+)?$/.exec(ref);
  if (!m) throw new UsageError(`'${ref.slice(0, 40)}' is not a key id (12 letters/digits, or tgk_<id>)`);
  return m[1]!;
}

/** Entry point of `tradegate keys`. */
export function run(argv: string[]): Promise<number> {
  return runCommand('keys', USAGE, async () => {
    const { values, positionals } = parseCommand(argv, {
      user: { type: 'string' },
      name: { type: 'string' },
      scopes: { type: 'string' },
      json: { type: 'boolean' },
    });
    const [sub, ...args] = positionals;

    if (sub === 'create') {
      if (args.length > 0) throw new UsageError('keys create takes no positional arguments');
      if (!values.name) throw new UsageError('--name is required');
      const scopes = parseScopes(values.scopes);
      const name = values.name;
      const { user, created } = await withStore(values, async (store, config) => {
        const owner = resolveUser(store, values.user);
        checkQuota(store, config, owner.id, 'apiKeys');
        return { user: owner, created: await store.apiKeys.create({ userId: owner.id, name, scopes }) };
      });
      const { record, key } = created;
      if (values.json) {
        print(JSON.stringify({ id: record.id, key, name: record.name, scopes: record.scopes, user: user.name }));
      } else {
        // The key alone on stdout (so `KEY=$(tradegate keys create …)` works); notes on stderr.
        note(`created key '${record.name}' (${record.id}, scopes ${record.scopes.join(',')}) for user ${user.name}`);
        print(key);
        note('store it now: it is shown only this once');
      }
      return 0;
    }

    if (sub === 'list') {
      if (args.length > 0) throw new UsageError('keys list takes no positional arguments');
      const keys = await withStore(values, async (store) => {
        const owner = resolveUser(store, values.user);
        return store.apiKeys.listByUser(owner.id);
      });
      if (values.json) print(JSON.stringify(keys));
      else {
        const rows = keys.map((k) => [k.id, k.prefix, k.name, k.scopes.join(','), k.createdAt, k.lastUsedAt ?? '-', k.revokedAt ? `revoked ${k.revokedAt}` : 'active']);
        print(table(['ID', 'PREFIX', 'NAME', 'SCOPES', 'CREATED', 'LAST USED', 'STATUS'], rows));
      }
      return 0;
    }

    if (sub === 'revoke') {
      const [ref, ...extra] = args;
      if (!ref || extra.length > 0) throw new UsageError('keys revoke takes exactly one <id>');
      const id = keyIdFrom(ref);
      const outcome = await withStore(values, async (store) => {
        const existing = store.apiKeys.byId(id);
        if (!existing) throw new AppError('NOT_FOUND', `no API key with id '${id}'`);
        if (existing.revokedAt) return 'already';
        return (await store.apiKeys.revokeById(id)) ? 'revoked' : 'already';
      });
      if (values.json) print(JSON.stringify({ id, revoked: true, already: outcome !== 'revoked' }));
      else print(outcome === 'revoked' ? `revoked key ${id}` : `key ${id} was already revoked`);
      return 0;
    }

    throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'missing subcommand');
  });
}
