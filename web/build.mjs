// Builds the web app into dist/web: one hashed JS bundle and one hashed stylesheet under
// assets/, and index.html pointing at them. Run by `npm run build` (and so by `npm test`
// and `prepare`). Fails when the JavaScript shipped exceeds its budget.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(root, 'dist', 'web');
/** Budget for JavaScript shipped to the browser, gzipped. */
const JS_BUDGET_GZIP_BYTES = 100 * 1024;

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const result = await build({
  absWorkingDir: root,
  entryPoints: { app: 'web/src/main.tsx' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => join(root, p));
const script = outputs.find((p) => p.endsWith('.js'));
const style = outputs.find((p) => p.endsWith('.css'));
if (!script || !style) throw new Error('web build: expected one .js and one .css output');

const iconSource = readFileSync(join(root, 'web', 'favicon.svg'));
const icon = `favicon-${createHash('sha256').update(iconSource).digest('hex').slice(0, 8)}.svg`;
writeFileSync(join(out, 'assets', icon), iconSource);

const html = readFileSync(join(root, 'web', 'index.html'), 'utf8')
  .replace('%STYLE%', `/assets/${basename(style)}`)
  .replace('%SCRIPT%', `/assets/${basename(script)}`)
  .replace('%ICON%', `/assets/${icon}`);
writeFileSync(join(out, 'index.html'), html);

const gz = gzipSync(readFileSync(script), { level: 9 }).length;
process.stdout.write(`web: ${basename(script)} ${(gz / 1024).toFixed(1)} KB gzipped, ${basename(style)}\n`);
if (gz > JS_BUDGET_GZIP_BYTES) throw new Error(`web build: ${gz} bytes of gzipped JavaScript exceeds the ${JS_BUDGET_GZIP_BYTES}-byte budget`);
