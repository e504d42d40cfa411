/**
 * Webhook tokens `whk_<id>_<secret>`: the capability in a TradingView alert URL, bound to one
 * account (and optionally a strategy). Checked like API keys (id lookup, sha256 digest,
 * constant-time compare); also kept sealed with AES-256-GCM so the owner can copy the URL
 * again from the web app.
 */
import { checkRecordName } from '../domain/plain-text.js';
import { AppError } from '../domain/problems.js';
import { byCreation, ownedIds, ownedReads, rowReader, type StoreContext } from './context.js';
import type { Sealer } from './crypto.js';
import { newToken, parseToken, tokenPrefix, verifiedRow, wellFormedToken } from './secret-token.js';
import { touchThrottle } from './api-keys.js';
import type { GuardNarrowing } from '../domain/guards.js';

/** A webhook token as it may be shown (never the token itself). */
export interface WebhookTokenRecord {
  id: string;
  userId: string;
  name: string;
  accountId: string;
  strategyId: string | null;
  /** Narrows the account's risk guards for this token's alerts (null: none). */
  guards: GuardNarrowing | null;
  /** `whk_<id>` */
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  /** Set when the token was made inactive (its account's connection deleted); cleared by a rebind. */
  inactiveReason: string | null;
  /** When its secret (the URL) was last rotated; null: never. What a page showing the URL re-reads it by. */
  rotatedAt: string | null;
}

/** A webhook token as stored; the NATS store keeps `sealedToken` as base64. */
export interface WebhookTokenRow {
  id: string;
  userId: string;
  name: string;
  accountId: string;
  strategyId: string | null;
  createdAt: string;
  digest: string;
  sealedToken: Uint8Array;
  /** Absent on rows written before guards existed. */
  guards?: GuardNarrowing | null;
  /** Absent in rows written before it existed (= active). */
  inactiveReason?: string | null;
  /** Absent in rows written before it existed, and until the first rotation. */
  rotatedAt?: string | null;
}

export interface WebhookTokenPatch {
  name?: string;
  accountId?: string;
  /** null unbinds the strategy. */
  strategyId?: string | null;
  /** null removes the narrowing. */
  guards?: GuardNarrowing | null;
}

export interface WebhookTokenStore {
  /** Creates a token; `token` is the secret for the URL (also recoverable later with `reveal`). */
  create(input: { userId: string; name: string; accountId: string; strategyId?: string | null; guards?: GuardNarrowing | null }): Promise<{
    record: WebhookTokenRecord;
    token: string;
  }>;
  /** Strict format check without store access. */
  parseToken(raw: unknown): { id: string } | null;
  /** The token's record when well-formed, known and matching; otherwise null. Synchronous. */
  verify(raw: unknown): WebhookTokenRecord | null;
  /** The token in clear for its owner; undefined when unknown or not theirs. */
  reveal(userId: string, id: string): string | undefined;
  /** A user's tokens, oldest first. */
  listByUser(userId: string): WebhookTokenRecord[];
  getForUser(userId: string, id: string): WebhookTokenRecord | undefined;
  /** Every token (e.g. to flag tokens bound to inactive accounts). */
  all(): WebhookTokenRecord[];
  /** Renames or rebinds a token the user owns; undefined when unknown or not theirs. */
  update(userId: string, id: string, patch: WebhookTokenPatch): Promise<WebhookTokenRecord | undefined>;
  /** A new secret for a token the user owns (same id and binding); the old URL stops working at once. */
  rotate(userId: string, id: string): Promise<{ record: WebhookTokenRecord; token: string } | undefined>;
  /** Deletes a token the user owns; false when unknown or not theirs. */
  remove(userId: string, id: string): Promise<boolean>;
  /** Makes the user's tokens bound to any of `accountIds` inactive with `reason`; the ids changed. */
  deactivateForAccounts(userId: string, accountIds: readonly string[], reason: string): Promise<string[]>;
  /** Records use; at most once per minute per token, not awaited. */
  touch(id: string, now: number): void;
}

/** Binds a sealed token to its record. */
export const webhookTokenAad = (id: string): string => `webhook-token:${id}`;

/** VALIDATION_FAILED unless the name has 1..100 characters. */
export function checkTokenName(name: string): void {
  checkRecordName('token', name);
}

/** What may be shown of a stored token, with its last use (ms) if any. */
export function webhookTokenView(r: Omit<WebhookTokenRow, 'sealedToken'>, used: number | undefined): WebhookTokenRecord {
  return {
    id: r.id,
    userId: r.userId,
    name: r.name,
    accountId: r.accountId,
    strategyId: r.strategyId,
    guards: r.guards ?? null,
    prefix: tokenPrefix('whk', r.id),
    createdAt: r.createdAt,
    lastUsedAt: used === undefined ? null : new Date(used).toISOString(),
    inactiveReason: r.inactiveReason ?? null,
    rotatedAt: r.rotatedAt ?? null,
  };
}

/** Validates a new token and builds its row, the token sealed under `seal`; `token` is the secret. */
export function newWebhookTokenRow(
  { userId, name, accountId, strategyId, guards }: { userId: string; name: string; accountId: string; strategyId?: string | null; guards?: GuardNarrowing | null },
  createdAt: string,
  sealer: Sealer,
): { row: WebhookTokenRow; token: string } {
  checkTokenName(name);
  const { id, token, digest } = newToken('whk');
  return {
    row: { id, userId, name, accountId, strategyId: strategyId ?? null, guards: guards ?? null, createdAt, digest, sealedToken: sealer.seal(token, webhookTokenAad(id)) },
    token,
  };
}

