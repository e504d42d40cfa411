/**
 * A cluster's NATS that requires a login, as README "Running a cluster" asks for: the store
 * commands (and nodes, through the same connectNats) log in with a user and password (from the
 * environment, a file, or the URL), a token, or an nkey, over TLS with a client certificate; with
 * no login or a wrong one they stop with a message naming the settings, not a wait for ever.
 * Before, tradegate had no way to give a login: NATS had to stay open, and an attacker probe
 * that reached it minted an API key for any user with a bare NATS client.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nkeys } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { run as runUsers } from '../../../src/commands/users.js';
import { useCommandOutput } from '../../support/cli.js';
import { freePorts, startNats, type NatsServer } from '../../support/nats.js';
import { connectNats } from '../../../src/cluster/node.js';
import { natsLogin } from '../../../src/cluster/nats-login.js';
import { TEST_DATA_KEY } from '../../support/store.js';

const dir = mkdtempSync(join(tmpdir(), 'tg-nats-login-'));
const user = nkeys.createUser();
const seedFile = join(dir, 'user.nk');
const passwordFile = join(dir, 'password');
let open: NatsServer & { stopAndRemove(): Promise<void> };
let tls: NatsServer & { stopAndRemove(): Promise<void> };
const { out, err } = useCommandOutput();

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
function certificates(): Record<'ca' | 'serverCert' | 'serverKey' | 'clientCert' | 'clientKey', string> {
  const file = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=tradegate test CA', '-keyout', file('ca.key'), '-out', file('ca.pem'));
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  for (const who of ['server', 'client']) {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${who}`, '-keyout', file(`${who}.key`), '-out', file(`${who}.csr`));
    ssl('x509', '-req', '-in', file(`${who}.csr`), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('san.ext'), '-out', file(`${who}.pem`));
  }
  return { ca: file('ca.pem'), serverCert: file('server.pem'), serverKey: file('server.key'), clientCert: file('client.pem'), clientKey: file('client.key') };
}

beforeAll(async () => {
  writeFileSync(seedFile, new TextDecoder().decode(user.getSeed()) + '\n', { mode: 0o600 });
  writeFileSync(passwordFile, 's3cret pass\n', { mode: 0o600 });
  open = await startNats({
    extra: { authorization: { users: [{ user: 'tg', password: 's3cret pass' }, { nkey: user.getPublicKey() }] } },
    login: { user: 'tg', pass: 's3cret pass' },
  });
  const c = certificates();
  tls = await startNats({
    extra: { authorization: { token: 'a-long-token' }, tls: { cert_file: c.serverCert, key_file: c.serverKey, ca_file: c.ca, verify: true } },
    login: { token: 'a-long-token', tls: { caFile: c.ca, certFile: c.clientCert, keyFile: c.clientKey } },
  });
  certs = c;
}, 60_000);
let certs: ReturnType<typeof certificates>;

afterAll(async () => {
  await open?.stopAndRemove();
  await tls?.stopAndRemove();
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => vi.unstubAllEnvs());

/** `tradegate users add NAME --cluster URL` with (only) the environment given; its exit code, or its ConfigError (the CLI prints it, exit 2). */
function addUser(name: string, url: string, env: Record<string, string>): Promise<number> {
  vi.unstubAllEnvs();
  vi.stubEnv('TRADEGATE_DATA_KEY', TEST_DATA_KEY);
  vi.stubEnv('TRADEGATE_CLUSTER_PREFIX', 'login');
  vi.stubEnv('TRADEGATE_DATA_DIR', dir);
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  return runUsers(['add', name, '--cluster', url]);
}

