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
  splitting: true,
  target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  chunkNames: 'chunk-[hash]',
  assetNames: '[name]-[hash]',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.entries(result.metafile.outputs).map(([p, o]) => ({ path: join(root, p), entry: o.entryPoint }));
const script = outputs.find((o) => o.entry && o.path.endsWith('.js'))?.path;
const style = outputs.find((o) => o.path.endsWith('.css'))?.path;
if (!script || !style) throw new Error('web build: expected an entry .js and one .css output');
const scripts = outputs.filter((o) => o.path.endsWith('.js')).map((o) => o.path);

// The entry's static imports, fetched in parallel with it (otherwise the browser only finds
// them after the entry arrives); page chunks stay lazy.
const staticImports = new Set();
const walk = (file) => {
  for (const imp of result.metafile.outputs[file]?.imports ?? []) {
    if (imp.kind === 'import-statement' && !staticImports.has(imp.path)) {
      staticImports.add(imp.path);
      walk(imp.path);
    }
  }
};
walk(Object.keys(result.metafile.outputs).find((p) => join(root, p) === script));
const preloads = [...staticImports].map((p) => `<link rel="modulepreload" href="/assets/${basename(p)}" />`).join('\n    ');

const iconSource = readFileSync(join(root, 'web', 'favicon.svg'));
const icon = `favicon-${createHash('sha256').update(iconSource).digest('hex').slice(0, 8)}.svg`;
writeFileSync(join(out, 'assets', icon), iconSource);

const html = readFileSync(join(root, 'web', 'index.html'), 'utf8')
  .replace('%STYLE%', `/assets/${basename(style)}`)
  .replace('%SCRIPT%', `/assets/${basename(script)}`)
  .replace('%ICON%', `/assets/${icon}`)
  .replace('%PRELOADS%', preloads);
writeFileSync(join(out, 'index.html'), html);

const gzipped = (file) => gzipSync(readFileSync(file), { level: 9 }).length;
const gz = scripts.reduce((n, f) => n + gzipped(f), 0);
process.stdout.write(`web: ${scripts.length} scripts ${(gz / 1024).toFixed(1)} KB gzipped (first page: ${basename(script)} ${(gzipped(script) / 1024).toFixed(1)} KB), ${basename(style)}\n`);
if (gz > JS_BUDGET_GZIP_BYTES) throw new Error(`web build: ${gz} bytes of gzipped JavaScript exceeds the ${JS_BUDGET_GZIP_BYTES}-byte budget`);
