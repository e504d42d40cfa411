import { describe, expect, it } from 'vitest';
import { AccountClaims, type ClaimsHost, type Refusal, type ServedRecord } from '../../../src/actors/account-claims.js';
import type { ConnectionSpec } from '../../../src/domain/connections.js';
import type { AccountRecord } from '../../../src/domain/orders.js';
import { createLogger } from '../../../src/log.js';

const account = (id: string): AccountRecord => ({ id, name: `ACC${id}`, connectionId: '', broker: 'paper', environment: 'paper', active: true });

/** Running connections of user u1, a claims store, and what the claims did to them. */
function setup(stored: ServedRecord[] = [], withStore = true) {
  const specs = new Map<string, ConnectionSpec>();
  const live = new Map<string, AccountRecord[]>();
  const stopped: [string, Refusal][] = [];
  const started: string[] = [];
  const kept: [string, string[]][] = [];
  const rows = new Map<string, ServedRecord & { userId: string }>(stored.map((r) => [r.id, { ...r, userId: 'u1' }]));
  const host: ClaimsHost = {
    specs,
    liveAccounts: (id) => live.get(id),
    stop: (id, refusal) => {
      stopped.push([id, refusal]);
      live.delete(id);
    },
    start: (id) => started.push(id),
  };
  const claims = new AccountClaims(
    host,
    withStore && {
      of: (userId) => [...rows.values()].filter((r) => r.userId === userId),
      keep: async (id, accountIds) => {
        kept.push([id, accountIds]);
        rows.set(id, { ...rows.get(id)!, servedAccountIds: accountIds });
      },
    } || undefined,
    createLogger('silent'),
  );
  const run = (id: string, createdAt: string, userId = 'u1') => {
    specs.set(id, { connectionId: id, userId, broker: 'paper', environment: 'paper', restUrl: '', wsUrl: '', credentials: { name: 'n', password: 'p' }, budget: { perMinute: 1, perHour: 1 }, createdAt });
    if (!rows.has(id)) rows.set(id, { id, createdAt, userId });
  };
  /** A connection reports its accounts, as the supervisor passes them on. */
  const report = (id: string, ids: string[]): boolean => {
    const accounts = ids.map(account);
    const admitted = claims.refusalOf(id) !== undefined || claims.admit(id, accounts);
    if (admitted && claims.refusalOf(id) === undefined) live.set(id, accounts);
    return admitted;
  };
  return { claims, specs, live, rows, stopped, started, kept, run, report };
}

