import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/store/crypto.js';
import { newToken, parseToken, tokenPrefix } from '../../../src/store/secret-token.js';

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
