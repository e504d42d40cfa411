import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['dist/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers and worker threads; on a 2-core machine
    // running every file at once makes timing-sensitive protocol tests flaky.
    maxWorkers: 2,
  },
});
