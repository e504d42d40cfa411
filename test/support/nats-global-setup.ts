/**
 * Global setup of the `store-on-nats` test project: one nats-server with JetStream for the
 * whole run (each test opens its store under its own bucket prefix), stopped at the end.
 */
import type { TestProject } from 'vitest/node';
import { startNats } from './nats.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Which store the shared store tests run against. */
    storeBackend: 'lmdb' | 'nats';
    /** URL of the nats-server this project's global setup started. */
    natsUrl: string;
    /** That server's JetStream storage dir. */
    natsStoreDir: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startNats();
  project.provide('natsUrl', server.url);
  project.provide('natsStoreDir', server.storeDir);
  return () => server.stopAndRemove();
}
