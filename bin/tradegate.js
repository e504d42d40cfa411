#!/usr/bin/env node
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
process.exitCode = await main(process.argv.slice(2));
