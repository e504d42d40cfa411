/**
 * Connections over real HTTP against `serve --paper`: adding paper connections (account
 * names checked up front, broker refusals coded, never a 500).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../support/http.js';
import { startServe, type Served } from '../../support/processes.js';

let s: Served;
const api = (method: string, path: string, body?: unknown) => http(s.url, method, path, { key: s.apiKey, ...(body !== undefined ? { body } : {}) });

beforeAll(async () => {
  s = await startServe({ RATE_LIMIT_PER_MIN: '100000' });
}, 60_000);
afterAll(async () => {
  expect(await s?.stop()).toBe(0);
});

describe('POST /connections account names', () => {
  it('refuses a name given twice in one request with 400 naming the second one', async () => {
    const r = await api('POST', '/api/v1/connections', { accounts: [{ name: 'TWICE' }, { name: 'TWICE' }] });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ path: 'accounts.1.name' }] });
  });

  it('opens the default account on every call (its name is unique per login)', async () => {
    const first = await api('POST', '/api/v1/connections', {});
    const second = await api('POST', '/api/v1/connections', {});
    expect([first.status, second.status], `${first.text} ${second.text}`).toEqual([201, 201]);
  });

  it('answers 409 CONFLICT with the broker reason when the broker already has the name', async () => {
    expect((await api('POST', '/api/v1/connections', { accounts: [{ name: 'TAKEN-1' }] })).status).toBe(201);
    const again = await api('POST', '/api/v1/connections', { accounts: [{ name: 'OTHER-1' }, { name: 'TAKEN-1' }] });
    expect(again.status, again.text).toBe(409);
    expect(again.json).toMatchObject({ code: 'CONFLICT', brokerReason: 'account TAKEN-1 exists' });
  });

  it('refuses names the broker could not show (spaces, control characters) with 400', async () => {
    const r = await api('POST', '/api/v1/connections', { accounts: [{ name: 'a b' }] });
    expect(r.status).toBe(400);
    expect(r.json.errors[0].path).toBe('accounts.0.name');
  });
});
