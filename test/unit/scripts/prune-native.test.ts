/**
 * The container image ships only what runs: the prune script leaves exactly the native binaries
 * this Node loads (run here on a hard-linked copy of the installed packages), and the Dockerfile
 * and .dockerignore keep compiled tests, the bench, node_modules, VCS history and data out.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../src/paths.js';

const root = mkdtempSync(join(tmpdir(), 'tg-prune-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('scripts/prune-native.sh', () => {
  it('keeps only this platform’s uWebSockets.js binary and this ABI’s lmdb build, which still load', () => {
    mkdirSync(join(root, 'node_modules', '@lmdb'), { recursive: true });
    execFileSync('cp', ['-al', join(PACKAGE_ROOT, 'node_modules', 'uWebSockets.js'), join(root, 'node_modules')]);
    for (const pkg of readdirSync(join(PACKAGE_ROOT, 'node_modules', '@lmdb'))) {
      execFileSync('cp', ['-al', join(PACKAGE_ROOT, 'node_modules', '@lmdb', pkg), join(root, 'node_modules', '@lmdb')]);
    }
    execFileSync('sh', [join(PACKAGE_ROOT, 'scripts', 'prune-native.sh'), root]);
    const abi = process.versions.modules;
    expect(readdirSync(join(root, 'node_modules/uWebSockets.js/binaries'))).toEqual([`uws_${process.platform}_${process.arch}_${abi}.node`]);
    expect(readdirSync(join(root, 'node_modules/uWebSockets.js/dist')).filter((f) => f.endsWith('.node'))).toEqual([]);
    const lmdb = readdirSync(join(root, 'node_modules/@lmdb')).flatMap((p) => readdirSync(join(root, 'node_modules/@lmdb', p)).filter((f) => f.endsWith('.node')));
    expect(lmdb.sort()).toEqual([`node.abi${abi}.glibc.node`, 'node.napi.glibc.node']);
    // The library warns and falls back to a JavaScript server when its binary is missing: it must not.
    const load = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(join(root, 'node_modules/uWebSockets.js'))})`], { encoding: 'utf8' });
    expect(load.status).toBe(0);
    expect(load.stderr + load.stdout).not.toMatch(/fall/i);
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(join(PACKAGE_ROOT, 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));

  it('the runtime stage copies the service’s compiled code only, and prunes native binaries', () => {
    const copies = runtime.split('\n').filter((l) => l.startsWith('COPY --from=build'));
    expect(copies).toEqual(['COPY --from=build /app/dist/src ./dist/src', 'COPY --from=build /app/dist/workers ./dist/workers', 'COPY --from=build /app/dist/web ./dist/web']);
    expect(runtime).toMatch(/npm ci --omit=dev --ignore-scripts .*sh scripts\/prune-native\.sh/);
    expect(runtime).toMatch(/^USER node$/m);
  });

  it('builds with the project’s own build script', () => {
    expect(dockerfile.slice(0, dockerfile.lastIndexOf('\nFROM '))).toMatch(/^RUN npm run build/m);
  });

  it('the build context is an allow-list that never lets in modules, history, data or reports', () => {
    const lines = readFileSync(join(PACKAGE_ROOT, '.dockerignore'), 'utf8').split('\n').filter((l) => l && !l.startsWith('#'));
    expect(lines[0]).toBe('**');
    const allowed = lines.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/\*\*$/, ''));
    for (const never of ['node_modules', '.git', 'data', 'dist', 'reports', '.stryker-tmp']) expect(allowed).not.toContain(never);
    expect(allowed).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'src', 'workers', 'web', 'bin', 'scripts']));
    expect(lines).toEqual(expect.arrayContaining(['**/node_modules', '**/data.key', 'bench/results']));
  });
});
