/**
 * Set-up of mutation runs (vitest.mutation.config.ts) only: every test that covers a mutant
 * runs once per mutant, so property tests run 25 cases instead of 100 there. `npm test` runs
 * them in full.
 */
import fc from 'fast-check';

fc.configureGlobal({ numRuns: 25 });
