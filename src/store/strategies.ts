/**
 * Strategies: named defaults a webhook token may point at; their fields fill what an alert
 * leaves out. Validation of the fields is the HTTP layer's job (zod); this module stores them.
 */
import { checkRecordName } from '../domain/plain-text.js';
import type { LegInput, OrderType } from '../domain/orders.js';
import { AppError } from '../domain/problems.js';
import { cachedOwnedReads, rowReader, type StoreContext } from './context.js';
import { randomBase62 } from './crypto.js';

export interface StrategyFields {
  name: string;
  description: string;
  symbol?: string;
  qty?: number;
  orderType?: OrderType;
  takeProfit?: LegInput;
  stopLoss?: LegInput;
}

export interface StrategyRecord extends StrategyFields {
  id: string;
  userId: string;
  createdAt: string;
  updatedAt: string;
}

/** Fields to change; `null` clears an optional field. */
export type StrategyPatch = {
  name?: string;
  description?: string;
} & { [K in 'symbol' | 'qty' | 'orderType' | 'takeProfit' | 'stopLoss']?: StrategyFields[K] | null };

export interface StrategyStore {
  create(userId: string, fields: StrategyFields): Promise<StrategyRecord>;
  /** A user's strategies, oldest first. */
  listByUser(userId: string): StrategyRecord[];
  /** The strategy when `userId` owns it. */
  getForUser(userId: string, id: string): StrategyRecord | undefined;
  /** Applies a patch to a strategy the user owns; undefined when unknown or not theirs. */
  update(userId: string, id: string, patch: StrategyPatch): Promise<StrategyRecord | undefined>;
  /** Deletes a strategy the user owns; false when unknown or not theirs. */
  remove(userId: string, id: string): Promise<boolean>;
}

const OPTIONAL = ['symbol', 'qty', 'orderType', 'takeProfit', 'stopLoss'] as const;

/** VALIDATION_FAILED unless the name has 1..100 characters. */
export function checkName(name: string): void {
  checkRecordName('strategy', name);
}

/** Copies only known fields, dropping undefined/null optionals (so records stay clean). */
export function clean(rec: StrategyRecord): StrategyRecord {
  const out: StrategyRecord = {
    id: rec.id,
    userId: rec.userId,
    name: rec.name,
    description: rec.description,
    createdAt: rec.createdAt,
    updatedAt: rec.updatedAt,
  };
  for (const k of OPTIONAL) {
    const v = rec[k];
    if (v !== undefined && v !== null) (out as unknown as Record<string, unknown>)[k] = v;
  }
  return out;
}

/** Validates a new strategy and builds its record. */
export function newStrategy(userId: string, fields: StrategyFields, now: string): StrategyRecord {
  checkName(fields.name);
  return clean({ ...fields, id: `stg_${randomBase62(12)}`, userId, createdAt: now, updatedAt: now });
}

/** `r` with `patch` applied (null clears an optional field; unknown fields are ignored). */
export function patchedStrategy(r: StrategyRecord, patch: StrategyPatch, updatedAt: string): StrategyRecord {
  const merged = { ...r } as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch)) {
    if (v !== undefined && (k === 'name' || k === 'description' || (OPTIONAL as readonly string[]).includes(k))) merged[k] = v;
  }
  return clean({ ...(merged as unknown as StrategyRecord), id: r.id, userId: r.userId, createdAt: r.createdAt, updatedAt });
}

/** The strategy store over a shared context. */
export function createStrategyStore(ctx: StoreContext): StrategyStore {
  const { strategies, owners } = ctx.dbs;
  const row = rowReader<StrategyRecord>(strategies);

  return {
    async create(userId, fields) {
      const rec = newStrategy(userId, fields, ctx.nowIso());
      const ok = await ctx.durable(
        strategies.ifNoExists(rec.id, () => {
          strategies.put(rec.id, rec);
          owners.put(['strategy', userId, rec.id], true);
        }),
      );
      if (!ok) throw new AppError('CONFLICT', 'strategy id collision, retry');
      return rec;
    },

    ...cachedOwnedReads(ctx, 'strategy', row, clean),

    async update(userId, id, patch) {
      if (patch.name !== undefined) checkName(patch.name);
      const updatedAt = ctx.nowIso();
      return ctx.durable(
        strategies.transaction((): StrategyRecord | undefined => {
          const r = row(id);
          if (!r || r.userId !== userId) return undefined;
          const next = patchedStrategy(r, patch, updatedAt);
          strategies.put(id, next);
          return next;
        }),
      );
    },

    async remove(userId, id) {
      return ctx.durable(
        strategies.transaction(() => {
          const r = row(id);
          if (!r || r.userId !== userId) return false;
          strategies.remove(id);
          owners.remove(['strategy', userId, id]);
          return true;
        }),
      );
    },
  };
}
