/**
 * Runs the paper broker on a worker thread so `tradegate serve --paper` keeps it off the
 * front thread. The worker entry is `workers/paper-broker.ts` (compiled to dist/).
 */
import { Worker } from 'node:worker_threads';
import type { LevelWithSilent } from 'pino';
import { distPath } from '../paths.js';
import type { SimHandle, SimOptions } from './index.js';

/** What crosses into the worker: SimOptions minus functions and objects, plus a log level. */
export type SimWorkerData = Omit<SimOptions, 'logger' | 'clock'> & { logLevel?: LevelWithSilent };

/** Messages the worker posts back. */
export type SimWorkerMessage =
  | { type: 'ready'; port: number; url: string; restUrl: string; wsUrl: string; controlUrl: string }
  | { type: 'error'; message: string }
  | { type: 'closed' };

/** Starts the paper broker in a worker thread; `close()` stops it and ends the thread. */
export function startSimInWorker(opts: SimOptions & { logLevel?: LevelWithSilent } = {}): Promise<SimHandle> {
  const { logger: _logger, clock: _clock, ...data } = opts;
  const worker = new Worker(distPath('workers/paper-broker.js'), { workerData: data satisfies SimWorkerData });
  return new Promise((resolve, reject) => {
    const onExit = (code: number) => reject(new Error(`paper broker worker exited with code ${code} before it was ready`));
    worker.once('error', reject);
    worker.once('exit', onExit);
    worker.once('message', (msg: SimWorkerMessage) => {
      worker.off('exit', onExit);
      worker.off('error', reject);
      if (msg.type !== 'ready') {
        void worker.terminate();
        reject(new Error(msg.type === 'error' ? msg.message : 'paper broker worker closed before it was ready'));
        return;
      }
      let closing: Promise<void> | undefined;
      const { type: _type, ...urls } = msg;
      resolve({
        ...urls,
        close() {
          closing ??= new Promise<void>((done) => {
            const timer = setTimeout(() => void worker.terminate(), 5000);
            worker.once('exit', () => {
              clearTimeout(timer);
              done();
            });
            worker.postMessage({ type: 'close' });
          });
          return closing;
        },
      });
    });
  });
}
