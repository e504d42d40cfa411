import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { meResponseSchema } from '../../../../src/http/schemas.js';
import { call, world, type World } from '../../../support/routes.js';

let w: World;
beforeEach(async () => {
  w = await world();
});
afterEach(() => w.close());

describe('GET /me', () => {
  it('names the user, this key (without its secret) and the rate limit', async () => {
    const { record, key } = await w.store.apiKeys.create({ userId: w.a.userId, name: 'bot', scopes: ['read'] });
    const res = await call(w, 'GET', '/me', { userId: w.a.userId, principalId: record.id, scopes: ['read'] });
    const body = meResponseSchema.parse(res.body);
    expect(body).toEqual({
      user: { id: w.a.userId, name: 'alice' },
      key: { id: record.id, name: 'bot', scopes: ['read'], prefix: `tgk_${record.id}` },
      rateLimit: { limit: 120, windowSeconds: 60 },
    });
    expect(JSON.stringify(res.body)).not.toContain(key);
  });
});
