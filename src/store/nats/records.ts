/**
 * The shared records on NATS KV, behind the same interfaces as the LMDB store: validation,
 * rows and views come from the LMDB modules (one definition of each rule); only where rows
 * live differs. Reads are synchronous from the mirror; writes are KV creates and
 * revision-checked updates (see kv-mirror.ts).
 */
import type { BrokerCredentials } from '../../domain/connections.js';
import { AppError } from '../../domain/problems.js';
import { apiKeyView, newApiKeyRow, revokedBeyondKept, touchThrottle, type ApiKeyRow, type ApiKeyStore, type ApiKeyView } from '../api-keys.js';
import { checkConnectionName, connectionAad, connectionView, newConnectionRow, patchedConnection, type ConnectionRow, type ConnectionStore } from '../connections.js';
import { byCreation, ownedReadsOver } from '../context.js';
import { hashPassword } from '../crypto.js';
import { parseToken, VerifiedTokens } from '../secret-token.js';
import { checkName, clean, newStrategy, patchedStrategy, type StrategyRecord, type StrategyStore } from '../strategies.js';
import { USER_NAME_PATTERN, checkPassword, newUserRow, passwordMatches, passwordTagOf, sameNameIgnoringCase, sortUsers, userView, type UserRow, type UserStore } from '../users.js';
import {
  checkTokenName,
  deactivates,
  newWebhookTokenRow,
  patchedToken,
  rotatedSecret,
  webhookTokenAad,
  webhookTokenView,
  type WebhookTokenRow,
  type WebhookTokenStore,
} from '../webhook-tokens.js';
import { fromBase64, LastUsed, OwnedTable, toBase64, type NatsStoreContext } from './tables.js';

/** The KV key of a user: its name (hex), so that KV create makes names unique. */
export const userKey = (name: string): string => `user.${Buffer.from(name, 'utf8').toString('hex')}`;

/**
 * Users live under `user.<hex of name>`: the name is the key, so KV create makes it unique
 * across nodes in one write (names are immutable). Ids are found through an in-memory index.
 */
export function createNatsUserStore(ctx: NatsStoreContext, hooks: { onPasswordChanged?: (userId: string) => Promise<unknown> } = {}): UserStore {
  const { mirror } = ctx;
  const keyOf = userKey;
  const keyById = new Map<string, string>();
  mirror.onChange((key, value) => {
    const row = value as UserRow | undefined;
    if (key.startsWith('user.') && row) keyById.set(row.id, key);
  });
  const byId = (id: string): UserRow | undefined => {
    const key = keyById.get(id);
    return key === undefined ? undefined : mirror.get<UserRow>(key);
  };
  /** The user named `name` in any case (names are unique regardless of case). */
  const byName = (name: string): UserRow | undefined => {
    if (!USER_NAME_PATTERN.test(name)) return undefined;
    const folded = name.toLowerCase();
    return mirror.get<UserRow>(keyOf(name)) ?? mirror.values<UserRow>('user.').find((u) => u.name.toLowerCase() === folded);
  };

  return {
    async create(input) {
      const rec = await newUserRow(input, ctx.nowIso());
      const taken = sameNameIgnoringCase(mirror.values<UserRow>('user.').map((u) => u.name), rec.name);
      if (taken !== undefined) throw new AppError('CONFLICT', `user '${taken}' already exists`);
      if (!(await mirror.create(keyOf(rec.name), rec))) throw new AppError('CONFLICT', `user '${rec.name}' already exists`);
      return userView(rec);
    },
    byId(id) {
      const r = byId(id);
      return r && userView(r);
    },
    byName(name) {
      const r = byName(name);
      return r && userView(r);
    },
    list: () => sortUsers(mirror.values<UserRow>('user.').map(userView)),
    verifyPassword: (name, password) => passwordMatches(byName(name), password),
    passwordTag: (userId) => passwordTagOf(byId(userId)),
    async setPassword(userId, password) {
      checkPassword(password);
      const passwordHash = await hashPassword(password);
      const key = keyById.get(userId);
      const found =
        key !== undefined &&
        (await mirror.mutate(key, (r) => (r ? { next: { ...(r as UserRow), passwordHash }, result: true } : { next: undefined, result: false })));
      if (!found) throw new AppError('NOT_FOUND', 'user not found');
      await hooks.onPasswordChanged?.(userId);
    },
  };
}

/** API keys under `apiKey.<id>`; revocation is a revision-checked update every node's mirror sees. */
export function createNatsApiKeyStore(ctx: NatsStoreContext): ApiKeyStore {
  const table = new OwnedTable<ApiKeyRow>(ctx.mirror, 'apiKey');
  const used = new LastUsed(ctx, 'apiKey');
  const touches = touchThrottle();
  const view = (r: ApiKeyRow) => apiKeyView(r, used.of(r.id));
  // A revoked key is a new row: it verifies afresh, and fails.
  const verified = new VerifiedTokens<ApiKeyRow, ApiKeyView>('tgk', table.row, (r) => (r.revokedAt ? null : view(r)));

  async function revokeWhere(id: string, owner: string | undefined): Promise<boolean> {
    const revokedAt = ctx.nowIso();
    const done = await table.update(id, owner, (r) => (r.revokedAt ? undefined : { ...r, revokedAt }));
    if (done) {
      touches.forget(id);
      for (const old of revokedBeyondKept([...table.idsOf(done.userId)].map(table.row))) {
        await table.remove(done.userId, old);
        used.forget(old);
      }
    }
    return done !== undefined;
  }

  return {
    async create(input) {
      const { row, key } = newApiKeyRow(input, ctx.nowIso());
      await table.create(row);
      return { record: view(row), key };
    },
    parseKey: (raw) => parseToken('tgk', raw),
    verify: (raw) => verified.verify(raw),
    ...ownedReadsOver(table.idsOf, table.row, view),
    revoke: (userId, id) => revokeWhere(id, userId),
    revokeById: (id) => revokeWhere(id, undefined),
    async setGuards(userId, id, guards) {
      const next = await table.update(id, userId, (r) => ({ ...r, guards }));
      return next && view(next);
    },
    touch(id, now) {
      touches.record(id, now, (at) => {
        used.record(id, at);
        verified.forget(id);
      });
    },
  };
}

