#!/usr/bin/env -S node --max-semi-space-size=2
// The young generation is capped at 2 MB semi-spaces (V8's default grows to 16 MB): ten thousand
// open SSE streams cost ~1.5 KB each instead of ~4 KB, at no measurable CPU cost (README).
// The package is compiled by `tsc` into dist/ (npm ci runs the `prepare` script).
// This shim keeps the bin path stable and says what to do when the build is missing.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/src/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write('tradegate: dist/ is missing; run `npm ci` (or `npm run build`) first.\n');
  process.exit(1);
}
const { main } = await import(cli.href);
const code = await main(process.argv.slice(2));
// A command that failed exits now: a `serve` that failed to start (a damaged store) must not
// linger on a timer or a worker it had started, looking alive to its service manager.
if (code !== 0) process.exit(code);
process.exitCode = code;
