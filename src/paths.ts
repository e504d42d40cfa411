/**
 * Locations inside the package. Code runs either compiled (dist/src/...) or as TypeScript
 * under vitest (src/...); worker threads always load the compiled JavaScript in dist/,
 * which `npm test` builds before running the suite.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`package root not found above ${start}`);
    dir = up;
  }
  return dir;
}

/** The package root (the folder holding package.json). */
export const PACKAGE_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

/** Absolute path of a compiled file, e.g. `distPath('workers/paper-broker.js')`. */
export function distPath(relative: string): string {
  return join(PACKAGE_ROOT, 'dist', relative);
}