describe('a NATS that requires a login', () => {
  test('user and password from NATS_USER with NATS_PASSWORD_FILE or NATS_PASSWORD, or in the URL; an nkey seed from NATS_NKEY', async () => {
    expect(await addUser('u-file', open.url, { NATS_USER: 'tg', NATS_PASSWORD_FILE: passwordFile }), err.join('')).toBe(0);
    expect(await addUser('u-env', open.url, { NATS_USER: 'tg', NATS_PASSWORD: 's3cret pass' }), err.join('')).toBe(0);
    expect(await addUser('u-url', open.url.replace('nats://', 'nats://tg:s3cret%20pass@'), {}), err.join('')).toBe(0);
    expect(await addUser('u-nkey', open.url, { NATS_NKEY: seedFile }), err.join('')).toBe(0);
    out.length = 0;
    vi.stubEnv('NATS_NKEY', seedFile);
    expect(await runUsers(['list', '--cluster', open.url])).toBe(0);
    for (const name of ['u-file', 'u-env', 'u-url', 'u-nkey']) expect(out.join('')).toContain(name);
  }, 60_000);

  test('no login or a wrong one stops at once with the settings named; contradicting settings are refused before connecting', async () => {
    await expect(addUser('nobody', open.url, {})).rejects.toThrow(/^NATS refused the login \(none given\): Authorization Violation\. .*NATS_USER with NATS_PASSWORD_FILE/);
    const wrong = await addUser('nobody', open.url, { NATS_USER: 'tg', NATS_PASSWORD: 'wrong-password' }).catch((e: unknown) => e as Error);
    expect(String(wrong)).toMatch(/NATS refused the login \(user tg\)/);
    expect(String(wrong)).not.toContain('wrong-password');
    await expect(addUser('nobody', open.url, { NATS_USER: 'tg', NATS_PASSWORD: 'x', NATS_TOKEN: 'y' })).rejects.toThrow('NATS_USER/NATS_PASSWORD and NATS_TOKEN are each a way to log in; set one');
    await expect(addUser('nobody', open.url, { NATS_NKEY: passwordFile })).rejects.toThrow(/NATS_NKEY: .* does not hold a user seed/);
  }, 60_000);

  test('a token over TLS with a client certificate (tls:// URL, NATS_CA, NATS_CERT, NATS_KEY); without the CA the server is not trusted', async () => {
    const url = tls.url.replace('nats://', 'tls://');
    const tlsEnv = { NATS_TOKEN: 'a-long-token', NATS_CA: certs.ca, NATS_CERT: certs.clientCert, NATS_KEY: certs.clientKey };
    expect(await addUser('over-tls', url, tlsEnv), err.join('')).toBe(0);
    err.length = 0;
    const { NATS_CA: _ca, ...untrusted } = tlsEnv;
    await expect(addUser('untrusted', url, untrusted)).rejects.toThrow(/^NATS TLS failed: .*certificate.*Check NATS_CA/i);
    // TLS asked of a server without it: said at once, naming the settings (re-probe: retried for 60 s as "NATS not ready").
    await expect(addUser('no-tls', open.url, { NATS_USER: 'tg', NATS_PASSWORD: 's3cret pass', NATS_CA: certs.ca })).rejects.toThrow(/^NATS TLS failed: .*NATS_CA/);
  }, 60_000);
});

test('a running connection whose login NATS refuses for a while (the password changed on the server, then back) keeps trying and is back once NATS takes it (cluster re-probe: nats.js gave up for good after two refusals, and every node served 503 until restarted)', async () => {
  const [port] = await freePorts(1);
  const conf = join(dir, 'rotate.conf');
  const write = (password: string) => writeFileSync(conf, `listen: 127.0.0.1:${port}\nauthorization { users: [ { user: tg, password: "${password}" } ] }\n`);
  write('first-pass');
  const server = spawn('nats-server', ['-c', conf], { stdio: 'ignore' });
  try {
    const login = natsLogin([`nats://127.0.0.1:${port}`], { NATS_USER: 'tg', NATS_PASSWORD: 'first-pass' });
    let nc: Awaited<ReturnType<typeof connectNats>> | undefined;
    await expect.poll(async () => (nc = await connectNats(login, 'rotate').catch(() => undefined)) !== undefined, { timeout: 10_000 }).toBe(true);
    write('second-pass');
    server.kill('SIGHUP');
    // The server drops the connection whose login is no longer valid; its reconnects are refused meanwhile
    // (without ignoreAuthErrorAbort the client gives up for good within this time: the test fails so).
    await new Promise((r) => setTimeout(r, 2_000));
    write('first-pass');
    server.kill('SIGHUP');
    await expect.poll(async () => !nc!.isClosed() && (await nc!.flush().then(() => true, () => false)), { timeout: 15_000 }).toBe(true);
    await nc!.close();
  } finally {
    server.kill('SIGKILL');
  }
}, 60_000);
