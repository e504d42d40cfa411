import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS_FILE, LMDB_DIR, openStore, STREAM_ID_SPAN, type LmdbStore, type Store } from '../../../src/store/index.js';
import { allFiles, tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
beforeEach(async () => {
  t = await tempStore();
});
afterEach(() => t.cleanup());

describe('openStore', () => {
  it('keeps one LMDB environment and a 0600 key file in the data dir', () => {
    const names = readdirSync(t.dir);
    expect(names).toContain(LMDB_DIR);
    expect(names).toContain('data.key');
    expect(statSync(join(t.dir, 'data.key')).mode & 0o777).toBe(0o600);
  });

  it('keeps every record kind across close and reopen', async () => {
    const user = await t.store.users.create({ name: 'alice' });
    const { record: key, key: rawKey } = await t.store.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read'] });
    const conn = await t.store.connections.create({
      userId: user.id,
      name: 'c',
      broker: 'paper',
      environment: 'paper',
      restUrl: 'http://127.0.0.1:1/v1',
      wsUrl: 'ws://127.0.0.1:1/v1/websocket',
      credentials: { name: 'p', password: 'q' },
    });
    const { record: tok, token } = await t.store.webhookTokens.create({ userId: user.id, name: 'w', accountId: '1' });
    const strat = await t.store.strategies.create(user.id, { name: 's', description: '' });
    await t.store.idempotency.put('user:' + user.id, 'idem', { fingerprint: 'x', status: 200, headers: {}, body: 'b' });
    t.store.journal.append({ userId: user.id, accountId: '1', kind: 'k', request: 1, outcome: 2 });

    const s = await t.reopen();
    expect(s.users.byName('alice')).toEqual(user);
    expect(s.apiKeys.verify(rawKey)).toEqual(key);
    expect(s.connections.getForUser(user.id, conn.id)).toEqual(conn);
    expect(s.webhookTokens.verify(token)).toEqual(tok);
    expect(s.webhookTokens.reveal(user.id, tok.id)).toBe(token);
    expect(s.strategies.getForUser(user.id, strat.id)).toEqual(strat);
    expect((await s.idempotency.get('user:' + user.id, 'idem'))?.body).toBe('b');
    expect(await s.journal.list({ limit: 5 })).toHaveLength(1);
  });

  it('writes no API key, webhook token, broker password or user password in plain text to any file', async () => {
    const user = await t.store.users.create({ name: 'alice', password: 'user-password-Xy9' });
    const { key } = await t.store.apiKeys.create({ userId: user.id, name: 'k', scopes: ['read', 'trade'] });
    const { token } = await t.store.webhookTokens.create({ userId: user.id, name: 'w', accountId: '1' });
    await t.store.connections.create({
      userId: user.id,
      name: 'c',
      broker: 'tradovate',
      environment: 'demo',
      restUrl: 'https://demo.tradovateapi.com/v1',
      wsUrl: 'wss://demo.tradovateapi.com/v1/websocket',
      credentials: { name: 'jdoe', password: 'broker-password-Q7w', sec: 'api-secret-Z3k' },
    });
    await t.store.close();

    const secrets = [
      key,
      key.slice(key.lastIndexOf('_') + 1),
      token,
      token.slice(token.lastIndexOf('_') + 1),
      'broker-password-Q7w',
      'api-secret-Z3k',
      'user-password-Xy9',
    ];
    const files = allFiles(t.dir);
    expect(files.map((f) => f.path).some((p) => p.endsWith(LMDB_DIR))).toBe(true);
    // Control: the scan does see record contents (the key id is stored in clear, by design).
    expect(files.some((f) => f.bytes.includes(Buffer.from(key.slice(4, 16))))).toBe(true);
    for (const f of files) {
      for (const secret of secrets) expect(f.bytes.includes(Buffer.from(secret)), `${secret} in ${f.path}`).toBe(false);
    }
  });

  it('refuses to open a data dir with a different data key than it was created with', async () => {
    const u = await t.store.users.create({ name: 'alice' });
    await t.store.webhookTokens.create({ userId: u.id, name: 'w', accountId: '1' });
    await t.store.close();
    await expect(openStore({ dataDir: t.dir, dataKey: 'ab'.repeat(32) })).rejects.toThrow(/data key does not match/);
    // The original key file still opens it.
    t.store = await openStore({ dataDir: t.dir });
    expect(t.store.users.byName('alice')).toEqual(u);
  });

  it('refuses to invent a new key file when the existing one is missing', async () => {
    await t.store.close();
    rmSync(join(t.dir, 'data.key'));
    await expect(openStore({ dataDir: t.dir })).rejects.toThrow(/data\.key is missing/);
    expect(existsSync(join(t.dir, 'data.key'))).toBe(false);
  });

  it('accepts a configured key consistently across reopen', async () => {
    const keyed = await tempStore({ dataKey: 'cd'.repeat(32) });
    try {
      expect(existsSync(join(keyed.dir, 'data.key'))).toBe(false);
      const u = (await keyed.store.users.create({ name: 'carol' })).id;
      const { record, token } = await keyed.store.webhookTokens.create({ userId: u, name: 'w', accountId: '1' });
      const s = await keyed.reopen();
      expect(s.webhookTokens.reveal(u, record.id)).toBe(token);
    } finally {
      await keyed.cleanup();
    }
  });

  it('starts each run\'s health stream ids above every id of the runs before, across a reopen and a clock set back', async () => {
    const lmdb = (store: Store) => store as LmdbStore;
    const now = 1_800_000_000_000;
    const first = await lmdb(t.store).claimStreamIdBase(now);
    expect(first).toBe(now);
    // Restarted a second later: the clock would give ids the first run may have handed out.
    const s = await t.reopen();
    const second = await lmdb(s).claimStreamIdBase(now + 1_000);
    expect(second).toBe(first + STREAM_ID_SPAN);
    // The clock set back an hour across another restart.
    const third = await lmdb(await t.reopen()).claimStreamIdBase(now - 3_600_000);
    expect(third).toBe(second + STREAM_ID_SPAN);
    // Long after: the clock again (ids stay near it).
    const later = now + 2 * STREAM_ID_SPAN + 10 * STREAM_ID_SPAN;
    expect(await lmdb(await t.reopen()).claimStreamIdBase(later)).toBe(later);
  });

  it('a new password of the demo user drops the saved one from demo-credentials.json; another user\'s leaves it (ops probe: the old password stayed there)', async () => {
    const demo = await t.store.users.create({ name: 'demo', password: 'first-password-1' });
    const other = await t.store.users.create({ name: 'alice', password: 'alice-password-1' });
    const file = join(t.dir, DEMO_CREDENTIALS_FILE);
    writeFileSync(file, JSON.stringify({ login: { name: 'demo', password: 'first-password-1' }, apiKey: 'k' }), { mode: 0o600 });
    await t.store.users.setPassword(other.id, 'alice-password-2');
    expect(JSON.parse(readFileSync(file, 'utf8')).login.password).toBe('first-password-1');
    await t.store.users.setPassword(demo.id, 'second-password-2');
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved).toMatchObject({ login: { name: 'demo', password: null, passwordChangedAt: expect.any(String) }, apiKey: 'k' });
    expect(readFileSync(file, 'utf8')).not.toContain('first-password-1');
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('close is idempotent', async () => {
    await t.store.close();
    await expect(t.store.close()).resolves.toBeUndefined();
  });
});
