/**
 * `tradegate bench [orders|webhooks|sse|reads|actors|cluster] [--quick] [--profile] [--keys K] [--out DIR]`: runs the load
 * scenarios of bench/ (compiled into dist/bench) against real `tradegate serve --paper`
 * processes and writes bench/results/<date>.json|.md|.svg and latest.json.
 * Exit code 0 when every scenario ran and every correctness check passed.
 */
import { parseArgs } from 'node:util';

/** Entry point of the `bench` command. */
export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { quick: { type: 'boolean', default: false }, profile: { type: 'boolean', default: false }, out: { type: 'string' }, keys: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 1) throw new Error(`expected at most one scenario, got ${positionals.join(' ')}`);
  // Loaded lazily: the bench pulls in piscina, ws and the store, which other commands never need.
  let bench: typeof import('../../bench/run.js');
  try {
    bench = await import('../../bench/run.js');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    // The container image ships the service only.
    process.stderr.write('tradegate bench: the bench is not part of this installation (the container image ships the service only); run it from a checkout: npm ci && npm run bench\n');
    return 2;
  }
  const { parseScenario, runBench } = bench;
  const { Service } = await import('../../bench/service.js');
  // Ctrl-C must not leave `serve --paper` children running with their temp data dirs.
  const interrupt = (signal: NodeJS.Signals): void => {
    process.stderr.write(`\ntradegate bench: ${signal}, stopping services\n`);
    void Service.stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  const scenarios = parseScenario(positionals[0]);
  const keys = values.keys === undefined ? undefined : Number(values.keys);
  if (keys !== undefined && !(Number.isInteger(keys) && keys > 0)) throw new Error('--keys must be a positive integer');
  const { summary, files, passed } = await runBench({ scenarios, quick: values.quick ?? false, keys, outDir: values.out, profile: values.profile ?? false });
  const { renderMarkdown } = await import('../../bench/report.js');
  process.stdout.write(renderMarkdown(summary));
  const written = [files.json, files.markdown, files.svg, files.latest, ...(files.summary ? [files.summary] : [])];
  process.stdout.write(`\nWrote ${written.join('\n      ')}\n`);
  if (summary.profiles?.length) process.stdout.write(`CPU profiles (Chrome DevTools → Performance → Load profile):\n${summary.profiles.map((p) => `  ${p.file}`).join('\n')}\n`);
  return passed ? 0 : 1;
}
