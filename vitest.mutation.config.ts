import { defineConfig } from 'vitest/config';

/**
 * The unit tests that pin the money rules, for mutation testing (stryker.config.json): pure
 * modules only, so each mutant runs in milliseconds, and no NATS or worker-thread set-up.
 */
export default defineConfig({
  test: {
    include: [
      'test/unit/domain/*.test.ts',
      'test/unit/http/webhook-payload.test.ts',
      'test/unit/http/idempotency.test.ts',
      'test/unit/http/rate-limit.test.ts',
      'test/unit/broker/tradovate/budget.test.ts',
      'test/unit/workers/connection-actor/*.test.ts',
    ],
    setupFiles: ['test/support/mutation-setup.ts'],
    provide: { storeBackend: 'lmdb' },
  },
});