describe('AccountClaims: who serves an account id two connections of one user report', () => {
  it('with no claims stored, the older connection keeps the id whichever reports first; the newer is refused, naming the account and the connection', () => {
    const t = setup([], false);
    t.run('con_old', '2026-01-01T00:00:00Z');
    t.run('con_new', '2026-02-01T00:00:00Z');
    expect(t.report('con_new', ['1', '2'])).toBe(true);
    expect(t.report('con_old', ['1'])).toBe(true);
    expect(t.stopped).toHaveLength(1);
    const [id, refusal] = t.stopped[0]!;
    expect(id).toBe('con_new');
    expect(refusal).toMatchObject({ by: 'con_old', accountId: '1' });
    expect(refusal.detail).toMatch(/account 1 is also an account of connection con_old/);
    expect(t.claims.refusalOf('con_new')).toEqual(refusal);
    // Refused as a whole: reporting again, it takes nothing while con_old serves the id.
    t.claims.forget('con_new');
    expect(t.report('con_new', ['1', '2'])).toBe(false);
  });

  it('the first to report stores its claim, and keeps the id against an older connection reporting it later', () => {
    const t = setup();
    t.run('con_old', '2026-01-01T00:00:00Z');
    t.run('con_new', '2026-02-01T00:00:00Z');
    expect(t.report('con_new', ['1'])).toBe(true);
    expect(t.kept).toEqual([['con_new', ['1']]]);
    expect(t.report('con_old', ['1', '2'])).toBe(false);
    expect(t.stopped.map(([id, r]) => [id, r.by])).toEqual([['con_old', 'con_new']]);
    // Refused as a whole: nothing it reported is stored as served.
    expect(t.rows.get('con_old')?.servedAccountIds).toBeUndefined();
  });

  it('a stored claim beats age: the newer connection that served the id first keeps it, also before it reports', () => {
    const t = setup([{ id: 'con_new', createdAt: '2026-02-01T00:00:00Z', servedAccountIds: ['1'] }]);
    t.run('con_old', '2026-01-01T00:00:00Z');
    t.run('con_new', '2026-02-01T00:00:00Z');
    // The owner has not reported yet (connecting after a restart): its stored claim holds.
    expect(t.report('con_old', ['1'])).toBe(false);
    expect(t.stopped.map(([id, r]) => [id, r.by])).toEqual([['con_old', 'con_new']]);
    expect(t.report('con_new', ['1'])).toBe(true);
  });

  it('a connection that loses an id is refused, and once the winner reports, its stored claim on that id goes while those on its other ids stay', () => {
    // Both stored a claim on 1 (each served it once); with both, the older keeps it.
    const t = setup([
      { id: 'con_a', createdAt: '2026-01-01T00:00:00Z', servedAccountIds: ['1'] },
      { id: 'con_b', createdAt: '2026-02-01T00:00:00Z', servedAccountIds: ['1', '2'] },
    ]);
    t.run('con_a', '2026-01-01T00:00:00Z');
    t.run('con_b', '2026-02-01T00:00:00Z');
    // con_a, not yet reporting (connecting after a restart), keeps it by its stored claim.
    expect(t.report('con_b', ['1', '2'])).toBe(false);
    expect(t.rows.get('con_b')?.servedAccountIds).toEqual(['1', '2']);
    expect(t.report('con_a', ['1'])).toBe(true);
    expect(t.stopped.map(([id, r]) => [id, r.by, r.accountId])).toEqual([['con_b', 'con_a', '1']]);
    expect(t.rows.get('con_b')?.servedAccountIds).toEqual(['2']);
    // Its claim on 2 holds while it is refused: a third connection reporting 2 is refused.
    t.run('con_c', '2025-12-01T00:00:00Z');
    expect(t.report('con_c', ['2'])).toBe(false);
  });

  it('a refused connection starts again once the one that kept the id no longer serves or claims it', () => {
    const t = setup();
    t.run('con_old', '2026-01-01T00:00:00Z');
    t.run('con_new', '2026-02-01T00:00:00Z');
    t.report('con_old', ['1']);
    t.report('con_new', ['1']);
    t.claims.recheck();
    expect(t.started).toEqual([]);
    // The owner is deleted: gone from the running connections and from the store.
    t.specs.delete('con_old');
    t.live.delete('con_old');
    t.rows.delete('con_old');
    t.claims.recheck();
    expect(t.started).toEqual(['con_new']);
    expect(t.claims.refusalOf('con_new')).toBeUndefined();
    expect(t.report('con_new', ['1'])).toBe(true);
  });

  it('the owner reporting without the id readmits the connections it refused over it', () => {
    const t = setup();
    t.run('con_old', '2026-01-01T00:00:00Z');
    t.run('con_new', '2026-02-01T00:00:00Z');
    t.report('con_old', ['1', '3']);
    t.report('con_new', ['1']);
    expect(t.report('con_old', ['3'])).toBe(true);
    expect(t.started).toEqual(['con_new']);
    expect(t.kept.at(-1)).toEqual(['con_old', ['3']]);
  });

  it('connections of other users never collide', () => {
    const t = setup();
    t.run('con_a', '2026-01-01T00:00:00Z');
    t.report('con_a', ['1']);
    t.run('con_x', '2025-01-01T00:00:00Z', 'u2');
    expect(t.report('con_x', ['1'])).toBe(true);
    expect(t.stopped).toEqual([]);
  });
});
