/**
 * `tradegate sim`: runs the paper broker standalone until SIGINT/SIGTERM and prints its URLs
 * and a short how-to. Creates nothing unless asked (`--demo` adds user demo with 2 accounts).
 * `--sessions cme` trades CME Globex hours; `--daily-loss-limit` / `--trailing-drawdown` give
 * every account created through the control API those evaluation rules.
 */
import type { LevelWithSilent } from 'pino';
import { createLogger, printOut } from '../log.js';
import { startSim } from '../sim/index.js';
import type { SessionMode } from '../sim/sessions.js';
import type { AccountRules } from '../sim/state.js';

interface SimArgs {
  port: number;
  host: string;
  seed?: number;
  demo: boolean;
  logLevel: LevelWithSilent;
  priceStepMs?: number;
  sessions: SessionMode;
  accountRules: AccountRules;
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Parses `tradegate sim` flags; throws with a clear message on a bad value. */
export function parseSimArgs(argv: string[]): SimArgs {
  const args: SimArgs = { port: 8091, host: '127.0.0.1', demo: false, logLevel: 'info', sessions: 'none', accountRules: {} };
  const int = (flag: string, v: string | undefined, min: number, max: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} needs an integer in ${min}..${max}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const [name, inline] = flag.includes('=') ? [flag.slice(0, flag.indexOf('=')), flag.slice(flag.indexOf('=') + 1)] : [flag, undefined];
    const value = () => inline ?? argv[++i];
    switch (name) {
      case '--port': args.port = int('--port', value(), 0, 65535); break;
      case '--host': args.host = value() ?? ''; if (!args.host) throw new Error('--host needs a value'); break;
      case '--seed': args.seed = int('--seed', value(), 0, 2 ** 31 - 1); break;
      case '--price-step-ms': args.priceStepMs = int('--price-step-ms', value(), 0, 3_600_000); break;
      case '--demo': args.demo = true; break;
      case '--sessions': {
        const mode = value();
        if (mode !== 'cme' && mode !== 'none') throw new Error('--sessions must be cme or none');
        args.sessions = mode;
        break;
      }
      case '--daily-loss-limit': args.accountRules.dailyLossLimit = int('--daily-loss-limit', value(), 1, 1_000_000_000); break;
      case '--trailing-drawdown': args.accountRules.trailingDrawdown = int('--trailing-drawdown', value(), 1, 1_000_000_000); break;
      case '--log-level': {
        const level = value() ?? '';
        if (!LEVELS.includes(level)) throw new Error(`--log-level must be one of ${LEVELS.join(', ')}`);
        args.logLevel = level as LevelWithSilent;
        break;
      }
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  return args;
}

/** Runs the paper broker until a termination signal. */
export async function run(argv: string[]): Promise<number> {
  const args = parseSimArgs(argv);
  const logger = createLogger(args.logLevel, undefined, { component: 'paper-broker' });
  const sim = await startSim({
    port: args.port, host: args.host, seed: args.seed, priceStepMs: args.priceStepMs, logger, sessions: args.sessions, accountRules: args.accountRules,
  });
  const lines = [
    `tradegate paper broker (Tradovate protocol) listening`,
    `  REST       ${sim.restUrl}`,
    `  WebSocket  ${sim.wsUrl}`,
    `  control    ${sim.controlUrl}   (loopback only)`,
    `  sessions   ${args.sessions === 'cme' ? 'CME Globex hours (Sun 17:00 – Fri 16:00 CT, break 16:00–17:00 CT)' : 'always open'}`,
  ];
  const rules = args.accountRules;
  if (rules.dailyLossLimit !== undefined || rules.trailingDrawdown !== undefined) {
    lines.push(`  new accounts: daily loss limit ${rules.dailyLossLimit ?? 'none'}, trailing drawdown ${rules.trailingDrawdown ?? 'none'}`);
  }
  if (args.demo) {
    const res = await fetch(`${sim.controlUrl}/users`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'demo', password: 'demo', accounts: [{ name: 'DEMO1', balance: 50000 }, { name: 'DEMO2', balance: 50000 }] }),
    });
    const created = (await res.json()) as { userId: number; accounts: Array<{ id: number; name: string }> };
    lines.push(`  demo user  name "demo", password "demo", userId ${created.userId}, accounts ${created.accounts.map((a) => `${a.name}=${a.id}`).join(' ')}`);
  }
  lines.push(
    '',
    'Try:',
    `  curl -s -X POST ${sim.controlUrl}/users -d '{"name":"alice","password":"pw","accounts":[{"name":"SIM1"}]}'`,
    `  curl -s -X POST ${sim.restUrl}/auth/accesstokenrequest -d '{"name":"alice","password":"pw"}'`,
    `  curl -s -X POST ${sim.controlUrl}/prices -d '{"symbol":"ESZ6","price":5000}'`,
    `  curl -s ${sim.controlUrl}/state`,
    'Stop with Ctrl-C. Control API: see README "Paper broker".',
    '',
  );
  printOut(logger, lines.join('\n') + '\n');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await sim.close();
  return 0;
}
