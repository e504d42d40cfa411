import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/store/crypto.js';
import { newToken, parseToken, tokenPrefix, VerifiedTokens } from '../../../src/store/secret-token.js';

describe('secret tokens', () => {
  it('newToken makes <prefix>_<12 base62>_<32 base62> with its digest', () => {
    const { id, token, digest } = newToken('whk');
    expect(token).toMatch(new RegExp(`^whk_${id}_[A-Za-z0-9]{32}$`));
    expect(id).toMatch(/^[A-Za-z0-9]{12}$/);
    expect(digest).toBe(sha256Hex(token));
    expect(newToken('whk').token).not.toBe(token);
  });

  it('parseToken accepts only its own prefix and exact lengths', () => {
    const { id, token } = newToken('tgk');
    expect(parseToken('tgk', token)).toEqual({ id });
    expect(parseToken('whk', token)).toBeNull();
    expect(parseToken('tgk', token + 'x')).toBeNull();
    expect(parseToken('tgk', token.slice(0, -1))).toBeNull();
    expect(parseToken('tgk', token.toUpperCase() === token ? token.toLowerCase() : token.replace('tgk', 'TGK'))).toBeNull();
  });

  it('tokenPrefix shows the id part only', () => {
    expect(tokenPrefix('tgk', 'abcdefghijkl')).toBe('tgk_abcdefghijkl');
  });
});

describe('verified tokens remembered while their row is the same object (cluster store)', () => {
  it('answers a known token from memory, verifies again once its row was replaced, and remembers nothing that failed', () => {
    const { id, token, digest } = newToken('tgk');
    const rows = new Map<string, { id: string; digest: string; revokedAt: string | null }>([[id, { id, digest, revokedAt: null }]]);
    let views = 0;
    let reads = 0;
    const verified = new VerifiedTokens('tgk', (i: string) => (reads++, rows.get(i)), (r) => (r.revokedAt ? null : { id: r.id, n: ++views }));
    const first = verified.verify(token);
    expect(first).toEqual({ id, n: 1 });
    // The same view, no digest or view built again (one row lookup to see it is unchanged).
    expect(verified.verify(token)).toBe(first);
    expect(views).toBe(1);
    // Revoked on any node: a new row object, verified again, refused.
    rows.set(id, { id, digest, revokedAt: '2026-11-28T00:00:00Z' });
    expect(verified.verify(token)).toBeNull();
    expect(verified.verify(token)).toBeNull();
    // Deleted: refused.
    rows.delete(id);
    expect(verified.verify(token)).toBeNull();
    // A wrong secret or garbage: refused every time, never remembered.
    rows.set(id, { id, digest, revokedAt: null });
    const wrong = `${token.slice(0, -1)}${token.endsWith('a') ? 'b' : 'a'}`;
    for (const raw of [wrong, wrong, 'garbage', 42, undefined]) expect(verified.verify(raw)).toBeNull();
    expect(verified.verify(token)).toEqual({ id, n: 2 });
    reads = 0;
    expect(verified.verify(token)).toEqual({ id, n: 2 });
    expect(reads).toBe(1);
    // Its last use recorded here: the view is built again at the next use.
    verified.forget(id);
    expect(verified.verify(token)).toEqual({ id, n: 3 });
  });

  it('keeps at most max tokens (all forgotten past it), still answering each correctly', () => {
    const made = Array.from({ length: 5 }, () => newToken('whk'));
    const rows = new Map(made.map((t) => [t.id, { id: t.id, digest: t.digest }]));
    const verified = new VerifiedTokens('whk', (i: string) => rows.get(i), (r) => r.id, 2);
    for (let round = 0; round < 2; round++) for (const t of made) expect(verified.verify(t.token)).toBe(t.id);
  });
});
