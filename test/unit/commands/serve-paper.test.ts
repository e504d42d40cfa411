import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { loginRefusal, rememberPaperLogin, startEmbeddedPaper, type EmbeddedPaper } from '../../../src/commands/serve-paper.js';
import { PaperRefusedError } from '../../../src/sim/control-client.js';
import { createLogger } from '../../../src/log.js';
import { tempStore, type TempStore } from '../../support/store.js';

let t: TempStore;
let paper: EmbeddedPaper | undefined;
beforeEach(async () => {
  t = await tempStore();
});
afterEach(async () => {
  await paper?.close();
  paper = undefined;
  await t.cleanup();
});

const start = () => startEmbeddedPaper({ store: t.store, dataDir: t.dir, port: 0, logLevel: 'silent', logger: createLogger('silent'), restartMs: 10 });

async function accountList(restUrl: string, name: string, password: string): Promise<{ id: number; name: string }[] | null> {
  const auth = await fetch(`${restUrl}/auth/accesstokenrequest`, { method: 'POST', body: JSON.stringify({ name, password }) });
  const { accessToken } = (await auth.json()) as { accessToken?: string };
  if (!accessToken) return null;
  const list = await fetch(`${restUrl}/account/list`, { headers: { authorization: `Bearer ${accessToken}` } });
  return (await list.json()) as { id: number; name: string }[];
}

async function accountNames(restUrl: string, name: string, password: string): Promise<string[] | null> {
  return (await accountList(restUrl, name, password))?.map((a) => a.name) ?? null;
}

async function storePaperConnection(name: string, password: string, accounts: string[], remember = true): Promise<{ userId: string; id: string }> {
  const user = t.store.users.byName(`u-${name}`) ?? (await t.store.users.create({ name: `u-${name}` }));
  const record = await t.store.connections.create({
    userId: user.id, name: 'Paper', broker: 'paper', environment: 'paper',
    restUrl: 'http://old/v1', wsUrl: 'ws://old/v1/websocket', credentials: { name, password },
  });
  if (remember) rememberPaperLogin(t.dir, name, accounts);
  return { userId: user.id, id: record.id };
}

const remembered = () => JSON.parse(readFileSync(join(t.dir, 'paper-logins.json'), 'utf8')) as Record<string, { accounts: string[]; ids: Record<string, number> }>;

test('re-creates the stored paper logins with their account names at start', async () => {
  await storePaperConnection('kept', 'pw-kept', ['K1', 'K2']);
  paper = await start();
  expect(await accountNames(paper.endpoints.restUrl, 'kept', 'pw-kept')).toEqual(['K1', 'K2']);
});

test('openLogin opens the login at the broker and remembers its accounts for the next start (no secrets in the file)', async () => {
  paper = await start();
  await paper.broker.openLogin({ name: 'fresh', password: 'pw-fresh', accounts: ['F1'] });
  expect(await accountNames(paper.broker.restUrl, 'fresh', 'pw-fresh')).toEqual(['F1']);
  const file = readFileSync(join(t.dir, 'paper-logins.json'), 'utf8');
  const [f1] = (await accountList(paper.broker.restUrl, 'fresh', 'pw-fresh'))!;
  expect(JSON.parse(file)).toEqual({ fresh: { accounts: ['F1'], ids: { F1: f1!.id } } });
  expect(file).not.toContain('pw-fresh');
});

test('a login re-created at a start keeps its accounts’ ids, though what was numbered before it is gone (tokens, guards and locks are bound to ids)', async () => {
  paper = await start();
  await paper.broker.openLogin({ name: 'before', password: 'pw-b', accounts: ['B1', 'B2'] });
  const { id } = await storePaperConnection('after', 'pw-a', ['A1', 'A2'], false);
  await paper.broker.ensureLogin(id);
  const idsOf = async () => (await accountList(paper!.endpoints.restUrl, 'after', 'pw-a'))?.map((a) => [a.name, a.id]);
  const first = await idsOf();
  await paper.close();
  // The next start does not bring back 'before' (no stored connection uses it): without its
  // ids remembered, 'after' would now be numbered where 'before' was.
  paper = await start();
  expect(await idsOf()).toEqual(first);
  expect(await accountNames(paper.endpoints.restUrl, 'before', 'pw-b')).toBeNull();
  // Files written before ids were kept (names only) still restore, and keep the ids given then.
  await paper.close();
  writeFileSync(join(t.dir, 'paper-logins.json'), JSON.stringify({ after: ['A1', 'A2'] }));
  paper = await start();
  const again = await accountList(paper.endpoints.restUrl, 'after', 'pw-a');
  expect(again!.map((a) => a.name)).toEqual(['A1', 'A2']);
  expect(remembered().after!.ids).toEqual(Object.fromEntries(again!.map((a) => [a.name, a.id])));
});

