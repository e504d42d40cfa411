/**
 * How a node, or a CLI command with `--cluster`, logs in to NATS.
 *
 * NATS holds every record the nodes share: users with their password hashes, API key and session
 * digests, webhook tokens, connections (broker credentials sealed with the data key). Whoever can
 * write there can make themselves a key for any user (attacker probe: an unauthenticated NATS
 * client wrote one, and it traded). So a NATS that anything but the nodes can reach must require a
 * login, and the nodes must be able to give one: README "Running a cluster" shows the server side.
 *
 * One way at a time, from the environment (never flags: a command line is visible to every user of
 * the machine), with the NATS CLI's names:
 * - user and password: NATS_USER with NATS_PASSWORD or NATS_PASSWORD_FILE, or `user:password@` in
 *   the server URLs (the same on every URL);
 * - a token: NATS_TOKEN or NATS_TOKEN_FILE;
 * - an nkey: NATS_NKEY, the file holding the user's seed (`SU…`).
 * TLS: `tls://` server URLs, NATS_CA (the CA file the server's certificate is checked against),
 * NATS_CERT and NATS_KEY (a client certificate, for servers that verify clients).
 */
import { readFileSync } from 'node:fs';
import { nkeyAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import { ConfigError } from '../config.js';

/** What `connect` is given: the server URLs without their credentials, and the login and TLS options. */
export interface NatsLogin {
  servers: string[];
  options: Pick<ConnectionOptions, 'user' | 'pass' | 'token' | 'authenticator' | 'tls'>;
  /** How it logs in, for the start-up line: `user tg`, `token`, `nkey UA…`, `none`; never a secret. */
  method: string;
}

/** A secret from `NAME` or the file `NAME_FILE` (its content without the final line break); not both. */
function secret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const direct = env[name] || undefined;
  const file = env[`${name}_FILE`] || undefined;
  if (direct !== undefined && file !== undefined) throw new ConfigError(`${name} and ${name}_FILE: set one of them`);
  if (file === undefined) return direct;
  const text = readSetting(`${name}_FILE`, file).replace(/\r?\n$/, '');
  if (text === '') throw new ConfigError(`${name}_FILE: ${file} is empty`);
  return text;
}

function readSetting(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/** `nats://user:pass@host:port` → its credentials (decoded) and the URL without them. */
function splitUrl(url: string): { url: string; user?: string; pass?: string } {
  const match = /^([a-z]+:\/\/)([^@/]*)@(.*)$/i.exec(url);
  if (!match) return { url };
  const [, scheme, userinfo, rest] = match as unknown as [string, string, string, string];
  const colon = userinfo.indexOf(':');
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      throw new ConfigError('--cluster / TRADEGATE_CLUSTER: the user or password in a server URL is not valid percent-encoding');
    }
  };
  const user = decode(colon < 0 ? userinfo : userinfo.slice(0, colon));
  const pass = colon < 0 ? undefined : decode(userinfo.slice(colon + 1));
  return { url: scheme + rest, user, ...(pass !== undefined ? { pass } : {}) };
}

/**
 * The login for `servers` (the `--cluster` list) from the environment. Throws ConfigError naming the
 * setting when the settings contradict each other or a file cannot be read.
 */
export function natsLogin(servers: readonly string[], env: NodeJS.ProcessEnv = process.env): NatsLogin {
  const split = servers.map(splitUrl);
  const inUrl = split.filter((s) => s.user !== undefined);
  if (inUrl.length > 0 && (inUrl.length !== split.length || inUrl.some((s) => s.user !== inUrl[0]!.user || s.pass !== inUrl[0]!.pass))) {
    throw new ConfigError('--cluster / TRADEGATE_CLUSTER: give the same user and password on every server URL, or none and set NATS_USER and NATS_PASSWORD_FILE');
  }
  const user = env.NATS_USER || undefined;
  const password = secret(env, 'NATS_PASSWORD');
  const token = secret(env, 'NATS_TOKEN');
  const nkeyFile = env.NATS_NKEY || undefined;
  const ways = [
    (user !== undefined || password !== undefined) && 'NATS_USER/NATS_PASSWORD',
    inUrl.length > 0 && 'a user in the server URLs',
    token !== undefined && 'NATS_TOKEN',
    nkeyFile !== undefined && 'NATS_NKEY',
  ].filter((w): w is string => typeof w === 'string');
  if (ways.length > 1) throw new ConfigError(`NATS login: ${ways.join(' and ')} are each a way to log in; set one`);

  const options: NatsLogin['options'] = {};
  let method = 'none';
  if (user !== undefined || password !== undefined) {
    if (user === undefined) throw new ConfigError('NATS_PASSWORD needs NATS_USER');
    if (password === undefined) throw new ConfigError('NATS_USER needs NATS_PASSWORD or NATS_PASSWORD_FILE');
    Object.assign(options, { user, pass: password });
    method = `user ${user}`;
  } else if (inUrl.length > 0) {
    const { user: u, pass } = inUrl[0]!;
    if (pass === undefined) throw new ConfigError('--cluster / TRADEGATE_CLUSTER: a server URL names a user without a password (user:password@host)');
    Object.assign(options, { user: u, pass });
    method = `user ${u!}`;
  } else if (token !== undefined) {
    options.token = token;
    method = 'token';
  } else if (nkeyFile !== undefined) {
    const seed = readSetting('NATS_NKEY', nkeyFile).trim();
    if (!/^SU[A-Z2-7]{56}$/.test(seed)) throw new ConfigError(`NATS_NKEY: ${nkeyFile} does not hold a user seed (SU…, 58 characters)`);
    options.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
    method = 'nkey';
  }

  const ca = env.NATS_CA || undefined;
  const cert = env.NATS_CERT || undefined;
  const key = env.NATS_KEY || undefined;
  if ((cert === undefined) !== (key === undefined)) throw new ConfigError('NATS_CERT and NATS_KEY: a client certificate needs both');
  const urls = split.map((s) => s.url);
  if (ca !== undefined || cert !== undefined || urls.some((u) => u.startsWith('tls://'))) {
    // Read now, so that a wrong path is said at start, naming the setting (the client reads them at each connect).
    for (const [name, path] of [['NATS_CA', ca], ['NATS_CERT', cert], ['NATS_KEY', key]] as const) if (path !== undefined) readSetting(name, path);
    options.tls = { ...(ca !== undefined && { caFile: ca }), ...(cert !== undefined && { certFile: cert }), ...(key !== undefined && { keyFile: key }) };
  }
  return { servers: urls, options, method };
}
