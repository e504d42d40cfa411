import { defineConfig } from 'vitest/config';

/** Store tests that also run against the NATS KV store (cluster mode), in the `store-on-nats` project. */
const SHARED_STORE_TESTS = ['users', 'api-keys', 'connections', 'strategies', 'webhook-tokens', 'idempotency', 'journal', 'sessions', 'guards'].map(
  (name) => `test/unit/store/${name}.test.ts`,
);

export default defineConfig({
  test: {
    exclude: ['dist/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers and worker threads; on a 2-core machine
    // running every file at once makes timing-sensitive protocol tests flaky.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'default', include: ['test/**/*.test.ts'], exclude: ['dist/**', 'node_modules/**', 'test/e2e/**'], provide: { storeBackend: 'lmdb' } } },
      // The browser tests time a first page load: `npm test` runs them after the rest, on a machine
      // no other test file shares (their own server, browser and the page are what is measured).
      { extends: true, test: { name: 'browser', include: ['test/e2e/**/*.test.ts'], provide: { storeBackend: 'lmdb' } } },
      {
        extends: true,
        test: {
          name: 'store-on-nats',
          include: SHARED_STORE_TESTS,
          globalSetup: ['test/support/nats-global-setup.ts'],
          provide: { storeBackend: 'nats' },
        },
      },
    ],
  },
});