type StoredConnection = Omit<ConnectionRow, 'sealedCredentials'> & { sealedCredentials: string };

/** Broker connections under `connection.<id>`, credentials sealed (base64 in JSON). */
export function createNatsConnectionStore(ctx: NatsStoreContext): ConnectionStore {
  const table = new OwnedTable<StoredConnection>(ctx.mirror, 'connection');
  return {
    async create(input) {
      const row = newConnectionRow(input, ctx.nowIso(), ctx.sealer);
      await table.create({ ...row, sealedCredentials: toBase64(row.sealedCredentials) });
      return connectionView(row);
    },
    ...ownedReadsOver(table.idsOf, table.row, connectionView),
    all: () => byCreation(table.all().map(connectionView)),
    credentials(id) {
      const r = table.row(id);
      if (!r) throw new AppError('NOT_FOUND', 'connection not found');
      return JSON.parse(ctx.sealer.open(fromBase64(r.sealedCredentials), connectionAad(id))) as BrokerCredentials;
    },
    async setDisabled(id, disabled) {
      return (await table.update(id, undefined, (r) => ({ ...r, disabled }))) !== undefined;
    },
    async setServedAccounts(id, accountIds) {
      return (await table.update(id, undefined, (r) => ({ ...r, servedAccountIds: accountIds }))) !== undefined;
    },
    async update(userId, id, patch) {
      if (patch.name !== undefined) checkConnectionName(patch.name);
      const next = await table.update(id, userId, (r) => patchedConnection(r, patch, (c) => toBase64(ctx.sealer.seal(JSON.stringify(c), connectionAad(id)))));
      return next && connectionView(next);
    },
    remove: (userId, id) => table.remove(userId, id),
  };
}

type StoredToken = Omit<WebhookTokenRow, 'sealedToken'> & { sealedToken: string };

/** Webhook tokens under `webhookToken.<id>`, the token sealed (base64 in JSON) for `reveal`. */
export function createNatsWebhookTokenStore(ctx: NatsStoreContext): WebhookTokenStore {
  const table = new OwnedTable<StoredToken>(ctx.mirror, 'webhookToken');
  const used = new LastUsed(ctx, 'webhookToken');
  const touches = touchThrottle();
  const view = (r: StoredToken) => webhookTokenView(r, used.of(r.id));
  const verified = new VerifiedTokens<StoredToken, ReturnType<typeof view>>('whk', table.row, view);
  return {
    async create(input) {
      const { row, token } = newWebhookTokenRow(input, ctx.nowIso(), ctx.sealer);
      const stored: StoredToken = { ...row, sealedToken: toBase64(row.sealedToken) };
      await table.create(stored);
      return { record: view(stored), token };
    },
    parseToken: (raw) => parseToken('whk', raw),
    verify: (raw) => verified.verify(raw),
    reveal(userId, id) {
      const r = table.row(id);
      return r && r.userId === userId ? ctx.sealer.open(fromBase64(r.sealedToken), webhookTokenAad(id)) : undefined;
    },
    ...ownedReadsOver(table.idsOf, table.row, view),
    all: () => byCreation(table.all().map(view)),
    async update(userId, id, patch) {
      if (patch.name !== undefined) checkTokenName(patch.name);
      const next = await table.update(id, userId, (r) => patchedToken(r, patch));
      return next && view(next);
    },
    async rotate(userId, id) {
      const { token, digest, sealedToken } = rotatedSecret(id, ctx.sealer);
      const rotatedAt = ctx.nowIso();
      const next = await table.update(id, userId, (r) => ({ ...r, digest, sealedToken: toBase64(sealedToken), rotatedAt }));
      return next && { record: view(next), token };
    },
    async remove(userId, id) {
      const removed = await table.remove(userId, id);
      if (removed) used.forget(id);
      return removed;
    },
    async deactivateForAccounts(userId, accountIds, reason) {
      const changed: string[] = [];
      for (const id of [...table.idsOf(userId)]) {
        const next = await table.update(id, userId, (r) => (deactivates(r, userId, accountIds) ? { ...r, inactiveReason: reason } : undefined));
        if (next) changed.push(id);
      }
      return changed;
    },
    touch(id, now) {
      touches.record(id, now, (at) => {
        used.record(id, at);
        verified.forget(id);
      });
    },
  };
}

/** Strategies under `strategy.<id>`. */
export function createNatsStrategyStore(ctx: NatsStoreContext): StrategyStore {
  const table = new OwnedTable<StrategyRecord>(ctx.mirror, 'strategy');
  return {
    async create(userId, fields) {
      const rec = newStrategy(userId, fields, ctx.nowIso());
      await table.create(rec);
      return rec;
    },
    ...ownedReadsOver(table.idsOf, table.row, clean),
    update(userId, id, patch) {
      if (patch.name !== undefined) checkName(patch.name);
      const updatedAt = ctx.nowIso();
      return table.update(id, userId, (r) => patchedStrategy(r, patch, updatedAt));
    },
    remove: (userId, id) => table.remove(userId, id),
  };
}