/** A new secret for token `id` (rotation): the token, its digest and its sealed copy. */
export function rotatedSecret(id: string, sealer: Sealer): { token: string; digest: string; sealedToken: Buffer } {
  const { token, digest } = newToken('whk', id);
  return { token, digest, sealedToken: sealer.seal(token, webhookTokenAad(id)) };
}

/** `row` with `patch` applied (the caller has checked the name); binding an account makes the token active again. */
export function patchedToken<R extends Omit<WebhookTokenRow, 'sealedToken'>>(r: R, patch: WebhookTokenPatch): R {
  return {
    ...r,
    ...(patch.name !== undefined && { name: patch.name }),
    ...(patch.accountId !== undefined && { accountId: patch.accountId, inactiveReason: null }),
    ...(patch.strategyId !== undefined && { strategyId: patch.strategyId }),
    ...(patch.guards !== undefined && { guards: patch.guards }),
  };
}

/** Whether `deactivateForAccounts` changes this row. */
export function deactivates(r: { userId: string; accountId: string; inactiveReason?: string | null }, userId: string, accountIds: readonly string[]): boolean {
  return r.userId === userId && !r.inactiveReason && accountIds.includes(r.accountId);
}

/** The webhook token store over a shared context. */
export function createWebhookTokenStore(ctx: StoreContext): WebhookTokenStore {
  const { webhookTokens, owners, lastUsed } = ctx.dbs;
  const touches = touchThrottle();
  const row = rowReader<WebhookTokenRow>(webhookTokens);

  const view = (r: WebhookTokenRow): WebhookTokenRecord => webhookTokenView(r, lastUsed.get(['webhookToken', r.id]));

  return {
    async create(input) {
      const { row: rec, token } = newWebhookTokenRow(input, ctx.nowIso(), ctx.sealer);
      const { id, userId } = rec;
      const ok = await ctx.durable(
        webhookTokens.ifNoExists(id, () => {
          webhookTokens.put(id, rec);
          owners.put(['webhookToken', userId, id], true);
        }),
      );
      if (!ok) throw new AppError('CONFLICT', 'token id collision, retry');
      return { record: view(rec), token };
    },

    parseToken(raw) {
      return parseToken('whk', raw);
    },

    verify(raw) {
      // As API keys: verified tokens are remembered until any process writes tokens again, and
      // malformed input reaches no store read.
      if (typeof raw !== 'string') return null;
      const seen = ctx.cache.knownIn<WebhookTokenRecord>('webhookToken:verified', raw);
      if (seen) return seen;
      if (!wellFormedToken('whk', raw)) return null;
      const known = ctx.cache.peekIn<WebhookTokenRecord>('webhookToken:verified', raw);
      if (known) return known;
      const r = verifiedRow('whk', raw, row);
      if (!r) return null;
      const v = view(r);
      ctx.cache.setIn('webhookToken:verified', raw, v);
      ctx.cache.set(`webhookToken:view:${r.id}`, v);
      return v;
    },

    reveal(userId, id) {
      const r = row(id);
      if (!r || r.userId !== userId) return undefined;
      return ctx.sealer.open(r.sealedToken, webhookTokenAad(id));
    },

    ...ownedReads(ctx, 'webhookToken', row, view),

    all() {
      const out: WebhookTokenRecord[] = [];
      for (const { value } of webhookTokens.getRange()) out.push(view(value as WebhookTokenRow));
      return byCreation(out);
    },

    async update(userId, id, patch) {
      if (patch.name !== undefined) checkTokenName(patch.name);
      const updated = await ctx.durable(
        webhookTokens.transaction((): WebhookTokenRow | undefined => {
          const r = row(id);
          if (!r || r.userId !== userId) return undefined;
          const next = patchedToken(r, patch);
          webhookTokens.put(id, next);
          return next;
        }),
      );
      return updated && view(updated);
    },

    async rotate(userId, id) {
      const { token, digest, sealedToken } = rotatedSecret(id, ctx.sealer);
      const updated = await ctx.durable(
        webhookTokens.transaction((): WebhookTokenRow | undefined => {
          const r = row(id);
          if (!r || r.userId !== userId) return undefined;
          const next: WebhookTokenRow = { ...r, digest, sealedToken, rotatedAt: ctx.nowIso() };
          webhookTokens.put(id, next);
          return next;
        }),
      );
      return updated && { record: view(updated), token };
    },

    async remove(userId, id) {
      return ctx.durable(
        webhookTokens.transaction(() => {
          const r = row(id);
          if (!r || r.userId !== userId) return false;
          webhookTokens.remove(id);
          owners.remove(['webhookToken', userId, id]);
          lastUsed.remove(['webhookToken', id]);
          return true;
        }),
      );
    },

    async deactivateForAccounts(userId, accountIds, reason) {
      if (accountIds.length === 0) return [];
      return ctx.durable(
        webhookTokens.transaction(() => {
          const changed: string[] = [];
          for (const id of ownedIds(ctx, 'webhookToken', userId)) {
            const r = row(id);
            if (!r || !deactivates(r, userId, accountIds)) continue;
            webhookTokens.put(id, { ...r, inactiveReason: reason });
            changed.push(id);
          }
          return changed;
        }),
      );
    },

    touch(id, now) {
      touches.record(id, now, (at) => {
        lastUsed.put(['webhookToken', id], at).catch((err: unknown) => ctx.logger?.warn({ err, tokenId: id }, 'recording token use failed'));
        const remembered = ctx.cache.peek<WebhookTokenRecord>(`webhookToken:view:${id}`);
        if (remembered) remembered.lastUsedAt = new Date(at).toISOString();
      });
    },
  };
}