test('a paper broker whose thread dies is restarted on the same address with the stored logins', async () => {
  await storePaperConnection('survivor', 'pw-s', ['S1']);
  paper = await start();
  const first = paper.current;
  const restarted = paper.restarted();
  await first.worker.terminate();
  await restarted;
  expect(paper.current).not.toBe(first);
  expect(paper.current.restUrl).toBe(paper.endpoints.restUrl);
  expect(await accountNames(paper.endpoints.restUrl, 'survivor', 'pw-s')).toEqual(['S1']);
});

test('close() stops it for good', async () => {
  paper = await start();
  const url = paper.endpoints.controlUrl;
  await paper.close();
  paper = undefined;
  await expect(fetch(`${url}/state`)).rejects.toThrow();
  expect(existsSync(join(t.dir, 'paper-logins.json'))).toBe(false);
});

test('a login the broker refuses becomes a coded error, never a 500', () => {
  expect(loginRefusal(new PaperRefusedError(409, 'account A exists', 'x'))).toMatchObject({ code: 'CONFLICT', extensions: { brokerReason: 'account A exists' } });
  expect(loginRefusal(new PaperRefusedError(400, 'password is required', 'x'))).toMatchObject({ code: 'BROKER_REJECTED' });
  expect(loginRefusal(new PaperRefusedError(500, 'boom', 'x'))).toMatchObject({ code: 'BROKER_UNAVAILABLE', retryAfterSeconds: 1 });
  expect(loginRefusal(new TypeError('fetch failed'))).toMatchObject({ code: 'BROKER_UNAVAILABLE' });
});

test('closeLogin removes the login at the broker and from the file, unless a stored connection still uses it', async () => {
  paper = await start();
  await paper.broker.openLogin({ name: 'gone', password: 'pw-g', accounts: ['G1'] });
  await paper.broker.closeLogin('gone');
  expect(await accountNames(paper.broker.restUrl, 'gone', 'pw-g')).toBeNull();
  expect(remembered()).toEqual({});
  // Its account name is free again at the broker.
  await paper.broker.openLogin({ name: 'again', password: 'pw-a', accounts: ['G1'] });

  await storePaperConnection('shared', 'pw-s', ['S1']);
  await paper.broker.ensureLogin(t.store.connections.all().find((c) => t.store.connections.credentials(c.id).name === 'shared')!.id);
  await paper.broker.closeLogin('shared');
  expect(await accountNames(paper.broker.restUrl, 'shared', 'pw-s')).toEqual(['S1']);
  expect(remembered()).toMatchObject({ shared: { accounts: ['S1'] } });
});

test('ensureLogin opens a stored connection’s login the broker lacks, and is content when it has it', async () => {
  paper = await start();
  const { id } = await storePaperConnection('late', 'pw-l', ['L1']);
  expect(await accountNames(paper.broker.restUrl, 'late', 'pw-l')).toBeNull();
  expect(await paper.broker.ensureLogin(id)).toBe(true);
  expect(await accountNames(paper.broker.restUrl, 'late', 'pw-l')).toEqual(['L1']);
  expect(await paper.broker.ensureLogin(id)).toBe(true);
});

test('at start, logins remembered for connections that are gone are forgotten and not re-created', async () => {
  await storePaperConnection('kept', 'pw-k', ['K1']);
  rememberPaperLogin(t.dir, 'leaked', ['X1']);
  paper = await start();
  expect(Object.keys(remembered())).toEqual(['kept']);
  expect(remembered().kept!.accounts).toEqual(['K1']);
  expect(await accountNames(paper.endpoints.restUrl, 'kept', 'pw-k')).toEqual(['K1']);
});

test('re-creates a disabled paper connection’s login too, under its remembered ids: other logins do not take them (attack probe: a kill switch on a disabled connection’s account was lost across a restart)', async () => {
  const { id } = await storePaperConnection('resting', 'pw-resting', ['R1']);
  paper = await start();
  const [r1] = (await accountList(paper.endpoints.restUrl, 'resting', 'pw-resting'))!;
  await t.store.connections.setDisabled(id, true);
  await paper.close();
  // A fresh broker: a login opened before the disabled one is re-created would take its id.
  paper = await start();
  await paper.broker.openLogin({ name: 'newcomer', password: 'pw-new', accounts: ['N1'] });
  expect((await accountList(paper.endpoints.restUrl, 'resting', 'pw-resting'))!.map((a) => a.id)).toEqual([r1!.id]);
  expect((await accountList(paper.endpoints.restUrl, 'newcomer', 'pw-new'))!.map((a) => a.id)).not.toContain(r1!.id);
  expect(remembered().resting!.ids).toEqual({ R1: r1!.id });
});
