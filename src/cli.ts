/**
 * `tradegate` command line. Each command lives in src/commands/<name>.ts and exports
 * `run(argv): Promise<number>`; modules load lazily so `--help` and small commands stay fast.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CommandInfo {
  summary: string;
  usage: string;
}

export const COMMANDS: Record<string, CommandInfo> = {
  serve: {
    summary: 'run the HTTP/SSE service (add --paper for the embedded paper broker, --cluster for a cluster node)',
    usage:
      'tradegate serve [--paper] [--port P] [--host H] [--data-dir D] [--paper-port P] [--base-url URL] [--trust-proxy LIST] [--log-level L] [--metrics-port P] [--cluster nats://host:4222[,…] [--node-id NAME]]',
  },
  sim: {
    summary: 'run the paper broker (Tradovate protocol simulator) standalone',
    usage: 'tradegate sim [--port P (default 8091)] [--host H] [--seed N] [--demo] [--price-step-ms MS] [--sessions cme|none] [--daily-loss-limit USD] [--trailing-drawdown USD] [--log-level L]',
  },
  users: {
    summary: 'manage users',
    usage: 'tradegate users add <name> [--password-stdin] [--json] | users list [--json]   [--data-dir D | --cluster nats://…]',
  },
  keys: {
    summary: 'manage API keys (a key is shown once, at creation)',
    usage:
      'tradegate keys create --user U --name N --scopes read,trade [--json] | keys list --user U [--json] | keys revoke <id>   [--data-dir D | --cluster nats://…]',
  },
  connections: {
    summary: 'manage broker connections',
    usage:
      'tradegate connections add --user U (--paper --paper-url URL --paper-user NAME | --tradovate-demo --broker-user NAME | --tradovate-live --broker-user NAME) [--name N] [--password-stdin] [--json] | connections list --user U | connections remove|disable|enable <id>   [--data-dir D | --cluster nats://…]',
  },
  cluster: {
    summary: 'move a single-node data dir into a cluster\'s NATS store',
    usage: 'tradegate cluster import --data-dir DIR [--cluster nats://host:4222[,…]] [--json]',
  },
  bench: {
    summary: 'measure latency and throughput under the rate limit (see README "Performance")',
    usage: 'tradegate bench [orders|webhooks|sse|reads|actors|cluster] [--quick] [--profile] [--keys K] [--out DIR]',
  },
};

/** How `--cluster` logs in to NATS (src/cluster/nats-login.ts; README "Running a cluster"). */
const NATS_LOGIN_HELP = [
  '',
  "With --cluster, NATS's login comes from the environment: NATS_USER with NATS_PASSWORD or",
  'NATS_PASSWORD_FILE (or user:password@ in the URLs), NATS_TOKEN or NATS_TOKEN_FILE, or NATS_NKEY',
  "(a seed file); TLS: tls:// URLs, NATS_CA, and NATS_CERT with NATS_KEY for servers that verify clients.",
  '',
].join('\n');

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'tradegate — trading automation over plain HTTP, webhooks and SSE',
    '',
    'Usage: tradegate <command> [options]',
    '',
    'Commands:',
    ...lines,
    '',
    'Run `tradegate <command> --help` for its options. Settings can also come from the',
    'environment (see README "Configuration").',
    '',
  ].join('\n');
}

/** Entry point used by bin/tradegate.js; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(help());
    return name ? 0 : 1;
  }
  const info = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!info) {
    process.stderr.write(`tradegate: unknown command '${name}'\n\n${help()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${info.summary}\n\nUsage: ${info.usage}\n${info.usage.includes('--cluster') ? NATS_LOGIN_HELP : ''}`);
    return 0;
  }
  const mod = (await import(`./commands/${name}.js`)) as { run(argv: string[]): Promise<number> };
  try {
    return await mod.run(rest);
  } catch (err) {
    process.stderr.write(`tradegate ${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

// `node dist/src/cli.js <command>` runs like bin/tradegate.js instead of exiting silently with 0.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const code = await main(process.argv.slice(2));
  // As bin/tradegate.js: a failed command exits now, whatever it had started.
  if (code !== 0) process.exit(code);
  process.exitCode = code;
}
